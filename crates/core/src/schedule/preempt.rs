//! Quality of service and preemption: which running slices give way to a
//! waiting request, in the spirit of Kubernetes' QoS classes and Kueue's
//! cohort borrowing.
//!
//! - [`QosClass::Guaranteed`] slices count against their tenant's quota and
//!   are never preempted.
//! - [`QosClass::Burstable`] slices go beyond it, on quota the pool's other
//!   tenants do not use right now (the pool is the cohort). They give way
//!   when a lender wants its quota back, or to a higher priority.
//! - [`QosClass::BestEffort`] slices use otherwise idle capacity outside any
//!   quota and give way first.
//!
//! [`plan_preemption`] picks, for each waiting request that has no room,
//! the victims whose loss is least: lowest priority, then best-effort before
//! burstable, then the youngest, then the smallest set that frees a fitting
//! place on one host, found by the placement engine itself. Victims get
//! notice and a grace period (the caller's); capacity already promised back
//! by earlier notices is counted first, so a pass never displaces more than
//! it needs. Pure: no clock, no I/O.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use crate::ids::AllocationId;
use crate::names::stable_names;
use crate::placement::{Decision, Fleet, PlacementRequest, Policy};
#[cfg(doc)]
use crate::quota::headroom;
use crate::quota::{check, Demand, Quota, QuotaExceeded, Usage};

stable_names! {
    /// How safe a slice is from preemption, chosen per request.
    #[derive(Default)]
    pub enum QosClass ("qos_class") {
        /// Within the tenant's quota; never preempted.
        #[default]
        Guaranteed = "guaranteed",
        /// Beyond the tenant's quota, on the pool's unused quota; preempted
        /// (after notice) when the lenders want it back.
        Burstable = "burstable",
        /// On otherwise idle capacity, outside any quota; preempted first.
        BestEffort = "best-effort",
    }
}

impl QosClass {
    /// The class as people read it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Guaranteed => "Guaranteed",
            Self::Burstable => "Burstable",
            Self::BestEffort => "Best effort",
        }
    }

    /// What choosing it means, for the request form.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Guaranteed => "Counts against your quota; never preempted.",
            Self::Burstable => {
                "Beyond your quota, on quota other tenants leave unused; may be preempted with notice when they need it back."
            }
            Self::BestEffort => {
                "Outside any quota, on idle capacity; preempted first, with notice, when anyone needs the room."
            }
        }
    }

    /// Order of displacement: best-effort (0) before burstable (1);
    /// guaranteed (2) never.
    pub fn protection(self) -> u8 {
        match self {
            Self::BestEffort => 0,
            Self::Burstable => 1,
            Self::Guaranteed => 2,
        }
    }

    /// Whether it can ever be preempted.
    pub fn preemptible(self) -> bool {
        self != Self::Guaranteed
    }

    /// Checks a request of this class against the quota it draws on:
    /// guaranteed on the tenant's own (`own`, against its guaranteed
    /// slices' `own_usage`), burstable on what the pool's quota leaves
    /// unused (`borrowable`: [`headroom`] of every tenant's quota there
    /// after every guaranteed and burstable slice), best-effort on none.
    pub fn check_quota(
        self,
        (own, own_usage): (&Quota, &Usage),
        borrowable: &Demand,
        demand: &Demand,
    ) -> Result<(), QosQuotaError> {
        match self {
            Self::Guaranteed => check(own, own_usage, demand).map_err(QosQuotaError::Own),
            Self::Burstable => {
                let lendable = Quota {
                    compute: borrowable.compute,
                    memory: borrowable.memory,
                    max_slices: borrowable.slices,
                };
                check(&lendable, &Usage::default(), demand).map_err(QosQuotaError::Pool)
            }
            Self::BestEffort => Ok(()),
        }
    }
}

/// A request its class's quota cannot hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QosQuotaError {
    /// A guaranteed request beyond the tenant's quota.
    #[error("{0} (or ask for it as burstable, to borrow quota the pool's other tenants leave unused, at the risk of preemption)")]
    Own(QuotaExceeded),
    /// A burstable request beyond what the pool's quota leaves unused.
    #[error("burstable slices borrow quota the pool's tenants leave unused, and this one needs {} of {} while only {} is unused; ask for less, ask for it as best-effort, or try again later", .0.dimension.amount(.0.requested), .0.dimension, .0.dimension.amount(.0.available))]
    Pool(QuotaExceeded),
}

/// A slice holding capacity that might give way.
#[derive(Clone, Debug, PartialEq)]
pub struct Running {
    /// Allocation id.
    pub id: AllocationId,
    /// Its priority (the class's value).
    pub priority: i32,
    /// Its QoS class.
    pub qos: QosClass,
    /// When it was placed (ms): the youngest loses least.
    pub since: i64,
    /// What it occupies.
    pub decision: Decision,
    /// Already told to give way: its capacity counts as coming back.
    pub notified: bool,
}

/// A waiting request that has no room.
#[derive(Clone, Debug, PartialEq)]
pub struct Claimant {
    /// Allocation id.
    pub id: AllocationId,
    /// Its priority.
    pub priority: i32,
    /// Its QoS class.
    pub qos: QosClass,
    /// What it needs.
    pub request: PlacementRequest,
}

/// The slices chosen to give way to one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preemption {
    /// The waiting request.
    pub for_id: AllocationId,
    /// The host where it will fit once they are gone.
    pub host: crate::ids::HostId,
    /// The slices to preempt, least loss first.
    pub victims: Vec<AllocationId>,
}

/// Whether `victim` may be displaced for a request of class `qos` at
/// `priority`. A guaranteed request (within its tenant's quota) takes back
/// any borrowed or idle capacity; a burstable one displaces best-effort
/// slices and burstable ones of lower priority; a best-effort one only
/// best-effort slices of lower priority. Guaranteed slices never give way.
pub fn may_displace(qos: QosClass, priority: i32, victim: &Running) -> bool {
    match (qos, victim.qos) {
        (_, QosClass::Guaranteed) => false,
        (QosClass::Guaranteed, _) => true,
        (QosClass::Burstable, QosClass::BestEffort) => true,
        (QosClass::Burstable, QosClass::Burstable)
        | (QosClass::BestEffort, QosClass::BestEffort) => victim.priority < priority,
        (QosClass::BestEffort, QosClass::Burstable) => false,
    }
}

/// How much is lost by displacing `r`; smaller gives way first: lower
/// priority, then best-effort before burstable, then younger.
type Loss = (i32, u8, Reverse<i64>, Reverse<AllocationId>);

fn loss(r: &Running) -> Loss {
    (
        r.priority,
        r.qos.protection(),
        Reverse(r.since),
        Reverse(r.id),
    )
}

/// For each claimant (in queue order), the slices to preempt so it fits,
/// or nothing when capacity already promised back (by earlier notices, or
/// by this pass for claimants ahead of it) covers it, or when no allowed
/// set of victims makes room. A slice is chosen for one claimant at most.
pub fn plan_preemption(
    fleet: &Fleet,
    claimants: &[Claimant],
    running: &[Running],
    policy: Policy,
) -> Vec<Preemption> {
    let mut fleet = fleet.clone();
    for r in running.iter().filter(|r| r.notified) {
        // A slice the snapshot does not hold gives nothing back.
        let _ = fleet.release(&r.decision);
    }
    let mut taken: BTreeSet<AllocationId> = BTreeSet::new();
    let mut out = Vec::new();
    // Claimants for which no victims were found since the last preemption:
    // one asking for the same at the same class and priority finds none
    // either (a long queue of alike requests costs one search).
    let mut failed: Vec<(&PlacementRequest, QosClass, i32)> = Vec::new();
    for c in claimants {
        if take(&mut fleet, &c.request, policy) {
            continue;
        }
        let key = (&c.request, c.qos, c.priority);
        if failed.contains(&key) {
            continue;
        }
        let eligible: Vec<&Running> = running
            .iter()
            .filter(|r| !r.notified && !taken.contains(&r.id))
            .filter(|r| may_displace(c.qos, c.priority, r))
            .collect();
        let Some((host, victims)) = cheapest(&fleet, &c.request, policy, &eligible) else {
            failed.push(key);
            continue;
        };
        failed.clear();
        for v in &victims {
            let _ = fleet.release(&v.decision);
            taken.insert(v.id);
        }
        take(&mut fleet, &c.request, policy);
        out.push(Preemption {
            for_id: c.id,
            host,
            victims: victims.iter().map(|v| v.id).collect(),
        });
    }
    out
}

/// Places and applies `request` on `fleet`, if it fits.
fn take(fleet: &mut Fleet, request: &PlacementRequest, policy: Policy) -> bool {
    fleet
        .place(request, policy)
        .and_then(|d| {
            fleet
                .apply(&d)
                .map_err(|_| crate::placement::PlacementError::InsufficientCapacity)
        })
        .is_ok()
}

/// The host and set of `eligible` slices whose preemption lets `request`
/// fit there at the least loss: per host, victims are added in order of
/// loss until it fits, then any not needed are put back (costliest first);
/// hosts compare by their sets' losses, highest first, then by size.
fn cheapest<'a>(
    fleet: &Fleet,
    request: &PlacementRequest,
    policy: Policy,
    eligible: &[&'a Running],
) -> Option<(crate::ids::HostId, Vec<&'a Running>)> {
    let mut by_host: BTreeMap<crate::ids::HostId, Vec<&'a Running>> = BTreeMap::new();
    for r in eligible {
        by_host.entry(r.decision.host).or_default().push(r);
    }
    let mut best: Option<(Vec<Loss>, crate::ids::HostId, Vec<&'a Running>)> = None;
    for (host, mut victims) in by_host {
        let Some(alone) = fleet.only_host(host) else {
            continue;
        };
        let fits_without = |set: &[&Running]| {
            let mut f = alone.clone();
            set.iter().all(|v| f.release(&v.decision).is_ok()) && f.place(request, policy).is_ok()
        };
        victims.sort_by_key(|r| loss(r));
        // The shortest prefix that makes room, releasing one at a time.
        let mut trial = alone.clone();
        let Some(needed) = victims.iter().position(|v| {
            trial.release(&v.decision).is_ok() && trial.place(request, policy).is_ok()
        }) else {
            continue;
        };
        let needed = needed + 1;
        let mut chosen: Vec<&Running> = victims[..needed].to_vec();
        for i in (0..chosen.len()).rev() {
            let mut fewer = chosen.clone();
            fewer.remove(i);
            if fits_without(&fewer) {
                chosen = fewer;
            }
        }
        let mut cost: Vec<Loss> = chosen.iter().map(|r| loss(r)).collect();
        cost.sort_by(|a, b| b.cmp(a));
        if best.as_ref().is_none_or(|(c, ..)| cost < *c) {
            best = Some((cost, host.to_owned(), chosen));
        }
    }
    best.map(|(_, host, victims)| (host, victims))
}

#[cfg(test)]
#[path = "preempt_tests.rs"]
mod tests;
