//! The fleet: pools, hosts, GPUs and the join tokens hosts enrol with.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tessera_core::checked::Hostname;
use tessera_core::ids::{HostId, JoinTokenId};

/// Liveness of a host, derived from when it last reported.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostStatus {
    /// Reported within the grace period.
    Online,
    /// Silent for longer than the grace period.
    Offline,
}

impl HostStatus {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Online => "online",
            Self::Offline => "offline",
        }
    }
}

/// Hosts on one page of the fleet.
pub const HOSTS_PER_PAGE: u32 = 50;

/// The fleet page.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetView {
    /// Pools with their GPU counts.
    pub pools: Vec<PoolView>,
    /// The whole fleet, whatever the filters.
    pub summary: FleetSummary,
    /// One page of the hosts that match the filters, by name.
    pub hosts: Vec<HostView>,
    /// Hosts that match the filters.
    pub matching: u32,
    /// This page, from 1.
    pub page: u32,
    /// Pages of matching hosts (at least 1).
    pub pages: u32,
    /// When the view was computed (server clock).
    pub as_of: DateTime<Utc>,
}

/// The whole fleet in numbers.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetSummary {
    /// Hosts enrolled.
    pub hosts: u32,
    /// Of those, online.
    pub hosts_online: u32,
    /// Hosts that need an admin's eye (see the `attention` filter).
    pub hosts_attention: u32,
    /// GPUs.
    pub gpus: u32,
    /// Of those, in MIG mode.
    pub gpus_mig: u32,
    /// GPU memory, all GPUs together.
    pub memory_mib: i64,
}

/// A GPU pool as the fleet page shows it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolView {
    /// Name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// How its GPUs are shared.
    pub sharing: tessera_core::sharing::SharingMode,
    /// Who it is for.
    pub isolation: tessera_core::sharing::IsolationClass,
    /// GPUs in the pool.
    pub gpus: u32,
    /// Of those, on hosts that are online.
    pub gpus_online: u32,
    /// Of those, healthy enough and not cordoned, drained or in maintenance:
    /// what new slices can be placed on.
    pub gpus_schedulable: u32,
    /// Free capacity on those GPUs, in thousandths of a GPU.
    #[serde(default)]
    pub free_gpu_milli: u64,
    /// Of the free capacity, what the pool's current mix of requests could
    /// not use (the fragmentation measure placement minimises), in
    /// thousandths of a GPU.
    #[serde(default)]
    pub fragmented_gpu_milli: u64,
    /// Shapes the pool offers that fit nowhere right now (e.g. `MIG 7g.80gb`).
    #[serde(default)]
    pub unplaceable: Vec<String>,
}

/// A platform admin's decision about a host or GPU, and who made it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OpsView {
    /// Available, cordoned, draining or in maintenance.
    pub mode: tessera_core::availability::OpsMode,
    /// Why.
    pub reason: Option<String>,
    /// Who.
    pub by: Option<String>,
    /// When.
    pub at: Option<DateTime<Utc>>,
    /// While draining: when the slices still there end.
    pub drain_deadline: Option<DateTime<Utc>>,
}

impl OpsView {
    /// Available, with no history.
    pub fn available() -> Self {
        Self {
            mode: tessera_core::availability::OpsMode::Available,
            reason: None,
            by: None,
            at: None,
            drain_deadline: None,
        }
    }
}

/// What a platform admin asks for: the action and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OpsRequest {
    /// What to do.
    #[serde(flatten)]
    pub action: tessera_core::availability::OpsAction,
    /// Why (1-500 characters; shown to the owners of slices there and in
    /// the audit log).
    pub reason: String,
}

/// One host and its GPUs.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostView {
    /// Host id.
    pub id: HostId,
    /// Host name.
    pub hostname: Hostname,
    /// Derived liveness.
    pub status: HostStatus,
    /// Last report, if any.
    pub last_seen_at: Option<DateTime<Utc>>,
    /// CPUs in thousandths.
    pub cpu_milli: i64,
    /// Host memory in MiB.
    pub memory_mib: i64,
    /// Agent version.
    pub agent_version: Option<String>,
    /// Backend (`nvml` or `simulated`).
    pub backend: Option<String>,
    /// Driver version.
    pub driver_version: Option<String>,
    /// Cordoned, draining, in maintenance, or available.
    pub ops: OpsView,
    /// Slices holding capacity on it now.
    pub live_slices: u32,
    /// GPUs, by index.
    pub gpus: Vec<GpuView>,
}

/// One GPU.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuView {
    /// NVML index.
    pub index: i32,
    /// UUID.
    pub uuid: String,
    /// Catalogue model name (or the driver's name for an unknown model).
    pub model: String,
    /// Memory in MiB.
    pub memory_mib: i64,
    /// MIG-capable.
    pub mig_capable: bool,
    /// MIG mode on.
    pub mig_enabled: bool,
    /// The health verdict and its reasons.
    pub health: tessera_core::health::GpuHealth,
    /// A platform admin's decision about this GPU alone (the host's applies too).
    pub ops: OpsView,
    /// Slices holding capacity on it now.
    pub live_slices: u32,
    /// MIG instances the agent last saw (empty when none or unknown).
    pub mig_instances: Vec<MigInstanceView>,
    /// The memory slices drawn to scale, with where each profile could still
    /// start (MIG mode only).
    #[serde(default)]
    pub mig_map: Option<tessera_core::mig::MigMap>,
    /// The MPS control daemon's defaults as the agent last saw them (MPS
    /// pools: the smallest share its clients were granted).
    #[serde(default)]
    pub mps: Option<tessera_core::plan::MpsSettings>,
    /// MPS clients the agent found not keeping to their slice (no
    /// `TESSERA_ALLOCATION`, a slice not on this GPU, limits left out or
    /// above the grant).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mps_strays: Vec<tessera_core::plan::MpsStray>,
    /// The pool the GPU belongs to, if any.
    pub pool: Option<String>,
    /// Who holds slices on it that are not MIG instances (`vision: 1 whole GPU`).
    pub holders: Vec<String>,
}

/// One MIG GPU instance on a GPU.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigInstanceView {
    /// Profile, e.g. `3g.40gb`.
    pub profile: String,
    /// Start memory slice.
    pub start: u8,
    /// Processes running in it.
    pub in_use: bool,
    /// The tenant whose allocation it is (none: made outside Tessera).
    pub tenant: Option<String>,
}

/// A join token as listed (never the secret).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinTokenView {
    /// Id.
    pub id: JoinTokenId,
    /// What it is for.
    pub description: String,
    /// Who created it.
    pub created_by: Option<String>,
    /// When.
    pub created_at: DateTime<Utc>,
    /// Expiry.
    pub expires_at: DateTime<Utc>,
    /// Whether it can still be used, and if not why.
    pub status: JoinTokenStatus,
    /// Host that used it.
    pub used_by_host: Option<String>,
    /// A re-enrolment token: the existing host it may re-key (and the only
    /// host it enrols). `None`: it enrols a new host only.
    #[serde(default)]
    pub for_host: Option<String>,
}

/// Where a join token stands, derived from its timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JoinTokenStatus {
    /// Unused and unexpired: an agent can enrol with it.
    Active,
    /// An agent enrolled with it.
    Used,
    /// Its time ran out unused.
    Expired,
    /// An admin revoked it.
    Revoked,
}

impl JoinTokenStatus {
    /// Lower-case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Used => "used",
            Self::Expired => "expired",
            Self::Revoked => "revoked",
        }
    }
}

impl std::fmt::Display for JoinTokenStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A join token right after creation: the only time the secret is shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedJoinToken {
    /// The listed view.
    pub token: JoinTokenView,
    /// The secret to hand to the agent.
    pub secret: String,
}
