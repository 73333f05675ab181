//! The agent API: enrolment and inventory reports.

use serde::{Deserialize, Serialize};
use tessera_core::checked::Hostname;
use tessera_core::ids::{AllocationId, HostId};

/// Path prefix of the agent API.
pub const AGENT_API_PREFIX: &str = "/api/agent/v1";

/// Where agents send telemetry, under [`AGENT_API_PREFIX`]: the one route
/// that takes a compressed body.
pub const TELEMETRY_ROUTE: &str = "/telemetry";

/// An agent trades a one-time join token for its own credential.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnrollRequest {
    /// The join token an admin created (shown once in the UI).
    pub join_token: String,
    /// The host name the agent will report under.
    pub hostname: Hostname,
}

/// The answer to a successful enrolment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnrollResponse {
    /// Server-side id of the host.
    pub host_id: HostId,
    /// The host's own secret credential; send it as `Authorization: Bearer`.
    pub credential: String,
}

/// What an agent reports on every pass: the host and its GPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostReport {
    /// Must equal the host name the credential was issued for.
    pub hostname: Hostname,
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
    /// Generation of the desired state the agent last applied in full (every
    /// listed GPU reached it, or failed with an entry in `errors`).
    #[serde(default)]
    pub applied_generation: Option<i64>,
    /// GPUs whose desired state could not be reached in that pass, and why.
    #[serde(default)]
    pub errors: Vec<GpuApplyError>,
    /// Processes stopped for released slices while applying that generation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stopped: Vec<ProcessesStopped>,
}

/// Processes the agent stopped on one GPU for released slices: SIGTERM,
/// then SIGKILL for those still there after the grace period.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessesStopped {
    /// GPU index.
    pub index: u32,
    /// Whose processes.
    pub scope: StopScope,
    /// Processes that exited after SIGTERM.
    pub terminated: u32,
    /// Processes that needed SIGKILL.
    pub killed: u32,
}

impl ProcessesStopped {
    /// Adds `other`'s counts (same GPU and scope).
    pub fn add(&mut self, terminated: u32, killed: u32) {
        self.terminated = self.terminated.saturating_add(terminated);
        self.killed = self.killed.saturating_add(killed);
    }
}

/// Which processes of a GPU were stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StopScope {
    /// Every process on the GPU (a whole GPU released, or a mode change).
    Gpu,
    /// The processes in the GPU instance at `gi_start` (a MIG slice).
    Instance {
        /// Start of the GPU instance.
        gi_start: u8,
    },
    /// The processes tagged `TESSERA_ALLOCATION=<allocation>` (a shared slice).
    Allocation {
        /// The released slice.
        allocation: AllocationId,
    },
}

/// A GPU that could not be brought to its desired state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuApplyError {
    /// GPU index.
    pub index: u32,
    /// The planner's or the driver's reason, for the tenant and the admin.
    pub message: String,
}

/// A MIG device (GPU instance with its compute instance) that exists on a GPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MigDevice {
    /// Start memory slice of the GPU instance.
    pub gi_start: u8,
    /// Profile name, e.g. `1g.10gb`.
    pub profile: String,
    /// The MIG device UUID (`MIG-...`), as `nvidia-smi -L` and
    /// `CUDA_VISIBLE_DEVICES` use it.
    pub uuid: String,
}

/// Longest a desired-state long poll is held open, in seconds.
pub const DESIRED_MAX_WAIT_S: u64 = 30;

/// The desired state of one host (`GET /api/agent/v1/desired?after=<gen>&wait_s=<s>`).
/// The server answers at once when its generation differs from `after`, and
/// otherwise holds the request until it changes or `wait_s` passes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DesiredState {
    /// Increases whenever anything on the host should change.
    pub generation: i64,
    /// The GPUs Tessera manages on this host; GPUs not listed are left alone.
    pub gpus: Vec<GpuDesiredEntry>,
}

/// The desired state of one GPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuDesiredEntry {
    /// GPU index.
    pub index: u32,
    /// GPU UUID (the agent checks it matches the index).
    pub uuid: String,
    /// What the GPU should look like.
    pub desired: tessera_core::plan::GpuDesired,
    /// Slices running on the GPU outside MIG (a whole-GPU holder, MPS
    /// clients, time-slice replicas in use); the simulated driver runs load
    /// on such GPUs.
    #[serde(default)]
    pub slices: u32,
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
    /// What the driver says about the GPU's health (the server judges it
    /// with `tessera_core::health::assess`).
    #[serde(default)]
    pub health: tessera_core::health::HealthSignals,
    /// Sharing state as the driver has it (MIG instances, MPS, replicas), when
    /// the backend can read it.
    #[serde(default)]
    pub sharing: Option<tessera_core::plan::GpuObserved>,
    /// MIG devices that exist now, with their UUIDs.
    #[serde(default)]
    pub mig_devices: Vec<MigDevice>,
}

/// The server's answer to a report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportAck {
    /// How often the agent observes its GPUs, in seconds: a report that
    /// changed is sent within this long.
    pub next_report_in_s: u64,
    /// How long the agent's desired-state poll may be held, in seconds, when
    /// nothing changes: the poll, naming the last report's digest, is the
    /// host's heartbeat, so this is well inside the server's offline grace.
    /// The agent keeps observing every [`ReportAck::next_report_in_s`]
    /// meanwhile and drops the poll to send a report that changed. 0 (a
    /// server that does not name one): the report interval.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub heartbeat_s: u64,
    /// The server's name for this report. An agent whose next report would
    /// be the same sends this instead, as [`REPORT_DIGEST_HEADER`] on its
    /// desired-state poll; absent from servers that do not take it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's signature
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Request header of the desired-state poll: the [`ReportAck::digest`] of
/// the agent's last report, which its next report would repeat. The poll
/// then stands for that report when the server answers
/// [`REPORT_HEADER`]`: `[`PolledReport::Noted`].
pub const REPORT_DIGEST_HEADER: &str = "tessera-report-digest";

/// Response header of the desired-state poll that carried
/// [`REPORT_DIGEST_HEADER`]: a [`PolledReport`].
pub const REPORT_HEADER: &str = "tessera-report";

/// What became of the report a desired-state poll named ([`REPORT_HEADER`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolledReport {
    /// The poll stood for the repeated report: the agent need not send it.
    Noted,
    /// The server wants the report itself (it did not process that one here
    /// lately, or the host's state changed since).
    Wanted,
}

impl PolledReport {
    /// The header value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Noted => "noted",
            Self::Wanted => "wanted",
        }
    }

    /// Reads a header value (`None`: not one of ours).
    pub fn parse(value: &[u8]) -> Option<Self> {
        [Self::Noted, Self::Wanted]
            .into_iter()
            .find(|r| r.as_str().as_bytes() == value)
    }
}

/// Error body of every API answer that is not a success.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiErrorBody {
    /// Stable machine-readable code, e.g. `invalid_join_token` (one of
    /// [`tessera_core::error_code::ErrorCode`]; a string on the wire so an
    /// older agent reads a newer server's codes).
    #[cfg_attr(feature = "openapi", schema(value_type = tessera_core::error_code::ErrorCode))]
    pub code: String,
    /// What went wrong and what to change, for a person.
    pub message: String,
}

/// Most sampling rounds one telemetry batch may carry (an hour at 10 s).
pub const MAX_TELEMETRY_ROUNDS: usize = 360;

/// GPU samples an agent sends (`POST /api/agent/v1/telemetry`, the body
/// gzip-compressed with `Content-Encoding: gzip`). Rounds carry their time:
/// the server keeps the time of the last round it stored per host and skips
/// rounds at or before it, so a batch sent twice (a lost answer, an outage
/// replay) is stored once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryBatch {
    /// Must equal the host name the credential was issued for.
    pub hostname: Hostname,
    /// How long each round stands for (the agent's sampling interval), ms.
    pub interval_ms: u32,
    /// Sampling rounds, oldest first, at most [`MAX_TELEMETRY_ROUNDS`].
    pub rounds: Vec<TelemetryRound>,
}

/// One sampling round of all the host's GPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryRound {
    /// When it was taken, ms since the epoch (the host's clock).
    pub at_ms: i64,
    /// One entry per GPU.
    pub gpus: Vec<GpuSample>,
}

/// One GPU in a round (see `tessera_core::telemetry` for what each figure
/// means and where the driver gives it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSample {
    /// The GPU's UUID.
    pub uuid: String,
    /// Utilisation, percent (0..=100); `None` where the driver does not
    /// measure it (a GPU with MIG on: NVML answers `NOT_SUPPORTED`), which
    /// is unknown, not idle.
    #[serde(default)]
    pub util_pct: Option<u8>,
    /// Framebuffer memory used, MiB.
    pub mem_used_mib: u64,
    /// Power draw, milliwatts.
    #[serde(default)]
    pub power_mw: Option<u32>,
    /// Core temperature, °C.
    #[serde(default)]
    pub temp_c: Option<u32>,
    /// SM clock, MHz.
    #[serde(default)]
    pub sm_clock_mhz: Option<u32>,
    /// Its MIG devices, where MIG is on.
    #[serde(default)]
    pub instances: Vec<InstanceSample>,
    /// Its shared slices' own figures (MIG off): the processes naming each
    /// slice (`TESSERA_ALLOCATION`), from the driver's per-process figures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clients: Vec<ClientSample>,
}

/// The processes of one shared slice (MPS client, time-sliced replica) on a
/// GPU in a round.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientSample {
    /// The slice its processes name.
    pub allocation: AllocationId,
    /// Their SM utilisation, percent of the *whole GPU* (summed over its
    /// processes, at most 100; `nvmlDeviceGetProcessUtilization`); `None`
    /// where the driver does not give it.
    #[serde(default)]
    pub util_pct: Option<u8>,
    /// Their framebuffer memory, MiB (the process list's used memory).
    pub mem_used_mib: u64,
}

/// One MIG device in a round.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceSample {
    /// The MIG device UUID.
    pub uuid: String,
    /// Graphics-engine activity, percent, where the driver measures it
    /// per instance (GPM on Hopper); `None` otherwise.
    #[serde(default)]
    pub util_pct: Option<u8>,
    /// Memory used, MiB.
    pub mem_used_mib: u64,
}

/// The server's answer to a telemetry batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TelemetryAck {
    /// Rounds stored now.
    pub stored: u32,
    /// Rounds skipped because they were stored before.
    pub duplicates: u32,
    /// Rounds dropped because they are older than the server keeps raw
    /// samples.
    pub expired: u32,
    /// The time of the last round the server holds for the host, ms: the
    /// agent may drop everything up to it.
    pub last_at_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::PolledReport;

    #[test]
    fn polled_report_values_read_back_and_nothing_else_does() {
        for r in [PolledReport::Noted, PolledReport::Wanted] {
            assert_eq!(PolledReport::parse(r.as_str().as_bytes()), Some(r));
        }
        assert_eq!(PolledReport::Noted.as_str(), "noted");
        assert_eq!(PolledReport::Wanted.as_str(), "wanted");
        for bad in [&b""[..], b"Noted", b"noted ", b"other"] {
            assert_eq!(PolledReport::parse(bad), None);
        }
    }
}
