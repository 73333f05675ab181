//! The agent API: enrolment and inventory reports.

use serde::{Deserialize, Serialize};

/// Path prefix of the agent API.
pub const AGENT_API_PREFIX: &str = "/api/agent/v1";

/// An agent trades a one-time join token for its own credential.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnrollRequest {
    /// The join token an admin created (shown once in the UI).
    pub join_token: String,
    /// The host name the agent will report under.
    pub hostname: String,
}

/// The answer to a successful enrolment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnrollResponse {
    /// Server-side id of the host.
    pub host_id: i64,
    /// The host's own secret credential; send it as `Authorization: Bearer`.
    pub credential: String,
}

/// What an agent reports on every pass: the host and its GPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostReport {
    /// Must equal the host name the credential was issued for.
    pub hostname: String,
    /// Version of the agent binary.
    pub agent_version: String,
    /// Logical CPUs in thousandths (8 cores = 8000).
    pub cpu_milli: u64,
    /// Host memory in MiB.
    pub memory_mib: u64,
    /// Which backend produced the report (`nvml` or `simulated`).
    pub backend: String,
    /// Driver version as the backend reports it, if any.
    #[serde(default)]
    pub driver_version: Option<String>,
    /// The GPUs, in index order.
    pub gpus: Vec<GpuReport>,
}

/// One GPU as an agent sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuReport {
    /// NVML index on the host.
    pub index: u32,
    /// The GPU's UUID (`GPU-...`).
    pub uuid: String,
    /// Product name as the driver reports it (e.g. `NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Total framebuffer memory in MiB.
    pub memory_mib: u64,
    /// Whether the GPU supports MIG.
    pub mig_capable: bool,
    /// Whether MIG mode is currently enabled.
    pub mig_enabled: bool,
    /// Indices of GPUs on the same host reachable over NVLink.
    #[serde(default)]
    pub nvlink_peers: Vec<u32>,
    /// `healthy`, or a short description of what is wrong.
    #[serde(default = "healthy")]
    pub health: String,
    /// Sharing state as the driver has it (MIG instances, MPS, replicas), when
    /// the backend can read it.
    #[serde(default)]
    pub sharing: Option<tessera_core::plan::GpuObserved>,
}

fn healthy() -> String {
    "healthy".to_owned()
}

/// The server's answer to a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportAck {
    /// Seconds until the server expects the next report.
    pub next_report_in_s: u64,
}

/// Error body of every API answer that is not a success.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiErrorBody {
    /// Stable machine-readable code, e.g. `invalid_join_token`.
    pub code: String,
    /// What went wrong and what to change, for a person.
    pub message: String,
}
