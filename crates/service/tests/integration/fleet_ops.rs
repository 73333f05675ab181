//! Fleet operations against a real database (SQLite, or PostgreSQL when
//! `TESSERA_TEST_POSTGRES_URL` is set): cordon, drain, maintenance and
//! decommissioning; GPU health from the agents' reports; slices that lose
//! their GPU or host, and asking for them again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use chrono::Duration;
use common::agent::*;
use common::{fixture, fixture_with_grace, fixture_with_pools, host_named, Fixture};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use tessera_core::availability::{OpsAction, OpsMode};
use tessera_core::health::{HealthSignals, HealthVerdict, XidEvent};
use tessera_core::ids::HostId;
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::notify::NotificationKind;
use tessera_protocol::views::{AllocationView, OpsRequest, OpsView};
use tessera_service::entity::notification;
use tessera_service::pools::ReleasePolicy;
use tessera_service::ServiceError;

fn req(action: OpsAction, reason: &str) -> OpsRequest {
    OpsRequest {
        action,
        reason: reason.into(),
    }
}

async fn operate(
    f: &Fixture,
    host_id: HostId,
    gpu: Option<u32>,
    r: OpsRequest,
) -> Result<Option<OpsView>, ServiceError> {
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    match gpu {
        None => f.service.operate_host(&proof, host_id, &r).await,
        Some(i) => f.service.operate_gpu(&proof, host_id, i, &r).await,
    }
}

async fn slice(f: &Fixture, who: &tessera_service::TenantActor) -> AllocationView {
    f.service
        .request_allocation(who, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap()
}

async fn notices(f: &Fixture, kind: NotificationKind) -> Vec<notification::Model> {
    notification::Entity::find()
        .filter(notification::Column::Kind.eq(kind))
        .all(f.service.db())
        .await
        .unwrap()
}

async fn fleet(f: &Fixture) -> tessera_protocol::views::FleetView {
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    f.service
        .fleet_view(&proof, &Default::default())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_cordoned_host_takes_no_new_slices_until_it_is_resumed() {
    let f = fixture().await;
    let mut a1 = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
    let a2 = Agent::enrol(&f, "gpu-2", vec![h100(0, "GPU-b1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;

    let v = operate(
        &f,
        a1.host.id(),
        None,
        req(OpsAction::Cordon, "new firmware"),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(v.mode, OpsMode::Cordoned);
    assert_eq!(v.by.as_deref(), Some("User root"));
    let first = slice(&f, &alice).await;
    assert_eq!(
        first.host.as_deref(),
        Some("gpu-2"),
        "not on the cordoned host"
    );
    // A single GPU can be cordoned too: now nothing takes new slices.
    operate(
        &f,
        a2.host.id(),
        Some(0),
        req(OpsAction::Cordon, "fan noise"),
    )
    .await
    .unwrap();
    let waiting = slice(&f, &alice).await;
    assert_eq!(waiting.state, AllocationPhase::Queued);
    let view = fleet(&f).await;
    let pool = view.pools.iter().find(|p| p.name == "h100-mig").unwrap();
    assert_eq!((pool.gpus_online, pool.gpus_schedulable), (2, 0));
    let h1 = view.hosts.iter().find(|h| h.hostname == "gpu-1").unwrap();
    assert_eq!(h1.ops.mode, OpsMode::Cordoned);
    assert_eq!(h1.ops.reason.as_deref(), Some("new firmware"));
    let h2 = view.hosts.iter().find(|h| h.hostname == "gpu-2").unwrap();
    assert_eq!(h2.gpus[0].ops.mode, OpsMode::Cordoned);
    assert_eq!((h2.live_slices, h2.gpus[0].live_slices), (1, 1));
    // Nothing fits anywhere while everything is cordoned.
    assert!(
        pool.unplaceable.contains(&"MIG 1g.10gb".to_owned()),
        "{pool:?}"
    );
    assert_eq!(pool.free_gpu_milli, 0);

    // Back in service: the queue moves onto it.
    operate(
        &f,
        a1.host.id(),
        None,
        req(OpsAction::Resume, "firmware done"),
    )
    .await
    .unwrap();
    f.service.tick().await.unwrap();
    let placed = get(&f, &alice, waiting.id).await;
    assert_eq!(placed.state, AllocationPhase::Placed);
    assert_eq!(placed.host.as_deref(), Some("gpu-1"));
    // The MIG map of gpu-1 once its agent made the instance: to scale, with
    // where each profile could still start; the pool's unplaceable shapes.
    a1.converge(&f).await;
    let view = fleet(&f).await;
    let g1 = &view
        .hosts
        .iter()
        .find(|h| h.hostname == "gpu-1")
        .unwrap()
        .gpus[0];
    let map = g1.mig_map.clone().expect("a MIG GPU has a map");
    assert_eq!(map.memory_slices, 8);
    assert_eq!(map.instances.len(), 1);
    assert_eq!(map.free.len(), 7);
    let seven = map
        .can_start
        .iter()
        .find(|p| p.profile == "7g.80gb")
        .unwrap();
    assert!(seven.starts.is_empty(), "a 7g.80gb no longer fits on it");
    let pool = view.pools.iter().find(|p| p.name == "h100-mig").unwrap();
    assert!(
        pool.unplaceable.contains(&"MIG 7g.80gb".to_owned()),
        "{pool:?}"
    );
    assert!(
        !pool.unplaceable.contains(&"MIG 1g.10gb".to_owned()),
        "{pool:?}"
    );
    assert!(
        pool.free_gpu_milli > 0 && pool.free_gpu_milli < 1000,
        "{pool:?}"
    );
    let actions = f.audit_actions().await;
    for a in ["host.cordon", "gpu.cordon", "host.resume"] {
        assert_eq!(count(&actions, a), 1, "{a} in {actions:?}");
    }
}

#[tokio::test]
async fn a_drain_requeues_placed_slices_warns_owners_and_ends_the_rest_at_its_deadline() {
    let f = fixture().await;
    let mut a1 = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
    let a2 = Agent::enrol(&f, "gpu-2", vec![h100(0, "GPU-b1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    // One active and one placed slice on gpu-1 (pack keeps them together).
    let running = slice(&f, &alice).await;
    let host1 = running.host.clone().unwrap();
    let agent = if host1 == "gpu-1" {
        &mut a1
    } else {
        panic!("placed on {host1}")
    };
    agent.converge(&f).await;
    assert_eq!(
        get(&f, &alice, running.id).await.state,
        AllocationPhase::Active
    );
    let placed = slice(&f, &alice).await;
    assert_eq!(placed.host.as_deref(), Some("gpu-1"));

    let drain = req(
        OpsAction::Drain {
            deadline_minutes: 30,
        },
        "rack 4 power work",
    );
    let v = operate(&f, a1.host.id(), None, drain)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(v.mode, OpsMode::Draining);
    let deadline = v.drain_deadline.unwrap();
    // The placed one had nothing on the GPU: it went back to the queue and
    // is placed on the other host.
    f.service.tick().await.unwrap();
    let moved = get(&f, &alice, placed.id).await;
    assert_eq!(moved.state, AllocationPhase::Placed);
    assert_eq!(moved.host.as_deref(), Some("gpu-2"));
    // The running one is told when it ends.
    let view = get(&f, &alice, running.id).await;
    let notice = view.drain.clone().expect("drain notice on the slice");
    assert_eq!((notice.host.as_str(), notice.deadline), ("gpu-1", deadline));
    assert_eq!(notice.reason, "rack 4 power work");
    let told = notices(&f, NotificationKind::AllocationDraining).await;
    assert_eq!(told.len(), 1);
    assert!(
        told[0].title.contains("gpu-1 is being drained"),
        "{}",
        told[0].title
    );
    // Maintenance needs it empty; decommissioning too.
    let err = operate(&f, a1.host.id(), None, req(OpsAction::Maintenance, "x"))
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409);
    assert!(
        err.to_string().contains("1 slice still runs there"),
        "{err}"
    );

    // At the deadline the slice ends, with the reason.
    f.clock.advance(Duration::minutes(31));
    a2.send(&f, a2.base.clone(), None, vec![]).await;
    let tick = f.service.tick().await.unwrap();
    assert_eq!(tick.drained, 1);
    a1.converge(&f).await;
    let ended = get(&f, &alice, running.id).await;
    assert_eq!(ended.state, AllocationPhase::Failed);
    assert!(
        ended
            .reason
            .as_deref()
            .unwrap_or_default()
            .contains("drain of host gpu-1"),
        "{ended:?}"
    );
    let h1 = fleet(&f)
        .await
        .hosts
        .into_iter()
        .find(|h| h.hostname == "gpu-1")
        .unwrap();
    assert_eq!(h1.live_slices, 0, "drained");
    operate(
        &f,
        a1.host.id(),
        None,
        req(OpsAction::Maintenance, "swap PSU"),
    )
    .await
    .unwrap();
    // Decommissioned: gone from the fleet, its credential stops working.
    let gone = operate(
        &f,
        a1.host.id(),
        None,
        req(OpsAction::Decommission, "end of life"),
    )
    .await
    .unwrap();
    assert_eq!(gone, None);
    assert!(fleet(&f).await.hosts.iter().all(|h| h.hostname != "gpu-1"));
    let err = f
        .service
        .record_report(&a1.host, &report("gpu-1", a1.base.clone(), None))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::InvalidCredential), "{err:?}");
    // The ended slice keeps its history.
    assert_eq!(
        get(&f, &alice, running.id).await.state,
        AllocationPhase::Failed
    );
    let actions = f.audit_actions().await;
    for a in [
        "host.drain",
        "allocation.capacity_lost",
        "host.maintenance",
        "host.decommission",
    ] {
        assert_eq!(count(&actions, a), 1, "{a} in {actions:?}");
    }
}

#[tokio::test]
async fn an_unhealthy_gpu_loses_its_slices_and_they_can_be_asked_for_again() {
    let f = fixture().await;
    let mut a1 = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
    let _a2 = Agent::enrol(&f, "gpu-2", vec![h100(0, "GPU-b1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let vision = alice.tenant_id();
    let first = slice(&f, &alice).await;
    assert_eq!(first.host.as_deref(), Some("gpu-1"));
    let d = a1.converge(&f).await;
    assert_eq!(
        get(&f, &alice, first.id).await.state,
        AllocationPhase::Active
    );
    assert_eq!(usage(&f, vision, "h100-mig").await.2, 1);

    // The driver reports an uncorrectable ECC error on the GPU.
    let mut sick = a1.applied(&d);
    sick[0].health = HealthSignals {
        ecc_uncorrected: 1,
        ..HealthSignals::default()
    };
    a1.send(&f, sick.clone(), Some(d.generation), vec![]).await;
    let lost = get(&f, &alice, first.id).await;
    assert_eq!(
        lost.state,
        AllocationPhase::Active,
        "the work may still run"
    );
    let mark = lost.capacity_lost.clone().expect("marked");
    assert!(
        mark.reason.contains("GPU 0 on gpu-1 is unhealthy"),
        "{mark:?}"
    );
    assert!(mark.reason.contains("uncorrectable ECC"), "{mark:?}");
    assert_eq!(
        usage(&f, vision, "h100-mig").await.2,
        0,
        "no longer counted"
    );
    let gpu = &fleet(&f).await.hosts[0].gpus[0];
    assert_eq!(gpu.health.verdict, HealthVerdict::Unhealthy);
    assert_eq!(
        notices(&f, NotificationKind::AllocationCapacityLost)
            .await
            .len(),
        1
    );
    assert_eq!(
        notices(&f, NotificationKind::GpuHealthChanged).await.len(),
        1,
        "the admin"
    );
    // Nothing new is placed on it.
    let other = slice(&f, &alice).await;
    assert_eq!(other.host.as_deref(), Some("gpu-2"));

    // A reset: healthy again, the mark goes.
    a1.send(&f, a1.applied(&d), Some(d.generation), vec![])
        .await;
    assert_eq!(get(&f, &alice, first.id).await.capacity_lost, None);
    assert_eq!(
        notices(&f, NotificationKind::AllocationCapacityRestored)
            .await
            .len(),
        1
    );
    // A slice that did not lose its GPU cannot be asked for again.
    let err = f
        .service
        .requeue_allocation(&alice, first.id)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409, "{err}");

    // Falls off the bus this time (XID 79): ask for it again elsewhere.
    sick[0].health = HealthSignals {
        lost: true,
        xids: vec![XidEvent { xid: 79, count: 1 }],
        ..HealthSignals::default()
    };
    a1.send(&f, sick, Some(d.generation), vec![]).await;
    assert!(get(&f, &alice, first.id).await.capacity_lost.is_some());
    let again = f
        .service
        .requeue_allocation(&alice, first.id)
        .await
        .unwrap();
    assert_ne!(again.id, first.id);
    assert_eq!(again.shape_label, "MIG 1g.10gb");
    assert_eq!(again.host.as_deref(), Some("gpu-2"));
    let old = get(&f, &alice, first.id).await;
    assert_eq!(
        old.state,
        AllocationPhase::Releasing,
        "released in the same step"
    );
    let actions = f.audit_actions().await;
    assert_eq!(count(&actions, "gpu.health"), 3, "{actions:?}");
    assert_eq!(count(&actions, "allocation.capacity_lost"), 2);
    assert_eq!(count(&actions, "allocation.capacity_restored"), 1);
    // An ended slice can be asked for again too.
    let ended = f
        .service
        .release_allocation(&alice, other.id)
        .await
        .unwrap();
    assert_eq!(ended.state, AllocationPhase::Released);
    let third = f
        .service
        .requeue_allocation(&alice, other.id)
        .await
        .unwrap();
    assert_eq!(third.pool, "h100-mig");
}

#[tokio::test]
async fn a_host_silent_past_the_grace_period_loses_its_slices_until_it_reports() {
    let f = fixture_with_grace(Duration::seconds(120)).await;
    let mut a1 = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let running = slice(&f, &alice).await;
    let d = a1.converge(&f).await;
    let placed = slice(&f, &alice).await;
    assert_eq!(placed.state, AllocationPhase::Placed);
    // Offline (30 s) is not lost yet (120 s here).
    f.clock.advance(Duration::seconds(60));
    assert_eq!(f.service.tick().await.unwrap().lost, 0);
    f.clock.advance(Duration::seconds(61));
    let tick = f.service.tick().await.unwrap();
    assert_eq!(tick.lost, 2);
    let lost = get(&f, &alice, running.id).await;
    assert!(
        lost.capacity_lost
            .as_ref()
            .unwrap()
            .reason
            .contains("host gpu-1 has not reported since"),
        "{lost:?}"
    );
    assert_eq!(
        get(&f, &alice, placed.id).await.state,
        AllocationPhase::Queued
    );
    // Marked once, not at every tick.
    assert_eq!(f.service.tick().await.unwrap().lost, 0);
    // The host comes back: its slice has its capacity again.
    a1.send(&f, a1.applied(&d), Some(d.generation), vec![])
        .await;
    assert_eq!(get(&f, &alice, running.id).await.capacity_lost, None);
    f.service.tick().await.unwrap();
    assert_eq!(
        get(&f, &alice, placed.id).await.state,
        AllocationPhase::Placed
    );
}

#[tokio::test]
async fn bad_operations_say_what_to_fix_and_change_nothing() {
    let f = fixture().await;
    let a1 = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
    let fleet_actions = |actions: Vec<String>| {
        actions
            .into_iter()
            .filter(|a| a.starts_with("host.") || a.starts_with("gpu."))
            .count()
    };
    let before = fleet_actions(f.audit_actions().await);
    let cases = [
        (
            a1.host.id(),
            None,
            req(OpsAction::Cordon, "  "),
            400,
            "reason",
        ),
        (
            a1.host.id(),
            None,
            req(
                OpsAction::Drain {
                    deadline_minutes: 100_000,
                },
                "x",
            ),
            400,
            "deadline_minutes",
        ),
        (
            a1.host.id(),
            Some(0),
            req(OpsAction::Decommission, "x"),
            400,
            "cannot be decommissioned",
        ),
        (
            a1.host.id(),
            None,
            req(OpsAction::Decommission, "x"),
            409,
            "cordon or drain",
        ),
        (
            a1.host.id(),
            None,
            req(OpsAction::Resume, "x"),
            409,
            "already available",
        ),
        (
            a1.host.id(),
            Some(7),
            req(OpsAction::Cordon, "x"),
            404,
            "GPU 7",
        ),
        (
            HostId::new(9_999),
            None,
            req(OpsAction::Cordon, "x"),
            404,
            "host 9999",
        ),
    ];
    for (host, gpu, r, status, says) in cases {
        let err = operate(&f, host, gpu, r.clone()).await.unwrap_err();
        assert_eq!(err.status(), status, "{r:?}: {err}");
        assert!(err.to_string().contains(says), "{r:?}: {err}");
    }
    assert_eq!(
        fleet_actions(f.audit_actions().await),
        before,
        "nothing recorded"
    );
    let h = &fleet(&f).await.hosts[0];
    assert_eq!(h.ops.mode, OpsMode::Available);
}

#[tokio::test]
async fn a_released_slices_processes_are_stopped_unless_the_pool_refuses() {
    for policy in [ReleasePolicy::Stop, ReleasePolicy::Refuse] {
        let mut pools = common::pools();
        for p in &mut pools {
            p.on_release = policy;
        }
        let f = fixture_with_pools(pools).await;
        let mut a1 = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
        let alice = actor(&f, "alice", &["vision"], "vision").await;
        let v = slice(&f, &alice).await;
        a1.converge(&f).await;
        let start = get(&f, &alice, v.id).await.mig_start.unwrap();
        f.service.release_allocation(&alice, v.id).await.unwrap();
        let d = a1.fetch(&f).await;
        let released = &entry(&d, "GPU-a1").desired.released;
        match policy {
            // The agent may stop what runs in the released instance.
            ReleasePolicy::Stop => assert_eq!(released.instances, vec![start], "{d:?}"),
            // Nothing may be interrupted: the agent refuses while it is in use.
            ReleasePolicy::Refuse => assert!(released.instances.is_empty(), "{d:?}"),
        }
        assert!(!released.whole_gpu);
    }
}

/// An MPS GPU's daemon defaults are its smallest grant (a client without
/// its variables gets least); the grants travel to the agent, which raises
/// running servers to the largest; a released client's processes are named
/// by its allocation, and what the agent stopped shows on the slice and in
/// the audit trail. The pool's policy for strays travels with the grants.
#[tokio::test]
async fn an_mps_gpus_daemon_defaults_are_its_smallest_grant_and_a_release_stops_its_clients() {
    use tessera_core::plan::MpsGrant;
    use tessera_core::units::MemMiB;
    use tessera_protocol::agent::{ProcessesStopped, StopScope};
    let mut pools = common::pools();
    for p in &mut pools {
        if p.name == "l4-shared" {
            p.sharing = tessera_core::sharing::SharingMode::Mps;
            p.mps_strays = tessera_core::pool::MpsStrayPolicy::Stop;
        }
    }
    let f = fixture_with_pools(pools).await;
    let mut agent = Agent::enrol(&f, "gpu-l4", vec![l4(0, "GPU-14")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let mps = |pct: u8, mib: u64| {
        ask(
            "l4-shared",
            tessera_core::sharing::SliceShape::Mps {
                compute_percent: pct,
                memory_mib: MemMiB(mib),
            },
            2,
        )
    };
    let gpu = |d: &tessera_protocol::agent::DesiredState| entry(d, "GPU-14").desired.clone();
    let small = f
        .service
        .request_allocation(&alice, &mps(25, 6144))
        .await
        .unwrap();
    let large = f
        .service
        .request_allocation(&alice, &mps(40, 4096))
        .await
        .unwrap();
    let d = agent.converge(&f).await;
    let daemon = gpu(&d).mps.unwrap();
    assert_eq!(daemon.default_active_thread_percentage, 25);
    assert_eq!(daemon.default_pinned_mem_limit, Some(MemMiB(4096)));
    assert_eq!(
        gpu(&d).mps_strays,
        tessera_core::pool::MpsStrayPolicy::Stop,
        "the pool's policy for clients over their grant travels with the grants"
    );
    let mut grants = gpu(&d).mps_clients;
    grants.sort_by_key(|g| g.allocation);
    assert_eq!(
        grants,
        vec![
            MpsGrant {
                allocation: small.id,
                active_thread_percentage: 25,
                pinned_mem_limit: MemMiB(6144),
            },
            MpsGrant {
                allocation: large.id,
                active_thread_percentage: 40,
                pinned_mem_limit: MemMiB(4096),
            },
        ]
    );
    assert_eq!(
        MpsGrant::ceiling(&grants),
        Some((40, MemMiB(6144))),
        "what running servers get"
    );

    // Releasing one names its processes; the other keeps running.
    f.service
        .release_allocation(&alice, large.id)
        .await
        .unwrap();
    let d = agent.fetch(&f).await;
    assert_eq!(gpu(&d).released.allocations, vec![large.id]);
    assert!(!gpu(&d).released.whole_gpu, "the other client stays");
    assert_eq!(gpu(&d).mps_clients.len(), 1);
    let gpus = agent.applied(&d);
    let mut r = common::agent::report("gpu-l4", gpus, Some(d.generation));
    r.stopped = vec![
        ProcessesStopped {
            index: 0,
            scope: StopScope::Allocation {
                allocation: large.id,
            },
            terminated: 1,
            killed: 1,
        },
        // Another slice's record is not this one's.
        ProcessesStopped {
            index: 0,
            scope: StopScope::Allocation {
                allocation: small.id,
            },
            terminated: 5,
            killed: 0,
        },
    ];
    f.service.record_report(&agent.host, &r).await.unwrap();
    let ended = get(&f, &alice, large.id).await;
    assert_eq!(ended.state, AllocationPhase::Released);
    let stopped = ended.processes_stopped.expect("what was stopped");
    assert_eq!((stopped.terminated, stopped.killed), (1, 1));
    assert_eq!(
        stopped.describe(),
        "2 processes stopped (1 killed after the grace period)"
    );
    let audit = f.audit_entries().await;
    let end = audit
        .iter()
        .rev()
        .find(|e| e.action.to_string() == "allocation.end" && e.target_id == large.id.to_string())
        .expect("an end entry");
    assert_eq!(
        end.after.as_ref().and_then(|a| a.get("processes_stopped")),
        Some(&serde_json::json!({"terminated": 1, "killed": 1})),
        "{end:?}"
    );
    assert_eq!(get(&f, &alice, small.id).await.processes_stopped, None);

    let d = agent.converge(&f).await;
    assert_eq!(gpu(&d).mps.unwrap().default_active_thread_percentage, 25);
    f.service
        .release_allocation(&alice, small.id)
        .await
        .unwrap();
    agent.converge(&f).await;
    // Nothing said is nothing running.
    assert_eq!(
        get(&f, &alice, small.id)
            .await
            .processes_stopped
            .map(|p| p.total()),
        Some(0)
    );
    let d = agent.converge(&f).await;
    let daemon = gpu(&d).mps.unwrap();
    assert_eq!(
        daemon.default_active_thread_percentage, 100,
        "no clients: open"
    );
    assert_eq!(daemon.default_pinned_mem_limit, None);
}

/// The fleet page at size: one page of 50 hosts by name, a search on the
/// name, a pool filter and a status filter (online, offline, needs
/// attention), the whole fleet's numbers whatever the filters, and a 400
/// that names the field for a bad filter.
#[tokio::test]
async fn the_fleet_pages_filters_and_searches_its_hosts() {
    use tessera_protocol::views::{FleetFilter, HostFilter};
    let f = fixture().await;
    let mut nodes = Vec::new();
    for i in 0..52 {
        let name = format!("node-{i:02}");
        nodes.push(Agent::enrol(&f, &name, vec![h100(0, &format!("GPU-a{i:02}"))]).await);
    }
    let edge_gpus = || vec![l4(0, "GPU-e1"), l4(1, "GPU-e2")];
    let edge = Agent::enrol(&f, "edge-1", edge_gpus()).await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let view = |filter: FleetFilter| {
        let (f, proof) = (&f, &proof);
        async move { f.service.fleet_view(proof, &filter).await }
    };
    let names = |v: &tessera_protocol::views::FleetView| -> Vec<String> {
        v.hosts.iter().map(|h| h.hostname.to_string()).collect()
    };

    let first = view(FleetFilter::default()).await.unwrap();
    assert_eq!((first.matching, first.page, first.pages), (53, 1, 2));
    assert_eq!(first.hosts.len(), 50);
    assert_eq!(first.hosts[0].hostname, "edge-1", "hosts by name");
    assert_eq!(
        (
            first.summary.hosts,
            first.summary.hosts_online,
            first.summary.gpus
        ),
        (53, 53, 54)
    );
    assert_eq!(first.summary.gpus_mig, 52, "the H100s are in MIG mode");
    assert_eq!(
        u64::try_from(first.summary.memory_mib).unwrap(),
        52 * h100(0, "GPU-x").memory_mib + 2 * l4(0, "GPU-x").memory_mib
    );
    let l4s = first.pools.iter().find(|p| p.name == "l4-shared").unwrap();
    assert_eq!((l4s.gpus, l4s.gpus_online, l4s.gpus_schedulable), (2, 2, 2));
    let h100s = first.pools.iter().find(|p| p.name == "h100-mig").unwrap();
    assert_eq!(
        (h100s.gpus, h100s.gpus_online, h100s.gpus_schedulable),
        (52, 52, 52)
    );
    let second = view(FleetFilter {
        page: Some(2),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(names(&second), ["node-49", "node-50", "node-51"]);
    assert_eq!(second.summary, first.summary, "the numbers are the fleet's");

    // The insights' heat map lists hosts the same way and reads only the
    // shown hosts' telemetry (node-03 is on the first page, node-50 on the
    // second).
    let now_ms = f.service.now().timestamp_millis();
    for (i, util) in [(3usize, 40u8), (50, 70)] {
        use tessera_protocol::agent::{GpuSample, TelemetryBatch, TelemetryRound};
        let batch = TelemetryBatch {
            hostname: host_named(&format!("node-{i:02}")),
            interval_ms: 10_000,
            rounds: vec![TelemetryRound {
                at_ms: now_ms - 5_000,
                gpus: vec![GpuSample {
                    uuid: format!("GPU-a{i:02}"),
                    util_pct: Some(util),
                    mem_used_mib: 8_000,
                    power_mw: None,
                    temp_c: None,
                    sm_clock_mhz: None,
                    instances: vec![],
                    clients: vec![],
                }],
            }],
        };
        f.service
            .record_telemetry(&nodes[i].host, &batch)
            .await
            .unwrap();
    }
    let insights = |heat: FleetFilter| {
        let (f, proof) = (&f, &proof);
        async move { f.service.fleet_insights(proof, 7, &heat).await }
    };
    let heat_of = |i: &tessera_protocol::views::FleetInsights| -> Vec<(String, Option<u8>)> {
        i.heat
            .iter()
            .map(|h| (h.hostname.to_string(), h.gpus[0].util_pct))
            .collect()
    };
    let all = insights(FleetFilter::default()).await.unwrap();
    assert_eq!(
        (all.heat_matching, all.heat_page, all.heat_pages),
        (53, 1, 2)
    );
    assert_eq!(all.heat.len(), 50);
    assert_eq!(heat_of(&all)[4], ("node-03".to_owned(), Some(40)));
    let h100_capacity = |i: &tessera_protocol::views::FleetInsights| {
        i.pools
            .iter()
            .find(|p| p.pool == "h100-mig")
            .map(|p| p.capacity_gpus)
    };
    assert_eq!(h100_capacity(&all), Some(52), "capacity is the pool's");
    let later = insights(FleetFilter {
        page: Some(2),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(
        heat_of(&later),
        [
            ("node-49".to_owned(), None),
            ("node-50".to_owned(), Some(70)),
            ("node-51".to_owned(), None)
        ]
    );
    assert_eq!((later.heat_page, h100_capacity(&later)), (2, Some(52)));
    let one = insights(FleetFilter {
        q: Some("node-03".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(heat_of(&one), [("node-03".to_owned(), Some(40))]);
    assert_eq!((one.heat_matching, one.heat_pages), (1, 1));
    let none = insights(FleetFilter {
        pool: Some("h100-mig".into()),
        q: Some("edge".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(none.heat.is_empty() && none.heat_matching == 0);
    match insights(FleetFilter {
        page: Some(0),
        ..Default::default()
    })
    .await
    {
        Err(ServiceError::Invalid { field, .. }) => assert_eq!(field, "page"),
        other => panic!("{other:?}"),
    }

    let search = view(FleetFilter {
        q: Some("NODE-1".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(search.matching, 10, "node-10 … node-19");
    let pool = view(FleetFilter {
        pool: Some("l4-shared".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(names(&pool), ["edge-1"]);

    // A cordoned host needs attention; so does one gone silent.
    let attention = |f: FleetFilter| async move { names(&view(f).await.unwrap()) };
    let only = |status| FleetFilter {
        status: Some(status),
        ..Default::default()
    };
    assert!(attention(only(HostFilter::Attention)).await.is_empty());
    operate(
        &f,
        nodes[7].host.id(),
        None,
        req(OpsAction::Cordon, "rack work"),
    )
    .await
    .unwrap();
    assert_eq!(attention(only(HostFilter::Attention)).await, ["node-07"]);
    f.clock.advance(Duration::seconds(31));
    edge.send(&f, edge_gpus(), None, vec![]).await;
    assert_eq!(attention(only(HostFilter::Online)).await, ["edge-1"]);
    let offline = view(only(HostFilter::Offline)).await.unwrap();
    assert_eq!(
        (offline.matching, offline.summary.hosts_attention),
        (52, 52)
    );

    // Bad filters name the field and change nothing.
    for (filter, field) in [
        (
            FleetFilter {
                pool: Some("nope".into()),
                ..Default::default()
            },
            "pool",
        ),
        (
            FleetFilter {
                page: Some(0),
                ..Default::default()
            },
            "page",
        ),
        (
            FleetFilter {
                q: Some("x".repeat(254)),
                ..Default::default()
            },
            "q",
        ),
    ] {
        match view(filter).await {
            Err(ServiceError::Invalid { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{field}: {other:?}"),
        }
    }
}
