//! Placement: where a slice goes in the fleet.
//!
//! [`Fleet`] holds the hosts and GPUs (as the server reads them from the
//! database) together with the workload mix ([`Workload`]) that
//! fragmentation is measured against. [`Fleet::place`] chooses a host, GPUs
//! and, on MIG GPUs, a profile and start slice for a [`PlacementRequest`];
//! [`Fleet::apply`] records the [`Decision`]; [`Fleet::place_batch`] does
//! both for a queue.
//!
//! The default policy, [`Policy::Pack`], builds on "fragmentation gradient
//! descent" (FGD; Weng et al., USENIX ATC '23): free GPU capacity is
//! fragmented for a shape of the workload when that shape cannot use it,
//! and the placement chosen is the one that grows the workload-weighted
//! fragmentation least. Unlike FGD it measures exactly (no quantised score),
//! judges CPU and memory as well as GPU, counts GPU left without the CPU or
//! memory to feed it as fragmented, puts CPU-only work where it strands
//! no GPU, and keeps the counts of partly used shared GPUs at each gap
//! level balanced (the Sum-of-Squares rule of online bin packing, see
//! `gaps`), so that the next share finds a gap it fills well. [`Policy::Fgd`] is the published algorithm, kept as the
//! reference `placement-bench` compares against. Everything is pure and
//! deterministic: no clock, no I/O, randomness only from a seed.

mod apply;
mod batch;
mod decision;
mod error;
mod fleet;
mod frag;
mod gaps;
mod index;
mod mig_table;
mod place;
mod policy;
mod request;
mod rng;
mod search;
mod shape;
mod state;
mod workload;

#[cfg(test)]
mod tests;

pub use batch::BatchOrder;
pub use decision::{Decision, RankedPlace, ScoreBreakdown, Slice};
pub use error::{ApplyError, FleetError, PlacementError};
pub use fleet::{Fleet, FragmentationReport};
pub use policy::{Policy, PoolPlacement, UnknownPolicy};
pub use request::{Demand, PlacementRequest};
pub use rng::SplitMix64;
pub use state::{GpuMode, GpuState, HostState};
pub use workload::{Workload, WorkloadClass, WorkloadTally, DEFAULT_MAX_CLASSES};
