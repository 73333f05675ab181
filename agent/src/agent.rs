//! One host's control loop: enrol once, then on every pass long-poll the
//! desired state, apply it through the backend (observe, plan, apply per GPU)
//! and report inventory, observed state and the applied generation, backing
//! off while the server is unreachable.

use crate::backend::{BackendError, GpuBackend, Inventory};
use crate::client::{ClientError, ServerClient};
use crate::reconcile::reconcile_gpu;
use crate::telemetry::TelemetryLoop;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tessera_protocol::agent::{
    DesiredState, EnrollRequest, GpuApplyError, HostReport, ProcessesStopped, DESIRED_MAX_WAIT_S,
};
use thiserror::Error;

/// Why an agent stopped.
#[derive(Debug, Error)]
pub enum AgentError {
    /// No credential saved and no join token given.
    #[error(
        "this host is not enrolled yet: set TESSERA_JOIN_TOKEN or pass --join-token-file (create a token on the Join tokens page)"
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
    pub hostname: tessera_core::checked::Hostname,
    /// Where the credential is kept.
    pub credential_path: PathBuf,
    /// One-time join token for the first start.
    pub join_token: Option<String>,
    /// Fetch the desired state, apply it, report once and return (for scripts
    /// and tests).
    pub once: bool,
    /// Sample GPU telemetry and send it this often (`None`: off).
    pub telemetry: Option<crate::telemetry::Cadence>,
}

const MAX_BACKOFF: Duration = Duration::from_secs(30);
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// Report interval until the server names one.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);

/// What one apply pass did on a host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// Operations applied, over all GPUs.
    pub ops: usize,
    /// GPUs that did not reach their desired state, and why.
    pub errors: Vec<GpuApplyError>,
    /// Processes stopped for released slices.
    pub stopped: Vec<ProcessesStopped>,
}

/// Brings every GPU listed in `desired` to its desired state: checks that the
/// UUID matches the GPU at that index in `inventory`, then runs one reconcile
/// pass (observe, plan, apply) for it. GPUs not listed are left alone. Blocks
/// on driver calls: run it off the async runtime.
pub fn apply_desired(
    backend: &dyn GpuBackend,
    inventory: &Inventory,
    desired: &DesiredState,
) -> Applied {
    let mut applied = Applied::default();
    for entry in &desired.gpus {
        let error = |message: String| GpuApplyError {
            index: entry.index,
            message,
        };
        let Some(gpu) = inventory.gpus.iter().find(|g| g.index == entry.index) else {
            applied.errors.push(error(format!(
                "there is no GPU {} on this host",
                entry.index
            )));
            continue;
        };
        if gpu.uuid != entry.uuid {
            applied.errors.push(error(format!(
                "GPU {} is {}, not {}: the host's GPUs changed; nothing was done to it",
                entry.index, gpu.uuid, entry.uuid
            )));
            continue;
        }
        let model = tessera_core::catalogue::lookup(&gpu.name, gpu.memory_mib);
        match reconcile_gpu(backend, entry.index, &model, &entry.desired) {
            Ok(outcome) => {
                applied.ops += outcome.applied.len();
                applied.stopped.extend(outcome.stopped);
            }
            Err(e) => {
                if let crate::reconcile::ReconcileError::Apply { applied: n, .. } = &e {
                    applied.ops += n;
                }
                applied.errors.push(error(e.to_string()));
            }
        }
    }
    applied
}

/// What the loop knows about the desired state between passes.
struct Control {
    /// The last desired state received (shared with the apply passes,
    /// which run off the runtime).
    desired: Option<Arc<DesiredState>>,
    /// The generation last applied, and that pass's errors (what is reported).
    applied_generation: Option<i64>,
    errors: Vec<GpuApplyError>,
    /// Processes stopped while applying that generation (reported with it).
    stopped: Vec<ProcessesStopped>,
    /// The last report the server took, and its name for it (`ReportAck::digest`).
    last_report: Option<(HostReport, String)>,
}

/// How fetching the desired state went in one pass.
enum Fetch {
    /// The server answered (possibly after holding the request) with a new
    /// desired state or `None` (still the one the agent has); whether the
    /// poll stood for the last report (the agent need not send it again).
    Got {
        state: Option<DesiredState>,
        report_noted: bool,
    },
    /// Could not fetch it this time; apply the last one known and back off.
    Failed,
    /// The host changed while the poll was held: the poll was dropped to
    /// send this report.
    Changed(Box<HostReport>),
}

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
        let mut backoff = FIRST_BACKOFF;
        let resp = loop {
            match self.client.enroll(&req).await {
                Ok(r) => break r,
                Err(ClientError::Transient(e)) => {
                    let wait = next_backoff(&mut backoff);
                    tracing::warn!(host = %self.hostname, "enrolment failed, retrying in {wait:?}: {e}");
                    tokio::time::sleep(wait).await;
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
        tracing::info!(host = %self.hostname, host_id = resp.host_id.get(), "enrolled");
        Ok(resp.credential)
    }

    /// Long-polls the desired state (at once on the first pass, otherwise
    /// held by the server for up to `wait` while nothing changes), naming
    /// the digest of the last report, which the poll may stand for.
    async fn fetch_desired(
        &self,
        credential: &str,
        control: &Control,
        wait: Duration,
    ) -> Result<Fetch, AgentError> {
        let after = control.desired.as_ref().map(|d| d.generation);
        let wait_s = if self.once {
            0
        } else {
            wait.as_secs().clamp(1, DESIRED_MAX_WAIT_S)
        };
        let report = match &control.last_report {
            Some((_, digest)) if !self.once => Some(digest.as_str()),
            _ => None,
        };
        match self.client.desired(credential, after, wait_s, report).await {
            Ok(polled) => Ok(Fetch::Got {
                // `None`: still generation `after`, what the agent has.
                state: polled.state,
                report_noted: polled.report_noted,
            }),
            Err(
                e @ ClientError::Refused {
                    status: 401 | 403, ..
                },
            ) => Err(AgentError::Refused(e)),
            Err(e) => {
                tracing::warn!(host = %self.hostname, "fetching the desired state failed: {e}");
                Ok(Fetch::Failed)
            }
        }
    }

    /// [`HostAgent::fetch_desired`] held for up to `heartbeat`, observing
    /// (and applying the known desired state) every `interval` meanwhile: a
    /// report that changed drops the poll and is sent at once.
    async fn poll_observing(
        &self,
        credential: &str,
        control: &mut Control,
        heartbeat: Duration,
        interval: Duration,
    ) -> Result<Fetch, AgentError> {
        let watch = !self.once && control.last_report.is_some() && heartbeat > interval;
        if !watch {
            return self
                .fetch_desired(credential, control, heartbeat.max(interval))
                .await;
        }
        // The poll borrows what it names; the observations below work on a
        // copy and hand it back.
        let mut mine = Control {
            desired: control.desired.clone(),
            applied_generation: control.applied_generation,
            errors: control.errors.clone(),
            stopped: control.stopped.clone(),
            last_report: None,
        };
        let fetch = {
            let last = control.last_report.as_ref().map(|(r, _)| r);
            let poll = self.fetch_desired(credential, control, heartbeat);
            tokio::pin!(poll);
            let start = tokio::time::Instant::now() + interval;
            let mut tick = tokio::time::interval_at(start, interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    fetched = &mut poll => break fetched?,
                    _ = tick.tick() => {
                        let report = self.observe_report(&mut mine).await?;
                        if last != Some(&report) {
                            tracing::debug!(host = %self.hostname, "the host changed during the poll");
                            break Fetch::Changed(Box::new(report));
                        }
                    }
                }
            }
        };
        control.applied_generation = mine.applied_generation;
        control.errors = mine.errors;
        control.stopped = mine.stopped;
        Ok(fetch)
    }

    /// Observes the host, applies the known desired state, and returns the
    /// report of that pass. Every pass, not only on a new generation: a
    /// pass with nothing to do costs an observe and a plan, and this
    /// retries transient driver faults and repairs drift.
    async fn observe_report(&self, control: &mut Control) -> Result<HostReport, AgentError> {
        let (inventory, applied) = self.observe_and_apply(control.desired.clone()).await?;
        self.note_applied(control, applied);
        Ok(self.report_of(inventory, control))
    }

    /// Records one apply pass in `control` (what the next report says).
    fn note_applied(&self, control: &mut Control, applied: Option<Applied>) {
        let (Some(applied), Some(desired)) = (applied, control.desired.as_ref()) else {
            return;
        };
        let new_generation = control.applied_generation != Some(desired.generation);
        if applied.ops > 0 {
            tracing::info!(host = %self.hostname, generation = desired.generation, ops = applied.ops, errors = applied.errors.len(), "applied desired state");
        } else if new_generation {
            tracing::debug!(host = %self.hostname, generation = desired.generation, "desired state already in place");
        }
        if applied.errors != control.errors {
            for e in &applied.errors {
                tracing::warn!(host = %self.hostname, gpu = e.index, generation = desired.generation, "{}", e.message);
            }
        }
        if new_generation {
            control.stopped.clear();
        }
        for s in applied.stopped {
            match control
                .stopped
                .iter_mut()
                .find(|c| c.index == s.index && c.scope == s.scope)
            {
                Some(c) => c.add(s.terminated, s.killed),
                None => control.stopped.push(s),
            }
        }
        control.applied_generation = Some(desired.generation);
        control.errors = applied.errors;
    }

    /// The report of what `inventory` shows and `control` applied.
    fn report_of(&self, inventory: Inventory, control: &Control) -> HostReport {
        HostReport {
            hostname: self.hostname.clone(),
            agent_version: env!("CARGO_PKG_VERSION").to_owned(),
            cpu_milli: inventory.cpu_milli,
            memory_mib: inventory.memory_mib,
            backend: self.backend.name().to_owned(),
            driver_version: inventory.driver_version,
            gpus: inventory.gpus,
            applied_generation: control.applied_generation,
            errors: control.errors.clone(),
            stopped: control.stopped.clone(),
        }
    }

    /// Takes the inventory and, when a desired state is known, applies it
    /// (then takes the inventory again if anything changed), off the runtime.
    async fn observe_and_apply(
        &self,
        desired: Option<Arc<DesiredState>>,
    ) -> Result<(Inventory, Option<Applied>), AgentError> {
        let backend = Arc::clone(&self.backend);
        let span = tracing::info_span!("host", host = %self.hostname);
        tokio::task::spawn_blocking(move || {
            let _entered = span.enter();
            let inventory = backend.inventory()?;
            let Some(desired) = desired else {
                return Ok((inventory, None));
            };
            let applied = apply_desired(backend.as_ref(), &inventory, &desired);
            let inventory = if applied.ops > 0 || !applied.errors.is_empty() {
                backend.inventory()?
            } else {
                inventory
            };
            Ok((inventory, Some(applied)))
        })
        .await
        .map_err(|e| BackendError::Nvml {
            call: "inventory",
            detail: e.to_string(),
        })?
    }

    /// Runs until the server refuses this host or the task is dropped.
    pub async fn run(self) -> Result<(), AgentError> {
        let credential = self.credential().await?;
        let mut backoff = FIRST_BACKOFF;
        let mut interval = DEFAULT_INTERVAL;
        let mut heartbeat = DEFAULT_INTERVAL;
        let mut control = Control {
            desired: None,
            applied_generation: None,
            errors: Vec::new(),
            stopped: Vec::new(),
            last_report: None,
        };
        // The GPUs slices hold outside MIG, for the telemetry loop, which
        // starts after the first report (the server must know the GPUs).
        let (held_tx, held_rx) = tokio::sync::watch::channel(BTreeSet::new());
        let mut telemetry = Background(None);
        loop {
            // (a) The desired state; the long poll is also the wait between
            // reports, and the heartbeat.
            let fetch = self
                .poll_observing(&credential, &mut control, heartbeat, interval)
                .await?;

            // (b) Apply it, every pass (see `observe_report`); a report that
            // changed during the poll was taken by such a pass already.
            let (report, report_noted, answered) = match fetch {
                Fetch::Changed(report) => (*report, false, true),
                Fetch::Failed => (self.observe_report(&mut control).await?, false, false),
                Fetch::Got {
                    state,
                    report_noted,
                } => {
                    if let Some(d) = state {
                        if control.desired.as_ref().map(|c| c.generation) != Some(d.generation) {
                            tracing::debug!(host = %self.hostname, generation = d.generation, gpus = d.gpus.len(), "new desired state");
                        }
                        control.desired = Some(Arc::new(d));
                    }
                    (self.observe_report(&mut control).await?, report_noted, true)
                }
            };

            // The GPUs slices hold outside MIG, for the simulated load.
            if let Some(d) = &control.desired {
                let held: BTreeSet<u32> = d
                    .gpus
                    .iter()
                    .filter(|g| g.slices > 0)
                    .map(|g| g.index)
                    .collect();
                held_tx.send_if_modified(|h| {
                    let changed = *h != held;
                    *h = held;
                    changed
                });
            }

            // (c) Report, unless the poll stood for this very report.
            let noted = report_noted
                && control
                    .last_report
                    .as_ref()
                    .is_some_and(|(last, _)| *last == report);
            if noted {
                tracing::trace!(host = %self.hostname, "the poll stood for the report");
                backoff = FIRST_BACKOFF;
                // The next long poll is the wait.
                continue;
            }
            let wait = match self.client.report(&credential, &report).await {
                Ok(ack) => {
                    tracing::debug!(host = %self.hostname, "reported {} GPUs", report.gpus.len());
                    if let (None, Some(cadence)) = (&telemetry.0, self.telemetry) {
                        let run = TelemetryLoop {
                            backend: Arc::clone(&self.backend),
                            client: self.client.clone(),
                            credential: credential.clone(),
                            hostname: self.hostname.clone(),
                            cadence,
                            held: held_rx.clone(),
                        }
                        .run();
                        let host = self.hostname.clone();
                        telemetry.0 = Some(tokio::spawn(async move {
                            if let Err(e) = run.await {
                                tracing::error!(host = %host, "telemetry stopped: {e}");
                            }
                        }));
                    }
                    interval = Duration::from_secs(ack.next_report_in_s.max(1));
                    heartbeat = match ack.heartbeat_s {
                        0 => interval,
                        s => Duration::from_secs(s),
                    };
                    control.last_report = ack.digest.map(|digest| (report, digest));
                    if answered {
                        backoff = FIRST_BACKOFF;
                        if self.once {
                            return Ok(());
                        }
                        // The next long poll is the wait.
                        Duration::ZERO
                    } else {
                        next_backoff(&mut backoff)
                    }
                }
                Err(ClientError::Transient(e)) => {
                    let wait = next_backoff(&mut backoff);
                    tracing::warn!(host = %self.hostname, "report failed, retrying in {wait:?}: {e}");
                    wait
                }
                Err(e) => return Err(AgentError::Refused(e)),
            };
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// A background task that ends with the loop that started it.
struct Background(Option<tokio::task::JoinHandle<()>>);

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(task) = &self.0 {
            task.abort();
        }
    }
}

/// The wait before the next try — between half the current backoff and
/// all of it, at random, so that hosts that failed together (a server
/// restart, an overloaded database) do not all come back in the same
/// instant — doubling the next one (up to `MAX_BACKOFF`).
fn next_backoff(backoff: &mut Duration) -> Duration {
    let wait = backoff.mul_f64(rand::Rng::gen_range(&mut rand::thread_rng(), 0.5..=1.0));
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
    wait
}

async fn write_private(path: &std::path::Path, secret: &str) -> std::io::Result<()> {
    let (path, secret) = (path.to_owned(), secret.to_owned());
    tokio::task::spawn_blocking(move || crate::credential::write_private(&path, &secret))
        .await
        .map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests;
