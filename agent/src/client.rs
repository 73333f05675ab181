//! The agent's side of the agent API.

use reqwest::StatusCode;
use tessera_protocol::agent::{
    ApiErrorBody, EnrollRequest, EnrollResponse, HostReport, ReportAck, AGENT_API_PREFIX,
};
use thiserror::Error;

/// Why a call to the server failed.
#[derive(Debug, Error)]
pub enum ClientError {
    /// Network trouble or a server error: retry later.
    #[error("server unreachable or failing: {0}")]
    Transient(String),
    /// The server refused the credential or token: retrying will not help.
    #[error("refused by the server ({code}): {message}")]
    Refused {
        /// HTTP status.
        status: u16,
        /// Stable code.
        code: String,
        /// Message.
        message: String,
    },
}

/// HTTP client for one server.
#[derive(Debug, Clone)]
pub struct ServerClient {
    base: String,
    http: reqwest::Client,
}

impl ServerClient {
    /// A client for `server` (e.g. `http://127.0.0.1:3000`).
    pub fn new(server: &str) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|e| ClientError::Transient(e.to_string()))?;
        Ok(Self {
            base: format!("{}{AGENT_API_PREFIX}", server.trim_end_matches('/')),
            http,
        })
    }

    /// Trades a join token for a credential.
    pub async fn enroll(&self, req: &EnrollRequest) -> Result<EnrollResponse, ClientError> {
        let resp = self
            .http
            .post(format!("{}/enroll", self.base))
            .json(req)
            .send()
            .await;
        decode(resp).await
    }

    /// Sends a report.
    pub async fn report(
        &self,
        credential: &str,
        report: &HostReport,
    ) -> Result<ReportAck, ClientError> {
        let resp = self
            .http
            .post(format!("{}/report", self.base))
            .bearer_auth(credential)
            .json(report)
            .send()
            .await;
        decode(resp).await
    }
}

async fn decode<T: serde::de::DeserializeOwned>(
    resp: reqwest::Result<reqwest::Response>,
) -> Result<T, ClientError> {
    let resp = resp.map_err(|e| ClientError::Transient(e.to_string()))?;
    let status = resp.status();
    if status.is_success() {
        return resp
            .json::<T>()
            .await
            .map_err(|e| ClientError::Transient(e.to_string()));
    }
    let body: Option<ApiErrorBody> = resp.json().await.ok();
    if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS {
        return Err(ClientError::Transient(format!(
            "{status}: {}",
            body.map(|b| b.message).unwrap_or_default()
        )));
    }
    let (code, message) = body
        .map(|b| (b.code, b.message))
        .unwrap_or_else(|| ("unknown".into(), status.to_string()));
    Err(ClientError::Refused {
        status: status.as_u16(),
        code,
        message,
    })
}
