#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::ids::named::hid;
use proptest::prelude::*;

use super::*;
use crate::ids::AllocationId;
use crate::placement::{Demand, GpuState, HostState, PlacementRequest, Workload};
use crate::schedule::tests::{fleet, whole};
use crate::units::{ComputeMilli, CpuMilli, MemMiB};

use QosClass::{BestEffort, Burstable, Guaranteed};

fn share(milli: u32) -> PlacementRequest {
    PlacementRequest::new(Demand::Fraction {
        compute: ComputeMilli(milli),
        memory: None,
    })
}

/// Places `request` on `host` of `f` and returns it as a running slice.
fn run(
    f: &mut Fleet,
    host: &str,
    request: &PlacementRequest,
    (id, priority, qos, since): (i64, i32, QosClass, i64),
) -> Running {
    let host = hid(host);
    let others: Vec<crate::ids::HostId> = f
        .hosts()
        .iter()
        .map(|h| h.id)
        .filter(|h| *h != host)
        .collect();
    // Fill the other hosts' room temporarily is overkill: fixtures use at
    // most two hosts, so avoiding the other one is enough.
    assert!(others.len() <= 1);
    let d = f
        .place_avoiding(request, Policy::Pack, others.first().copied())
        .unwrap();
    assert_eq!(d.host, host);
    f.apply(&d).unwrap();
    Running {
        id: AllocationId::new(id),
        priority,
        qos,
        since,
        decision: d,
        notified: false,
    }
}

fn claim(id: i64, priority: i32, qos: QosClass, request: PlacementRequest) -> Claimant {
    Claimant {
        id: AllocationId::new(id),
        priority,
        qos,
        request,
    }
}

fn victims(plan: &[Preemption]) -> Vec<Vec<i64>> {
    plan.iter()
        .map(|p| p.victims.iter().map(|v| v.get()).collect())
        .collect()
}

#[test]
fn the_names_are_stable_and_guaranteed_is_the_default() {
    let names: Vec<&str> = QosClass::ALL.iter().map(|q| q.as_str()).collect();
    assert_eq!(names, ["guaranteed", "burstable", "best-effort"]);
    assert_eq!(QosClass::default(), Guaranteed);
    assert_eq!(
        serde_json::to_string(&BestEffort).unwrap(),
        "\"best-effort\""
    );
    assert!(!Guaranteed.preemptible() && Burstable.preemptible() && BestEffort.preemptible());
}

#[test]
fn who_may_displace_whom() {
    let victim = |qos, priority| Running {
        id: AllocationId::new(1),
        priority,
        qos,
        since: 0,
        decision: Decision::held(hid("a"), vec![0], crate::placement::Slice::Whole, None),
        notified: false,
    };
    // Guaranteed slices never give way, whatever asks.
    for qos in QosClass::ALL {
        assert!(!may_displace(*qos, i32::MAX, &victim(Guaranteed, -5)));
    }
    // A guaranteed request takes back borrowed and idle capacity, even from
    // a higher priority: the lender's quota comes first.
    assert!(may_displace(Guaranteed, 0, &victim(Burstable, 100)));
    assert!(may_displace(Guaranteed, 0, &victim(BestEffort, 100)));
    // Burstable: best-effort always, burstable only below it.
    assert!(may_displace(Burstable, 0, &victim(BestEffort, 100)));
    assert!(may_displace(Burstable, 10, &victim(Burstable, 0)));
    assert!(!may_displace(Burstable, 0, &victim(Burstable, 0)));
    // Best-effort: only best-effort below it.
    assert!(may_displace(BestEffort, 10, &victim(BestEffort, 0)));
    assert!(!may_displace(BestEffort, 0, &victim(BestEffort, 0)));
    assert!(!may_displace(BestEffort, 100, &victim(Burstable, 0)));
}

#[test]
fn guaranteed_slices_are_never_preempted() {
    let mut f = fleet(&[("a", 2)]);
    let running = vec![
        run(&mut f, "a", &whole(1), (1, -100, Guaranteed, 0)),
        run(&mut f, "a", &whole(1), (2, -100, Guaranteed, 5)),
    ];
    let plan = plan_preemption(
        &f,
        &[claim(9, 1000, Guaranteed, whole(1))],
        &running,
        Policy::Pack,
    );
    assert!(plan.is_empty(), "{plan:?}");
}

#[test]
fn the_least_loss_gives_way_first() {
    let mut f = fleet(&[("a", 4)]);
    let running = vec![
        run(&mut f, "a", &whole(1), (1, 0, BestEffort, 10)),
        run(&mut f, "a", &whole(1), (2, 0, Burstable, 20)),
        run(&mut f, "a", &whole(1), (3, 100, BestEffort, 30)),
        run(&mut f, "a", &whole(1), (4, -10, Burstable, 40)),
    ];
    let one = |request| {
        plan_preemption(
            &f,
            &[claim(9, 0, Guaranteed, request)],
            &running,
            Policy::Pack,
        )
    };
    // Lowest priority first, whatever its class.
    assert_eq!(victims(&one(whole(1))), [vec![4]]);
    // Then best-effort before burstable at the same priority.
    assert_eq!(victims(&one(whole(2))), [vec![4, 1]]);
    assert_eq!(victims(&one(whole(3))), [vec![4, 1, 2]]);
    let plan = one(whole(3));
    assert_eq!(plan[0].for_id.get(), 9);
    assert_eq!(plan[0].host, hid("a"));
    // More than the host has: nothing is preempted for it.
    assert!(one(whole(5)).is_empty());
}

#[test]
fn among_equals_the_youngest_goes() {
    let mut f = fleet(&[("a", 2)]);
    let running = vec![
        run(&mut f, "a", &whole(1), (1, 0, BestEffort, 10)),
        run(&mut f, "a", &whole(1), (2, 0, BestEffort, 50)),
    ];
    let plan = plan_preemption(
        &f,
        &[claim(9, 0, Guaranteed, whole(1))],
        &running,
        Policy::Pack,
    );
    assert_eq!(victims(&plan), [vec![2]]);
}

#[test]
fn the_set_is_the_cheapest_that_frees_one_host() {
    // Host a: two young one-GPU slices; host b: one older two-GPU slice.
    let mut f = fleet(&[("a", 2), ("b", 2)]);
    let young = vec![
        run(&mut f, "a", &whole(1), (1, 0, BestEffort, 80)),
        run(&mut f, "a", &whole(1), (2, 0, BestEffort, 90)),
        run(&mut f, "b", &whole(2), (3, 0, BestEffort, 70)),
    ];
    let plan = plan_preemption(
        &f,
        &[claim(9, 0, Guaranteed, whole(2))],
        &young,
        Policy::Pack,
    );
    // Displacing the younger pair loses less than the older one's work.
    assert_eq!(plan[0].host, hid("a"));
    assert_eq!(victims(&plan), [vec![2, 1]]);

    // Where the lone slice is younger than the pair's oldest, one victim
    // beats two.
    let mut f = fleet(&[("a", 2), ("b", 2)]);
    let mixed = vec![
        run(&mut f, "a", &whole(1), (1, 0, BestEffort, 10)),
        run(&mut f, "a", &whole(1), (2, 0, BestEffort, 90)),
        run(&mut f, "b", &whole(2), (3, 0, BestEffort, 50)),
    ];
    let plan = plan_preemption(
        &f,
        &[claim(9, 0, Guaranteed, whole(2))],
        &mixed,
        Policy::Pack,
    );
    assert_eq!((plan[0].host, victims(&plan)), (hid("b"), vec![vec![3]]));
}

#[test]
fn slices_not_needed_are_put_back() {
    // A shared GPU: best-effort shares of 100 (youngest) and 600, a
    // guaranteed 300. A 500 share needs the 600 alone: the 100 that loses
    // least is tried first but does not make room, so it is put back.
    let mut f = Fleet::new(
        vec![HostState {
            id: hid("a"),
            cpu_free: CpuMilli(64_000),
            memory_free: MemMiB(512 * 1024),
            gpus: vec![GpuState::exclusive(0, "L4", MemMiB(23_034)).shared(48)],
        }],
        Workload::default(),
    )
    .unwrap();
    let running = vec![
        run(&mut f, "a", &share(300), (1, 0, Guaranteed, 0)),
        run(&mut f, "a", &share(600), (2, 0, BestEffort, 10)),
        run(&mut f, "a", &share(100), (3, 0, BestEffort, 20)),
    ];
    let plan = plan_preemption(
        &f,
        &[claim(9, 0, Burstable, share(500))],
        &running,
        Policy::Pack,
    );
    assert_eq!(victims(&plan), [vec![2]]);
}

#[test]
fn capacity_already_promised_back_is_used_first() {
    let mut f = fleet(&[("a", 3)]);
    let mut running = vec![
        run(&mut f, "a", &whole(1), (1, 0, BestEffort, 10)),
        run(&mut f, "a", &whole(1), (2, 0, BestEffort, 20)),
        run(&mut f, "a", &whole(1), (3, 0, BestEffort, 30)),
    ];
    running[2].notified = true;
    // The first claimant waits for slice 3 (already told); the second gets
    // the next victim; the third has nothing left to take but 1.
    let claimants = [
        claim(7, 0, Guaranteed, whole(1)),
        claim(8, 0, Guaranteed, whole(1)),
        claim(9, 0, Guaranteed, whole(1)),
    ];
    let plan = plan_preemption(&f, &claimants, &running, Policy::Pack);
    assert_eq!(
        plan.iter()
            .map(|p| (p.for_id.get(), p.victims.iter().map(|v| v.get()).collect()))
            .collect::<Vec<_>>(),
        [(8, vec![2]), (9, vec![1])]
    );
    // A claimant that fits displaces nobody.
    let empty = fleet(&[("a", 1)]);
    assert!(plan_preemption(
        &empty,
        &[claim(1, 0, Guaranteed, whole(1))],
        &[],
        Policy::Pack
    )
    .is_empty());
}

#[derive(Clone, Debug)]
struct Case {
    hosts: Vec<u32>,
    slices: Vec<(usize, u32, i32, QosClass)>,
    claimant: (u32, i32, QosClass),
}

fn qos() -> impl Strategy<Value = QosClass> {
    prop_oneof![Just(Guaranteed), Just(Burstable), Just(BestEffort)]
}

fn case() -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(2u32..=4, 1..=2),
        prop::collection::vec((0usize..2, 1u32..=2, -2i32..=2, qos()), 0..=8),
        (1u32..=3, -2i32..=2, qos()),
    )
        .prop_map(|(hosts, slices, claimant)| Case {
            hosts,
            slices,
            claimant,
        })
}

/// The fleet and the slices of `c` that fit (in order).
fn build(c: &Case) -> (Fleet, Vec<Running>) {
    let ids = ["a", "b"];
    let hosts: Vec<(&str, u32)> = c
        .hosts
        .iter()
        .enumerate()
        .map(|(i, n)| (ids[i], *n))
        .collect();
    let mut f = fleet(&hosts);
    let mut running = Vec::new();
    for (i, (h, count, priority, q)) in c.slices.iter().enumerate() {
        let host = ids[h % hosts.len()];
        let other = hosts.iter().map(|(id, _)| *id).find(|id| *id != host);
        let Ok(d) = f.place_avoiding(&whole(*count), Policy::Pack, other.map(hid)) else {
            continue;
        };
        f.apply(&d).unwrap();
        let id = i64::try_from(i).unwrap() + 1;
        running.push(Running {
            id: AllocationId::new(id),
            priority: *priority,
            qos: *q,
            since: id * 10,
            decision: d,
            notified: false,
        });
    }
    (f, running)
}

proptest! {
    #[test]
    fn preemption_is_allowed_sufficient_minimal_and_deterministic(c in case()) {
        let (f, running) = build(&c);
        let (count, priority, q) = c.claimant;
        let claimant = claim(100, priority, q, whole(count));
        let plan = plan_preemption(&f, std::slice::from_ref(&claimant), &running, Policy::Pack);
        prop_assert_eq!(&plan, &plan_preemption(&f, std::slice::from_ref(&claimant), &running, Policy::Pack));
        let fits_now = f.place(&claimant.request, Policy::Pack).is_ok();
        if fits_now {
            prop_assert!(plan.is_empty());
        }
        let Some(p) = plan.first() else { return Ok(()); };
        let chosen: Vec<&Running> = p
            .victims
            .iter()
            .map(|id| running.iter().find(|r| r.id == *id).unwrap())
            .collect();
        for v in &chosen {
            prop_assert!(v.qos != Guaranteed, "a guaranteed slice was chosen");
            prop_assert!(may_displace(q, priority, v));
            prop_assert_eq!(&v.decision.host, &p.host);
        }
        let fits_without = |set: &[&Running]| {
            let mut g = f.clone();
            for v in set {
                g.release(&v.decision).unwrap();
            }
            g.place(&claimant.request, Policy::Pack).is_ok()
        };
        prop_assert!(fits_without(&chosen), "the victims do not make room");
        for i in 0..chosen.len() {
            let mut fewer = chosen.clone();
            fewer.remove(i);
            prop_assert!(!fits_without(&fewer), "victim {} was not needed", chosen[i].id);
        }
    }

    #[test]
    fn room_is_found_whenever_the_allowed_victims_of_one_host_make_it(c in case()) {
        let (f, running) = build(&c);
        let (count, priority, q) = c.claimant;
        let request = whole(count);
        if f.place(&request, Policy::Pack).is_ok() {
            return Ok(());
        }
        let possible = f.hosts().iter().any(|h| {
            let mut g = f.clone();
            for r in running.iter().filter(|r| r.decision.host == h.id && may_displace(q, priority, r)) {
                g.release(&r.decision).unwrap();
            }
            g.place(&request, Policy::Pack).is_ok()
        });
        let plan = plan_preemption(&f, &[claim(100, priority, q, request)], &running, Policy::Pack);
        prop_assert_eq!(possible, !plan.is_empty());
    }
}

#[test]
fn each_class_draws_on_its_own_quota() {
    use crate::quota::{headroom, Demand as QuotaDemand, Quota, QuotaDimension, Usage};
    let gpus = |n: u32| Quota {
        compute: ComputeMilli(n * 1000),
        memory: MemMiB::from_gib(u64::from(n) * 80),
        max_slices: n,
    };
    let used = |n: u32| Usage {
        compute: ComputeMilli(n * 1000),
        memory: MemMiB::from_gib(u64::from(n) * 80),
        slices: n,
    };
    let one = QuotaDemand {
        compute: ComputeMilli(1000),
        memory: MemMiB::from_gib(80),
        slices: 1,
    };
    // The tenant uses its 2 GPUs; the pool's 6 GPUs of quota hold 4.
    let own = (&gpus(2), &used(2));
    let pool = &headroom(&gpus(6), &used(4));
    let err = Guaranteed.check_quota(own, pool, &one).unwrap_err();
    assert!(matches!(err, QosQuotaError::Own(e) if e.dimension == QuotaDimension::Compute));
    assert!(err.to_string().contains("ask for it as burstable"), "{err}");
    assert_eq!(Burstable.check_quota(own, pool, &one), Ok(()));
    // Nothing left to borrow.
    let full = &headroom(&gpus(6), &used(6));
    let err = Burstable.check_quota(own, full, &one).unwrap_err();
    assert_eq!(
        err.to_string(),
        "burstable slices borrow quota the pool's tenants leave unused, and this one needs 1.000 GPU of GPU compute while only 0.000 GPU is unused; ask for less, ask for it as best-effort, or try again later"
    );
    // Best-effort draws on no quota at all.
    assert_eq!(BestEffort.check_quota(own, full, &one), Ok(()));
    // Within its own quota, guaranteed fits.
    assert_eq!(
        Guaranteed.check_quota((&gpus(3), &used(2)), full, &one),
        Ok(())
    );
}

#[test]
fn one_host_of_a_fleet_answers_like_the_fleet_for_that_host() {
    let mut f = fleet(&[("a", 2), ("b", 4)]);
    let held = run(&mut f, "a", &whole(1), (1, 0, BestEffort, 0));
    let a = f.only_host(hid("a")).unwrap();
    assert_eq!(a.hosts().len(), 1);
    assert_eq!(a.gpu_count(), 2);
    assert_eq!(a.free_gpu_milli(), 1000);
    // Two GPUs fit on b, not on a (one is taken) until its slice leaves.
    assert!(a.place(&whole(2), Policy::Pack).is_err());
    let mut freed = a.clone();
    freed.release(&held.decision).unwrap();
    let d = freed.place(&whole(2), Policy::Pack).unwrap();
    assert_eq!(d.host, hid("a"));
    freed.apply(&d).unwrap();
    // The fleet itself is untouched.
    assert_eq!(f.free_gpu_milli(), 5000);
    assert!(f.only_host(hid("nowhere")).is_none());
}
