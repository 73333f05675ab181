//! The fleet ledger against a real database (SQLite, or PostgreSQL when
//! `TESSERA_TEST_POSTGRES_URL` is set): random lifecycles of slices,
//! drains, cordons, unhealthy GPUs and silent hosts on the test clock, and
//! every GPU-millisecond of every GPU lands in exactly one bucket.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use chrono::{Duration, TimeZone, Utc};
use common::agent::*;
use common::{fixture, Fixture};
use sea_orm::EntityTrait;
use std::collections::BTreeMap;
use tessera_core::availability::OpsAction;
use tessera_core::health::HealthSignals;
use tessera_core::ids::{AllocationId, HostId};
use tessera_core::ledger::PARTS_PER_GPU;
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::sharing::SliceShape;
use tessera_protocol::views::{
    LedgerGrouping, LedgerQuery, LedgerStep, OpsRequest, UsageGrouping, UsageQuery,
};
use tessera_service::entity::host;
use tessera_service::TenantActor;

/// A small deterministic generator (no dependency for a test's dice).
struct Dice(u64);

impl Dice {
    fn roll(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n.max(1)
    }
}

struct Fleet {
    agents: Vec<Agent>,
    silent: Vec<u32>,
    sick: BTreeMap<(usize, usize), bool>,
}

impl Fleet {
    /// Every agent not kept silent reports what it was asked for, with
    /// the health the test gave its GPUs.
    async fn heartbeat(&mut self, f: &Fixture) {
        for (i, agent) in self.agents.iter_mut().enumerate() {
            if self.silent[i] > 0 {
                self.silent[i] -= 1;
                continue;
            }
            let d = agent.fetch(f).await;
            let mut gpus = agent.applied(&d);
            for (j, g) in gpus.iter_mut().enumerate() {
                if self.sick.get(&(i, j)).copied().unwrap_or(false) {
                    g.health = HealthSignals {
                        ecc_uncorrected: 1,
                        ..HealthSignals::default()
                    };
                }
            }
            agent.send(f, gpus, Some(d.generation), vec![]).await;
        }
    }
}

fn shapes() -> Vec<(&'static str, SliceShape)> {
    vec![
        ("h100-mig", mig("1g.10gb")),
        ("h100-mig", mig("1g.20gb")),
        ("h100-mig", mig("3g.40gb")),
        ("h100-mig", mig("2g.20gb")),
        ("l4-shared", SliceShape::TimeSlice {}),
        (
            "a100-whole",
            SliceShape::Whole {
                count: 1,
                nvlink_local: false,
            },
        ),
    ]
}

async fn lifecycle(seed: u64) {
    let f = fixture().await;
    let mut dice = Dice(seed);
    let agents = vec![
        Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1"), h100(1, "GPU-a2")]).await,
        Agent::enrol(&f, "gpu-2", vec![l4(0, "GPU-b1"), l4(1, "GPU-b2")]).await,
        Agent::enrol(&f, "gpu-3", vec![a100(0, "GPU-c1")]).await,
    ];
    let mut fleet = Fleet {
        agents,
        silent: vec![0; 3],
        sick: BTreeMap::new(),
    };
    let people: Vec<TenantActor> = vec![
        actor(&f, "alice", &["vision"], "vision").await,
        actor(&f, "bob", &["nlp"], "nlp").await,
    ];
    let hosts: Vec<HostId> = fleet.agents.iter().map(|a| a.host.id()).collect();
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let mut open: Vec<(usize, AllocationId)> = Vec::new();
    let mut did = BTreeMap::<&str, u32>::new();
    f.service.tick().await.unwrap();
    for _ in 0..60 {
        match dice.roll(10) {
            0..=3 => {
                let who = dice.roll(2) as usize;
                let all = shapes();
                let (pool, shape) = all[dice.roll(all.len() as u64) as usize].clone();
                if let Ok(a) = f
                    .service
                    .request_allocation(&people[who], &ask(pool, shape, 1 + dice.roll(3) as u32))
                    .await
                {
                    open.push((who, a.id));
                    *did.entry("request").or_default() += 1;
                }
            }
            4 | 5 if !open.is_empty() => {
                let (who, id) = open.remove(dice.roll(open.len() as u64) as usize);
                if f.service.release_allocation(&people[who], id).await.is_ok() {
                    *did.entry("release").or_default() += 1;
                }
            }
            6 => {
                let host = hosts[dice.roll(3) as usize];
                let action = match dice.roll(6) {
                    0 => OpsAction::Cordon,
                    1 => OpsAction::Drain {
                        deadline_minutes: 1,
                    },
                    2 => OpsAction::Maintenance,
                    _ => OpsAction::Resume,
                };
                let r = OpsRequest {
                    action,
                    reason: "ledger test".into(),
                };
                if f.service.operate_host(&proof, host, &r).await.is_ok() {
                    *did.entry(action.name()).or_default() += 1;
                }
            }
            7 => {
                let i = dice.roll(3) as usize;
                fleet.silent[i] = 4 + dice.roll(4) as u32;
                *did.entry("silence").or_default() += 1;
            }
            8 => {
                // One GPU at a time falls sick; the next roll heals it.
                let key = (dice.roll(3) as usize, dice.roll(2) as usize);
                let was = fleet.sick.get(&key).copied().unwrap_or(false);
                fleet.sick.clear();
                fleet.sick.insert(key, !was);
                *did.entry("health").or_default() += 1;
            }
            _ => {}
        }
        // Agents are heard every 5–25 s (a silent one not at all), and
        // the timer runs.
        f.clock.advance(Duration::seconds(5 + dice.roll(21) as i64));
        fleet.heartbeat(&f).await;
        f.service.tick().await.unwrap();
    }
    f.clock.advance(Duration::seconds(dice.roll(600) as i64));
    f.service.tick().await.unwrap();

    // Every GPU since its host enrolled, to the millisecond.
    let now = f.service.now().timestamp_millis();
    let enrolled: Vec<i64> = host::Entity::find()
        .all(f.service.db())
        .await
        .unwrap()
        .iter()
        .map(|h| h.enrolled_at.timestamp_millis())
        .collect();
    let gpus_per_host = [2i64, 2, 1];
    let from = enrolled.iter().min().copied().unwrap();
    let physical: u128 = enrolled
        .iter()
        .zip(gpus_per_host)
        .map(|(e, n)| u128::try_from((now - e) * n).unwrap() * u128::from(PARTS_PER_GPU))
        .sum();
    for (step, group) in [
        (LedgerStep::Hour, LedgerGrouping::Fleet),
        (LedgerStep::Day, LedgerGrouping::Pool),
        (LedgerStep::Month, LedgerGrouping::Host),
    ] {
        let l = f
            .service
            .ledger_exact(from, now + 3_600_000, step, group)
            .await
            .unwrap();
        let t = l.totals();
        assert_eq!(l.recorded_part_ms, physical, "seed {seed}: recorded time");
        assert_eq!(t.total(), physical, "seed {seed}: buckets {t:?} ({did:?})");
        assert_eq!((t.overbooked, t.unrecorded), (0, 0), "seed {seed}");
        assert_eq!(l.gpus, 5);
    }
    let t = f
        .service
        .ledger_exact(from, now, LedgerStep::Day, LedgerGrouping::Fleet)
        .await
        .unwrap()
        .totals();
    // Tenants' ledger time is their metered time.
    for p in &people {
        let slug = p.tenant_slug().to_string();
        let usage = f
            .service
            .usage_report(
                &admin,
                &UsageQuery {
                    from: Some(Utc.timestamp_millis_opt(from).unwrap()),
                    to: Some(Utc.timestamp_millis_opt(now + 1).unwrap()),
                    tenant: Some(slug.parse().unwrap()),
                    group_by: Some(UsageGrouping::Tenant),
                    ..UsageQuery::default()
                },
            )
            .await
            .unwrap();
        let metered: f64 = usage.rows.iter().map(|r| r.gpu_hours).sum();
        let ledger = t
            .tenants
            .get(&p.tenant_id())
            .map_or(0.0, |v| tessera_core::ledger::gpu_hours(*v));
        assert!(
            (metered - ledger).abs() < 1e-9,
            "seed {seed} {slug}: metered {metered}, ledger {ledger}"
        );
    }
    // The run went through the conditions it is about.
    let states: Vec<_> = rows(&f)
        .await
        .iter()
        .map(|a| (a.state, a.active_at.is_some(), a.placement.is_some()))
        .collect();
    assert!(t.allocated() > 0, "seed {seed}: {did:?} {states:?}");
    assert!(t.silent > 0, "seed {seed}: {did:?} {t:?}");
    assert!(t.unhealthy + t.draining > 0, "seed {seed}: {did:?} {t:?}");
    assert!(t.unallocated > 0, "seed {seed}");
    let active = rows(&f)
        .await
        .iter()
        .filter(|a| a.state == AllocationPhase::Active)
        .count();
    assert!(
        did.get("request").copied().unwrap_or(0) > 5,
        "seed {seed}: {did:?} ({active} active)"
    );
}

#[tokio::test]
async fn random_lifecycles_put_every_gpu_millisecond_in_exactly_one_bucket() {
    for seed in [1, 7, 42] {
        lifecycle(seed).await;
    }
}

#[tokio::test]
async fn seven_1g_slices_bill_the_whole_gpu_a_cordon_is_its_own_bucket_and_the_report_balances() {
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    f.service.tick().await.unwrap();
    let start = f.service.now();
    // Seven 1g.10gb: exactly the whole GPU, billed.
    let mut ids = Vec::new();
    for _ in 0..7 {
        let a = f
            .service
            .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 8))
            .await
            .unwrap();
        ids.push(a.id);
    }
    agent.converge(&f).await;
    // Ten minutes, the agent heard every 25 s.
    async fn ten_minutes(f: &Fixture, agent: &mut Agent) {
        for _ in 0..24 {
            f.clock.advance(Duration::seconds(25));
            agent.converge(f).await;
            f.service.tick().await.unwrap();
        }
    }
    ten_minutes(&f, &mut agent).await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    // All released; the host is cordoned for an hour.
    for id in ids {
        f.service.release_allocation(&alice, id).await.unwrap();
    }
    agent.converge(&f).await;
    f.service
        .operate_host(
            &proof,
            agent.host.id(),
            &OpsRequest {
                action: OpsAction::Cordon,
                reason: "firmware".into(),
            },
        )
        .await
        .unwrap();
    ten_minutes(&f, &mut agent).await;
    let q = LedgerQuery {
        from: Some(start),
        to: Some(start + Duration::hours(3)),
        step: Some(LedgerStep::Hour),
        group_by: Some(LedgerGrouping::Pool),
        ..LedgerQuery::default()
    };
    let r = f.service.ledger(&proof, &q).await.unwrap();
    assert!(r.balanced, "{r:?}");
    assert_eq!(r.gpus, 1);
    let vision = &r.totals.tenants[0];
    assert_eq!(vision.tenant, "vision");
    let sixth = 1.0 / 6.0;
    assert!(
        (vision.gpu_hours - sixth).abs() < 1e-9,
        "seven 1g.10gb for ten minutes: {vision:?}"
    );
    assert!((r.totals.draining - sixth).abs() < 1e-9, "{:?}", r.totals);
    assert!(
        (r.totals.physical - 2.0 * sixth).abs() < 1e-9,
        "{:?}",
        r.totals
    );
    assert_eq!(
        r.totals.unallocated + r.totals.silent + r.totals.stranded,
        0.0
    );
    assert_eq!(r.rows[0].group, "h100-mig");
    // Hourly steps over more than a week: refused, naming the field.
    let err = f
        .service
        .ledger(
            &proof,
            &LedgerQuery {
                from: Some(start),
                to: Some(start + Duration::days(8)),
                step: Some(LedgerStep::Hour),
                ..LedgerQuery::default()
            },
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, tessera_service::ServiceError::Invalid { ref field, .. } if field == "step")
    );
}

#[tokio::test]
async fn silence_starts_after_the_offline_limit_and_maintenance_on_a_silent_host_starts_when_decided(
) {
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
    f.service.tick().await.unwrap();
    let t0 = f.service.now().timestamp_millis();
    // Ten minutes heard every 25 s.
    for _ in 0..24 {
        f.clock.advance(Duration::seconds(25));
        agent.converge(&f).await;
        f.service.tick().await.unwrap();
    }
    // Ten minutes silent: silent from the last heartbeat + 30 s.
    f.clock.advance(Duration::minutes(10));
    f.service.tick().await.unwrap();
    // Maintenance while still silent: from now, not backdated over the
    // silence.
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let ops = |action| OpsRequest {
        action,
        reason: "swap the fan".into(),
    };
    f.service
        .operate_host(&proof, agent.host.id(), &ops(OpsAction::Maintenance))
        .await
        .unwrap();
    f.clock.advance(Duration::minutes(5));
    agent.converge(&f).await;
    f.service.tick().await.unwrap();
    f.service
        .operate_host(&proof, agent.host.id(), &ops(OpsAction::Resume))
        .await
        .unwrap();
    f.clock.advance(Duration::minutes(1));
    agent.converge(&f).await;
    f.service.tick().await.unwrap();
    let now = f.service.now().timestamp_millis();
    let t = f
        .service
        .ledger_exact(t0, now, LedgerStep::Hour, LedgerGrouping::Fleet)
        .await
        .unwrap()
        .totals();
    let s = |secs: u128| secs * 1000 * u128::from(PARTS_PER_GPU);
    assert_eq!(t.silent, s(600 - 30), "{t:?}");
    assert_eq!(t.maintenance, s(300), "{t:?}");
    assert_eq!(t.unallocated, s(600 + 30 + 60), "{t:?}");
    assert_eq!(t.total(), s(1560));
}
