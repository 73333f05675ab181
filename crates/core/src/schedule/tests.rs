//! The queue planner: backfill, the starved request's reservation, and
//! estimated starts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::ids::named::hid;
use proptest::prelude::*;

use crate::ids::{AllocationId, TenantId};
use crate::placement::{
    Decision, Demand, Fleet, GpuState, HostState, PlacementError, PlacementRequest, Policy,
    Workload,
};
use crate::units::{CpuMilli, MemMiB};

use super::{plan_queue, Discipline, Holding, QueueEntry, QueuePlan, QueuePolicy, Wait, Waiting};

const NEVER: i64 = i64::MAX;

/// Request `n`.
fn aid(n: i64) -> AllocationId {
    AllocationId::new(n)
}

pub(super) fn host(id: &str, gpus: u32) -> HostState {
    HostState {
        id: hid(id),
        cpu_free: CpuMilli(64_000),
        memory_free: MemMiB(512 * 1024),
        gpus: (0..gpus)
            .map(|i| GpuState::exclusive(i, "L4", MemMiB(23_034)))
            .collect(),
    }
}

pub(super) fn fleet(hosts: &[(&str, u32)]) -> Fleet {
    Fleet::new(
        hosts.iter().map(|(id, n)| host(id, *n)).collect(),
        Workload::default(),
    )
    .unwrap()
}

pub(super) fn whole(count: u32) -> PlacementRequest {
    PlacementRequest::new(Demand::Whole { count })
}

fn waiting(id: i64, count: u32, requested_at: i64, hold_ms: i64) -> Waiting {
    Waiting {
        entry: QueueEntry {
            id: aid(id),
            qos: Default::default(),
            priority: 0,
            tenant_id: TenantId::new(1),
            tenant_usage: 0,
            tenant_weight: 1000,
            requested_at,
        },
        request: whole(count),
        hold_ms,
    }
}

/// Takes `count` GPUs on `host` in `f` until `until`.
fn hold(f: &mut Fleet, host: &str, count: u32, until: i64) -> Holding {
    let host = hid(host);
    let avoid: Vec<crate::ids::HostId> = f
        .hosts()
        .iter()
        .map(|h| h.id)
        .filter(|id| *id != host)
        .collect();
    assert!(avoid.len() <= 1, "fixture fleets have at most two hosts");
    let d = f
        .place_avoiding(&whole(count), Policy::Pack, avoid.first().copied())
        .unwrap();
    assert_eq!(d.host, host);
    f.apply(&d).unwrap();
    Holding { decision: d, until }
}

fn policy(reserve_after_ms: i64, estimate: bool) -> QueuePolicy {
    QueuePolicy {
        placement: Policy::Pack,
        discipline: Discipline::Backfill,
        reserve_after_ms,
        estimate,
    }
}

fn placed_ids(plan: &QueuePlan) -> Vec<i64> {
    plan.placed.iter().map(|(id, _)| id.get()).collect()
}

/// Host `a` has one GPU free and one held until 100; host `b` has both
/// held, until 200 and 300.
fn busy_pair() -> (Fleet, Vec<Holding>) {
    let mut f = fleet(&[("a", 2), ("b", 2)]);
    let holdings = vec![
        hold(&mut f, "a", 1, 100),
        hold(&mut f, "b", 1, 200),
        hold(&mut f, "b", 1, 300),
    ];
    (f, holdings)
}

#[test]
fn a_request_that_does_not_fit_does_not_hold_up_smaller_ones() {
    let (mut f, holdings) = busy_pair();
    let queue = [waiting(1, 2, 0, 1_000), waiting(2, 1, 5, 1_000)];
    let plan = plan_queue(&mut f, &queue, &holdings, 10, &policy(NEVER, false));
    assert_eq!(placed_ids(&plan), vec![2]);
    assert_eq!(plan.placed[0].1.host, hid("a"));
    assert_eq!(plan.waiting.len(), 1);
    assert_eq!(
        plan.waiting[0].why,
        Wait::NoRoom {
            error: PlacementError::InsufficientCapacity
        }
    );
    assert_eq!(plan.reservation, None);
    // The decision is applied: host a is now full.
    assert_eq!(
        f.place(&whole(1), Policy::Pack),
        Err(PlacementError::InsufficientCapacity)
    );
}

#[test]
fn a_starved_request_holds_the_host_where_it_fits_first() {
    let (mut f, holdings) = busy_pair();
    // Request 1 has waited 10 ms, which is the limit.
    let queue = [waiting(1, 2, 0, 1_000), waiting(2, 1, 5, 1_000)];
    let plan = plan_queue(&mut f, &queue, &holdings, 10, &policy(10, false));
    let r = plan.reservation.clone().unwrap();
    assert_eq!((r.id.get(), r.host, r.from), (1, hid("a"), 100));
    // Request 2 would run past 100 on host a: it waits, and says why.
    assert!(plan.placed.is_empty());
    assert_eq!(
        plan.waits(aid(2)).unwrap().why,
        Wait::Held { for_id: aid(1) }
    );
    assert!(plan
        .waits(aid(2))
        .unwrap()
        .why
        .reason()
        .contains("held for request 1"));
    assert_eq!(plan.waits(aid(1)).unwrap().estimated_start, Some(100));
}

#[test]
fn a_short_request_may_use_the_held_host_if_it_ends_before_the_reservation() {
    let (mut f, holdings) = busy_pair();
    let queue = [waiting(1, 2, 0, 1_000), waiting(2, 1, 5, 90)];
    let plan = plan_queue(&mut f, &queue, &holdings, 10, &policy(10, false));
    assert_eq!(plan.reservation.as_ref().unwrap().host, hid("a"));
    // 10 + 90 = 100: it is done when request 1 can start.
    assert_eq!(placed_ids(&plan), vec![2]);
    assert_eq!(plan.placed[0].1.host, hid("a"));
}

#[test]
fn estimates_replay_the_lease_ends_in_queue_order() {
    let (mut f, holdings) = busy_pair();
    let queue = [waiting(1, 2, 0, 1_000), waiting(2, 1, 5, 1_000)];
    let plan = plan_queue(&mut f, &queue, &holdings, 10, &policy(10, true));
    // 1 is reserved host a from 100; 2 starts when b's first GPU frees.
    assert_eq!(plan.waits(aid(1)).unwrap().estimated_start, Some(100));
    assert_eq!(plan.waits(aid(2)).unwrap().estimated_start, Some(200));

    // One GPU, three requests behind a lease that ends at 100: each starts
    // when the one before it ends.
    let mut f = fleet(&[("a", 1)]);
    let holdings = vec![hold(&mut f, "a", 1, 100)];
    let queue = [
        waiting(3, 1, 3, 50),
        waiting(1, 1, 1, 50),
        waiting(2, 1, 2, 50),
    ];
    let plan = plan_queue(&mut f, &queue, &holdings, 10, &policy(NEVER, true));
    let starts: Vec<(i64, Option<i64>)> = plan
        .waiting
        .iter()
        .map(|w| (w.id.get(), w.estimated_start))
        .collect();
    assert_eq!(starts, vec![(1, Some(100)), (2, Some(150)), (3, Some(200))]);
}

#[test]
fn a_strict_queue_starts_nothing_behind_a_request_that_does_not_fit() {
    let (mut f, holdings) = busy_pair();
    let h100_only = Waiting {
        request: whole(1).with_models(["H100-80GB"]),
        ..waiting(3, 1, 0, 10)
    };
    let queue = [h100_only, waiting(1, 2, 1, 1_000), waiting(2, 1, 5, 1_000)];
    let strict = QueuePolicy {
        discipline: Discipline::Fifo,
        ..policy(0, true)
    };
    let plan = plan_queue(&mut f, &queue, &holdings, 10, &strict);
    // The request no GPU can serve does not hold up the queue; the one
    // waiting for capacity does, and gets no reservation (strict order
    // needs none).
    assert!(plan.placed.is_empty());
    assert_eq!(
        plan.waits(aid(2)).unwrap().why,
        Wait::Behind { head: aid(1) }
    );
    assert!(plan
        .waits(aid(2))
        .unwrap()
        .why
        .reason()
        .contains("request 1 ahead"));
    assert_eq!(plan.reservation, None);
    // In order: 1 when host a frees at 100, 2 when host b's first GPU does.
    assert_eq!(plan.waits(aid(1)).unwrap().estimated_start, Some(100));
    assert_eq!(plan.waits(aid(2)).unwrap().estimated_start, Some(200));
    assert_eq!(plan.waits(aid(3)).unwrap().estimated_start, None);
}

#[test]
fn an_overdue_lease_counts_as_ending_now() {
    let mut f = fleet(&[("a", 1)]);
    let holdings = vec![hold(&mut f, "a", 1, 5)];
    let plan = plan_queue(
        &mut f,
        &[waiting(1, 1, 0, 50)],
        &holdings,
        10,
        &policy(0, true),
    );
    assert_eq!(plan.waits(aid(1)).unwrap().estimated_start, Some(10));
    assert_eq!(plan.reservation.as_ref().unwrap().from, 10);
}

#[test]
fn what_capacity_cannot_fix_gets_no_estimate_and_no_reservation() {
    let (mut f, holdings) = busy_pair();
    let h100_only = Waiting {
        request: whole(1).with_models(["H100-80GB"]),
        ..waiting(1, 1, 0, 10)
    };
    // Three GPUs on one host exist nowhere, however long it waits.
    let too_big = waiting(2, 3, 0, 10);
    let plan = plan_queue(
        &mut f,
        &[h100_only, too_big, waiting(3, 1, 0, 10)],
        &holdings,
        10,
        &policy(0, true),
    );
    assert_eq!(plan.waits(aid(1)).unwrap().estimated_start, None);
    assert!(matches!(
        plan.waits(aid(1)).unwrap().why,
        Wait::NoRoom {
            error: PlacementError::NoMatchingGpu { .. }
        }
    ));
    assert_eq!(plan.waits(aid(2)).unwrap().estimated_start, None);
    assert_eq!(plan.reservation, None);
    assert_eq!(placed_ids(&plan), vec![3]);
}

#[test]
fn higher_priority_is_served_first_whatever_the_input_order() {
    let mut f = fleet(&[("a", 1)]);
    let mut urgent = waiting(2, 1, 50, 10);
    urgent.entry.priority = 10;
    let plan = plan_queue(
        &mut f,
        &[waiting(1, 1, 0, 10), urgent],
        &[],
        60,
        &policy(NEVER, true),
    );
    assert_eq!(placed_ids(&plan), vec![2]);
    assert_eq!(plan.waits(aid(1)).unwrap().estimated_start, Some(70));
}

/// Ticks a one-host pool: a two-GPU request waits while one-GPU requests
/// arrive every 5 ms and hold a GPU for 8 ms, so one GPU is nearly always
/// busy. Returns when the big request started, if within `horizon`.
fn big_request_start(reserve_after_ms: i64, horizon: i64) -> Option<i64> {
    let mut f = fleet(&[("a", 2)]);
    let mut holdings: Vec<Holding> = vec![hold(&mut f, "a", 1, 3)];
    let mut queue = vec![waiting(0, 2, 0, 100)];
    let mut next_id = 1;
    for now in 0..horizon {
        holdings.retain(|h| {
            if h.until <= now {
                f.release(&h.decision).unwrap();
                false
            } else {
                true
            }
        });
        if now % 5 == 0 {
            queue.push(waiting(next_id, 1, now, 8));
            next_id += 1;
        }
        let plan = plan_queue(
            &mut f,
            &queue,
            &holdings,
            now,
            &policy(reserve_after_ms, false),
        );
        for (id, d) in plan.placed {
            if id.get() == 0 {
                return Some(now);
            }
            let w = queue.iter().find(|w| w.entry.id == id).unwrap();
            holdings.push(Holding {
                decision: d,
                until: now + w.hold_ms,
            });
        }
        queue.retain(|w| plan.waiting.iter().any(|x| x.id == w.entry.id));
    }
    None
}

#[test]
fn without_a_reservation_a_large_request_starves_and_with_one_it_starts() {
    assert_eq!(big_request_start(NEVER, 2_000), None);
    let started = big_request_start(20, 2_000).expect("the reservation lets it start");
    // It is reserved at 20 and starts once the slices already running end.
    assert!((20..=40).contains(&started), "started at {started}");
}

/// GPUs per host; held GPUs (host, count, until); asks (count, asked at,
/// lease); how long before a reservation.
type Scenario = (Vec<u32>, Vec<(usize, u32, i64)>, Vec<(u32, i64, i64)>, i64);

/// A random fleet of whole GPUs, some held, and a random queue.
fn scenario() -> impl Strategy<Value = Scenario> {
    (
        prop::collection::vec(1u32..=4, 1..=4),
        prop::collection::vec((0usize..4, 1u32..=2, 0i64..200), 0..8),
        prop::collection::vec((1u32..=4, 0i64..100, 1i64..300), 1..10),
        0i64..150,
    )
}

fn build(gpus: &[u32], held: &[(usize, u32, i64)]) -> (Fleet, Vec<Holding>) {
    let names: Vec<String> = (0..gpus.len()).map(|i| format!("h{i}")).collect();
    let hosts: Vec<(&str, u32)> = names
        .iter()
        .map(String::as_str)
        .zip(gpus.iter().copied())
        .collect();
    let mut f = fleet(&hosts);
    let mut holdings = Vec::new();
    for &(h, count, until) in held {
        let Some(name) = names.get(h) else { continue };
        let Ok(d) = f.place(&whole(count), Policy::FirstFit) else {
            continue;
        };
        if d.host != hid(name) {
            continue;
        }
        f.apply(&d).unwrap();
        holdings.push(Holding { decision: d, until });
    }
    (f, holdings)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn plans_are_complete_respect_the_reservation_and_repeat(
        (gpus, held, asks, reserve_after) in scenario(),
        strict in any::<bool>(),
    ) {
        let (fleet0, holdings) = build(&gpus, &held);
        let now = 100;
        let queue: Vec<Waiting> = asks
            .iter()
            .enumerate()
            .map(|(i, &(count, at, hold_ms))| waiting(i as i64, count, at, hold_ms))
            .collect();
        let p = QueuePolicy {
            discipline: if strict { Discipline::Fifo } else { Discipline::Backfill },
            ..policy(reserve_after, true)
        };
        let mut f = fleet0.clone();
        let plan = plan_queue(&mut f, &queue, &holdings, now, &p);

        // Deterministic.
        let mut again = fleet0.clone();
        prop_assert_eq!(&plan, &plan_queue(&mut again, &queue, &holdings, now, &p));
        // Every request is either placed or waits, once.
        prop_assert_eq!(plan.placed.len() + plan.waiting.len(), queue.len());
        // Backfill is complete: nothing left waiting fits the pool as
        // planned, unless the room is held for the reserved request.
        for w in &plan.waiting {
            let ask = &queue[w.id.get() as usize];
            match &w.why {
                // (Strict queues stop at the head, so a later request may fit.)
                Wait::NoRoom { .. } => prop_assert!(f.place(&ask.request, Policy::Pack).is_err() || strict),
                Wait::Behind { head } => {
                    prop_assert!(strict);
                    let head_waits_for_room =
                        matches!(plan.waits(*head).unwrap().why, Wait::NoRoom { .. });
                    prop_assert!(head_waits_for_room);
                    // Nothing behind the head started.
                    let head = &queue[head.get() as usize].entry;
                    for (id, _) in &plan.placed {
                        prop_assert!(super::queue::serve_first(&queue[id.get() as usize].entry, head).is_lt());
                    }
                }
                Wait::Held { for_id } => {
                    let r = plan.reservation.as_ref().unwrap();
                    prop_assert_eq!(*for_id, r.id);
                    prop_assert!(now + ask.hold_ms > r.from);
                }
            }
            if let Some(start) = w.estimated_start {
                prop_assert!(start >= now);
            }
        }
        // Nothing placed now on the held host outlives the reservation,
        // unless it was ahead of the reserved request in the queue.
        if let Some(r) = &plan.reservation {
            prop_assert!(now - queue[r.id.get() as usize].entry.requested_at >= reserve_after);
            let reserved = &queue[r.id.get() as usize].entry;
            for (id, d) in &plan.placed {
                let ask = &queue[id.get() as usize];
                let behind = super::queue::serve_first(reserved, &ask.entry).is_lt();
                if behind && d.host == r.host {
                    prop_assert!(now + ask.hold_ms <= r.from);
                }
            }
            // The reservation is honest: on the planned fleet, with the
            // leases up to `from` ended, the reserved request fits on its host.
            let mut later = f.clone();
            let placed_until: Vec<(Decision, i64)> = plan
                .placed
                .iter()
                .map(|(id, d)| (d.clone(), now + queue[id.get() as usize].hold_ms))
                .collect();
            for (d, until) in holdings
                .iter()
                .map(|h| (h.decision.clone(), h.until))
                .chain(placed_until)
            {
                if until.max(now) <= r.from {
                    later.release(&d).unwrap();
                }
            }
            let fits = later.place(&queue[r.id.get() as usize].request, Policy::Pack);
            prop_assert!(fits.is_ok());
        }
    }
}

/// Three tenants, always with work waiting (each keeps 20 one-GPU jobs of
/// 1 h queued) on 12 GPUs, usage decaying over `half_life_ms`. Returns each
/// tenant's share of the GPU-time over `hours`.
fn backlogged_shares(weights: [u64; 3], half_life_ms: i64, hours: i64) -> [f64; 3] {
    const HOUR: i64 = 3_600_000;
    let mut f = fleet(&[("a", 4), ("b", 4), ("c", 4)]);
    let mut running: Vec<Holding> = Vec::new();
    let mut spans: [Vec<super::UseSpan>; 3] = Default::default();
    let mut queue: Vec<(Waiting, usize)> = Vec::new();
    let mut next_id = 0;
    let mut gpu_ms = [0i64; 3];
    // Every 15 minutes: jobs end, queues are topped up, the queue is planned.
    for step in 0..(hours * 4) {
        let now = step * HOUR / 4;
        running.retain(|h| {
            if h.until <= now {
                f.release(&h.decision).unwrap();
                false
            } else {
                true
            }
        });
        for t in 0..3 {
            while queue.iter().filter(|(_, owner)| *owner == t).count() < 20 {
                queue.push((waiting(next_id, 1, now, HOUR), t));
                next_id += 1;
            }
        }
        let entries: Vec<Waiting> = queue
            .iter()
            .map(|(w, t)| {
                let mut w = w.clone();
                w.entry.tenant_id = TenantId::new(*t as i64);
                w.entry.tenant_usage = super::decayed_usage(&spans[*t], now, half_life_ms);
                w.entry.tenant_weight = weights[*t];
                w
            })
            .collect();
        let plan = plan_queue(&mut f, &entries, &running, now, &policy(NEVER, false));
        for (id, d) in plan.placed {
            let at = queue.iter().position(|(w, _)| w.entry.id == id).unwrap();
            let (_, t) = queue.remove(at);
            spans[t].push(super::UseSpan {
                start: now,
                end: Some(now + HOUR),
                milli: 1000,
            });
            gpu_ms[t] += HOUR;
            running.push(Holding {
                decision: d,
                until: now + HOUR,
            });
        }
    }
    let total = gpu_ms.iter().sum::<i64>() as f64;
    gpu_ms.map(|g| g as f64 / total)
}

#[test]
fn with_everyone_waiting_gpu_time_converges_to_the_weights() {
    // (Without fair share the shares come out a third each.)
    let shares = backlogged_shares([2, 1, 1], 6 * 3_600_000, 96);
    for (share, want) in shares.iter().zip([0.5, 0.25, 0.25]) {
        assert!((share - want).abs() < 0.03, "{shares:?}");
    }
    let equal = backlogged_shares([1, 1, 1], 6 * 3_600_000, 96);
    for share in equal {
        assert!((share - 1.0 / 3.0).abs() < 0.03, "{equal:?}");
    }
}
