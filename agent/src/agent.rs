//! One host's loop: enrol once, then report on the server's interval, backing
//! off while the server is unreachable.

use crate::backend::GpuBackend;
use crate::client::{ClientError, ServerClient};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tessera_protocol::agent::{EnrollRequest, HostReport};
use thiserror::Error;

/// Why an agent stopped.
#[derive(Debug, Error)]
pub enum AgentError {
    /// No credential saved and no join token given.
    #[error(
        "this host is not enrolled yet: pass --join-token (create one on the Join tokens page)"
    )]
    NotEnrolled,
    /// The server refused the join token or the credential.
    #[error("{0}")]
    Refused(ClientError),
    /// The credential file could not be read or written.
    #[error("credential file {path}: {source}")]
    CredentialFile {
        /// Path.
        path: String,
        /// I/O error.
        source: std::io::Error,
    },
    /// The backend failed in a way retrying will not fix.
    #[error("{0}")]
    Backend(#[from] crate::backend::BackendError),
}

/// Settings for one host's agent.
pub struct HostAgent {
    /// Where GPU facts come from.
    pub backend: Arc<dyn GpuBackend>,
    /// The server.
    pub client: ServerClient,
    /// The host name to report.
    pub hostname: String,
    /// Where the credential is kept.
    pub credential_path: PathBuf,
    /// One-time join token for the first start.
    pub join_token: Option<String>,
    /// Run one report and return (for scripts and tests).
    pub once: bool,
}

const MAX_BACKOFF: Duration = Duration::from_secs(30);

impl HostAgent {
    async fn credential(&self) -> Result<String, AgentError> {
        let file_err = |source| AgentError::CredentialFile {
            path: self.credential_path.display().to_string(),
            source,
        };
        match tokio::fs::read_to_string(&self.credential_path).await {
            Ok(c) if !c.trim().is_empty() => return Ok(c.trim().to_owned()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(file_err(e)),
        }
        let token = self.join_token.clone().ok_or(AgentError::NotEnrolled)?;
        let req = EnrollRequest {
            join_token: token,
            hostname: self.hostname.clone(),
        };
        let mut backoff = Duration::from_millis(500);
        let resp = loop {
            match self.client.enroll(&req).await {
                Ok(r) => break r,
                Err(ClientError::Transient(e)) => {
                    tracing::warn!(host = %self.hostname, "enrolment failed, retrying in {backoff:?}: {e}");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                Err(e) => return Err(AgentError::Refused(e)),
            }
        };
        if let Some(dir) = self.credential_path.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(file_err)?;
        }
        write_private(&self.credential_path, &resp.credential)
            .await
            .map_err(file_err)?;
        tracing::info!(host = %self.hostname, host_id = resp.host_id, "enrolled");
        Ok(resp.credential)
    }

    /// Runs until the server refuses this host or the task is dropped.
    pub async fn run(self) -> Result<(), AgentError> {
        let credential = self.credential().await?;
        let mut backoff = Duration::from_millis(500);
        loop {
            let backend = Arc::clone(&self.backend);
            let inventory = tokio::task::spawn_blocking(move || backend.inventory())
                .await
                .map_err(|e| crate::backend::BackendError::Nvml {
                    call: "inventory",
                    detail: e.to_string(),
                })??;
            let report = HostReport {
                hostname: self.hostname.clone(),
                agent_version: env!("CARGO_PKG_VERSION").to_owned(),
                cpu_milli: inventory.cpu_milli,
                memory_mib: inventory.memory_mib,
                backend: self.backend.name().to_owned(),
                driver_version: inventory.driver_version,
                gpus: inventory.gpus,
            };
            let wait = match self.client.report(&credential, &report).await {
                Ok(ack) => {
                    backoff = Duration::from_millis(500);
                    tracing::debug!(host = %self.hostname, "reported {} GPUs", report.gpus.len());
                    if self.once {
                        return Ok(());
                    }
                    Duration::from_secs(ack.next_report_in_s.max(1))
                }
                Err(ClientError::Transient(e)) => {
                    tracing::warn!(host = %self.hostname, "report failed, retrying in {backoff:?}: {e}");
                    let b = backoff;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    b
                }
                Err(e) => return Err(AgentError::Refused(e)),
            };
            tokio::time::sleep(wait).await;
        }
    }
}

async fn write_private(path: &std::path::Path, secret: &str) -> std::io::Result<()> {
    tokio::fs::write(path, secret).await?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tokio::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).await?;
    }
    Ok(())
}
