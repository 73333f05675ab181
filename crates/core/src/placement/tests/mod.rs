//! Unit tests of the placer, with small fleet fixtures.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod batch;
mod explain;
mod fgd;
mod mig;
mod policies;
mod proptests;
mod rules;
mod tenancy;

use crate::ids::named::hid;
use crate::units::{ComputeMilli, CpuMilli, MemMiB};

use super::{
    Demand, Fleet, GpuMode, GpuState, HostState, PlacementRequest, Workload, WorkloadClass,
};

pub(super) const A100: &str = "A100-80GB";
pub(super) const L4: &str = "L4";

/// An idle exclusive GPU of `model`.
pub(super) fn gpu(index: u32, model: &str) -> GpuState {
    let memory = crate::catalogue::lookup(model, 0).memory_mib;
    GpuState::exclusive(index, model, MemMiB(memory))
}

/// A shared GPU with `used` thousandths of compute already taken by one client.
pub(super) fn shared(index: u32, model: &str, used: u32) -> GpuState {
    let mut g = gpu(index, model).shared(48);
    if let GpuMode::Shared {
        compute_free,
        memory_free,
        clients,
        ..
    } = &mut g.mode
    {
        *compute_free = ComputeMilli(1000 - used);
        *memory_free = MemMiB(memory_free.0 * u64::from(1000 - used) / 1000);
        *clients = u32::from(used > 0);
    }
    g
}

/// A host with 64 cores, 512 GiB and `gpus`.
pub(super) fn host(id: &str, gpus: Vec<GpuState>) -> HostState {
    HostState {
        id: hid(id),
        cpu_free: CpuMilli(64_000),
        memory_free: MemMiB(512 * 1024),
        gpus,
    }
}

pub(super) fn fleet(hosts: Vec<HostState>) -> Fleet {
    Fleet::new(hosts, Workload::default()).unwrap()
}

pub(super) fn frac(milli: u32) -> PlacementRequest {
    PlacementRequest::new(Demand::Fraction {
        compute: ComputeMilli(milli),
        memory: None,
    })
}

pub(super) fn whole(count: u32) -> PlacementRequest {
    PlacementRequest::new(Demand::Whole { count })
}

pub(super) fn mig(profile: &str) -> PlacementRequest {
    PlacementRequest::new(Demand::Mig {
        profile: profile.to_string(),
    })
}

pub(super) fn class(request: &PlacementRequest, weight: u64) -> WorkloadClass {
    WorkloadClass {
        demand: request.demand.clone(),
        cpu: request.cpu,
        memory: request.memory,
        allowed_models: request.allowed_models.clone(),
        pool: request.pool.clone(),
        weight,
    }
}
