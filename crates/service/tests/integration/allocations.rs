//! Allocations against a real database (SQLite by default; PostgreSQL when
//! `TESSERA_TEST_POSTGRES_URL` is set): admission, placement, the agent's
//! part of the lifecycle, the timer, isolation and API tokens.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;
use tessera_core::role::TokenScope;

use chrono::Duration;
use common::agent::*;
use common::{fixture, fixture_with_pools, slug, Fixture};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use std::collections::{BTreeMap, BTreeSet};
use tessera_core::availability::OpsAction;
use tessera_core::ids::{AllocationId, TenantId};
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::mig::MigPlacement;
use tessera_core::plan::{ComputeInstance, DesiredInstance, GpuObserved, ObservedInstance};
use tessera_core::schedule::QosClass;
use tessera_core::sharing::SliceShape;
use tessera_core::units::MemMiB;
use tessera_protocol::agent::{GpuApplyError, MigDevice};
use tessera_protocol::views::{AllocationView, NewAllocation};
use tessera_service::TenantActor;
use tessera_service::{Clock, ServiceError};

/// Checks, from the database, what must hold whatever happened: no tenant
/// holds more than its quota in a pool, and the MIG instances that occupy
/// each GPU are distinct and form a layout the GPU can have.
async fn check_invariants(f: &Fixture) {
    let all = rows(f).await;
    let mut held: BTreeMap<(TenantId, tessera_core::checked::PoolName), (i64, i64, i64)> =
        BTreeMap::new();
    // Guaranteed slices count against their tenant's quota; guaranteed and
    // burstable ones together never hold more than the pool's quota.
    let mut cohort: BTreeMap<tessera_core::checked::PoolName, i64> = BTreeMap::new();
    for a in all
        .iter()
        .filter(|a| AllocationPhase::QUOTA.contains(&a.state) && a.qos != QosClass::BestEffort)
    {
        *cohort.entry(a.pool.clone()).or_default() += i64::from(a.demand_slices);
    }
    for (pool, slices) in &cohort {
        let quota: i64 = tessera_service::entity::quota::Entity::find()
            .filter(tessera_service::entity::quota::Column::Pool.eq(pool.as_str()))
            .all(f.service.db())
            .await
            .unwrap()
            .iter()
            .map(|q| i64::from(q.max_slices))
            .sum();
        assert!(
            *slices <= quota,
            "{pool}: {slices} slices beyond the pool's quota of {quota}"
        );
    }
    for a in all
        .iter()
        .filter(|a| AllocationPhase::QUOTA.contains(&a.state) && a.qos == QosClass::Guaranteed)
    {
        let e = held.entry((a.tenant_id, a.pool.clone())).or_default();
        e.0 += a.demand_compute_milli;
        e.1 += a.demand_memory_mib;
        e.2 += i64::from(a.demand_slices);
    }
    for ((tenant_id, pool), (compute, memory, slices)) in &held {
        let q = tessera_service::entity::quota::Entity::find()
            .filter(tessera_service::entity::quota::Column::TenantId.eq(*tenant_id))
            .filter(tessera_service::entity::quota::Column::Pool.eq(pool.as_str()))
            .one(f.service.db())
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("tenant {tenant_id} holds {pool} without a quota"));
        assert!(
            *compute <= q.compute_milli
                && *memory <= q.memory_mib
                && *slices <= i64::from(q.max_slices),
            "tenant {tenant_id} in {pool} holds ({compute}, {memory}, {slices}) over its quota {q:?}"
        );
    }
    let mut layouts: BTreeMap<String, Vec<MigPlacement>> = BTreeMap::new();
    for a in all
        .iter()
        .filter(|a| AllocationPhase::CAPACITY.contains(&a.state))
    {
        let p = a
            .placement
            .as_ref()
            .expect("a placed allocation has a placement");
        if let tessera_core::placement::Slice::Mig(m) = &p.slice {
            layouts
                .entry(p.gpus[0].uuid.clone())
                .or_default()
                .push(m.clone());
        }
    }
    let h100 = tessera_core::catalogue::lookup("H100-80GB", 81_559);
    for (uuid, layout) in &layouts {
        let starts: BTreeSet<u8> = layout.iter().map(|m| m.start).collect();
        assert_eq!(
            starts.len(),
            layout.len(),
            "{uuid}: two slices at one start: {layout:?}"
        );
        tessera_core::mig::validate(&h100, layout)
            .unwrap_or_else(|e| panic!("{uuid}: impossible layout {layout:?}: {e}"));
    }
}

// ---------------------------------------------------------------- tests

#[tokio::test]
async fn mig_slice_goes_from_request_to_active_and_back() {
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a0"), h100(1, "GPU-a1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let t0 = f.clock.now();

    let v = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 8))
        .await
        .unwrap();
    assert_eq!(v.state, AllocationPhase::Placed);
    assert_eq!(v.tenant, "vision");
    assert_eq!(v.host.as_deref(), Some("gpu-1"));
    assert_eq!(v.gpus.len(), 1);
    assert_eq!(v.shape_label, "MIG 1g.10gb");
    assert_eq!(v.requested_by, "User alice <alice@example.com>");
    assert_eq!(
        (v.demand.compute.0, v.demand.memory, v.demand.slices),
        (142, MemMiB(9984), 1)
    );
    assert_eq!(v.placed_at, Some(t0));
    assert_eq!((v.queue_position, v.connection.clone()), (None, None));
    let start = v.mig_start.expect("a MIG slice has a start");
    let gpu = v.gpus[0].uuid.clone();
    assert_eq!(
        usage(&f, alice.tenant_id(), "h100-mig").await,
        (142, 9984, 1)
    );

    // The agent is told to create it; the allocation is now provisioning.
    let d = agent.fetch(&f).await;
    let e = entry(&d, &gpu);
    assert!(e.desired.mig_enabled);
    assert_eq!(
        e.desired.instances,
        vec![DesiredInstance {
            placement: MigPlacement::new("1g.10gb", start),
            compute_instances: vec![ComputeInstance::whole(1)],
        }]
    );
    assert!(e.desired.released.instances.is_empty());
    let other = d.gpus.iter().find(|e| e.uuid != gpu).unwrap();
    assert!(other.desired.mig_enabled && other.desired.instances.is_empty());
    assert_eq!(
        get(&f, &alice, v.id).await.state,
        AllocationPhase::Provisioning
    );

    // A report of an older generation changes nothing.
    agent
        .send(&f, agent.applied(&d), Some(d.generation - 1), vec![])
        .await;
    assert_eq!(
        get(&f, &alice, v.id).await.state,
        AllocationPhase::Provisioning
    );

    // The agent created it and says so.
    f.clock.advance(Duration::seconds(3));
    agent
        .send(&f, agent.applied(&d), Some(d.generation), vec![])
        .await;
    let active = get(&f, &alice, v.id).await;
    assert_eq!(active.state, AllocationPhase::Active);
    assert_eq!(active.active_at, Some(t0 + Duration::seconds(3)));
    assert_eq!(
        active.lease_ends_at,
        Some(t0 + Duration::seconds(3) + Duration::hours(8))
    );
    assert_eq!(
        env_of(&active, "CUDA_VISIBLE_DEVICES"),
        Some(mig_uuid(&gpu, start))
    );
    let conn = active.connection.clone().unwrap();
    assert_eq!(conn.host, "gpu-1");
    assert_eq!(conn.k8s_resource, "nvidia.com/mig-1g.10gb");
    assert_eq!(
        usage(&f, alice.tenant_id(), "h100-mig").await,
        (142, 9984, 1)
    );

    // Release: torn down by the agent, then released.
    f.clock.advance(Duration::minutes(10));
    let r = f.service.release_allocation(&alice, v.id).await.unwrap();
    assert_eq!(r.state, AllocationPhase::Releasing);
    assert_eq!(r.ending_as, Some(AllocationPhase::Released));
    assert_eq!(usage(&f, alice.tenant_id(), "h100-mig").await, (0, 0, 0));
    let d2 = agent.fetch(&f).await;
    assert!(d2.generation > d.generation);
    let e = entry(&d2, &gpu);
    assert!(e.desired.instances.is_empty(), "{e:?}");
    assert_eq!(e.desired.released.instances, vec![start]);

    // Still there (the agent has not got to it): still releasing.
    agent
        .send(&f, agent.applied(&d), Some(d2.generation), vec![])
        .await;
    assert_eq!(
        get(&f, &alice, v.id).await.state,
        AllocationPhase::Releasing
    );

    agent
        .send(&f, agent.applied(&d2), Some(d2.generation), vec![])
        .await;
    let done = get(&f, &alice, v.id).await;
    assert_eq!(done.state, AllocationPhase::Released);
    assert_eq!(done.ended_at, Some(f.clock.now()));
    assert_eq!(done.connection, None);
    assert_eq!(usage(&f, alice.tenant_id(), "h100-mig").await, (0, 0, 0));
    let d3 = agent.fetch(&f).await;
    let e = entry(&d3, &gpu);
    assert!(e.desired.instances.is_empty() && e.desired.released.instances.is_empty());

    // Releasing twice is a conflict.
    let err = f
        .service
        .release_allocation(&alice, v.id)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409, "{err:?}");

    let actions = f.audit_actions().await;
    for a in [
        "allocation.create",
        "allocation.provision",
        "allocation.activate",
        "allocation.release",
        "allocation.end",
    ] {
        assert_eq!(count(&actions, a), 1, "{a} in {actions:?}");
    }
}

/// Many callers at once never push a tenant over its quota nor put two
/// slices on one place, and nobody sees a database error.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_respect_quota_and_capacity() {
    let f = fixture().await;
    let _agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-1a0"), h100(1, "GPU-1a1")]).await;
    let mut actors = Vec::new();
    for i in 0..4 {
        actors.push(actor(&f, &format!("v{i}"), &["vision"], "vision").await);
    }
    for i in 0..3 {
        actors.push(actor(&f, &format!("n{i}"), &["nlp"], "nlp").await);
    }
    let mut won: BTreeMap<String, Vec<AllocationPhase>> = BTreeMap::new();
    let mut refused = 0;
    for r in race(&f, &actors, 200).await {
        match r {
            Ok(v) => won.entry(v.tenant).or_default().push(v.state),
            Err(ServiceError::QuotaExceeded(_)) => refused += 1,
            Err(e) => panic!("unexpected outcome {e:?}"),
        }
    }
    // Slices are the binding limit (vision 8, nlp 4); 12 fit on 14 places.
    assert_eq!(won["vision"], vec![AllocationPhase::Placed; 8]);
    assert_eq!(won["nlp"], vec![AllocationPhase::Placed; 4]);
    assert_eq!(refused, 188);
    assert_eq!(f.count("allocations").await, 12);
    assert_eq!(count(&f.audit_actions().await, "allocation.create"), 12);
    check_invariants(&f).await;
    // What admissions read in one statement is what the quota page shows.
    let (_, held) = offer_agrees(&f, &actors[0], "h100-mig").await;
    assert_eq!(held.2, 8);
    let (_, held) = offer_agrees(&f, &actors[4], "h100-mig").await;
    assert_eq!(held.2, 4);
    // A tenant without quota in a pool is told so, and offered none there.
    let whole = SliceShape::Whole {
        count: 1,
        nvlink_local: false,
    };
    let err = f
        .service
        .request_allocation(&actors[4], &ask("a100-whole", whole, 1))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServiceError::QuotaExceeded(ref m) if m.contains("no quota in pool 'a100-whole'")),
        "{err:?}"
    );
    let options = f.service.request_options(&actors[4]).await.unwrap();
    let a100 = options.pools.iter().find(|p| p.offer.pool == "a100-whole");
    assert_eq!(a100.map(|p| p.quota), Some(None));
    assert_eq!(f.count("allocations").await, 12);
}

/// Another "replica"'s transaction holding the admission lock, so that
/// this process's admissions line up behind it; `None` on SQLite, which has
/// no advisory lock (the test then has nothing to check).
async fn hold_admission_lock(f: &Fixture) -> Option<sea_orm::DatabaseTransaction> {
    use sea_orm::{ConnectionTrait, DbBackend, TransactionTrait};
    let db = f.service.db();
    if db.get_database_backend() != DbBackend::Postgres {
        eprintln!("PostgreSQL only (TESSERA_TEST_POSTGRES_URL): SQLite has no advisory lock");
        return None;
    }
    let other_replica = db.begin().await.unwrap();
    other_replica
        .execute_unprepared(&format!(
            "SELECT pg_advisory_xact_lock({})",
            tessera_service::ADMISSION_LOCK
        ))
        .await
        .unwrap();
    Some(other_replica)
}

/// This process's admissions wait their turn in memory, holding no
/// database connection: while another replica's admission holds the lock,
/// two of six wait for it in PostgreSQL (not six, which with a pool of ten
/// left the agents' reports and the reads four connections), and all six
/// are admitted once it is let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admissions_waiting_their_turn_hold_no_connection() {
    use sea_orm::{ConnectionTrait, DbBackend, Statement};
    let f = fixture().await;
    let db = f.service.db();
    let Some(other_replica) = hold_admission_lock(&f).await else {
        return;
    };
    let _agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-3a0")]).await;
    let actors = members(&f, 3).await;
    let waiting_in_db = || async {
        db.query_one(Statement::from_string(
            DbBackend::Postgres,
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() \
             AND wait_event_type = 'Lock' AND wait_event = 'advisory'",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get::<i64>("", "n")
        .unwrap()
    };
    let (outcomes, ()) = tokio::join!(race(&f, &actors, 6), async {
        for _ in 0..200 {
            if waiting_in_db().await > 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        // Time for the other five to queue up wherever they would.
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        assert_eq!(waiting_in_db().await, 2);
        other_replica.commit().await.unwrap();
    });
    for r in outcomes {
        assert_eq!(r.unwrap().state, AllocationPhase::Placed);
    }
    check_invariants(&f).await;
}

/// Admissions that wait for the turn together take one turn: one
/// transaction admits them in order, each seeing the ones before it. A
/// refused request in it stores nothing and does not stop the others, and
/// each request's audit row names its own caller (PostgreSQL: another
/// "replica" holds the admission lock while they line up).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn admissions_that_wait_together_share_one_turn() {
    use tessera_service::entity::audit_event;
    let f = fixture().await;
    let db = f.service.db();
    let _agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-5a0"), h100(1, "GPU-5a1")]).await;
    let vision = [
        actor(&f, "v0", &["vision"], "vision").await,
        actor(&f, "v1", &["vision"], "vision").await,
        actor(&f, "v2", &["vision"], "vision").await,
    ];
    // nlp's quota is one GPU: of two whole-GPU requests, one is refused.
    let nlp = [
        actor(&f, "n0", &["nlp"], "nlp").await,
        actor(&f, "n1", &["nlp"], "nlp").await,
    ];
    let Some(other_replica) = hold_admission_lock(&f).await else {
        return;
    };
    let before = f.service.admission_turns();
    let mut asks = Vec::new();
    for a in &vision {
        asks.push((a.clone(), ask("h100-mig", mig("1g.10gb"), 4)));
    }
    for a in &nlp {
        asks.push((a.clone(), ask("h100-mig", mig("7g.80gb"), 4)));
    }
    let tasks: Vec<_> = asks
        .into_iter()
        .map(|(a, req)| {
            let service = f.service.clone();
            tokio::spawn(async move { (a.clone(), service.request_allocation(&a, &req).await) })
        })
        .collect();
    // Every request in line before the lock is let go.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert_eq!(f.service.admission_turns(), before, "nothing admitted yet");
    other_replica.commit().await.unwrap();
    let outcomes: Vec<_> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    let after = f.service.admission_turns();
    assert_eq!(
        (after.0 - before.0, after.1 - before.1),
        (1, 5),
        "one turn admitted all five"
    );
    let (mut placed, mut refused) = (Vec::new(), 0);
    for (a, outcome) in &outcomes {
        match outcome {
            Ok(v) => {
                assert_eq!(v.state, AllocationPhase::Placed, "{v:?}");
                placed.push((a.clone(), v.id));
            }
            Err(ServiceError::QuotaExceeded(_)) => {
                assert_eq!(a.tenant_slug(), "nlp");
                refused += 1;
            }
            Err(e) => panic!("unexpected outcome {e:?}"),
        }
    }
    assert_eq!((placed.len(), refused), (4, 1));
    assert_eq!(
        rows(&f).await.len(),
        4,
        "the refused request stored nothing"
    );
    for (a, id) in &placed {
        let rows = audit_event::Entity::find()
            .filter(audit_event::Column::TargetId.eq(id.to_string()))
            .filter(
                audit_event::Column::TargetType.eq(tessera_core::audit::AuditTarget::Allocation),
            )
            .all(db)
            .await
            .unwrap();
        let tessera_service::audit::Actor::Tenant { name, .. } = a.audit() else {
            unreachable!("a tenant actor")
        };
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].actor, name, "each request names its own caller");
    }
    assert_eq!(
        f.service.fleet_index_agrees("h100-mig").await.unwrap(),
        Some(true),
        "the index each admission of the turn carried to the next holds all four"
    );
    check_invariants(&f).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_beyond_capacity_queue() {
    let f = fixture().await;
    let _agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-c0")]).await;
    let actors = members(&f, 3).await;
    let mut states: BTreeMap<String, usize> = BTreeMap::new();
    for r in race(&f, &actors, 200).await {
        match r {
            Ok(v) => *states.entry(v.state.name().to_owned()).or_default() += 1,
            Err(ServiceError::QuotaExceeded(_)) => {
                *states.entry("refused".into()).or_default() += 1
            }
            Err(e) => panic!("unexpected outcome {e:?}"),
        }
    }
    // 12 admitted by quota, 7 places on the one GPU.
    let expected: BTreeMap<String, usize> = [("placed", 7), ("queued", 5), ("refused", 188)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
    assert_eq!(states, expected);
    check_invariants(&f).await;
    let all = rows(&f).await;
    for (slug, n) in [("vision", 8), ("nlp", 4)] {
        let id = actors
            .iter()
            .find(|a| a.tenant_slug() == slug)
            .unwrap()
            .tenant_id();
        assert_eq!(
            all.iter().filter(|a| a.tenant_id == id).count(),
            n,
            "{slug}"
        );
    }
    // The queue is numbered 1..=5.
    let mut positions: Vec<u32> = Vec::new();
    for a in &actors[..2] {
        for v in f.service.list_allocations(a).await.unwrap() {
            if v.state == AllocationPhase::Queued {
                positions.push(v.queue_position.unwrap());
            }
        }
    }
    positions.sort_unstable();
    assert_eq!(positions, vec![1, 2, 3, 4, 5]);
}

#[tokio::test]
async fn bad_requests_store_nothing() {
    let f = fixture().await;
    let _h = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-b0")]).await;
    let _a = Agent::enrol(&f, "gpu-2", vec![a100(0, "GPU-b1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let nora = actor(&f, "nora", &["nlp"], "nlp").await;
    let admin = f.admin().await;
    let admin_actor = f
        .service
        .tenant_actor(&admin, &slug("vision"))
        .await
        .unwrap();
    assert!(!admin_actor.can_request());
    let generation = f
        .service
        .desired_state(f.service.db(), _h.host.id())
        .await
        .unwrap()
        .generation;

    let whole = |count| SliceShape::Whole {
        count,
        nvlink_local: false,
    };
    let invalid: Vec<(NewAllocation, &str)> = vec![
        (ask("h200-mig", mig("1g.10gb"), 4), "pool"),
        (ask("a100-whole", mig("1g.10gb"), 4), "shape"),
        (ask("h100-mig", mig("1g.12gb"), 4), "shape"),
        (ask("h100-mig", SliceShape::TimeSlice {}, 4), "shape"),
        (ask("h100-mig", mig("1g.10gb"), 0), "lease_hours"),
        (ask("h100-mig", mig("1g.10gb"), 73), "lease_hours"),
        (ask("a100-whole", whole(0), 4), "shape"),
        (ask("a100-whole", whole(1000), 4), "shape"),
        // Fits the quota, but the pool has one A100: it could never fit.
        (ask("a100-whole", whole(2), 4), "shape"),
        (
            NewAllocation {
                purpose: "x".repeat(501),
                ..ask("h100-mig", mig("1g.10gb"), 4)
            },
            "purpose",
        ),
    ];
    for (req, field) in invalid {
        match f.service.request_allocation(&alice, &req).await {
            Err(ServiceError::Invalid {
                field: got,
                message,
            }) => {
                assert_eq!(got, field, "{req:?}: {message}");
                assert!(!message.is_empty());
            }
            other => panic!("{req:?}: expected Invalid {field}, got {other:?}"),
        }
    }
    let other_tenant = NewAllocation {
        tenant: Some("nlp".parse().unwrap()),
        ..ask("h100-mig", mig("1g.10gb"), 4)
    };
    let err = f
        .service
        .request_allocation(&alice, &other_tenant)
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::NotFound { .. }), "{err:?}");
    // Beyond the quota (5 of 4 slices), and no quota at all.
    for (who, req) in [
        (&alice, ask("a100-whole", whole(5), 4)),
        (&nora, ask("a100-whole", whole(1), 4)),
    ] {
        let err = f.service.request_allocation(who, &req).await.unwrap_err();
        assert!(matches!(err, ServiceError::QuotaExceeded(_)), "{err:?}");
        assert_eq!(
            (err.status(), err.code()),
            (403, tessera_service::ErrorCode::QuotaExceeded)
        );
    }
    // A pool without GPUs.
    let err = f
        .service
        .request_allocation(&alice, &ask("l4-shared", SliceShape::TimeSlice {}, 4))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Conflict(_)), "{err:?}");
    // A platform admin looks, but does not ask.
    let err = f
        .service
        .request_allocation(&admin_actor, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Forbidden(_)), "{err:?}");

    assert_eq!(f.count("allocations").await, 0);
    let actions = f.audit_actions().await;
    assert!(
        !actions.iter().any(|a| a.starts_with("allocation.")),
        "{actions:?}"
    );
    let after = f
        .service
        .desired_state(f.service.db(), _h.host.id())
        .await
        .unwrap()
        .generation;
    assert_eq!(after, generation, "no desired-state change");
}

/// A stored state, shape or placement that does not decode is an error when
/// the row is read (a 500 saying nothing of it), never a guess: not a
/// missing state, a default shape or no placement.
#[tokio::test]
async fn an_allocation_row_that_does_not_decode_fails_the_read() {
    use sea_orm::{ConnectionTrait, Statement};
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-d0")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let s = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 1))
        .await
        .unwrap();
    agent.converge(&f).await;
    assert_eq!(get(&f, &alice, s.id).await.state, AllocationPhase::Active);
    let db = f.service.db();
    for (column, bad) in [
        ("state_data", r#"{"state":"melted"}"#),
        ("shape", r#"{"kind":"mig","profile":7}"#),
        ("placement", r#"{"hostname":"gpu-1"}"#),
    ] {
        let before: (String,) = {
            let row = db
                .query_one(Statement::from_string(
                    db.get_database_backend(),
                    format!(
                        "SELECT CAST({column} AS TEXT) AS v FROM allocations WHERE id = {}",
                        s.id
                    ),
                ))
                .await
                .unwrap()
                .unwrap();
            (row.try_get::<String>("", "v").unwrap(),)
        };
        let set = |v: &str| {
            Statement::from_string(
                db.get_database_backend(),
                format!(
                    "UPDATE allocations SET {column} = '{}' WHERE id = {}",
                    v.replace('\'', "''"),
                    s.id
                ),
            )
        };
        db.execute(set(bad)).await.unwrap();
        let err = f.service.get_allocation(&alice, s.id).await.unwrap_err();
        assert!(err.is_failure(), "{column}: {err:?}");
        assert_eq!(err.status(), 500, "{column}");
        assert!(
            !err.public_message().contains(column),
            "{column}: {}",
            err.public_message()
        );
        // The tenant's list fails alike, rather than leave the slice out.
        assert!(
            f.service.list_allocations(&alice).await.is_err(),
            "{column}"
        );
        // Restored, it reads as before.
        db.execute(set(&before.0)).await.unwrap();
        assert_eq!(get(&f, &alice, s.id).await.state, AllocationPhase::Active);
    }
}

#[tokio::test]
async fn queued_requests_take_freed_capacity_in_order() {
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-9e0")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let nora = actor(&f, "nora", &["nlp"], "nlp").await;
    // Fill the GPU: 4 nlp + 3 vision 1g.10gb.
    let mut fillers = Vec::new();
    for who in [&nora, &nora, &nora, &nora, &alice, &alice, &alice] {
        let v = f
            .service
            .request_allocation(who, &ask("h100-mig", mig("1g.10gb"), 4))
            .await
            .unwrap();
        assert_eq!(v.state, AllocationPhase::Placed);
        fillers.push(v);
    }
    agent.converge(&f).await;
    assert_eq!(
        get(&f, &alice, fillers[6].id).await.state,
        AllocationPhase::Active
    );

    f.clock.advance(Duration::seconds(1));
    let first = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    f.clock.advance(Duration::seconds(1));
    let second = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    assert_eq!(
        (first.state, first.queue_position),
        (AllocationPhase::Queued, Some(1))
    );
    assert_eq!(
        (second.state, second.queue_position),
        (AllocationPhase::Queued, Some(2))
    );
    assert_eq!(first.host, None);
    assert_eq!(first.mig_start, None);
    for v in [&first, &second] {
        assert_eq!(
            v.waiting_for.as_deref(),
            Some("no GPU in the pool has room for it right now")
        );
    }
    // Queued requests count against the quota.
    assert_eq!(usage(&f, alice.tenant_id(), "h100-mig").await.2, 5);
    assert_eq!(f.service.tick().await.unwrap().placed, 0);

    // Give back one vision slice: the place frees only once the agent has
    // torn it down.
    let freed = fillers[5].mig_start.unwrap();
    f.service
        .release_allocation(&alice, fillers[5].id)
        .await
        .unwrap();
    assert_eq!(f.service.tick().await.unwrap().placed, 0);
    assert_eq!(
        get(&f, &alice, first.id).await.state,
        AllocationPhase::Queued
    );
    agent.converge(&f).await;
    assert_eq!(
        get(&f, &alice, fillers[5].id).await.state,
        AllocationPhase::Released
    );

    let t = f.service.tick().await.unwrap();
    assert_eq!(t.placed, 1, "{t:?}");
    let first = get(&f, &alice, first.id).await;
    assert_eq!(first.state, AllocationPhase::Placed);
    assert_eq!(first.mig_start, Some(freed));
    assert_eq!(first.queue_position, None);
    let second = get(&f, &alice, second.id).await;
    assert_eq!(
        (second.state, second.queue_position),
        (AllocationPhase::Queued, Some(1))
    );
    assert_eq!(count(&f.audit_actions().await, "allocation.place"), 1);

    // A queued request ends at once when released.
    let r = f
        .service
        .release_allocation(&alice, second.id)
        .await
        .unwrap();
    assert_eq!(r.state, AllocationPhase::Released);
    agent.converge(&f).await;
    assert_eq!(
        get(&f, &alice, first.id).await.state,
        AllocationPhase::Active
    );
    check_invariants(&f).await;
}

#[tokio::test]
async fn a_slice_the_agent_cannot_create_fails_with_the_reason() {
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-f0"), h100(1, "GPU-f1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let v = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("2g.20gb"), 4))
        .await
        .unwrap();
    let start = v.mig_start.unwrap();
    let gpu = v.gpus[0].clone();
    let d = agent.fetch(&f).await;

    // The driver refused: nothing was created, and the GPU has an error.
    let message = "create_gpu_instance: driver refused";
    agent
        .send(
            &f,
            agent.base.clone(),
            Some(d.generation),
            vec![GpuApplyError {
                index: gpu.index,
                message: message.into(),
            }],
        )
        .await;
    let failing = get(&f, &alice, v.id).await;
    assert_eq!(failing.state, AllocationPhase::Releasing);
    assert_eq!(failing.ending_as, Some(AllocationPhase::Failed));
    assert!(
        failing
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains(message),
        "{failing:?}"
    );
    assert_eq!(usage(&f, alice.tenant_id(), "h100-mig").await, (0, 0, 0));

    let d2 = agent.fetch(&f).await;
    assert!(d2.generation > d.generation);
    let e = entry(&d2, &gpu.uuid);
    assert!(e.desired.instances.is_empty());
    assert_eq!(e.desired.released.instances, vec![start]);
    agent
        .send(&f, agent.applied(&d2), Some(d2.generation), vec![])
        .await;
    let failed = get(&f, &alice, v.id).await;
    assert_eq!(failed.state, AllocationPhase::Failed);
    assert!(
        failed
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains(message),
        "{failed:?}"
    );
    assert!(failed.ended_at.is_some());

    // Applied, no error, but no MIG device either: fails too, saying so.
    let w = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    let d3 = agent.fetch(&f).await;
    agent
        .send(&f, agent.base.clone(), Some(d3.generation), vec![])
        .await;
    let w = get(&f, &alice, w.id).await;
    assert_eq!(w.ending_as, Some(AllocationPhase::Failed));
    assert!(
        w.reason
            .as_deref()
            .unwrap_or_default()
            .contains("no MIG device"),
        "{w:?}"
    );
    agent.converge(&f).await;
    assert_eq!(get(&f, &alice, w.id).await.state, AllocationPhase::Failed);

    assert_eq!(usage(&f, alice.tenant_id(), "h100-mig").await, (0, 0, 0));
    let actions = f.audit_actions().await;
    assert_eq!(count(&actions, "allocation.fail"), 2, "{actions:?}");
    assert_eq!(count(&actions, "allocation.end"), 2, "{actions:?}");
    check_invariants(&f).await;
}

#[tokio::test]
async fn leases_extend_within_policy_and_expire() {
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-e0")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let nora = actor(&f, "nora", &["nlp"], "nlp").await;
    let v = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 2))
        .await
        .unwrap();
    // Only an active lease can be extended.
    let err = f
        .service
        .extend_allocation(&alice, v.id, 1)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409, "{err:?}");
    agent.converge(&f).await;
    let t0 = f.clock.now();
    assert_eq!(
        get(&f, &alice, v.id).await.lease_ends_at,
        Some(t0 + Duration::hours(2))
    );

    let x = f.service.extend_allocation(&alice, v.id, 1).await.unwrap();
    assert_eq!(x.lease_ends_at, Some(t0 + Duration::hours(3)));
    // Up to exactly 72 hours from now, not one more.
    let x = f.service.extend_allocation(&alice, v.id, 69).await.unwrap();
    assert_eq!(x.lease_ends_at, Some(t0 + Duration::hours(72)));
    // Past the limit, up to hours that do not fit a date at all: a clean
    // 400, never a panic, and the lease stays as it was.
    for hours in [0, 1, 1_000_000, u32::MAX] {
        match f.service.extend_allocation(&alice, v.id, hours).await {
            Err(ServiceError::Invalid { field, message }) => {
                assert_eq!(field, "hours");
                if hours > 0 {
                    assert!(message.contains("extend by at most 0 hours"), "{message}");
                }
            }
            other => panic!("extend by {hours}: {other:?}"),
        }
    }
    let err = f
        .service
        .extend_allocation(&nora, v.id, 1)
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::NotFound { .. }), "{err:?}");
    assert_eq!(
        get(&f, &alice, v.id).await.lease_ends_at,
        Some(t0 + Duration::hours(72))
    );
    assert_eq!(count(&f.audit_actions().await, "allocation.extend"), 2);

    // One second before the end nothing happens; at the end it expires.
    f.clock.advance(Duration::hours(72) - Duration::seconds(1));
    assert_eq!(f.service.tick().await.unwrap().expired, 0);
    f.clock.advance(Duration::seconds(1));
    let t = f.service.tick().await.unwrap();
    assert_eq!(t.expired, 1, "{t:?}");
    let e = get(&f, &alice, v.id).await;
    assert_eq!(e.state, AllocationPhase::Releasing);
    assert_eq!(e.ending_as, Some(AllocationPhase::Expired));
    assert_eq!(usage(&f, alice.tenant_id(), "h100-mig").await, (0, 0, 0));
    let d = agent.converge(&f).await;
    assert!(entry(&d, &v.gpus[0].uuid)
        .desired
        .released
        .instances
        .contains(&v.mig_start.unwrap()));
    let e = get(&f, &alice, v.id).await;
    assert_eq!(e.state, AllocationPhase::Expired);
    assert_eq!(e.ended_at, Some(f.clock.now()));
    assert_eq!(count(&f.audit_actions().await, "allocation.expire"), 1);

    // Alice was told: active, ending soon (once, although two ticks ran in
    // the last hour), expired; newest first.
    let person = f.login("alice", &["vision"]).await;
    let inbox = f.service.notifications(&person).await.unwrap();
    let kinds: Vec<&str> = inbox.items.iter().map(|n| n.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            "allocation.expired",
            "allocation.lease_ending",
            "allocation.active"
        ]
    );
    assert_eq!(inbox.unread, 3);
    assert_eq!(
        inbox.items[0].link.as_deref(),
        Some(format!("/t/vision/a/{}", v.id).as_str())
    );
    // Nora (another tenant) was told nothing.
    let other = f.login("nora", &["nlp"]).await;
    assert_eq!(f.service.notifications(&other).await.unwrap().unread, 0);
}

#[tokio::test]
async fn slices_never_confirmed_time_out_and_return_the_quota() {
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-7e0")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    // One the agent fetched but never confirmed, one it never fetched.
    let fetched = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    agent.fetch(&f).await;
    assert_eq!(
        get(&f, &alice, fetched.id).await.state,
        AllocationPhase::Provisioning
    );
    let unseen = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    assert_eq!(unseen.state, AllocationPhase::Placed);
    assert_eq!(usage(&f, alice.tenant_id(), "h100-mig").await.2, 2);

    f.clock.advance(Duration::seconds(299));
    assert_eq!(f.service.tick().await.unwrap().timed_out, 0);
    f.clock.advance(Duration::seconds(2));
    assert_eq!(f.service.tick().await.unwrap().timed_out, 2);

    let a = get(&f, &alice, fetched.id).await;
    assert_eq!(
        (a.state, a.ending_as),
        (AllocationPhase::Releasing, Some(AllocationPhase::Failed))
    );
    assert!(
        a.reason
            .as_deref()
            .unwrap_or_default()
            .contains("did not confirm"),
        "{a:?}"
    );
    let b = get(&f, &alice, unseen.id).await;
    assert_eq!(b.state, AllocationPhase::Failed);
    assert!(
        b.reason
            .as_deref()
            .unwrap_or_default()
            .contains("did not confirm"),
        "{b:?}"
    );
    assert_eq!(usage(&f, alice.tenant_id(), "h100-mig").await, (0, 0, 0));
    assert_eq!(f.service.tick().await.unwrap(), Default::default());

    // The host comes back: the fetched one is torn down, the other never made.
    let d = agent.fetch(&f).await;
    let e = entry(&d, &fetched.gpus[0].uuid);
    assert!(e.desired.instances.is_empty(), "{e:?}");
    assert_eq!(
        e.desired.released.instances,
        vec![fetched.mig_start.unwrap()]
    );
    agent.converge(&f).await;
    assert_eq!(
        get(&f, &alice, fetched.id).await.state,
        AllocationPhase::Failed
    );
}

#[tokio::test]
async fn tenants_see_only_their_own_and_tokens_act_for_one_tenant() {
    let f = fixture().await;
    let _agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-1e0")]).await;
    let member = f.login("m", &["vision"]).await;
    let lead = f.login("l", &["vision-leads"]).await;
    let outsider = f.login("o", &["nlp"]).await;
    let admin = f.admin().await;
    let alice = f
        .service
        .tenant_actor(&member, &slug("vision"))
        .await
        .unwrap();
    let nora = f
        .service
        .tenant_actor(&outsider, &slug("nlp"))
        .await
        .unwrap();
    let v = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();

    let err = f
        .service
        .tenant_actor(&outsider, &slug("vision"))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::NotFound { .. }), "{err:?}");
    let err = f.service.get_allocation(&nora, v.id).await.unwrap_err();
    assert!(matches!(err, ServiceError::NotFound { .. }), "{err:?}");
    let err = f.service.release_allocation(&nora, v.id).await.unwrap_err();
    assert!(matches!(err, ServiceError::NotFound { .. }), "{err:?}");
    let err = f
        .service
        .actor_for_allocation(&outsider, v.id)
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::NotFound { .. }), "{err:?}");
    assert!(f.service.list_allocations(&nora).await.unwrap().is_empty());
    assert_eq!(
        f.service
            .actor_for_allocation(&member, v.id)
            .await
            .unwrap()
            .tenant_slug(),
        "vision"
    );
    assert_eq!(
        get(&f, &alice, v.id).await.state,
        AllocationPhase::Placed,
        "untouched"
    );

    // Tokens: tenant admins only.
    let err = f
        .service
        .create_api_token(&member, &alice, "ci", None, TokenScope::Request)
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Forbidden(_)), "{err:?}");
    let err = f
        .service
        .list_api_tokens(&member, &alice)
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Forbidden(_)), "{err:?}");
    let lead_actor = f
        .service
        .tenant_actor(&lead, &slug("vision"))
        .await
        .unwrap();
    let created = f
        .service
        .create_api_token(&lead, &lead_actor, "ci", None, TokenScope::Request)
        .await
        .unwrap();
    assert!(created.secret.starts_with("tsk"), "{}", created.secret);
    assert!(created.secret.starts_with(&created.token.prefix));
    assert_eq!(created.token.last_used_at, None);

    let by_token = f
        .service
        .authenticate_api_token(&created.secret)
        .await
        .unwrap();
    assert_eq!(by_token.tenant_slug(), "vision");
    assert_eq!(by_token.tenant_id(), alice.tenant_id());
    assert!(by_token.can_request());
    assert_eq!(by_token.user_id(), None);
    let w = f
        .service
        .request_allocation(&by_token, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    assert_eq!(w.requested_by, "token:ci");
    assert_eq!(get(&f, &by_token, v.id).await.id, v.id);
    let listed = f.service.list_api_tokens(&lead, &lead_actor).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].last_used_at, Some(f.clock.now()));
    assert!(!format!("{listed:?}").contains(&created.secret));

    f.service
        .revoke_api_token(&lead, &lead_actor, created.token.id)
        .await
        .unwrap();
    let err = f
        .service
        .authenticate_api_token(&created.secret)
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::InvalidApiToken), "{err:?}");
    assert_eq!(err.status(), 401);
    let err = f
        .service
        .authenticate_api_token("tsk_nonsense")
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::InvalidApiToken), "{err:?}");

    // A platform admin may look and release, not ask.
    let as_admin = f
        .service
        .tenant_actor(&admin, &slug("vision"))
        .await
        .unwrap();
    assert!(!as_admin.can_request());
    let err = f
        .service
        .extend_allocation(&as_admin, v.id, 1)
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Forbidden(_)), "{err:?}");
    let r = f.service.release_allocation(&as_admin, w.id).await.unwrap();
    assert_eq!(r.state, AllocationPhase::Released);
    let actions = f.audit_actions().await;
    for a in ["api_token.create", "api_token.revoke", "allocation.release"] {
        assert_eq!(count(&actions, a), 1, "{a} in {actions:?}");
    }
}

#[tokio::test]
async fn time_sliced_pool_hands_out_replicas_up_to_the_quota() {
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "l4-1", vec![l4(0, "GPU-4e0")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let mut ids = Vec::new();
    for _ in 0..4 {
        let v = f
            .service
            .request_allocation(&alice, &ask("l4-shared", SliceShape::TimeSlice {}, 4))
            .await
            .unwrap();
        assert_eq!(v.state, AllocationPhase::Placed);
        assert_eq!(v.gpus[0].uuid, "GPU-4e0");
        assert_eq!(v.mig_start, None);
        assert_eq!(
            (v.demand.compute.0, v.demand.memory, v.demand.slices),
            (250, MemMiB(23_034 / 4), 1)
        );
        ids.push(v.id);
    }
    assert_eq!(
        usage(&f, alice.tenant_id(), "l4-shared").await,
        (1000, 4 * 5758, 4)
    );
    let err = f
        .service
        .request_allocation(&alice, &ask("l4-shared", SliceShape::TimeSlice {}, 4))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::QuotaExceeded(_)), "{err:?}");
    assert_eq!(f.count("allocations").await, 4);

    let d = agent.converge(&f).await;
    let e = entry(&d, "GPU-4e0");
    assert_eq!(e.desired.time_slice_replicas, 4);
    assert!(!e.desired.mig_enabled && e.desired.instances.is_empty());
    for id in &ids {
        let v = get(&f, &alice, *id).await;
        assert_eq!(v.state, AllocationPhase::Active);
        assert_eq!(
            env_of(&v, "CUDA_VISIBLE_DEVICES").as_deref(),
            Some("GPU-4e0")
        );
    }
    // Releasing one frees a replica through the agent.
    let r = f.service.release_allocation(&alice, ids[0]).await.unwrap();
    assert_eq!(r.state, AllocationPhase::Releasing);
    agent.converge(&f).await;
    assert_eq!(
        get(&f, &alice, ids[0]).await.state,
        AllocationPhase::Released
    );
    let v = f
        .service
        .request_allocation(&alice, &ask("l4-shared", SliceShape::TimeSlice {}, 4))
        .await
        .unwrap();
    assert_eq!(v.state, AllocationPhase::Placed);
}

#[tokio::test]
async fn instances_tessera_did_not_make_are_kept_and_occupy_their_place() {
    let f = fixture().await;
    let mut gpu = h100(0, "GPU-5e0");
    let handmade = MigPlacement::new("3g.40gb", 0);
    gpu.sharing = Some(GpuObserved {
        mig_enabled: true,
        instances: vec![ObservedInstance {
            placement: handmade.clone(),
            compute_instances: vec![ComputeInstance::whole(3)],
            in_use: true,
        }],
        ..GpuObserved::default()
    });
    gpu.mig_devices = vec![MigDevice {
        gi_start: 0,
        profile: "3g.40gb".into(),
        uuid: "MIG-handmade".into(),
    }];
    let mut agent = Agent::enrol(&f, "gpu-1", vec![gpu]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;

    let d = f
        .service
        .desired_state(f.service.db(), agent.host.id())
        .await
        .unwrap();
    assert_eq!(
        entry(&d, "GPU-5e0").desired.instances,
        vec![DesiredInstance {
            placement: handmade.clone(),
            compute_instances: vec![ComputeInstance::whole(3)],
        }]
    );

    let small = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    assert_eq!(small.state, AllocationPhase::Placed);
    let start = small.mig_start.unwrap();
    assert!(
        (4..=6).contains(&start),
        "1g.10gb at {start} overlaps 3g.40gb@0"
    );
    // 4g.40gb needs start 0: it would fit an empty GPU, so it waits.
    let big = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("4g.40gb"), 4))
        .await
        .unwrap();
    assert_eq!(big.state, AllocationPhase::Queued);

    let d = agent.converge(&f).await;
    let starts: Vec<(String, u8)> = entry(&d, "GPU-5e0")
        .desired
        .instances
        .iter()
        .map(|i| (i.placement.profile.clone(), i.placement.start))
        .collect();
    assert_eq!(
        starts,
        vec![("3g.40gb".into(), 0), ("1g.10gb".into(), start)]
    );
    assert_eq!(
        get(&f, &alice, small.id).await.state,
        AllocationPhase::Active
    );
    assert_eq!(f.service.tick().await.unwrap().placed, 0);
    assert_eq!(get(&f, &alice, big.id).await.state, AllocationPhase::Queued);
    check_invariants(&f).await;
}

/// A release that answered "released" stays released, whatever the timer
/// does at the same moment.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn releasing_a_queued_request_while_the_queue_is_placed_sticks() {
    let f = fixture().await;
    let agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-2b0"), h100(1, "GPU-2b1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let nora = actor(&f, "nora", &["nlp"], "nlp").await;
    for round in 0..3 {
        // The host is offline: requests queue.
        f.clock.advance(Duration::seconds(31));
        let mut queued = Vec::new();
        for who in std::iter::repeat_n(&alice, 8).chain(std::iter::repeat_n(&nora, 4)) {
            let v = f
                .service
                .request_allocation(who, &ask("h100-mig", mig("1g.10gb"), 4))
                .await
                .unwrap();
            assert_eq!(v.state, AllocationPhase::Queued);
            queued.push((who.clone(), v.id));
        }
        agent.send(&f, agent.base.clone(), None, vec![]).await;
        let tick = {
            let service = f.service.clone();
            tokio::spawn(async move { service.tick().await })
        };
        let releases: Vec<_> = queued
            .iter()
            .map(|(who, id)| {
                let (service, who, id) = (f.service.clone(), who.clone(), *id);
                tokio::spawn(async move { service.release_allocation(&who, id).await })
            })
            .collect();
        for r in futures::future::join_all(releases).await {
            let v = r.unwrap().unwrap();
            assert_eq!(v.state, AllocationPhase::Released, "round {round}: {v:?}");
        }
        tick.await.unwrap().unwrap();
        for (who, id) in &queued {
            let v = get(&f, who, *id).await;
            assert_eq!(v.state, AllocationPhase::Released, "round {round}: {v:?}");
        }
        assert_eq!(usage(&f, alice.tenant_id(), "h100-mig").await, (0, 0, 0));
        check_invariants(&f).await;
    }
}

/// A slice released while the agent is being sent it is torn down, not left
/// behind on the GPU as an instance nobody owns.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn releasing_while_the_agent_fetches_leaves_no_instance_behind() {
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-3c0"), h100(1, "GPU-3c1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    for round in 0..3 {
        let mut ids = Vec::new();
        for _ in 0..8 {
            let v = f
                .service
                .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 4))
                .await
                .unwrap();
            assert_eq!(v.state, AllocationPhase::Placed);
            ids.push(v.id);
        }
        let fetch = {
            let (service, host) = (f.service.clone(), agent.host.clone());
            tokio::spawn(async move { service.wait_desired(&host, None, NO_WAIT).await })
        };
        let releases: Vec<_> = ids
            .iter()
            .map(|id| {
                let (service, who, id) = (f.service.clone(), alice.clone(), *id);
                tokio::spawn(async move { service.release_allocation(&who, id).await })
            })
            .collect();
        for r in futures::future::join_all(releases).await {
            r.unwrap().unwrap();
        }
        // The agent creates what it was sent, and reports it.
        let sent = fetch.await.unwrap().unwrap();
        agent
            .send(&f, agent.applied(&sent), Some(sent.generation), vec![])
            .await;
        agent.converge(&f).await;
        agent.converge(&f).await;
        for id in &ids {
            let v = get(&f, &alice, *id).await;
            assert_eq!(v.state, AllocationPhase::Released, "round {round}: {v:?}");
        }
        let d = agent.fetch(&f).await;
        for e in &d.gpus {
            assert!(
                e.desired.instances.is_empty(),
                "round {round}: left behind: {e:?}"
            );
        }
        check_invariants(&f).await;
    }
}

#[tokio::test]
async fn small_requests_start_beside_a_waiting_large_one_until_it_has_waited_too_long() {
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a0")]).await;
    let bob = actor(&f, "bob", &["vision"], "vision").await;
    let nora = actor(&f, "nora", &["nlp"], "nlp").await;
    let slice = |profile: &str, hours| ask("h100-mig", mig(profile), hours);
    let first = f
        .service
        .request_allocation(&bob, &slice("4g.40gb", 4))
        .await
        .unwrap();
    assert_eq!(first.state, AllocationPhase::Placed);
    agent.converge(&f).await;
    let t0 = f.service.now();
    let big = f
        .service
        .request_allocation(&bob, &slice("7g.80gb", 4))
        .await
        .unwrap();
    assert_eq!(big.state, AllocationPhase::Queued);
    // A 1g.10gb fits next to the 4g.40gb: it starts now rather than wait
    // behind the 7g.80gb (no head-of-line blocking).
    let small = f
        .service
        .request_allocation(&bob, &slice("1g.10gb", 4))
        .await
        .unwrap();
    assert_eq!(small.state, AllocationPhase::Placed, "{small:?}");
    agent.converge(&f).await;
    // The big one starts when both leases have ended, 4 h from now.
    let waiting = get(&f, &bob, big.id).await;
    assert_eq!(waiting.queue_position, Some(1));
    assert_eq!(waiting.estimated_start, Some(t0 + Duration::hours(4)));
    assert_eq!(
        waiting.waiting_for.as_deref(),
        Some("no GPU in the pool has room for it right now")
    );

    // After 30 minutes (the pool's `reserve_after_minutes`) the GPU is kept
    // for it: a slice that would still run when the big one can start
    // waits, and says for whom.
    f.clock.advance(Duration::minutes(31));
    agent.converge(&f).await;
    let behind = f
        .service
        .request_allocation(&bob, &slice("1g.10gb", 4))
        .await
        .unwrap();
    assert_eq!(behind.state, AllocationPhase::Queued);
    let why = behind.waiting_for.clone().unwrap_or_default();
    assert!(
        why.contains(&format!("held for request {}", big.id)),
        "{why}"
    );
    let reserved = get(&f, &bob, big.id).await;
    assert!(
        reserved
            .waiting_for
            .as_deref()
            .is_some_and(|w| w.contains("kept for it")),
        "{reserved:?}"
    );
    assert_eq!(reserved.estimated_start, Some(t0 + Duration::hours(4)));
    assert_eq!(f.service.tick().await.unwrap().placed, 0);
    // One that is over before then may still use the room (EASY backfill).
    let short = f
        .service
        .request_allocation(&nora, &slice("1g.10gb", 1))
        .await
        .unwrap();
    assert_eq!(short.state, AllocationPhase::Placed, "{short:?}");

    // When the leases end, the big one goes first, then the one behind it.
    f.clock.advance(Duration::hours(4));
    f.service.tick().await.unwrap();
    agent.converge(&f).await;
    assert_eq!(f.service.tick().await.unwrap().placed, 1);
    assert_eq!(get(&f, &bob, big.id).await.state, AllocationPhase::Placed);
    assert_eq!(
        get(&f, &bob, behind.id).await.state,
        AllocationPhase::Queued
    );
    check_invariants(&f).await;
}

#[tokio::test]
async fn a_fifo_pool_serves_its_queue_strictly_in_order() {
    let mut pools = common::pools();
    pools[0].queue = tessera_core::schedule::Discipline::Fifo;
    let f = fixture_with_pools(pools).await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-f0")]).await;
    let bob = actor(&f, "bob", &["vision"], "vision").await;
    let slice = |profile: &str| ask("h100-mig", mig(profile), 4);
    let first = f
        .service
        .request_allocation(&bob, &slice("4g.40gb"))
        .await
        .unwrap();
    assert_eq!(first.state, AllocationPhase::Placed);
    agent.converge(&f).await;
    let big = f
        .service
        .request_allocation(&bob, &slice("7g.80gb"))
        .await
        .unwrap();
    assert_eq!(big.state, AllocationPhase::Queued);
    // The 1g.10gb would fit, but the queue is strict.
    let small = f
        .service
        .request_allocation(&bob, &slice("1g.10gb"))
        .await
        .unwrap();
    assert_eq!(small.state, AllocationPhase::Queued);
    let why = small.waiting_for.clone().unwrap_or_default();
    assert!(why.contains(&format!("request {} ahead", big.id)), "{why}");
    // In order: the big one when the 4g.40gb's lease ends, then the small
    // one when the big one's does.
    let end = first_lease_end(&f, &bob, first.id).await;
    assert_eq!(get(&f, &bob, big.id).await.estimated_start, Some(end));
    assert_eq!(small.estimated_start, Some(end + Duration::hours(4)));
    assert_eq!(f.service.tick().await.unwrap().placed, 0);
    // Release the 4g.40gb: the big one starts, the small one still waits.
    f.service.release_allocation(&bob, first.id).await.unwrap();
    agent.converge(&f).await;
    assert_eq!(f.service.tick().await.unwrap().placed, 1);
    assert_eq!(get(&f, &bob, big.id).await.state, AllocationPhase::Placed);
    assert_eq!(get(&f, &bob, small.id).await.state, AllocationPhase::Queued);
    check_invariants(&f).await;
}

/// When an active allocation's lease ends.
async fn first_lease_end(
    f: &Fixture,
    a: &TenantActor,
    id: AllocationId,
) -> chrono::DateTime<chrono::Utc> {
    let v = get(f, a, id).await;
    assert_eq!(v.state, AllocationPhase::Active, "{v:?}");
    v.lease_ends_at.unwrap()
}

#[tokio::test]
async fn higher_priority_classes_start_first_and_each_tenant_uses_only_its_own() {
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-b0")]).await;
    let bob = actor(&f, "bob", &["vision"], "vision").await;
    let nora = actor(&f, "nora", &["nlp"], "nlp").await;
    let small = |class: Option<&str>| NewAllocation {
        priority_class: class.map(str::to_string),
        qos: Default::default(),
        ..ask("h100-mig", mig("1g.10gb"), 4)
    };
    // The form offers each tenant its own classes, highest first.
    let offered = |o: tessera_protocol::views::RequestOptions| -> Vec<String> {
        o.pools
            .iter()
            .find(|p| p.offer.pool == "h100-mig")
            .unwrap()
            .priority_classes
            .iter()
            .map(|c| c.name.clone())
            .collect()
    };
    assert_eq!(
        offered(f.service.request_options(&bob).await.unwrap()),
        ["urgent", "standard", "batch"]
    );
    assert_eq!(
        offered(f.service.request_options(&nora).await.unwrap()),
        ["standard", "batch"]
    );
    // Fill the GPU with seven 1g.10gb.
    let mut fillers = Vec::new();
    for _ in 0..7 {
        let v = f
            .service
            .request_allocation(&bob, &small(None))
            .await
            .unwrap();
        assert_eq!(
            (v.state, v.priority_class.as_str()),
            (AllocationPhase::Placed, "standard")
        );
        fillers.push(v);
    }
    agent.converge(&f).await;
    // nora asks first at the default class, bob later at `urgent`, nora
    // last at `batch`: the queue serves urgent, then standard, then batch.
    let standard = f
        .service
        .request_allocation(&nora, &small(None))
        .await
        .unwrap();
    f.clock.advance(Duration::seconds(1));
    let urgent = f
        .service
        .request_allocation(&bob, &small(Some("urgent")))
        .await
        .unwrap();
    f.clock.advance(Duration::seconds(1));
    let batch = f
        .service
        .request_allocation(&nora, &small(Some("batch")))
        .await
        .unwrap();
    assert_eq!(urgent.priority_class, "urgent");
    for (v, position) in [(&urgent, 1), (&standard, 2), (&batch, 3)] {
        assert_eq!(get_any(&f, v).await.queue_position, Some(position), "{v:?}");
    }
    // nlp may not use `urgent`; a class that does not exist is named too.
    let before = rows(&f).await.len();
    for (class, says) in [
        (
            "urgent",
            "not open to your tenant in pool 'h100-mig'; choose one of: standard, batch",
        ),
        (
            "asap",
            "there is no priority class 'asap'; choose one of: standard, batch",
        ),
    ] {
        match f
            .service
            .request_allocation(&nora, &small(Some(class)))
            .await
        {
            Err(ServiceError::Invalid { field, message }) => {
                assert_eq!(field, "priority_class");
                assert!(message.contains(says), "{message}");
            }
            other => panic!("expected a 400, got {other:?}"),
        }
    }
    assert_eq!(
        rows(&f).await.len(),
        before,
        "a refused request stored a row"
    );

    // Each slice that frees goes to the highest class waiting: urgent
    // (although it came later), then standard; batch waits last.
    let order = [
        (&fillers[0], (&bob, urgent.id), (&nora, standard.id)),
        (&fillers[1], (&nora, standard.id), (&nora, batch.id)),
    ];
    for (freed, (winner, won), (loser, waits)) in order {
        f.service.release_allocation(&bob, freed.id).await.unwrap();
        agent.converge(&f).await;
        assert_eq!(f.service.tick().await.unwrap().placed, 1);
        assert_eq!(get(&f, winner, won).await.state, AllocationPhase::Placed);
        assert_eq!(get(&f, loser, waits).await.state, AllocationPhase::Queued);
    }
    check_invariants(&f).await;
}

#[tokio::test]
async fn fair_share_puts_the_tenant_that_used_the_pool_least_lately_first() {
    // With a 24 h half-life, vision's three busy hours count against it;
    // with none, only what each holds now for its quota does (vision three
    // 1g slices of its 2 GPUs, nlp three of its 1), and vision goes first.
    for (half_life, first) in [(24, "nlp"), (0, "vision")] {
        let mut pools = common::pools();
        pools[0].usage_half_life_hours = half_life;
        let f = fixture_with_pools(pools).await;
        let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-fa")]).await;
        let bob = actor(&f, "bob", &["vision"], "vision").await;
        let nora = actor(&f, "nora", &["nlp"], "nlp").await;
        let small = || ask("h100-mig", mig("1g.10gb"), 4);
        let take = |who: &TenantActor, n: usize| {
            let (f, who) = (&f, who.clone());
            async move {
                let mut out = Vec::new();
                for _ in 0..n {
                    out.push(f.service.request_allocation(&who, &small()).await.unwrap());
                }
                out
            }
        };
        // Vision has the GPU to itself for three hours.
        let busy = take(&bob, 6).await;
        agent.converge(&f).await;
        f.clock.advance(Duration::hours(3));
        for v in &busy {
            f.service.release_allocation(&bob, v.id).await.unwrap();
        }
        agent.converge(&f).await;
        // Now nlp holds three slices and vision four: the GPU is full.
        take(&nora, 3).await;
        let vision_held = take(&bob, 4).await;
        agent.converge(&f).await;
        // Vision queues first, nlp a second later.
        let v = f.service.request_allocation(&bob, &small()).await.unwrap();
        f.clock.advance(Duration::seconds(1));
        let n = f.service.request_allocation(&nora, &small()).await.unwrap();
        assert_eq!(
            (v.state, n.state),
            (AllocationPhase::Queued, AllocationPhase::Queued)
        );
        let (winner, loser) = if first == "nlp" { (&n, &v) } else { (&v, &n) };
        assert_eq!(
            get_any(&f, winner).await.queue_position,
            Some(1),
            "half-life {half_life}"
        );
        // One of vision's slices frees: the first in line gets it.
        f.service
            .release_allocation(&bob, vision_held[0].id)
            .await
            .unwrap();
        agent.converge(&f).await;
        assert_eq!(f.service.tick().await.unwrap().placed, 1);
        assert_eq!(
            get_any(&f, winner).await.state,
            AllocationPhase::Placed,
            "half-life {half_life}"
        );
        assert_eq!(get_any(&f, loser).await.state, AllocationPhase::Queued);
    }
}

/// An allocation as its own tenant's member sees it.
async fn get_any(f: &Fixture, v: &AllocationView) -> AllocationView {
    let who = actor(f, &format!("{}-reader", v.tenant), &[&v.tenant], &v.tenant).await;
    get(f, &who, v.id).await
}

// ---------------------------------------------------------------- isolation

/// The GPU an allocation was placed on.
fn gpu_of(v: &AllocationView) -> String {
    assert_eq!(v.gpus.len(), 1, "{v:?}");
    v.gpus[0].uuid.clone()
}

/// A vision member and an nlp member, each with one `1g.10gb` slice placed.
async fn one_slice_each(
    f: &Fixture,
) -> ((TenantActor, AllocationView), (TenantActor, AllocationView)) {
    let mut out = Vec::new();
    for tenant in ["vision", "nlp"] {
        let a = actor(f, &format!("{tenant}-1"), &[tenant], tenant).await;
        let v = f
            .service
            .request_allocation(&a, &ask("h100-mig", mig("1g.10gb"), 4))
            .await
            .unwrap();
        assert_eq!(v.state, AllocationPhase::Placed, "{tenant}");
        out.push((a, v));
    }
    let nlp = out.pop().unwrap();
    let vision = out.pop().unwrap();
    (vision, nlp)
}

#[tokio::test]
async fn production_pools_keep_tenants_on_separate_gpus() {
    let f = fixture_with_pools(common::production_pools()).await;
    let _agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-e0"), h100(1, "GPU-e1")]).await;
    let small = || ask("h100-mig", mig("1g.10gb"), 4);
    let ((vision, v1), (nlp, n1)) = one_slice_each(&f).await;
    assert_ne!(gpu_of(&v1), gpu_of(&n1), "two tenants on one GPU");
    // Each tenant's next slices join its own GPU, never the other's.
    for _ in 0..3 {
        let v = f
            .service
            .request_allocation(&vision, &small())
            .await
            .unwrap();
        assert_eq!(gpu_of(&v), gpu_of(&v1));
        let n = f.service.request_allocation(&nlp, &small()).await.unwrap();
        assert_eq!(gpu_of(&n), gpu_of(&n1));
    }
    // nlp (quota: 4 slices) is full; vision fills its GPU (7 × 1g) and then
    // waits rather than take room on nlp's GPU.
    for _ in 0..3 {
        let v = f
            .service
            .request_allocation(&vision, &small())
            .await
            .unwrap();
        assert_eq!(v.state, AllocationPhase::Placed);
        assert_eq!(gpu_of(&v), gpu_of(&v1));
    }
    let waiting = f
        .service
        .request_allocation(&vision, &small())
        .await
        .unwrap();
    assert_eq!(waiting.state, AllocationPhase::Queued);
    // It says why: the free room is on nlp's GPU.
    let why = waiting.waiting_for.clone().unwrap_or_default();
    assert!(why.contains("other tenants"), "{why}");
    assert_eq!(
        get(&f, &vision, waiting.id).await.waiting_for,
        waiting.waiting_for
    );
    // Lists leave it out; other states have none.
    let listed = f.service.list_allocations(&vision).await.unwrap();
    assert!(listed.iter().all(|v| v.waiting_for.is_none()));
    check_invariants(&f).await;

    // Once nlp's slices are gone, its GPU is free for vision.
    for v in f.service.list_allocations(&nlp).await.unwrap() {
        f.service.release_allocation(&nlp, v.id).await.unwrap();
    }
    f.service.tick().await.unwrap();
    let placed = get(&f, &vision, waiting.id).await;
    assert_eq!(placed.state, AllocationPhase::Placed, "{placed:?}");
    assert_eq!(gpu_of(&placed), gpu_of(&n1));
}

#[tokio::test]
async fn batch_pools_let_tenants_share_a_gpu() {
    let f = fixture().await;
    let _agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-b0")]).await;
    let ((_, v), (_, n)) = one_slice_each(&f).await;
    assert_eq!(gpu_of(&v), gpu_of(&n));
    check_invariants(&f).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_tenants_never_share_a_gpu_in_a_production_pool() {
    let f = fixture_with_pools(common::production_pools()).await;
    let _agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-f0"), h100(1, "GPU-f1")]).await;
    let actors = members(&f, 3).await;
    for r in race(&f, &actors, 60).await {
        match r {
            Ok(_) | Err(ServiceError::QuotaExceeded(_)) => {}
            Err(e) => panic!("unexpected outcome {e:?}"),
        }
    }
    check_invariants(&f).await;
    // Whatever the interleaving: no GPU holds slices of two tenants.
    let mut tenants_on: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for a in &actors[..2] {
        for v in f.service.list_allocations(a).await.unwrap() {
            for g in &v.gpus {
                tenants_on
                    .entry(g.uuid.clone())
                    .or_default()
                    .insert(v.tenant.clone());
            }
        }
    }
    assert!(!tenants_on.is_empty());
    for (gpu, tenants) in &tenants_on {
        assert_eq!(tenants.len(), 1, "{gpu} holds slices of {tenants:?}");
    }
}

/// API token checks cost no database write, are believed for a second, and
/// a revocation bites at once on the replica that made it and within a
/// second on another one (a second `Service` on the same database).
#[tokio::test]
async fn token_checks_are_cached_briefly_and_uses_are_written_in_batches() {
    use tessera_service::entity::api_token;
    let f = fixture().await;
    let replica = tessera_service::Service::new(
        f.service.db().clone(),
        f.service.settings().clone(),
        f.clock.clone(),
    );
    let lead = f.login("l", &["vision-leads"]).await;
    let lead_actor = f
        .service
        .tenant_actor(&lead, &slug("vision"))
        .await
        .unwrap();
    let created = f
        .service
        .create_api_token(&lead, &lead_actor, "ci", None, TokenScope::Request)
        .await
        .unwrap();
    let stored_use = || async {
        api_token::Entity::find_by_id(created.token.id)
            .one(f.service.db())
            .await
            .unwrap()
            .unwrap()
            .last_used_at
    };

    // Calls on both replicas: nothing is written yet, but the list of the
    // replica that saw the call shows it.
    let first = f.clock.now();
    for _ in 0..3 {
        f.service
            .authenticate_api_token(&created.secret)
            .await
            .unwrap();
    }
    f.clock.advance(Duration::milliseconds(400));
    let on_replica = replica
        .authenticate_api_token(&created.secret)
        .await
        .unwrap();
    assert_eq!(on_replica.tenant_slug(), "vision");
    assert_eq!(stored_use().await, None);
    let listed = f.service.list_api_tokens(&lead, &lead_actor).await.unwrap();
    assert_eq!(listed[0].last_used_at, Some(first));

    // The batch writes each token once; an older use never overwrites a
    // newer one, whichever replica flushes last.
    assert_eq!(replica.flush_token_uses().await.unwrap(), 1);
    assert_eq!(
        stored_use().await,
        Some(first + Duration::milliseconds(400))
    );
    assert_eq!(f.service.flush_token_uses().await.unwrap(), 1);
    assert_eq!(
        stored_use().await,
        Some(first + Duration::milliseconds(400))
    );
    assert_eq!(f.service.flush_token_uses().await.unwrap(), 0);

    // Revoked on the first replica: refused there at once; the other still
    // believes its check for the rest of the second, then asks and refuses.
    f.service
        .revoke_api_token(&lead, &lead_actor, created.token.id)
        .await
        .unwrap();
    let err = f
        .service
        .authenticate_api_token(&created.secret)
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::InvalidApiToken), "{err:?}");
    f.clock.advance(Duration::milliseconds(500));
    assert!(replica
        .authenticate_api_token(&created.secret)
        .await
        .is_ok());
    f.clock.advance(Duration::milliseconds(600));
    let err = replica
        .authenticate_api_token(&created.secret)
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::InvalidApiToken), "{err:?}");

    // A token past its expiry is refused even while its check is fresh.
    let short = f
        .service
        .create_api_token(&lead, &lead_actor, "short", Some(1), TokenScope::Request)
        .await
        .unwrap();
    f.clock
        .advance(Duration::days(1) - Duration::milliseconds(300));
    assert!(f
        .service
        .authenticate_api_token(&short.secret)
        .await
        .is_ok());
    f.clock.advance(Duration::milliseconds(300));
    let err = f
        .service
        .authenticate_api_token(&short.secret)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServiceError::ExpiredApiToken { .. }),
        "{err:?}"
    );
}

/// Audit actions recorded for allocation `id`, oldest first.
async fn audited(f: &Fixture, id: AllocationId) -> Vec<String> {
    use sea_orm::QueryOrder;
    use tessera_service::entity::audit_event;
    audit_event::Entity::find()
        .filter(audit_event::Column::TargetId.eq(id.to_string()))
        .order_by_asc(audit_event::Column::Id)
        .all(f.service.db())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action.as_str().to_owned())
        .collect()
}

#[tokio::test]
async fn burstable_and_best_effort_slices_give_way_with_notice_and_guaranteed_never() {
    use tessera_core::notify::NotificationKind;
    use tessera_service::entity::notification;
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-0c05")]).await;
    let bob = actor(&f, "bob", &["vision"], "vision").await;
    let nora = actor(&f, "nora", &["nlp"], "nlp").await;
    let small = |qos| NewAllocation {
        qos,
        ..ask("h100-mig", mig("1g.10gb"), 4)
    };
    let request = |who: &TenantActor, qos| {
        let (f, who) = (&f, who.clone());
        async move { f.service.request_allocation(&who, &small(qos)).await }
    };
    // nlp fills its own quota (4 slices) with guaranteed slices.
    let mut nlp_own = Vec::new();
    for _ in 0..4 {
        nlp_own.push(request(&nora, QosClass::Guaranteed).await.unwrap());
    }
    // A fifth guaranteed one is refused, saying how to go beyond the quota.
    let before = rows(&f).await.len();
    match request(&nora, QosClass::Guaranteed).await {
        Err(ServiceError::QuotaExceeded(m)) => {
            assert!(m.contains("ask for it as burstable"), "{m}")
        }
        other => panic!("expected a quota refusal, got {other:?}"),
    }
    assert_eq!(rows(&f).await.len(), before);
    // Burstable borrows vision's unused quota; best-effort uses none.
    let borrowed = [
        request(&nora, QosClass::Burstable).await.unwrap(),
        request(&nora, QosClass::Burstable).await.unwrap(),
    ];
    let spare = request(&nora, QosClass::BestEffort).await.unwrap();
    assert_eq!(borrowed[0].qos, QosClass::Burstable);
    for v in borrowed.iter().chain([&spare]) {
        assert_eq!(v.state, AllocationPhase::Placed, "{v:?}");
    }
    agent.converge(&f).await;
    // Its quota shows only the guaranteed four; the form shows what it
    // borrows and what is left to borrow (12 slices of quota in the pool,
    // 6 held: 4 guaranteed and 2 burstable).
    assert_eq!(usage(&f, nora.tenant_id(), "h100-mig").await.2, 4);
    let options = f.service.request_options(&nora).await.unwrap();
    let mig_pool = options
        .pools
        .iter()
        .find(|p| p.offer.pool == "h100-mig")
        .unwrap();
    assert_eq!(
        (mig_pool.borrowed.slices, mig_pool.borrowable.slices),
        (2, 6)
    );
    assert_eq!(mig_pool.preemption_grace_minutes, 5);

    // The GPU is full. vision asks within its quota: it waits, and the
    // best-effort slice (least loss) is told to give way, with 5 min notice.
    let first = request(&bob, QosClass::Guaranteed).await.unwrap();
    assert_eq!(first.state, AllocationPhase::Queued);
    let t = f.service.tick().await.unwrap();
    assert_eq!((t.preempt_notices, t.preempted), (1, 0));
    let notice = get(&f, &nora, spare.id).await.preemption.unwrap();
    assert_eq!(notice.for_request, first.id);
    assert_eq!(notice.deadline, f.service.now() + Duration::minutes(5));
    assert!(notice.reason.contains("best effort"), "{}", notice.reason);
    assert!(notice.preempted_at.is_none());
    // The waiting request says so, and when it should start.
    let waits = get(&f, &bob, first.id).await;
    assert!(
        waits.waiting_for.as_deref().is_some_and(
            |w| w.contains("1 slice(s) of a lower QoS class or priority are being preempted")
        ),
        "{:?}",
        waits.waiting_for
    );
    assert_eq!(waits.estimated_start, Some(notice.deadline));
    let told = notification::Entity::find()
        .filter(notification::Column::Kind.eq(NotificationKind::AllocationPreempting))
        .all(f.service.db())
        .await
        .unwrap();
    assert_eq!(told.len(), 1);
    assert!(
        told[0].title.contains(&format!("#{}", spare.id)),
        "{}",
        told[0].title
    );
    // Another pass before the deadline tells no one else: the room is promised.
    assert_eq!(f.service.tick().await.unwrap().preempt_notices, 0);
    // At the deadline it is preempted; once torn down, vision's slice starts.
    f.clock.advance(Duration::minutes(5));
    assert_eq!(f.service.tick().await.unwrap().preempted, 1);
    agent.converge(&f).await;
    assert_eq!(f.service.tick().await.unwrap().placed, 1);
    let ended = get(&f, &nora, spare.id).await;
    assert_eq!(ended.state, AllocationPhase::Released);
    assert!(ended.preemption.unwrap().preempted_at.is_some());
    assert_eq!(get(&f, &bob, first.id).await.state, AllocationPhase::Placed);
    assert_eq!(
        audited(&f, spare.id)
            .await
            .iter()
            .filter(|a| a.starts_with("allocation.preempt"))
            .collect::<Vec<_>>(),
        ["allocation.preempt_notice", "allocation.preempt"]
    );
    agent.converge(&f).await;

    // A notice whose request stops waiting is lifted.
    let cancelled = request(&bob, QosClass::Guaranteed).await.unwrap();
    assert_eq!(f.service.tick().await.unwrap().preempt_notices, 1);
    let victim = if get(&f, &nora, borrowed[0].id).await.preemption.is_some() {
        &borrowed[0]
    } else {
        &borrowed[1]
    };
    // The youngest burstable slice goes first.
    assert_eq!(victim.id, borrowed[1].id);
    f.service
        .release_allocation(&bob, cancelled.id)
        .await
        .unwrap();
    f.service.tick().await.unwrap();
    assert!(get(&f, &nora, victim.id).await.preemption.is_none());
    assert!(audited(&f, victim.id)
        .await
        .contains(&"allocation.preempt_lift".to_owned()));

    // vision wants its quota back twice: both borrowed slices are told. At
    // the deadline nora releases one herself while the timer preempts: each
    // ends once.
    let wants = [
        request(&bob, QosClass::Guaranteed).await.unwrap(),
        request(&bob, QosClass::Guaranteed).await.unwrap(),
    ];
    assert_eq!(f.service.tick().await.unwrap().preempt_notices, 2);
    f.clock.advance(Duration::minutes(5));
    let (released, ticked) = tokio::join!(
        f.service.release_allocation(&nora, borrowed[0].id),
        f.service.tick()
    );
    let ticked = ticked.unwrap();
    match released {
        // The owner was first: the timer preempts only the other one.
        Ok(_) => assert_eq!(ticked.preempted, 1),
        // The timer was first: releasing a slice already going is refused.
        Err(ServiceError::Conflict(_)) => assert_eq!(ticked.preempted, 2),
        Err(e) => panic!("{e:?}"),
    }
    for b in &borrowed {
        let endings: Vec<String> = audited(&f, b.id)
            .await
            .into_iter()
            .filter(|a| a == "allocation.release" || a == "allocation.preempt")
            .collect();
        assert_eq!(endings.len(), 1, "slice {} ended as {endings:?}", b.id);
    }
    agent.converge(&f).await;
    assert_eq!(f.service.tick().await.unwrap().placed, 2);
    for w in &wants {
        assert_eq!(get(&f, &bob, w.id).await.state, AllocationPhase::Placed);
    }
    agent.converge(&f).await;

    // Only guaranteed slices are left (nlp 4, vision 3): a fourth vision
    // request waits, and nothing is preempted for it, whatever its priority.
    let urgent = NewAllocation {
        priority_class: Some("urgent".into()),
        ..small(QosClass::Guaranteed)
    };
    let waits = f.service.request_allocation(&bob, &urgent).await.unwrap();
    assert_eq!(waits.state, AllocationPhase::Queued);
    let t = f.service.tick().await.unwrap();
    assert_eq!((t.preempt_notices, t.placed), (0, 0));
    for v in &nlp_own {
        assert!(get(&f, &nora, v.id).await.preemption.is_none());
    }
    check_invariants(&f).await;
}

/// Waits until `s` hears the other replicas' notices (its listener is
/// subscribed; at once on SQLite).
async fn subscribed(s: &tessera_service::Service) {
    for _ in 0..100 {
        if s.peers_heard() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the listener did not subscribe within 5 s");
}

/// Three replicas on one PostgreSQL: one leads the timer at a time and the
/// lead passes on when it resigns; a placement on one replica wakes an
/// agent's long poll held by another (whose own re-check is set far beyond
/// the wait, so only the notice can wake it); a revocation on one replica
/// makes the others forget the token at once (the test clock stands still,
/// so their one-second belief would otherwise last for ever); racing
/// requests spread over the replicas never exceed the quota.
#[tokio::test]
async fn replicas_take_turns_leading_and_wake_each_other() {
    let f = fixture().await;
    let replica = || {
        tessera_service::Service::new(
            f.service.db().clone(),
            f.service.settings().clone(),
            f.clock.clone(),
        )
        .with_desired_recheck(std::time::Duration::from_secs(3600))
    };
    let (b, c) = (replica(), replica());
    use sea_orm::ConnectionTrait;
    let postgres = f.service.db().get_database_backend() == sea_orm::DbBackend::Postgres;
    if !postgres {
        // One process on SQLite: every instance leads (there are no peers).
        assert!(f.service.lead().await && b.lead().await);
        return;
    }
    // Exactly one leads; the lead passes on when the leader resigns.
    assert!(f.service.lead().await);
    assert!(!b.lead().await && !c.lead().await);
    assert!(f.service.lead().await, "the leader keeps the lead");
    f.service.resign().await;
    assert!(!f.service.leads());
    let next = [b.lead().await, c.lead().await];
    assert_eq!(
        next,
        [true, false],
        "the first to try after the resignation leads"
    );
    assert!(!f.service.lead().await);
    let metric = |s: &tessera_service::Service| {
        prometheus::TextEncoder::new()
            .encode_to_string(&s.metrics().registry().gather())
            .unwrap()
            .lines()
            .any(|l| l == "tessera_scheduler_leader 1")
    };
    assert!(metric(&b) && !metric(&c) && !metric(&f.service));

    // b and c listen to the others, as the server does.
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    for s in [&b, &c] {
        let (s, stop) = (s.clone(), stop.clone());
        tokio::spawn(async move { s.listen_to_peers(stop).await });
    }
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-0c05")]).await;
    let seen = agent.converge(&f).await.generation;
    // Let the listeners subscribe before anything is announced.
    for s in [&b, &c] {
        subscribed(s).await;
    }
    let poll = {
        let (b, host) = (b.clone(), agent.host.clone());
        tokio::spawn(async move {
            b.wait_desired(&host, Some(seen), std::time::Duration::from_secs(20))
                .await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let bob = actor(&f, "bob", &["vision"], "vision").await;
    let placed = f
        .service
        .request_allocation(&bob, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    let woke = tokio::time::timeout(std::time::Duration::from_secs(10), poll)
        .await
        .expect("the long poll on another replica woke before its 20 s wait ended")
        .unwrap()
        .unwrap();
    assert!(woke.generation > seen, "{woke:?}");
    assert_eq!(placed.state, AllocationPhase::Placed);
    assert_eq!(
        woke.gpus
            .iter()
            .map(|g| g.desired.instances.len())
            .sum::<usize>(),
        1,
        "{woke:?}"
    );

    // A list kept on another replica is read again after a write to its
    // tenant here: the test clock stands still, so only the notice can.
    let kept = b.list_allocations(&bob).await.unwrap();
    f.behind_the_back(format!(
        "UPDATE allocations SET purpose = 'probe' WHERE id = {}",
        placed.id
    ))
    .await;
    assert_eq!(b.list_allocations(&bob).await.unwrap(), kept);

    // A revocation on one replica: the others forget their belief at once.
    let lead = f.login("l", &["vision-leads"]).await;
    let lead_actor = f
        .service
        .tenant_actor(&lead, &slug("vision"))
        .await
        .unwrap();
    let token = f
        .service
        .create_api_token(&lead, &lead_actor, "ci", None, TokenScope::Request)
        .await
        .unwrap();
    let mut reread = false;
    for _ in 0..50 {
        if b.list_allocations(&bob).await.unwrap()[0].purpose == "probe" {
            reread = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(reread, "the kept list was forgotten on the other replica");
    for s in [&b, &c] {
        assert!(s.authenticate_api_token(&token.secret).await.is_ok());
    }
    f.service
        .revoke_api_token(&lead, &lead_actor, token.token.id)
        .await
        .unwrap();
    for s in [&b, &c] {
        let mut refused = false;
        for _ in 0..50 {
            if s.authenticate_api_token(&token.secret).await.is_err() {
                refused = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(refused, "a revoked token is refused on every replica");
    }

    // A re-enrolment or a decommission on one replica: the others stop
    // believing the host's old credential at once.
    let refused_on_peers = |credential: String| {
        let (b, c) = (b.clone(), c.clone());
        async move {
            for s in [&b, &c] {
                let mut refused = false;
                for _ in 0..50 {
                    match s.authenticate_host(&credential).await {
                        Err(ServiceError::InvalidCredential) => {
                            refused = true;
                            break;
                        }
                        Err(e) => panic!("{e:?}"),
                        Ok(_) => {}
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
                assert!(
                    refused,
                    "a replaced host credential is refused on every replica"
                );
            }
        }
    };
    let old = f
        .enrol_credential(common::join_token("gpu-9", 60), "gpu-9")
        .await;
    for s in [&b, &c] {
        assert!(s.authenticate_host(&old).await.is_ok());
    }
    let new = f
        .enrol_credential(common::reenrol_token("gpu-9"), "gpu-9")
        .await;
    refused_on_peers(old).await;
    let mut gpu9 = None;
    for s in [&b, &c] {
        gpu9 = Some(s.authenticate_host(&new).await.unwrap().id());
    }
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    for action in [OpsAction::Maintenance, OpsAction::Decommission] {
        let r = tessera_protocol::views::OpsRequest {
            action,
            reason: "end of life".into(),
        };
        f.service
            .operate_host(&proof, gpu9.unwrap(), &r)
            .await
            .unwrap();
    }
    refused_on_peers(new).await;

    // Requests raced over the three replicas: vision's quota (8 slices,
    // one held) is never exceeded, and every winner is distinct.
    let services = [f.service.clone(), b.clone(), c.clone()];
    let vision = members(&f, 6).await;
    let tasks: Vec<_> = (0..24)
        .map(|i| {
            let s = services[i % 3].clone();
            let a = vision[i % vision.len()].clone();
            tokio::spawn(async move {
                s.request_allocation(&a, &ask("h100-mig", mig("1g.10gb"), 4))
                    .await
            })
        })
        .collect();
    let results: Vec<_> = futures::future::join_all(tasks)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    assert!(results.iter().any(|r| r.is_ok()));
    check_invariants(&f).await;
    stop_tx.send_replace(true);
}

/// A host credential that verified is believed for a minute while the
/// other replicas' notices are heard (always on SQLite), for a second when
/// they are not (PostgreSQL without a listener), and forgotten whenever the
/// listener subscribes again (it may have missed a notice). The probe: the
/// stored credential changed behind the service's back, as by a replica
/// whose notice was lost.
#[tokio::test]
async fn host_credentials_are_believed_longer_while_peers_are_heard() {
    use sea_orm::ConnectionTrait;
    let f = fixture().await;
    let postgres = f.service.db().get_database_backend() == sea_orm::DbBackend::Postgres;
    let credential = f
        .enrol_credential(common::join_token("gpu-1", 60), "gpu-1")
        .await;
    let set_hash = |hash: String| {
        f.behind_the_back(format!(
            "UPDATE hosts SET credential_hash = '{hash}' WHERE hostname = 'gpu-1'"
        ))
    };
    let tamper = || set_hash("elsewhere".into());
    let real_hash = {
        use tessera_service::entity::host;
        host::Entity::find()
            .one(f.service.db())
            .await
            .unwrap()
            .unwrap()
            .credential_hash
    };
    let accepted = || async { f.service.authenticate_host(&credential).await.is_ok() };

    // Not hearing the others (PostgreSQL, no listener): a second.
    if postgres {
        assert!(accepted().await);
        tamper().await;
        f.clock.advance(Duration::milliseconds(900));
        assert!(accepted().await, "believed within the second");
        f.clock.advance(Duration::milliseconds(200));
        assert!(!accepted().await, "asked again after a second");
        set_hash(real_hash.clone()).await;
    }

    // Hearing them: a minute.
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let listener = {
        let (s, stop) = (f.service.clone(), stop.clone());
        tokio::spawn(async move { s.listen_to_peers(stop).await })
    };
    // The subscription forgets what was believed before it; wait for it.
    subscribed(&f.service).await;
    assert!(accepted().await);
    tamper().await;
    f.clock.advance(Duration::seconds(59));
    assert!(accepted().await, "believed for the minute");
    f.clock.advance(Duration::seconds(1));
    assert!(!accepted().await, "asked again after a minute");
    if postgres {
        set_hash(real_hash.clone()).await;
        assert!(accepted().await);
        tamper().await;
        // A new subscription forgets every belief at once, the clock
        // standing still.
        stop_tx.send_replace(true);
        listener.await.unwrap();
        let (again_tx, again) = tokio::sync::watch::channel(false);
        let s = f.service.clone();
        tokio::spawn(async move { s.listen_to_peers(again).await });
        let mut refused = false;
        for _ in 0..50 {
            if !accepted().await {
                refused = true;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(refused, "a new subscription forgets believed credentials");
        again_tx.send_replace(true);
    }
    stop_tx.send_replace(true);
}

/// A report that repeats the last one only records that the host was seen;
/// one that differs, the first after a change of the host's desired state,
/// the first after the host was offline, and one a minute after the last
/// full processing are processed in full. The probe: a GPU row changed
/// behind the service's back is put right by a full processing only.
#[tokio::test]
async fn repeated_reports_only_record_that_the_host_was_seen() {
    use sea_orm::{ActiveModelTrait, Set};
    use tessera_protocol::agent::GpuReport;
    use tessera_service::entity::{gpu, host};
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-0c05")]).await;
    let d = agent.converge(&f).await;
    let same = agent.applied(&d);
    let tamper = || async {
        let g = gpu::Entity::find()
            .one(f.service.db())
            .await
            .unwrap()
            .unwrap();
        let mut a: gpu::ActiveModel = g.into();
        a.apply_error = Set(Some("changed behind the service's back".into()));
        a.update(f.service.db()).await.unwrap();
    };
    let tampered = || async {
        gpu::Entity::find()
            .one(f.service.db())
            .await
            .unwrap()
            .unwrap()
            .apply_error
            .is_some()
    };
    let seen = || async {
        host::Entity::find_by_id(agent.host.id())
            .one(f.service.db())
            .await
            .unwrap()
            .unwrap()
            .last_seen_at
    };
    let send = |gpus: Vec<GpuReport>, applied| {
        let (f, agent) = (&f, &agent);
        async move { agent.send(f, gpus, applied, vec![]).await }
    };

    // What /metrics counts of the reports, on a replica.
    let counted = |service: &tessera_service::Service, outcome: &str| {
        service
            .metrics()
            .registry()
            .gather()
            .iter()
            .filter(|m| m.name() == "tessera_agent_reports_total")
            .flat_map(|m| m.get_metric())
            .filter(|m| m.get_label().iter().any(|l| l.value() == outcome))
            .map(|m| m.get_counter().get_value() as u64)
            .sum::<u64>()
    };

    // Repeated: only the time it was seen moves, and that is written with
    // every other host's in the next round, not at each report (and at most
    // every 10 s, a third of the 30 s offline grace).
    tamper().await;
    let before = seen().await;
    let repeats = counted(&f.service, "repeated");
    f.clock.advance(Duration::seconds(10));
    let r = report(agent.host.hostname(), same.clone(), Some(d.generation));
    let digest = f
        .service
        .record_report(&agent.host, &r)
        .await
        .unwrap()
        .digest
        .unwrap();
    assert!(tampered().await, "a repeated report is not processed again");
    assert_eq!(seen().await, before, "nothing is written per report");
    assert_eq!(counted(&f.service, "repeated"), repeats + 1);
    assert_eq!(f.service.flush_heartbeats().await.unwrap(), 1);
    assert_eq!(seen().await, Some(f.clock.now()));
    assert_eq!(f.service.flush_heartbeats().await.unwrap(), 0);
    // A repeat within a third of the offline grace of the last sighting
    // written is not written again.
    let written = seen().await;
    f.clock.advance(Duration::seconds(5));
    f.service.record_report(&agent.host, &r).await.unwrap();
    assert_eq!(counted(&f.service, "repeated"), repeats + 2);
    assert_eq!(f.service.flush_heartbeats().await.unwrap(), 0);
    assert_eq!(seen().await, written);

    // Another replica has not processed it: it goes by the stored digest,
    // and writes at once.
    let replica = tessera_service::Service::new(
        f.service.db().clone(),
        f.service.settings().clone(),
        f.clock.clone(),
    );
    f.clock.advance(Duration::seconds(10));
    replica.record_report(&agent.host, &r).await.unwrap();
    assert!(tampered().await);
    assert_eq!(seen().await, Some(f.clock.now()));
    assert_eq!(counted(&replica, "repeated_stored"), 1);
    assert_eq!(counted(&replica, "processed"), 0);
    // From then on that replica remembers it: its next repeat writes nothing.
    f.clock.advance(Duration::seconds(10));
    let written = seen().await;
    replica.record_report(&agent.host, &r).await.unwrap();
    assert_eq!(counted(&replica, "repeated"), 1);
    assert_eq!(seen().await, written);
    assert_eq!(replica.flush_heartbeats().await.unwrap(), 1);
    assert_eq!(seen().await, Some(f.clock.now()));
    f.clock.advance(Duration::seconds(10));
    send(same.clone(), Some(d.generation)).await;
    assert!(tampered().await);
    assert_eq!(seen().await, Some(f.clock.now()));

    // Named on a poll instead of sent: noted in memory where it was
    // processed; elsewhere, or under another name, the report is wanted.
    f.clock.advance(Duration::seconds(10));
    assert!(f.service.note_polled_report(&agent.host, &digest));
    assert!(!f.service.note_polled_report(&agent.host, &"0".repeat(64)));
    let third = tessera_service::Service::new(
        f.service.db().clone(),
        f.service.settings().clone(),
        f.clock.clone(),
    );
    assert!(!third.note_polled_report(&agent.host, &digest));
    assert_eq!(counted(&f.service, "polled"), 1);
    assert_eq!(counted(&third, "polled"), 0);
    assert!(tampered().await);
    assert_eq!(f.service.flush_heartbeats().await.unwrap(), 1);
    assert_eq!(seen().await, Some(f.clock.now()));

    // A different report is processed in full.
    let mut other = same.clone();
    other[0].health.ecc_corrected = 1;
    send(other.clone(), Some(d.generation)).await;
    assert!(!tampered().await, "a new report is processed");

    // After a change of the desired state, the same report again is
    // processed in full (the placement cleared the digest).
    tamper().await;
    let other_digest = f
        .service
        .record_report(
            &agent.host,
            &report(agent.host.hostname(), other.clone(), Some(d.generation)),
        )
        .await
        .unwrap()
        .digest
        .unwrap();
    assert!(tampered().await);
    assert!(f.service.note_polled_report(&agent.host, &other_digest));
    let bob = actor(&f, "bob", &["vision"], "vision").await;
    f.service
        .request_allocation(&bob, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    assert!(
        !f.service.note_polled_report(&agent.host, &other_digest),
        "after a placement, the report is wanted"
    );
    send(other.clone(), Some(d.generation)).await;
    assert!(
        !tampered().await,
        "the first report after a placement is processed"
    );

    // A minute after the last full processing, in full again.
    tamper().await;
    for _ in 0..11 {
        f.clock.advance(Duration::seconds(5));
        send(other.clone(), Some(d.generation)).await;
    }
    assert!(tampered().await);
    f.clock.advance(Duration::seconds(5));
    send(other.clone(), Some(d.generation)).await;
    assert!(
        !tampered().await,
        "a repeated report is processed once a minute"
    );

    // Back after being offline (30 s here): in full.
    tamper().await;
    f.clock.advance(Duration::seconds(31));
    send(other.clone(), Some(d.generation)).await;
    assert!(!tampered().await, "a host coming back is processed in full");
}

/// A tenant's list is kept between the writes that touch it: a change
/// behind the service's back shows only after a second (the probe), while
/// every write through the service shows at once; another tenant's write
/// leaves it kept, and a list with a queued slice is never kept.
#[tokio::test]
async fn kept_lists_follow_every_write() {
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-11a0"), h100(1, "GPU-11a1")]).await;
    let bob = actor(&f, "bob", &["vision"], "vision").await;
    let nora = actor(&f, "nora", &["nlp"], "nlp").await;
    let behind_the_back = |id: AllocationId, purpose: &'static str| {
        f.behind_the_back(format!(
            "UPDATE allocations SET purpose = '{purpose}' WHERE id = {id}"
        ))
    };
    let purposes = |views: Vec<AllocationView>| -> Vec<(AllocationId, String)> {
        views.into_iter().map(|v| (v.id, v.purpose)).collect()
    };
    let a = f
        .service
        .request_allocation(&bob, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    let first = f.service.list_allocations(&bob).await.unwrap();
    assert_eq!(purposes(first.clone()), [(a.id, "integration test".into())]);

    // Kept: a change that no write announced is not seen...
    behind_the_back(a.id, "probe").await;
    let kept = f.service.list_allocations(&bob).await.unwrap();
    assert_eq!(kept, first, "the kept list");
    // ... nor after another tenant's write ...
    f.service
        .request_allocation(&nora, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    assert_eq!(f.service.list_allocations(&bob).await.unwrap(), kept);
    // ... until a second has passed (its `as_of` is always the time asked).
    f.clock.advance(Duration::milliseconds(999));
    let later = f.service.list_allocations(&bob).await.unwrap();
    assert_eq!(later[0].purpose, "integration test");
    assert_eq!(later[0].as_of, f.clock.now());
    f.clock.advance(Duration::milliseconds(1));
    let fresh = f.service.list_allocations(&bob).await.unwrap();
    assert_eq!(purposes(fresh), [(a.id, "probe".into())]);

    // Every write of the tenant shows at once, without the clock moving.
    behind_the_back(a.id, "second probe").await;
    let b = f
        .service
        .request_allocation(&bob, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    let both = f.service.list_allocations(&bob).await.unwrap();
    assert_eq!(
        purposes(both),
        [
            (b.id, "integration test".into()),
            (a.id, "second probe".into())
        ]
    );
    f.service.release_allocation(&bob, a.id).await.unwrap();
    let after = f.service.list_allocations(&bob).await.unwrap();
    assert_ne!(
        after.iter().find(|v| v.id == a.id).unwrap().state,
        AllocationPhase::Placed,
        "{after:?}"
    );
    // The agent's reports are writes too.
    agent.converge(&f).await;
    let active = f.service.list_allocations(&bob).await.unwrap();
    assert_eq!(
        active.iter().find(|v| v.id == b.id).unwrap().state,
        AllocationPhase::Active
    );

    // With a queued slice (the host went silent), nothing is kept.
    f.clock.advance(Duration::seconds(31));
    let q = f
        .service
        .request_allocation(&bob, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    assert_eq!(q.state, AllocationPhase::Queued);
    let with_queue = f.service.list_allocations(&bob).await.unwrap();
    assert_eq!(with_queue[0].queue_position, Some(1));
    behind_the_back(q.id, "third probe").await;
    let listed = f.service.list_allocations(&bob).await.unwrap();
    assert_eq!(listed[0].purpose, "third probe");
}

/// The re-check under the notices: generations changed behind the
/// service's back (no notice) reach every waiting long poll, through the
/// one read of all waiting hosts' generations.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waiting_long_polls_see_unannounced_changes_at_their_recheck() {
    let f = fixture().await;
    let service = tessera_service::Service::new(
        f.service.db().clone(),
        f.service.settings().clone(),
        f.clock.clone(),
    )
    .with_desired_recheck(std::time::Duration::from_millis(200));
    let mut agents = Vec::new();
    for (i, uuid) in ["GPU-12a0", "GPU-12b0", "GPU-12c0"].into_iter().enumerate() {
        let mut agent = Agent::enrol(&f, &format!("gpu-{i}"), vec![h100(0, uuid)]).await;
        let seen = agent.converge(&f).await.generation;
        agents.push((agent, seen));
    }
    let polls: Vec<_> = agents
        .iter()
        .map(|(agent, seen)| {
            let (service, host, seen) = (service.clone(), agent.host.clone(), *seen);
            tokio::spawn(async move {
                service
                    .wait_desired(&host, Some(seen), std::time::Duration::from_secs(20))
                    .await
            })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    f.behind_the_back("UPDATE hosts SET desired_generation = desired_generation + 5")
        .await;
    for (poll, (_, seen)) in polls.into_iter().zip(&agents) {
        let d = tokio::time::timeout(std::time::Duration::from_secs(5), poll)
            .await
            .expect("the re-check saw the change well before the 20 s wait ended")
            .unwrap()
            .unwrap();
        assert_eq!(d.generation, seen + 5);
    }
}

/// Admissions plan on each pool's fleet index, kept in memory between
/// them. It agrees with a fresh read of the pool after every write
/// (placements, the agents' reports of the instances they made, another
/// replica's release), and a host that went silent with nothing written is
/// caught when a placement chooses it: the request waits rather than going
/// there, and starts there once the host is back.
#[tokio::test]
async fn admissions_plan_on_a_kept_index_that_stays_true() {
    let f = fixture().await;
    let mut agents = BTreeMap::new();
    for (host, uuid) in [("gpu-1", "GPU-1d0"), ("gpu-2", "GPU-2d0")] {
        let mut a = Agent::enrol(&f, host, vec![h100(0, uuid)]).await;
        a.converge(&f).await;
        agents.insert(host.to_owned(), a);
    }
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let stats = || f.service.fleet_index_stats();
    let agrees = || async { f.service.fleet_index_agrees("h100-mig").await.unwrap() };
    let request = |shape: &'static str| {
        let (f, alice) = (&f, &alice);
        async move {
            f.service
                .request_allocation(alice, &ask("h100-mig", mig(shape), 4))
                .await
                .unwrap()
        }
    };

    // The first admission reads the pool; the next ones plan on the index.
    let start = stats();
    let small = request("1g.10gb").await;
    assert_eq!(small.state, AllocationPhase::Placed);
    assert_eq!(stats().rebuilt, start.rebuilt + 1);
    assert_eq!(agrees().await, Some(true));
    for a in agents.values_mut() {
        a.converge(&f).await;
    }
    assert_eq!(
        agrees().await,
        Some(true),
        "the agent's report of the instance it made keeps the index"
    );
    let second = request("1g.10gb").await;
    assert_eq!(second.state, AllocationPhase::Placed);
    assert_eq!(second.host, small.host, "pack fills the GPU in use first");
    assert_eq!(
        (stats().rebuilt, stats().reused),
        (start.rebuilt + 1, start.reused + 1)
    );
    assert_eq!(agrees().await, Some(true));

    // Another replica's release: the index is no longer current, and the
    // next admission reads the pool again.
    let replica = tessera_service::Service::new(
        f.service.db().clone(),
        f.service.settings().clone(),
        f.clock.clone(),
    );
    replica.release_allocation(&alice, second.id).await.unwrap();
    assert_eq!(agrees().await, None);
    f.service
        .release_allocation(&alice, small.id)
        .await
        .unwrap();
    for a in agents.values_mut() {
        a.converge(&f).await;
    }
    let whole = request("7g.80gb").await;
    assert_eq!(whole.state, AllocationPhase::Placed);
    assert_eq!(agrees().await, Some(true));
    let busy = whole.host.clone().unwrap();
    let silent = if busy == "gpu-1" { "gpu-2" } else { "gpu-1" };
    for a in agents.values_mut() {
        a.converge(&f).await;
    }
    assert_eq!(
        get(&f, &alice, whole.id).await.state,
        AllocationPhase::Active
    );

    // The other host goes silent; the busy one repeats its report, which
    // writes only when it was seen. The index still has the silent host.
    for _ in 0..2 {
        f.clock.advance(Duration::seconds(18));
        agents.get_mut(&busy).unwrap().converge(&f).await;
    }
    assert_eq!(
        agrees().await,
        Some(false),
        "time alone took a host offline"
    );
    let before = stats();
    let waiting = request("7g.80gb").await;
    assert_eq!(
        waiting.state,
        AllocationPhase::Queued,
        "a silent host takes nothing"
    );
    assert_eq!(stats().stale, before.stale + 1);
    assert_eq!(agrees().await, Some(true));

    // Back: its report changes what the placer sees, and the queue moves.
    agents.get_mut(silent).unwrap().converge(&f).await;
    assert_eq!(agrees().await, None);
    assert_eq!(f.service.tick().await.unwrap().placed, 1);
    let placed = get(&f, &alice, waiting.id).await;
    assert_eq!(placed.state, AllocationPhase::Placed);
    assert_eq!(placed.host.as_deref(), Some(silent));
    assert_eq!(agrees().await, Some(true));
    check_invariants(&f).await;
}

/// A kept index trusts a host only while its desired generation is the one
/// the index knows: a change to what the host holds that came without a
/// new capacity epoch (a write that forgot the epoch, a hand edit) makes
/// the next admission plan again on the pool as stored, not on the index.
#[tokio::test]
async fn a_host_whose_generation_moved_behind_the_index_is_planned_again() {
    use sea_orm::ConnectionTrait;
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-7a0")]).await;
    agent.converge(&f).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let stats = || f.service.fleet_index_stats();
    let request = || async {
        f.service
            .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 4))
            .await
            .unwrap()
    };
    let first = request().await;
    assert_eq!(first.state, AllocationPhase::Placed);
    agent.converge(&f).await;
    let before = stats();
    assert_eq!(request().await.state, AllocationPhase::Placed);
    assert_eq!(
        (stats().reused, stats().stale),
        (before.reused + 1, before.stale),
        "the index's own placements keep it current"
    );
    agent.converge(&f).await;

    f.service
        .db()
        .execute_unprepared(
            "UPDATE hosts SET desired_generation = desired_generation + 1 WHERE hostname = 'gpu-1'",
        )
        .await
        .unwrap();
    let before = stats();
    let third = request().await;
    assert_eq!(third.state, AllocationPhase::Placed);
    assert_eq!(
        (stats().stale, stats().rebuilt),
        (before.stale + 1, before.rebuilt + 1),
        "the moved generation sends the admission back to the store"
    );
    assert_eq!(
        f.service.fleet_index_agrees("h100-mig").await.unwrap(),
        Some(true)
    );
    check_invariants(&f).await;
}
