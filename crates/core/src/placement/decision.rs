//! The outcome of a placement and why it was chosen.

use serde::{Deserialize, Serialize};

use crate::ids::{HostId, TenantId};

use crate::mig::MigPlacement;
use crate::units::{ComputeMilli, CpuMilli, MemMiB};

/// What the allocation gets on its GPU(s).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Slice {
    /// CPU and memory only.
    HostOnly,
    /// The listed GPUs, whole.
    Whole,
    /// A share of one shared (MPS / time-sliced) GPU.
    Shared {
        /// Compute share.
        compute: ComputeMilli,
        /// GPU memory reserved.
        memory: MemMiB,
    },
    /// A new MIG instance on one GPU, created without touching existing ones.
    Mig(MigPlacement),
}

/// Why this place: the numbers the admin UI shows next to a decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScoreBreakdown {
    /// Policy that chose (`pack`, `spread`, ...).
    pub policy: String,
    /// Candidate places evaluated (after de-duplicating identical GPUs).
    pub candidates: u32,
    /// Workload-weighted fragmentation of the host before, in GPUs.
    pub fragmentation_before: f64,
    /// The same after this placement.
    pub fragmentation_after: f64,
    /// `fragmentation_after - fragmentation_before`; negative when the
    /// placement uses up capacity that was stranded. `pack` minimises this
    /// plus `gpu_waste` (in GPUs), GPU left without CPU or memory to feed
    /// it, and how many other GPUs share the gap it leaves.
    pub fragmentation_delta: f64,
    /// Compute taken beyond the request (a MIG profile rounding a share up),
    /// in thousandths; `pack` counts it as fragmentation.
    pub gpu_waste: ComputeMilli,
    /// Free compute left on the chosen GPU(s), in thousandths.
    pub gpu_leftover: ComputeMilli,
    /// Free GPU compute left on the host.
    pub host_gpu_free_after: ComputeMilli,
    /// CPU left on the host.
    pub host_cpu_free_after: CpuMilli,
    /// Memory left on the host.
    pub host_memory_free_after: MemMiB,
    /// What the policy ranks places by, most important first: the names
    /// of [`RankedPlace::scores`].
    #[serde(default)]
    pub ranking: Vec<String>,
    /// The chosen place and the next best, in rank order (at most four;
    /// identical hosts count once).
    #[serde(default)]
    pub ranked: Vec<RankedPlace>,
    /// Hosts whose places were evaluated.
    #[serde(default)]
    pub hosts_scanned: u32,
    /// Hosts passed over for want of the CPU or memory asked for.
    #[serde(default)]
    pub hosts_short: u32,
    /// GPUs with room that tenant isolation kept the slice off (they hold
    /// another tenant's slices).
    #[serde(default)]
    pub gpus_kept_apart: u32,
}

/// A place the policy ranked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankedPlace {
    /// Host id.
    pub host: HostId,
    /// Device indices of the GPUs it would use.
    pub gpus: Vec<u32>,
    /// The MIG start slice, for MIG slices.
    #[serde(default)]
    pub mig_start: Option<u8>,
    /// The policy's scores, as named by [`ScoreBreakdown::ranking`].
    pub scores: Vec<f64>,
}

/// Where a request goes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Host id.
    pub host: HostId,
    /// Position of the host in the fleet (a hint; `host` is authoritative).
    pub host_index: usize,
    /// Device indices of the GPUs used (empty for host-only requests).
    pub gpus: Vec<u32>,
    /// What is taken on those GPUs.
    pub slice: Slice,
    /// Host CPU taken.
    pub cpu: CpuMilli,
    /// Host memory taken.
    pub memory: MemMiB,
    /// Tenant the slice is for, recorded on its GPUs by [`Fleet::apply`](super::Fleet::apply).
    #[serde(default)]
    pub tenant: Option<TenantId>,
    /// Explanation.
    pub score: ScoreBreakdown,
}

impl Decision {
    /// What a slice placed earlier occupies, read back from storage: no
    /// host CPU or memory (slices take none), no score. Enough for
    /// [`Fleet::release`](super::Fleet::release) to give it back, e.g. to
    /// replay lease ends.
    pub fn held(host: HostId, gpus: Vec<u32>, slice: Slice, tenant: Option<TenantId>) -> Self {
        Self {
            host,
            host_index: 0,
            gpus,
            slice,
            cpu: CpuMilli(0),
            memory: MemMiB(0),
            tenant,
            score: ScoreBreakdown {
                policy: "held".to_string(),
                candidates: 0,
                fragmentation_before: 0.0,
                fragmentation_after: 0.0,
                fragmentation_delta: 0.0,
                gpu_waste: ComputeMilli(0),
                gpu_leftover: ComputeMilli(0),
                host_gpu_free_after: ComputeMilli(0),
                host_cpu_free_after: CpuMilli(0),
                host_memory_free_after: MemMiB(0),
                ranking: Vec::new(),
                ranked: Vec::new(),
                hosts_scanned: 0,
                hosts_short: 0,
                gpus_kept_apart: 0,
            },
        }
    }

    /// The MIG start slice, for MIG slices.
    pub fn mig_start(&self) -> Option<u8> {
        match &self.slice {
            Slice::Mig(p) => Some(p.start),
            _ => None,
        }
    }

    /// The MIG profile, for MIG slices.
    pub fn profile(&self) -> Option<&str> {
        match &self.slice {
            Slice::Mig(p) => Some(&p.profile),
            _ => None,
        }
    }
}
