//! Pools and tenants owned by the database (SQLite, or PostgreSQL when
//! `TESSERA_TEST_POSTGRES_URL` is set): seeded once from the configuration,
//! edited by platform admins with optimistic concurrency and an audit
//! trail; pool changes that move busy GPUs drain them first.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use common::agent::*;
use common::{fixture, slug, Fixture};
use tessera_core::availability::OpsMode;
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::sharing::SharingMode;
use tessera_protocol::views::{PoolAdminView, PoolEdit, TenantEdit};
use tessera_service::pools::PoolSpec;
use tessera_service::ServiceError;

async fn pools(f: &Fixture) -> Vec<PoolAdminView> {
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    f.service.pools_admin(&proof).await.unwrap().pools
}

async fn pool(f: &Fixture, name: &str) -> PoolAdminView {
    pools(f)
        .await
        .into_iter()
        .find(|p| p.spec.name == name)
        .unwrap()
}

fn edit(spec: PoolSpec, revision: i64, reason: &str) -> PoolEdit {
    PoolEdit {
        spec,
        revision: Some(revision),
        reason: reason.into(),
        drain_minutes: 30,
    }
}

async fn update(f: &Fixture, name: &str, e: &PoolEdit) -> Result<PoolAdminView, ServiceError> {
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    f.service.update_pool(&proof, name, e).await
}

async fn gpu_mode(f: &Fixture, host: &str, index: u32) -> OpsMode {
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let fleet = f
        .service
        .fleet_view(&proof, &Default::default())
        .await
        .unwrap();
    let h = fleet.hosts.iter().find(|h| h.hostname == host).unwrap();
    h.gpus
        .iter()
        .find(|g| u32::try_from(g.index).ok() == Some(index))
        .unwrap()
        .ops
        .mode
}

#[tokio::test]
async fn pools_are_seeded_once_then_the_database_owns_them() {
    let f = fixture().await;
    let list = pools(&f).await;
    let names: Vec<&str> = list.iter().map(|p| p.spec.name.as_str()).collect();
    assert_eq!(names, ["h100-mig", "a100-whole", "l4-shared"]);
    assert!(list
        .iter()
        .all(|p| p.updated_by.is_none() && p.revision == 1));
    assert_eq!(count(&f.audit_actions().await, "pool.create"), 3);

    // A change that moves no GPU applies at once.
    let mut spec = list[0].spec.clone();
    spec.description = "Big MIG GPUs".into();
    spec.max_lease_hours = 12;
    let v = update(&f, "h100-mig", &edit(spec.clone(), 1, ""))
        .await
        .unwrap();
    assert_eq!(v.spec, spec);
    assert_eq!(
        (v.revision, v.updated_by.as_deref()),
        (2, Some("User root"))
    );
    assert!(v.planned.is_none());
    // A restart seeds nothing over it.
    f.service.seed_policy().await.unwrap();
    assert_eq!(pool(&f, "h100-mig").await.spec.max_lease_hours, 12);
    assert_eq!(count(&f.audit_actions().await, "pool.create"), 3);
    assert_eq!(count(&f.audit_actions().await, "pool.update"), 1);
    // Tenants see the new limit at once.
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let err = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 24))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ServiceError::Invalid { field, .. } if field == "lease_hours"),
        "{err}"
    );

    // An edit from a stale page loses, and says so.
    let err = update(&f, "h100-mig", &edit(spec.clone(), 1, ""))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServiceError::Conflict(ref m) if m.contains("reload")),
        "{err}"
    );
    // Mistakes name the field and change nothing.
    let mut renamed = spec.clone();
    renamed.name = "h100".parse().unwrap();
    let err = update(&f, "h100-mig", &edit(renamed, 2, ""))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Invalid { ref field, .. } if field == "spec.name"));
    let mut unknown = spec.clone();
    unknown.models = vec!["Mystery9000".into()];
    let err = update(&f, "h100-mig", &edit(unknown, 2, ""))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Invalid { ref field, .. } if field == "spec.models"));
    let mut weights = spec.clone();
    weights
        .fair_share_weights
        .insert("nobody".parse().unwrap(), 2);
    let err = update(&f, "h100-mig", &edit(weights, 2, ""))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServiceError::Invalid { ref field, .. } if field == "spec.fair_share_weights")
    );
    assert_eq!(pool(&f, "h100-mig").await.revision, 2);
    assert_eq!(count(&f.audit_actions().await, "pool.update"), 1);

    // A new pool goes last; a second one of the name is refused.
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let mut t4 = PoolSpec::new("t4-dev".parse().unwrap(), SharingMode::TimeSlicing, &["T4"]);
    t4.time_slice_replicas = 8;
    let new = PoolEdit {
        spec: t4.clone(),
        revision: None,
        reason: String::new(),
        drain_minutes: 60,
    };
    let created = f.service.create_pool(&proof, &new).await.unwrap();
    assert_eq!(created.spec, t4);
    assert_eq!(pools(&f).await.last().unwrap().spec.name, "t4-dev");
    let err = f.service.create_pool(&proof, &new).await.unwrap_err();
    assert!(matches!(err, ServiceError::Conflict(_)), "{err}");
    // Members of an ordinary tenant cannot see or change pools.
    let member = f.login("bob", &["vision"]).await;
    assert!(member.require_platform_admin().is_err());
}

#[tokio::test]
async fn a_host_selector_moves_an_empty_hosts_gpus_to_another_pool_at_once() {
    let f = fixture().await;
    let mut a1 = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
    let _a2 = Agent::enrol(&f, "gpu-2", vec![h100(0, "GPU-b1")]).await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let whole = PoolSpec::new(
        "h100-whole".parse().unwrap(),
        SharingMode::Exclusive,
        &["H100-80GB"],
    );
    f.service
        .create_pool(
            &proof,
            &PoolEdit {
                spec: whole,
                revision: None,
                reason: String::new(),
                drain_minutes: 60,
            },
        )
        .await
        .unwrap();
    // Last in order: h100-mig still takes every H100.
    assert_eq!(pool(&f, "h100-whole").await.gpus, 0);

    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let s = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    let on = s.host.clone().unwrap();
    a1.converge(&f).await;
    let (keep, moving) = if on == "gpu-1" {
        ("gpu-1", "gpu-2")
    } else {
        ("gpu-2", "gpu-1")
    };
    let mut mig_pool = pool(&f, "h100-mig").await.spec;
    mig_pool.hosts = vec![keep.into()];
    let e = edit(mig_pool, 1, "");
    let preview = f
        .service
        .preview_pool_change(&proof, "h100-mig", &e)
        .await
        .unwrap();
    assert!(preview.immediate, "{preview:?}");
    assert_eq!(preview.moves.len(), 1);
    assert_eq!(preview.moves[0].host, moving);
    assert_eq!(preview.moves[0].to_pool.as_deref(), Some("h100-whole"));
    assert_eq!(preview.changes[0].field, "hosts");
    let v = update(&f, "h100-mig", &e).await.unwrap();
    assert!(v.planned.is_none());
    assert_eq!(v.gpus, 1);
    assert_eq!(pool(&f, "h100-whole").await.gpus, 1);
}

#[tokio::test]
async fn a_sharing_mode_change_drains_busy_gpus_and_takes_effect_once_they_are_empty() {
    let f = fixture().await;
    let mut a1 = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
    let mut a2 = Agent::enrol(&f, "gpu-2", vec![h100(0, "GPU-b1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let s = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    let busy = s.host.clone().unwrap();
    let idle = if busy == "gpu-1" { "gpu-2" } else { "gpu-1" };
    a1.converge(&f).await;
    a2.converge(&f).await;
    assert_eq!(get(&f, &alice, s.id).await.state, AllocationPhase::Active);

    let mut whole = pool(&f, "h100-mig").await.spec;
    whole.sharing = SharingMode::Exclusive;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let preview = f
        .service
        .preview_pool_change(&proof, "h100-mig", &edit(whole.clone(), 1, "whole GPUs"))
        .await
        .unwrap();
    assert!(!preview.immediate);
    assert_eq!(preview.moves.len(), 2);
    assert_eq!(preview.affected.len(), 1);
    assert_eq!(preview.affected[0].id, s.id);
    assert_eq!(preview.changes[0].field, "sharing");
    // Nothing happened yet.
    assert_eq!(pool(&f, "h100-mig").await.revision, 1);

    // Busy GPUs must be drained: that needs a reason.
    let err = update(&f, "h100-mig", &edit(whole.clone(), 1, " "))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Invalid { ref field, .. } if field == "reason"));
    let v = update(
        &f,
        "h100-mig",
        &edit(whole.clone(), 1, "whole GPUs for training"),
    )
    .await
    .unwrap();
    assert_eq!(v.spec.sharing, SharingMode::Mig, "still MIG until empty");
    let planned = v.planned.clone().unwrap();
    assert_eq!(planned.spec.sharing, SharingMode::Exclusive);
    assert_eq!(planned.waiting_slices, 1);
    assert_eq!(gpu_mode(&f, &busy, 0).await, OpsMode::Draining);
    assert_eq!(gpu_mode(&f, idle, 0).await, OpsMode::Cordoned);
    // The owner is told; new MIG requests wait; another change waits too.
    let queued = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    assert_eq!(queued.state, AllocationPhase::Queued);
    let err = update(&f, "h100-mig", &edit(whole.clone(), v.revision, "again"))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Conflict(_)), "{err}");
    f.service
        .release_allocation(&alice, queued.id)
        .await
        .unwrap();
    assert_eq!(f.service.tick().await.unwrap().pool_changes, 0);

    // The slice ends; once its teardown is reported the change applies.
    f.service.release_allocation(&alice, s.id).await.unwrap();
    let agent = if busy == "gpu-1" { &mut a1 } else { &mut a2 };
    agent.converge(&f).await;
    assert_eq!(get(&f, &alice, s.id).await.state, AllocationPhase::Released);
    assert_eq!(f.service.tick().await.unwrap().pool_changes, 1);
    let after = pool(&f, "h100-mig").await;
    assert_eq!(after.spec.sharing, SharingMode::Exclusive);
    assert!(after.planned.is_none());
    assert_eq!(after.updated_by.as_deref(), Some("User root"));
    assert_eq!(gpu_mode(&f, &busy, 0).await, OpsMode::Available);
    assert_eq!(gpu_mode(&f, idle, 0).await, OpsMode::Available);
    // The host's agent is told to leave MIG mode.
    let d = agent.fetch(&f).await;
    assert!(d.gpus.iter().all(|e| !e.desired.mig_enabled), "{d:?}");
    let actions = f.audit_actions().await;
    assert_eq!(count(&actions, "pool.plan_change"), 1);
    assert_eq!(count(&actions, "pool.update"), 1);
    assert_eq!(count(&actions, "gpu.drain"), 1);
    assert_eq!(count(&actions, "gpu.cordon"), 1);
    assert_eq!(count(&actions, "gpu.resume"), 2);
}

#[tokio::test]
async fn a_planned_change_can_be_cancelled_and_its_gpus_take_slices_again() {
    let f = fixture().await;
    let mut a1 = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let s = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    a1.converge(&f).await;
    let mut whole = pool(&f, "h100-mig").await.spec;
    whole.sharing = SharingMode::Exclusive;
    update(&f, "h100-mig", &edit(whole, 1, "try whole GPUs"))
        .await
        .unwrap();
    assert_eq!(gpu_mode(&f, "gpu-1", 0).await, OpsMode::Draining);
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let v = f
        .service
        .cancel_pool_change(&proof, "h100-mig")
        .await
        .unwrap();
    assert!(v.planned.is_none());
    assert_eq!(v.spec.sharing, SharingMode::Mig);
    assert_eq!(gpu_mode(&f, "gpu-1", 0).await, OpsMode::Available);
    assert_eq!(get(&f, &alice, s.id).await.state, AllocationPhase::Active);
    let err = f
        .service
        .cancel_pool_change(&proof, "h100-mig")
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Conflict(_)), "{err}");
    assert_eq!(count(&f.audit_actions().await, "pool.cancel_change"), 1);
    // New slices land again.
    let next = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 4))
        .await
        .unwrap();
    assert_eq!(next.state, AllocationPhase::Placed);
}

#[tokio::test]
async fn tenants_created_and_edited_by_admins_grant_roles_at_the_next_sign_in() {
    let f = fixture().await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let new = TenantEdit {
        slug: "robotics".into(),
        name: "Robotics".into(),
        cost_centre: Some(" CC-9 ".into()),
        member_groups: vec!["robots".into(), " robots ".into(), String::new()],
        admin_groups: vec!["robot-leads".into()],
        namespaces: Vec::new(),
        revision: None,
    };
    let t = f.service.create_tenant(&proof, &new).await.unwrap();
    assert_eq!(t.member_groups, ["robots"]);
    assert_eq!(t.cost_centre.as_deref(), Some("CC-9"));
    let rob = f.login("rob", &["robots"]).await;
    assert!(rob.memberships().iter().any(|(_, m)| m.slug == "robotics"));
    let err = f.service.create_tenant(&proof, &new).await.unwrap_err();
    assert!(matches!(err, ServiceError::Conflict(_)), "{err}");
    let bad = TenantEdit {
        slug: "Robotics Lab".into(),
        ..new.clone()
    };
    let err = f.service.create_tenant(&proof, &bad).await.unwrap_err();
    assert!(matches!(err, ServiceError::Invalid { ref field, .. } if field == "slug"));

    // The configuration's groups until an admin sets others.
    let list = f.service.tenants_admin(&proof).await.unwrap();
    let vision = list.iter().find(|t| t.slug == "vision").unwrap().clone();
    assert_eq!(vision.admin_groups, ["vision-leads"]);
    let moved = TenantEdit {
        slug: "vision".into(),
        name: "Computer Vision".into(),
        cost_centre: vision.cost_centre.clone(),
        member_groups: vision.member_groups.clone(),
        admin_groups: vec!["cv-admins".into()],
        namespaces: Vec::new(),
        revision: Some(vision.revision),
    };
    let v = f
        .service
        .update_tenant(&proof, &slug("vision"), &moved)
        .await
        .unwrap();
    assert_eq!(
        (v.name.as_str(), v.revision),
        ("Computer Vision", vision.revision + 1)
    );
    // A stale edit loses.
    let err = f
        .service
        .update_tenant(&proof, &slug("vision"), &moved)
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Conflict(_)), "{err}");
    // The old admin group now makes nobody an admin; the new one does.
    let lee = f.login("lee", &["vision-leads"]).await;
    assert!(!lee.memberships().iter().any(|(_, m)| m.slug == "vision"));
    let cara = f.login("cara", &["cv-admins"]).await;
    let role = cara
        .memberships()
        .iter()
        .find(|(_, m)| m.slug == "vision")
        .map(|(_, m)| m.role);
    assert_eq!(role, Some(tessera_protocol::views::TenantRole::TenantAdmin));
    // A restart keeps the admins' change.
    f.service.seed_policy().await.unwrap();
    let again = f.login("lee2", &["vision-leads"]).await;
    assert!(!again.memberships().iter().any(|(_, m)| m.slug == "vision"));
    let actions = f.audit_actions().await;
    assert_eq!(count(&actions, "tenant.create"), 3);
    assert_eq!(count(&actions, "tenant.update"), 1);
}

/// Whole-GPU request of one A100.
fn one_a100() -> tessera_core::sharing::SliceShape {
    tessera_core::sharing::SliceShape::Whole {
        count: 1,
        nvlink_local: false,
    }
}

#[tokio::test]
async fn a_pools_placement_policy_is_the_admins_choice_audited_and_used_from_the_next_placement() {
    use tessera_core::pool::PoolPlacement;
    let f = fixture().await;
    // Three hosts of two whole A100s each.
    let _agents = [
        Agent::enrol(&f, "gpu-1", vec![a100(0, "GPU-e10"), a100(1, "GPU-e11")]).await,
        Agent::enrol(&f, "gpu-2", vec![a100(0, "GPU-e20"), a100(1, "GPU-e21")]).await,
        Agent::enrol(&f, "gpu-3", vec![a100(0, "GPU-e30"), a100(1, "GPU-e31")]).await,
    ];
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let place = |f: &Fixture| {
        let alice = alice.clone();
        let f = f.service.clone();
        async move {
            let v = f
                .request_allocation(&alice, &ask("a100-whole", one_a100(), 4))
                .await
                .unwrap();
            assert_eq!(v.state, AllocationPhase::Placed, "{v:?}");
            v.host.unwrap()
        }
    };
    // Pack (the default) keeps vision's first two replicas on one host.
    assert_eq!(
        pool(&f, "a100-whole").await.spec.placement,
        PoolPlacement::Pack
    );
    let first = place(&f).await;
    assert_eq!(
        place(&f).await,
        first,
        "pack fills a host before it opens another"
    );

    // The admin switches the pool to spread: audited, field by field.
    let before = pool(&f, "a100-whole").await;
    let mut spec = before.spec.clone();
    spec.placement = PoolPlacement::Spread;
    let v = update(
        &f,
        "a100-whole",
        &edit(spec, before.revision, "inference replicas"),
    )
    .await
    .unwrap();
    assert_eq!(v.spec.placement, PoolPlacement::Spread);
    assert!(v.planned.is_none(), "a policy change moves no GPU");
    let audit = f.audit_entries().await;
    let entry = audit
        .iter()
        .rev()
        .find(|e| e.action.to_string() == "pool.update")
        .unwrap();
    let (was, now) = (
        entry
            .before
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        entry
            .after
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
    );
    assert!(was.contains(r#""placement":"pack""#), "{was}");
    assert!(now.contains(r#""placement":"spread""#), "{now}");

    // The next two replicas go to the two other hosts, one each (pack
    // would have put both on the same one).
    let third = place(&f).await;
    let fourth = place(&f).await;
    assert!(
        third != first && fourth != first && third != fourth,
        "{first} {third} {fourth}"
    );

    // Platform admins see why; the tenant's members do not.
    let rows = rows(&f).await;
    let last_id = rows.iter().map(|r| r.id).max().unwrap();
    assert!(get(&f, &alice, last_id).await.placement_why.is_none());
    let admin = f.admin().await;
    let overseer = f
        .service
        .tenant_actor(&admin, &slug("vision"))
        .await
        .unwrap();
    let why = f
        .service
        .get_allocation(&overseer, last_id)
        .await
        .unwrap()
        .placement_why
        .unwrap();
    assert_eq!(why.policy, "spread");
    assert_eq!(why.ranked[0].host, fourth);
    assert!(
        why.ranking[0].contains("tenant's slices"),
        "{:?}",
        why.ranking
    );
    // The chosen host held none of vision's slices; the runner-up held one.
    assert_eq!(why.ranked[0].scores[0], 0.0);
    assert!(
        why.ranked.len() >= 2 && why.ranked[1].scores[0] >= 1.0,
        "{why:?}"
    );
    assert_eq!(why.hosts_scanned, 3);
}
