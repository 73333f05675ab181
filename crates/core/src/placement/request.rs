//! What a tenant asks the placer for.

use serde::{Deserialize, Serialize};

use crate::ids::TenantId;

use crate::catalogue;
use crate::units::{ComputeMilli, CpuMilli, MemMiB};

/// The GPU part of a request.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Demand {
    /// No GPU at all: only host CPU and memory.
    None,
    /// A share of one GPU: an MPS / time-sliced share on a shared GPU, or, on
    /// a MIG GPU, the smallest MIG profile covering `compute` and the memory.
    Fraction {
        /// Compute share in thousandths of one GPU (1..=1000).
        compute: ComputeMilli,
        /// GPU memory; `None` means "proportional to `compute`" (the share of
        /// whichever GPU model it lands on).
        memory: Option<MemMiB>,
    },
    /// `count` whole, otherwise idle GPUs on one host (an idle MIG-mode GPU
    /// qualifies: the server then turns its MIG mode off).
    Whole {
        /// Number of GPUs (>= 1).
        count: u32,
    },
    /// One instance of a named MIG profile, e.g. `1g.10gb`.
    Mig {
        /// Profile name as in the catalogue.
        profile: String,
    },
}

/// A request to place one slice (or a multi-GPU set) onto the fleet.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PlacementRequest {
    /// The GPU demand.
    pub demand: Demand,
    /// Host CPU needed.
    pub cpu: CpuMilli,
    /// Host memory needed.
    pub memory: MemMiB,
    /// Canonical catalogue model names that are acceptable; empty = any.
    pub allowed_models: Vec<String>,
    /// Pool the GPUs must belong to; `None` = any pool.
    pub pool: Option<String>,
    /// For `Whole` with `count > 1`: all GPUs in one NVLink group.
    pub nvlink_local: bool,
    /// Tenant the slice is for (recorded on the GPUs it takes).
    #[serde(default)]
    pub tenant: Option<TenantId>,
    /// The slice may only go on GPUs that hold no other tenant's slices.
    #[serde(default)]
    pub tenant_exclusive: bool,
}

impl PlacementRequest {
    /// A request with only a GPU demand and no host resources or constraints.
    pub fn new(demand: Demand) -> Self {
        Self {
            demand,
            cpu: CpuMilli(0),
            memory: MemMiB(0),
            allowed_models: Vec::new(),
            pool: None,
            nvlink_local: false,
            tenant: None,
            tenant_exclusive: false,
        }
    }

    /// Sets the tenant; with `exclusive`, the slice only goes on GPUs that
    /// hold no other tenant's slices (an isolation class that separates
    /// tenants, see [`IsolationClass::separates_tenants`](crate::sharing::IsolationClass::separates_tenants)).
    pub fn for_tenant(mut self, tenant: TenantId, exclusive: bool) -> Self {
        self.tenant = Some(tenant);
        self.tenant_exclusive = exclusive;
        self
    }

    /// Sets the host CPU and memory.
    pub fn with_host(mut self, cpu: CpuMilli, memory: MemMiB) -> Self {
        self.cpu = cpu;
        self.memory = memory;
        self
    }

    /// Restricts the request to the given models.
    pub fn with_models<I, S>(mut self, models: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.allowed_models = models.into_iter().map(Into::into).collect();
        self
    }

    /// Restricts the request to one pool.
    pub fn in_pool(mut self, pool: impl Into<String>) -> Self {
        self.pool = Some(pool.into());
        self
    }

    /// Requires all GPUs to share one NVLink group.
    pub fn nvlink(mut self) -> Self {
        self.nvlink_local = true;
        self
    }

    /// GPU compute requested, in thousandths of a GPU (whole GPUs count 1000
    /// each). A named MIG profile counts its compute share, the largest over
    /// the catalogue's MIG models that offer a profile of that name (`7g.80gb`
    /// is 1000, `1g.10gb` 142); a name no model offers counts 0.
    pub fn gpu_milli(&self) -> u64 {
        match &self.demand {
            Demand::None => 0,
            Demand::Mig { profile } => catalogue::all_models()
                .iter()
                .filter_map(|m| m.mig)
                .filter_map(|spec| spec.profile(profile).map(|p| p.compute_milli(spec).0))
                .max()
                .map_or(0, u64::from),
            Demand::Fraction { compute, .. } => u64::from(compute.0),
            Demand::Whole { count } => u64::from(*count) * 1000,
        }
    }
}
