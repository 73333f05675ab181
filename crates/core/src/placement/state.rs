//! The fleet as the server fills it from the database: hosts, their free CPU
//! and memory, and each GPU's model, pool, sharing mode and current use.

use serde::{Deserialize, Serialize};

use crate::ids::{HostId, TenantId};

use crate::mig::MigPlacement;
use crate::units::{ComputeMilli, CpuMilli, MemMiB};

/// How a GPU is currently shared.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum GpuMode {
    /// Whole GPUs only: free when `GpuState::allocated` is false.
    Exclusive,
    /// MIG enabled; `layout` lists the instances that exist now. New instances
    /// are created in free slices (dynamic MIG); existing ones are never moved.
    Mig {
        /// Existing GPU instances.
        layout: Vec<MigPlacement>,
    },
    /// MPS or time-slicing: fractional compute and memory shares.
    Shared {
        /// Compute not yet promised to a client.
        compute_free: ComputeMilli,
        /// GPU memory not yet promised to a client.
        memory_free: MemMiB,
        /// Clients on the GPU now.
        clients: u32,
        /// Most clients the GPU takes (48 for MPS on Volta and later).
        max_clients: u32,
    },
}

/// One GPU of a host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuState {
    /// Device index on the host (as in `CUDA_VISIBLE_DEVICES`).
    pub index: u32,
    /// GPU UUID.
    pub uuid: String,
    /// Model name; resolved through the catalogue (`catalogue::lookup`).
    pub model: String,
    /// Total memory as reported by the agent (used for unknown models).
    pub memory: MemMiB,
    /// Pool the GPU belongs to.
    pub pool: String,
    /// GPUs with the same group on one host are NVLink-connected.
    pub nvlink_group: Option<u32>,
    /// Current sharing mode and use.
    pub mode: GpuMode,
    /// Held whole by one allocation (in any mode).
    pub allocated: bool,
    /// Tenants with slices on this GPU now, one entry per slice.
    #[serde(default)]
    pub tenants: Vec<TenantId>,
}

impl GpuState {
    /// An idle exclusive GPU: a starting point for fixtures and simulations.
    pub fn exclusive(index: u32, model: impl Into<String>, memory: MemMiB) -> Self {
        Self {
            index,
            uuid: String::new(),
            model: model.into(),
            memory,
            pool: String::new(),
            nvlink_group: None,
            mode: GpuMode::Exclusive,
            allocated: false,
            tenants: Vec::new(),
        }
    }

    /// The same GPU with MIG enabled and no instances yet.
    pub fn mig_enabled(mut self) -> Self {
        self.mode = GpuMode::Mig { layout: Vec::new() };
        self
    }

    /// The same GPU shared (MPS or time-slicing), entirely free.
    pub fn shared(mut self, max_clients: u32) -> Self {
        self.mode = GpuMode::Shared {
            compute_free: ComputeMilli(1000),
            memory_free: self.memory,
            clients: 0,
            max_clients,
        };
        self
    }

    /// The same GPU in another pool.
    pub fn in_pool(mut self, pool: impl Into<String>) -> Self {
        self.pool = pool.into();
        self
    }

    /// The same GPU holding one slice of `tenant` (fixtures: the tenant
    /// record only; the mode says what is taken).
    pub fn held_by(mut self, tenant: TenantId) -> Self {
        self.tenants.push(tenant);
        self
    }

    /// The same GPU in an NVLink group.
    pub fn nvlink(mut self, group: u32) -> Self {
        self.nvlink_group = Some(group);
        self
    }
}

/// One host: free CPU and memory and its GPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostState {
    /// Host id (unique in the fleet).
    pub id: HostId,
    /// CPU not yet promised to allocations.
    pub cpu_free: CpuMilli,
    /// Host memory not yet promised to allocations.
    pub memory_free: MemMiB,
    /// The host's GPUs.
    pub gpus: Vec<GpuState>,
}
