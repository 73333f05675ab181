//! Allocations as their tenant sees them, and the request form's data.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tessera_core::ids::AllocationId;

/// An allocation as its tenant (and platform admins) see it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationView {
    /// Id.
    pub id: AllocationId,
    /// Tenant slug.
    pub tenant: String,
    /// Pool.
    pub pool: String,
    /// Where it is in its life.
    pub state: tessera_core::lifecycle::AllocationPhase,
    /// Why it failed, or why the last teardown failed.
    pub reason: Option<String>,
    /// For `releasing`: the phase it will end in (`released`, `expired`, `failed`).
    pub ending_as: Option<tessera_core::lifecycle::AllocationPhase>,
    /// The slice asked for.
    pub shape: tessera_core::sharing::SliceShape,
    /// Short description of the slice.
    pub shape_label: String,
    /// What it costs against the quota.
    pub demand: tessera_core::quota::Demand,
    /// Purpose given.
    pub purpose: String,
    /// Who asked.
    pub requested_by: String,
    /// Lease length asked for, in hours.
    pub lease_hours: u32,
    /// When the lease ends (set when it becomes active).
    pub lease_ends_at: Option<DateTime<Utc>>,
    /// The pool's longest lease (for the extend form).
    pub max_lease_hours: u32,
    /// Host, once placed.
    pub host: Option<String>,
    /// GPUs (index and UUID), once placed.
    pub gpus: Vec<AllocatedGpu>,
    /// MIG start slice, for MIG slices.
    pub mig_start: Option<u8>,
    /// Priority class it was requested with (the queue serves higher
    /// classes first).
    pub priority_class: String,
    /// QoS class: how safe it is from preemption.
    pub qos: tessera_core::schedule::QosClass,
    /// Place in the pool's queue (1 = next), while queued.
    pub queue_position: Option<u32>,
    /// Why it waits, while queued, e.g. "no GPU in the pool has room for it
    /// right now" (on its own page and in the answer to the request; lists
    /// leave it out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
    /// When it is expected to start, while queued: every running slice's
    /// lease replayed to its end, the queue served in order, nothing new
    /// arriving (so it can only be earlier if slices are released early).
    /// Absent where lists leave it out, or when capacity freeing cannot
    /// let it start (e.g. its hosts are offline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_start: Option<DateTime<Utc>>,
    /// Set when its GPU turned unhealthy or went missing, or its host stayed
    /// offline past the grace period: what was lost, and since when. It can
    /// be requested again elsewhere in one step (`POST .../requeue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_lost: Option<CapacityLost>,
    /// Set while its host or GPU is being drained: when the slice will end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<DrainNotice>,
    /// Set while it waits to be reclaimed for being idle: the deadline, and
    /// whether its owner may still keep it (`POST .../keep`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle: Option<IdleNotice>,
    /// Set once it is told to give way to a waiting request (preemption):
    /// when, for which request and why, and when it was preempted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemption: Option<PreemptionNotice>,
    /// What the host stopped when it was released (absent until the host
    /// reports the slice gone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub processes_stopped: Option<ProcessesStoppedView>,
    /// While it waits: shapes in any pool that would start at once within
    /// the quota, closest to what was asked first (at most three).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub starts_now: Vec<tessera_core::slice::alternatives::StartsNow>,
    /// The slice this one replaces: released once this one is active.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<i64>))]
    pub replaces: Option<AllocationId>,
    /// Why the placer chose this place: for platform admins only, absent
    /// for everyone else and for slices placed before explanations were
    /// kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_why: Option<PlacementWhy>,
    /// How to use it, once active.
    pub connection: Option<tessera_core::slice::Connection>,
    /// Timestamps.
    pub created_at: DateTime<Utc>,
    /// When it was placed.
    pub placed_at: Option<DateTime<Utc>>,
    /// When it became active.
    pub active_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub ended_at: Option<DateTime<Utc>>,
    /// Server time of this view.
    pub as_of: DateTime<Utc>,
}

/// Why a slice was placed where it is, as the placer decided it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlacementWhy {
    /// The pool's placement policy that chose (`pack`, `spread`, ...).
    pub policy: String,
    /// What the policy ranks places by, most important first: the names
    /// of each place's `scores`.
    pub ranking: Vec<String>,
    /// The chosen place first, then the next best (at most three more;
    /// identical hosts count once).
    pub ranked: Vec<RankedPlaceView>,
    /// Places evaluated.
    pub candidates: u32,
    /// Hosts whose places were evaluated.
    pub hosts_scanned: u32,
    /// Hosts passed over for want of the CPU or memory asked for.
    pub hosts_short: u32,
    /// GPUs with room that tenant isolation kept the slice off.
    pub gpus_kept_apart: u32,
    /// How much the chosen place grew its host's workload-weighted
    /// fragmentation, in GPUs (negative: it used up fragmented capacity).
    pub fragmentation_delta: f64,
}

/// One place the policy ranked.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankedPlaceView {
    /// Host name.
    pub host: String,
    /// Device indices of the GPUs it would use.
    pub gpus: Vec<u32>,
    /// MIG start slice, for MIG slices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_start: Option<u8>,
    /// Scores, as `ranking` names them.
    pub scores: Vec<f64>,
}

// The scores and the fragmentation change are finite (integers scaled by
// the placer), never NaN, so equality is an equivalence.
impl Eq for PlacementWhy {}
impl Eq for RankedPlaceView {}

/// The processes a host stopped when a slice was released: SIGTERM, and
/// SIGKILL after the grace period for those still running.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessesStoppedView {
    /// Exited after SIGTERM.
    pub terminated: u32,
    /// Needed SIGKILL.
    pub killed: u32,
}

impl ProcessesStoppedView {
    /// Processes stopped in all.
    pub fn total(&self) -> u32 {
        self.terminated.saturating_add(self.killed)
    }

    /// For people: "2 processes stopped (1 killed after the grace period)".
    pub fn describe(&self) -> String {
        let total = self.total();
        let stopped = match total {
            0 => return "no process was running".to_owned(),
            1 => "1 process stopped".to_owned(),
            n => format!("{n} processes stopped"),
        };
        match self.killed {
            0 => stopped,
            k if k == total => format!("{stopped}, killed after the grace period"),
            k => format!("{stopped} ({k} killed after the grace period)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ProcessesStoppedView as P;

    #[test]
    fn what_was_stopped_reads_as_a_sentence() {
        let p = |terminated, killed| P { terminated, killed }.describe();
        assert_eq!(p(0, 0), "no process was running");
        assert_eq!(p(1, 0), "1 process stopped");
        assert_eq!(p(2, 0), "2 processes stopped");
        assert_eq!(
            p(1, 1),
            "2 processes stopped (1 killed after the grace period)"
        );
        assert_eq!(p(0, 1), "1 process stopped, killed after the grace period");
    }
}

impl AllocationView {
    /// No further change will happen.
    pub fn is_terminal(&self) -> bool {
        use tessera_core::lifecycle::AllocationPhase as P;
        matches!(self.state, P::Released | P::Failed | P::Expired)
    }
}

/// What a slice lost, and since when.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapacityLost {
    /// When it was noticed.
    pub at: DateTime<Utc>,
    /// What happened, e.g. "GPU 3 on gpu-01 is unhealthy: XID 79 ...".
    pub reason: String,
}

/// The drain a slice is caught in.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainNotice {
    /// The host being drained.
    pub host: String,
    /// When the slice ends.
    pub deadline: DateTime<Utc>,
    /// The admin's reason.
    pub reason: String,
}

/// An idle slice's reclaim.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdleNotice {
    /// When it was found idle.
    pub since: DateTime<Utc>,
    /// When it is released unless kept or busy again.
    pub deadline: DateTime<Utc>,
    /// Keeps used so far.
    pub keeps: u32,
    /// Keeps the pool allows in all.
    pub max_keeps: u32,
}

/// A slice's preemption.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreemptionNotice {
    /// When it ends (or ended) unless the request stops waiting first.
    pub deadline: DateTime<Utc>,
    /// The waiting request it gives way to.
    pub for_request: AllocationId,
    /// Why, in words.
    pub reason: String,
    /// When it was preempted, once it was.
    pub preempted_at: Option<DateTime<Utc>>,
}

/// Why a slice should stay although it is idle (`POST .../keep`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeepRequest {
    /// Shown in the audit log (1-500 characters).
    pub reason: String,
}

/// A GPU an allocation uses.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatedGpu {
    /// Device index on the host.
    pub index: u32,
    /// GPU UUID.
    pub uuid: String,
    /// Catalogue model.
    pub model: String,
}

/// One pool in the request form.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolChoice {
    /// Policy, models and lease limit (the form validates with these).
    pub offer: tessera_core::slice::PoolOffer,
    /// What it is for.
    pub description: String,
    /// Isolation class.
    pub isolation: tessera_core::sharing::IsolationClass,
    /// GPUs on online hosts.
    pub gpus_online: u32,
    /// The tenant's quota here, if it has one.
    pub quota: Option<tessera_core::quota::Quota>,
    /// The tenant's use here (its guaranteed slices: what counts against
    /// its quota).
    pub usage: tessera_core::quota::Usage,
    /// What its burstable slices borrow here.
    pub borrowed: tessera_core::quota::Usage,
    /// What a burstable request may still borrow here: the pool's quota
    /// (every tenant's) that no guaranteed or burstable slice holds.
    pub borrowable: tessera_core::quota::Demand,
    /// Notice a burstable or best-effort slice gets before preemption, in minutes.
    pub preemption_grace_minutes: u32,
    /// Requests waiting in this pool.
    pub queued: u32,
    /// Priority classes the tenant may use here, highest first.
    pub priority_classes: Vec<PriorityChoice>,
}

/// A priority class offered on the request form.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityChoice {
    /// Name.
    pub name: String,
    /// Higher is served first.
    pub value: i32,
    /// What it is for.
    pub description: String,
    /// Requests that name no class get this one.
    pub default: bool,
}

/// The request form's data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestOptions {
    /// Tenant slug.
    pub tenant: String,
    /// Tenant name.
    pub tenant_name: String,
    /// Pools the tenant can use.
    pub pools: Vec<PoolChoice>,
}

/// What a slice did since it started: its devices' utilisation and memory
/// over time, per minute (per hour for slices older than a day), the
/// current minute from the raw samples.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationActivity {
    /// Allocation id.
    pub allocation: AllocationId,
    /// GPU memory the slice may use, MiB (the memory chart's scale).
    pub memory_mib: u64,
    /// Length of each point's period, seconds (60 or 3600).
    pub period_s: u32,
    /// Oldest first.
    pub points: Vec<ActivityPoint>,
}

/// One period of a slice's activity.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActivityPoint {
    /// Start of the period.
    pub at: DateTime<Utc>,
    /// Mean utilisation, percent.
    pub util_avg: u8,
    /// Highest utilisation, percent.
    pub util_max: u8,
    /// Most memory used, MiB.
    pub mem_used_mib: u64,
}
