//! One pass over a pool's queue: start what fits (backfill), hold a host for
//! the request that has waited too long (reservation), and estimate when
//! the rest start by replaying the lease ends.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::AllocationId;
use crate::placement::{Decision, Fleet, PlacementError, PlacementRequest, Policy};

use super::queue::{serve_first, QueueEntry};

/// A queued request, as the planner sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Waiting {
    /// Its place in the queue's order, and when it was asked for (ms).
    pub entry: QueueEntry,
    /// What to place.
    pub request: PlacementRequest,
    /// How long it holds its capacity once placed (its lease), in ms.
    pub hold_ms: i64,
}

/// Capacity held now, and when it comes back.
#[derive(Clone, Debug, PartialEq)]
pub struct Holding {
    /// What it occupies in the fleet.
    pub decision: Decision,
    /// When it is given back (its lease end), in ms; a time in the past
    /// means "as soon as its release completes".
    pub until: i64,
}

/// How a queue treats a request that does not fit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum Discipline {
    /// Strict order: nothing behind it starts until it does (simple and
    /// predictable; capacity idles while the head waits).
    Fifo,
    /// Whatever fits starts; the request that has waited too long keeps the
    /// host where it fits first (EASY backfill).
    #[default]
    Backfill,
}

impl Discipline {
    /// Both, for lists and benchmarks.
    pub const ALL: [Self; 2] = [Self::Fifo, Self::Backfill];

    /// The configuration name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fifo => "fifo",
            Self::Backfill => "backfill",
        }
    }
}

impl std::fmt::Display for Discipline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A pool's queueing rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuePolicy {
    /// How requests are placed.
    pub placement: Policy,
    /// Strict order or backfill.
    pub discipline: Discipline,
    /// With [`Discipline::Backfill`]: a request waiting at least this long
    /// (ms) that still does not fit gets a reservation (only the first such
    /// request in queue order).
    pub reserve_after_ms: i64,
    /// Also estimate every waiting request's start (for showing it; the
    /// timer does not need it).
    pub estimate: bool,
}

/// A host held for a request that has waited too long.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// The request it is held for.
    pub id: AllocationId,
    /// The host (fleet id) where it fits first.
    pub host: crate::ids::HostId,
    /// When it is expected to fit there (ms).
    pub from: i64,
}

/// Why a request is still waiting.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Wait {
    /// The pool has no room for it (the placer's reason).
    NoRoom {
        /// What stands in the way.
        error: PlacementError,
    },
    /// Room exists, but on the host held for a request that has waited
    /// longer, and its lease would run past the time that request starts.
    Held {
        /// The request the room is held for.
        for_id: AllocationId,
    },
    /// The queue is strict ([`Discipline::Fifo`]) and an earlier request
    /// does not fit yet.
    Behind {
        /// The first request in the queue that does not fit.
        head: AllocationId,
    },
}

impl Wait {
    /// The reason in words, for the request's owner.
    pub fn reason(&self) -> String {
        match self {
            Self::NoRoom { error } => error.waiting_reason(),
            Self::Held { for_id } => format!(
                "the room that would fit it is held for request {for_id}, which has waited longer; it starts there once that request is placed, or earlier if something else frees"
            ),
            Self::Behind { head } => format!(
                "this pool serves its queue strictly in order, and request {head} ahead of it does not fit yet"
            ),
        }
    }
}

/// One request that stays in the queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Waits {
    /// The request.
    pub id: AllocationId,
    /// Why.
    pub why: Wait,
    /// When it is expected to start (ms), assuming every lease runs to its
    /// end and nothing new arrives; `None` when it was not estimated, or
    /// when it cannot start even then (its error does not clear with
    /// capacity, or the pool is too small while hosts are offline).
    pub estimated_start: Option<i64>,
}

/// The outcome of one pass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QueuePlan {
    /// Requests to place now, in the order they were placed (each decision
    /// is already applied to the fleet passed in).
    pub placed: Vec<(AllocationId, Decision)>,
    /// The rest, in queue order.
    pub waiting: Vec<Waits>,
    /// The host held for the request that waited too long, if any.
    pub reservation: Option<Reservation>,
}

impl QueuePlan {
    /// The decision for request `id`, when it is placed now.
    pub fn placed(&self, id: AllocationId) -> Option<&Decision> {
        self.placed.iter().find(|(i, _)| *i == id).map(|(_, d)| d)
    }

    /// Why request `id` waits, when it does.
    pub fn waits(&self, id: AllocationId) -> Option<&Waits> {
        self.waiting.iter().find(|w| w.id == id)
    }
}

/// Plans one pass over `queue` (any order; it is ranked with
/// [`queue_order`](super::queue_order)'s rule) on `fleet`, which holds
/// `holding`. The decisions in [`QueuePlan::placed`] are applied to
/// `fleet`. `now` and every time are in milliseconds on one clock.
pub fn plan_queue(
    fleet: &mut Fleet,
    queue: &[Waiting],
    holding: &[Holding],
    now: i64,
    policy: &QueuePolicy,
) -> QueuePlan {
    let mut order: Vec<&Waiting> = queue.iter().collect();
    order.sort_by(|a, b| serve_first(&a.entry, &b.entry));

    // When each slice placed below gives its capacity back (with
    // `holding`, what `returns_by` orders; built only when a request waits,
    // since a pass that places everything never looks ahead).
    let mut placed_ends: Vec<i64> = Vec::new();

    let mut plan = QueuePlan::default();
    let mut blocked: Vec<&Waiting> = Vec::new();
    let strict = policy.discipline == Discipline::Fifo;
    // Strict queues: the first request that waits for capacity (one that
    // can never fit as things are does not hold up the others).
    let mut head: Option<AllocationId> = None;
    for w in order {
        if let (true, Some(head)) = (strict, head) {
            plan.waiting.push(Waits {
                id: w.entry.id,
                why: Wait::Behind { head },
                estimated_start: None,
            });
            blocked.push(w);
            continue;
        }
        let ends = ends_at(now, w);
        let avoid = plan
            .reservation
            .as_ref()
            .filter(|r| ends > r.from)
            .map(|r| r.host);
        let decision = fleet
            .place_avoiding(&w.request, policy.placement, avoid)
            .and_then(|d| {
                // A fresh decision always applies; if the caches disagree,
                // the request waits for the next pass.
                fleet
                    .apply(&d)
                    .map(|()| d)
                    .map_err(|_| PlacementError::InsufficientCapacity)
            });
        let error = match decision {
            Ok(d) => {
                placed_ends.push(ends);
                plan.placed.push((w.entry.id, d));
                continue;
            }
            Err(e) => e,
        };
        let why = match &plan.reservation {
            Some(r) if avoid.is_some() && fleet.place(&w.request, policy.placement).is_ok() => {
                Wait::Held { for_id: r.id }
            }
            _ => Wait::NoRoom { error },
        };
        let starved = now.saturating_sub(w.entry.requested_at) >= policy.reserve_after_ms;
        if !strict && plan.reservation.is_none() && starved && clears(&why) {
            let returns = returns_by(holding, &plan.placed, &placed_ends, now);
            if let Some((from, d)) =
                earliest_fit(fleet.clone(), &w.request, policy.placement, &returns, now)
            {
                plan.reservation = Some(Reservation {
                    id: w.entry.id,
                    host: d.host,
                    from,
                });
            }
        }
        if head.is_none() && clears(&why) {
            head = Some(w.entry.id);
        }
        plan.waiting.push(Waits {
            id: w.entry.id,
            why,
            estimated_start: None,
        });
        blocked.push(w);
    }

    if policy.estimate {
        let returns = returns_by(holding, &plan.placed, &placed_ends, now);
        estimate(fleet.clone(), &mut plan, &blocked, returns, now, policy);
    } else if let Some(r) = &plan.reservation {
        if let Some(w) = plan.waiting.iter_mut().find(|w| w.id == r.id) {
            w.estimated_start = Some(r.from);
        }
    }
    plan
}

/// What comes back when: the slices `holding` holds, then those `placed`
/// in this pass (ending at `placed_ends`, in the same order).
fn returns_by(
    holding: &[Holding],
    placed: &[(AllocationId, Decision)],
    placed_ends: &[i64],
    now: i64,
) -> BTreeMap<i64, Vec<Decision>> {
    let mut returns: BTreeMap<i64, Vec<Decision>> = BTreeMap::new();
    for h in holding {
        returns
            .entry(h.until.max(now))
            .or_default()
            .push(h.decision.clone());
    }
    for ((_, d), &ends) in placed.iter().zip(placed_ends) {
        returns.entry(ends).or_default().push(d.clone());
    }
    returns
}

/// When a request placed now gives its capacity back.
fn ends_at(now: i64, w: &Waiting) -> i64 {
    now.saturating_add(w.hold_ms.max(1))
}

/// Whether capacity freeing later can let the request start.
fn clears(why: &Wait) -> bool {
    match why {
        Wait::NoRoom { error } => error.clears_with_capacity(),
        Wait::Held { .. } | Wait::Behind { .. } => true,
    }
}

/// The first time (and place) `request` fits as the slices in `returns`
/// come back in order, nothing else changing.
fn earliest_fit(
    mut fleet: Fleet,
    request: &PlacementRequest,
    policy: Policy,
    returns: &BTreeMap<i64, Vec<Decision>>,
    now: i64,
) -> Option<(i64, Decision)> {
    for (&at, decisions) in returns {
        for d in decisions {
            // A slice the snapshot does not hold (its GPU left the pool)
            // gives nothing back.
            let _ = fleet.release(d);
        }
        if let Ok(d) = fleet.place(request, policy) {
            return Some((at.max(now), d));
        }
    }
    None
}

/// Replays the queue's future: at each lease end, the capacity comes back
/// and the waiting requests that fit start (the reserved one first, then in
/// queue order; a strict queue stops at the first that does not fit) and
/// hold it for their own lease. Fills [`Waits::estimated_start`].
fn estimate(
    mut fleet: Fleet,
    plan: &mut QueuePlan,
    blocked: &[&Waiting],
    mut returns: BTreeMap<i64, Vec<Decision>>,
    now: i64,
    policy: &QueuePolicy,
) {
    let strict = policy.discipline == Discipline::Fifo;
    let placement = policy.placement;
    let reserved = plan.reservation.as_ref().map(|r| r.id);
    let mut pending: Vec<(usize, &Waiting)> = blocked
        .iter()
        .copied()
        .enumerate()
        .filter(|(i, _)| clears(&plan.waiting[*i].why))
        .collect();
    pending.sort_by_key(|(_, w)| Some(w.entry.id) != reserved);
    while let Some((at, decisions)) = returns.pop_first() {
        if pending.is_empty() {
            break;
        }
        for d in &decisions {
            let _ = fleet.release(d);
        }
        let mut stopped = false;
        pending.retain(|(i, w)| {
            if stopped {
                return true;
            }
            let Ok(d) = fleet.place(&w.request, placement) else {
                stopped = strict;
                return true;
            };
            if fleet.apply(&d).is_err() {
                stopped = strict;
                return true;
            }
            let start = at.max(now);
            plan.waiting[*i].estimated_start = Some(start);
            returns
                .entry(start.saturating_add(w.hold_ms.max(1)))
                .or_default()
                .push(d);
            false
        });
    }
    if let Some(r) = &plan.reservation {
        if let Some(w) = plan.waiting.iter_mut().find(|w| w.id == r.id) {
            w.estimated_start = Some(r.from);
        }
    }
}
