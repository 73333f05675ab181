//! Scheduling policy: in which order waiting requests are served, which of
//! them start now, and when the others can expect to.
//!
//! [`queue_order`] ranks a pool's queue: QoS class ([`QosClass`]: guaranteed,
//! burstable, best-effort), then priority (from the request's
//! [`PriorityClass`]), then weighted fair share ([`decayed_usage`] over the
//! tenant's weight), then age.
//! [`plan_queue`] walks it once: whatever fits starts now, so a request that
//! cannot fit does not hold up smaller ones behind it (backfill); the first
//! request that has waited longer than the pool allows gets a reservation on
//! the host where it will fit first, which later requests may only use if
//! their lease ends before it starts (EASY backfill: Lifka, 1995; Slurm's
//! `sched/backfill`); and a replay of the lease ends gives
//! every waiting request an estimated start. [`plan_preemption`] picks the
//! running slices that give way to a waiting request by QoS class and
//! priority ([`QosClass`]). Pure: no clock, no I/O.

mod backfill;
mod fair_share;
mod preempt;
mod priority;
mod queue;

pub use backfill::{
    plan_queue, Discipline, Holding, QueuePlan, QueuePolicy, Reservation, Wait, Waiting, Waits,
};
pub use fair_share::{decayed_usage, UseSpan, MAX_HALF_LIFE_MS};
pub use preempt::{
    may_displace, plan_preemption, Claimant, Preemption, QosClass, QosQuotaError, Running,
};
pub use priority::{PriorityClass, PriorityClassError, PriorityClasses, MAX_PRIORITY, STANDARD};
pub use queue::{queue_order, QueueEntry};

#[cfg(test)]
mod tests;
