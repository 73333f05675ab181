//! Use-cases against a real database (SQLite by default; PostgreSQL when
//! `TESSERA_TEST_POSTGRES_URL` is set).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use crate::common;
use tessera_core::role::TokenScope;

use chrono::Duration;
use common::{fixture, host_named, slug};
use tessera_core::sharing::SharingMode;
use tessera_protocol::agent::{EnrollRequest, GpuReport, HostReport};
use tessera_protocol::views::{HostStatus, JoinTokenStatus, TenantRole};
use tessera_service::{Clock, ServiceError};

fn report(hostname: &str, gpus: usize, uuid_prefix: &str) -> HostReport {
    HostReport {
        hostname: host_named(hostname),
        agent_version: "0.1.0".into(),
        cpu_milli: 64_000,
        memory_mib: 512 * 1024,
        backend: "simulated".into(),
        driver_version: Some("550".into()),
        gpus: (0..gpus)
            .map(|i| GpuReport {
                index: i as u32,
                uuid: format!("GPU-{uuid_prefix}{i:04}"),
                name: "NVIDIA H100 80GB HBM3".into(),
                memory_mib: 81_559,
                mig_capable: true,
                mig_enabled: i % 2 == 0,
                nvlink_peers: vec![],
                health: Default::default(),
                sharing: None,
                mig_devices: vec![],
            })
            .collect(),
        applied_generation: None,
        errors: vec![],
        stopped: Vec::new(),
    }
}

#[tokio::test]
async fn login_maps_groups_to_roles_and_refreshes_them() {
    let f = fixture().await;
    let p = f.login("u1", &["vision", "nlp"]).await;
    assert!(!p.is_platform_admin());
    let roles: Vec<(String, TenantRole)> = p
        .memberships()
        .iter()
        .map(|(_, m)| (m.slug.clone(), m.role))
        .collect();
    assert_eq!(
        roles,
        vec![
            ("nlp".into(), TenantRole::Member),
            ("vision".into(), TenantRole::Member)
        ]
    );

    // Next login: promoted in vision, dropped from nlp, made platform admin.
    let p = f.login("u1", &["vision-leads", "platform"]).await;
    assert!(p.is_platform_admin());
    let roles: Vec<(String, TenantRole)> = p
        .memberships()
        .iter()
        .map(|(_, m)| (m.slug.clone(), m.role))
        .collect();
    assert_eq!(roles, vec![("vision".into(), TenantRole::TenantAdmin)]);
    assert_eq!(f.count("users").await, 1);
    assert_eq!(f.count("memberships").await, 1);

    // Same roles again: a login event but no role change event.
    f.login("u1", &["vision-leads", "platform"]).await;
    let actions = f.audit_actions().await;
    let logins = actions.iter().filter(|a| *a == "user.login").count();
    let changes = actions.iter().filter(|a| *a == "user.roles_change").count();
    assert_eq!((logins, changes), (3, 2), "{actions:?}");
}

#[tokio::test]
async fn tenant_pages_are_private_to_members_and_admins() {
    let f = fixture().await;
    let member = f.login("m", &["vision"]).await;
    let lead = f.login("l", &["vision-leads"]).await;
    let outsider = f.login("o", &["nlp"]).await;
    let admin = f.admin().await;

    let v = f
        .service
        .tenant_view(&member, &slug("vision"))
        .await
        .unwrap();
    assert_eq!(v.name, "Vision");
    assert_eq!(v.cost_centre.as_deref(), Some("CC-1"));
    assert_eq!(v.members.len(), 2);
    assert_eq!(
        v.members[0].role,
        TenantRole::TenantAdmin,
        "admins listed first"
    );
    assert!(v.allocations.is_empty());
    assert!(f.service.tenant_view(&lead, &slug("vision")).await.is_ok());
    assert!(f.service.tenant_view(&admin, &slug("vision")).await.is_ok());

    let err = f
        .service
        .tenant_view(&outsider, &slug("vision"))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::NotFound { .. }), "{err:?}");
    let err = f
        .service
        .tenant_view(&member, &slug("no-such"))
        .await
        .unwrap_err();
    assert_eq!(err.status(), 404);
}

#[tokio::test]
async fn join_token_enrols_exactly_once() {
    let f = fixture().await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let created = f
        .service
        .create_join_token(&proof, &common::join_token("rack B", 60))
        .await
        .unwrap();
    assert_eq!(created.token.status, JoinTokenStatus::Active);
    assert!(created.secret.starts_with("tsj_"));

    let req = EnrollRequest {
        join_token: created.secret.clone(),
        hostname: host_named("gpu-1"),
    };
    let first = f.service.enroll(&req).await.unwrap();
    assert!(first.credential.starts_with("tsh_"));
    let again = f
        .service
        .enroll(&EnrollRequest {
            hostname: host_named("gpu-2"),
            ..req.clone()
        })
        .await
        .unwrap_err();
    assert!(matches!(again, ServiceError::InvalidJoinToken));
    assert_eq!(again.status(), 401);
    assert_eq!(f.count("hosts").await, 1, "a reused token stores nothing");

    let tokens = f.service.list_join_tokens(&proof).await.unwrap();
    assert_eq!(tokens[0].status, JoinTokenStatus::Used);
    assert_eq!(tokens[0].used_by_host.as_deref(), Some("gpu-1"));
    // The credential is stored hashed only.
    let host = f
        .service
        .authenticate_host(&first.credential)
        .await
        .unwrap();
    assert_eq!(host.hostname(), "gpu-1");
    use sea_orm::EntityTrait;
    let stored = tessera_service::entity::host::Entity::find()
        .all(f.service.db())
        .await
        .unwrap();
    assert_ne!(stored[0].credential_hash, first.credential);
}

#[tokio::test]
async fn expired_revoked_and_unknown_tokens_are_refused() {
    let f = fixture().await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let expiring = f
        .service
        .create_join_token(&proof, &common::join_token("short", 5))
        .await
        .unwrap();
    let revoked = f
        .service
        .create_join_token(&proof, &common::join_token("revoked", 60))
        .await
        .unwrap();
    f.service
        .revoke_join_token(&proof, revoked.token.id)
        .await
        .unwrap();
    let err = f
        .service
        .revoke_join_token(&proof, revoked.token.id)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409, "revoking twice is a conflict");
    f.clock.advance(Duration::minutes(6));

    for secret in [expiring.secret, revoked.secret, "tsj_nonsense".to_owned()] {
        let err = f
            .service
            .enroll(&EnrollRequest {
                join_token: secret,
                hostname: host_named("h"),
            })
            .await
            .unwrap_err();
        assert!(matches!(err, ServiceError::InvalidJoinToken), "{err:?}");
    }
    assert_eq!(f.count("hosts").await, 0);
}

#[tokio::test]
async fn join_token_input_is_validated() {
    let f = fixture().await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let err = f
        .service
        .create_join_token(&proof, &common::join_token("  ", 60))
        .await
        .unwrap_err();
    assert!(err.to_string().starts_with("description:"), "{err}");
    let err = f
        .service
        .create_join_token(&proof, &common::join_token("x", 44640))
        .await
        .unwrap_err();
    assert!(err.to_string().starts_with("ttl_minutes:"), "{err}");
    let err = f
        .service
        .create_join_token(&proof, &common::join_token("x", 0))
        .await
        .unwrap_err();
    assert_eq!(err.status(), 400);
    // Lifetimes that do not fit a date are refused, not a panic.
    for ttl in [i64::MAX, i64::MIN, -1] {
        let err = f
            .service
            .create_join_token(&proof, &common::join_token("x", ttl))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ServiceError::Invalid { field, message }
                if field == "ttl_minutes" && message.contains("43200 minutes")),
            "{err:?}"
        );
    }
    assert_eq!(f.count("join_tokens").await, 0);
    // A bad host name does not even make a request: it is refused where
    // the agent's JSON is read (a 400 naming the field over HTTP).
    let err = serde_json::from_str::<EnrollRequest>(r#"{"join_token":"x","hostname":"bad host!"}"#)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("'bad host!' is not a valid host name"),
        "{err}"
    );
}

#[tokio::test]
async fn concurrent_enrolments_with_one_token_have_one_winner() {
    let f = fixture().await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let created = f
        .service
        .create_join_token(&proof, &common::join_token("race", 60))
        .await
        .unwrap();
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let service = f.service.clone();
            let req = EnrollRequest {
                join_token: created.secret.clone(),
                hostname: host_named(&format!("racer-{i}")),
            };
            tokio::spawn(async move { service.enroll(&req).await })
        })
        .collect();
    let results = futures::future::join_all(tasks).await;
    let wins = results.iter().filter(|r| matches!(r, Ok(Ok(_)))).count();
    for r in &results {
        match r {
            Ok(Ok(_)) | Ok(Err(ServiceError::InvalidJoinToken)) => {}
            other => panic!("unexpected outcome {other:?}"),
        }
    }
    assert_eq!(wins, 1);
    assert_eq!(f.count("hosts").await, 1);
}

#[tokio::test]
async fn plain_token_enrols_new_hosts_but_never_takes_over_an_enrolled_one() {
    let f = fixture().await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let first = f
        .service
        .create_join_token(&proof, &common::join_token("gpu-1", 60))
        .await
        .unwrap();
    let owner = f
        .service
        .enroll(&EnrollRequest {
            join_token: first.secret,
            hostname: host_named("gpu-1"),
        })
        .await
        .unwrap();
    let other = f
        .service
        .create_join_token(&proof, &common::join_token("anything", 60))
        .await
        .unwrap();
    let audit_before = f.audit_actions().await.len();

    let err = f
        .service
        .enroll(&EnrollRequest {
            join_token: other.secret.clone(),
            hostname: host_named("gpu-1"),
        })
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Conflict(_)), "{err:?}");
    assert_eq!(err.status(), 409);
    assert_eq!(
        err.to_string(),
        "host 'gpu-1' is already enrolled; ask a platform admin for a re-enrolment token for this host"
    );
    // Nothing changed: the owner keeps its credential, the token is unused,
    // and nothing was audited.
    let host = f
        .service
        .authenticate_host(&owner.credential)
        .await
        .unwrap();
    assert_eq!(host.hostname(), "gpu-1");
    assert_eq!(f.count("hosts").await, 1);
    assert_eq!(f.audit_actions().await.len(), audit_before);
    let tokens = f.service.list_join_tokens(&proof).await.unwrap();
    let t = tokens.iter().find(|t| t.id == other.token.id).unwrap();
    assert_eq!(t.status, JoinTokenStatus::Active);
    assert_eq!(t.used_by_host, None);

    // The same token still enrols a new host.
    let new = f
        .service
        .enroll(&EnrollRequest {
            join_token: other.secret,
            hostname: host_named("gpu-2"),
        })
        .await
        .unwrap();
    assert_ne!(new.host_id, owner.host_id);
    assert_eq!(f.count("hosts").await, 2);
    assert_eq!(&f.audit_actions().await[audit_before..], &["host.enroll"]);
}

#[tokio::test]
async fn reenrol_token_rekeys_its_own_host_and_nothing_else() {
    let f = fixture().await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    f.enrolled_host("gpu-1").await;
    f.enrolled_host("gpu-2").await;
    let t = f
        .service
        .create_join_token(&proof, &common::join_token("gpu-3", 60))
        .await
        .unwrap();
    let old_credential = f
        .service
        .enroll(&EnrollRequest {
            join_token: t.secret,
            hostname: host_named("gpu-3"),
        })
        .await
        .unwrap()
        .credential;
    let hashes = || async {
        use sea_orm::{EntityTrait, QueryOrder};
        tessera_service::entity::host::Entity::find()
            .order_by_asc(tessera_service::entity::host::Column::Id)
            .all(f.service.db())
            .await
            .unwrap()
            .into_iter()
            .map(|h| (h.hostname, h.credential_hash))
            .collect::<Vec<_>>()
    };
    let before = hashes().await;
    let created = f
        .service
        .create_join_token(&proof, &common::reenrol_token("gpu-3"))
        .await
        .unwrap();
    assert_eq!(created.token.for_host.as_deref(), Some("gpu-3"));

    // Not for another enrolled host, nor for a new one; the token survives.
    for other in ["gpu-1", "gpu-new"] {
        let err = f
            .service
            .enroll(&EnrollRequest {
                join_token: created.secret.clone(),
                hostname: host_named(other),
            })
            .await
            .unwrap_err();
        assert!(matches!(err, ServiceError::Conflict(_)), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!("this join token re-enrols host 'gpu-3' only; it cannot enrol '{other}'")
        );
    }
    assert_eq!(hashes().await, before);
    assert_eq!(
        f.service
            .authenticate_host(&old_credential)
            .await
            .unwrap()
            .hostname(),
        "gpu-3"
    );

    let rekeyed = f
        .service
        .enroll(&EnrollRequest {
            join_token: created.secret.clone(),
            hostname: host_named("gpu-3"),
        })
        .await
        .unwrap();
    let host = f
        .service
        .authenticate_host(&rekeyed.credential)
        .await
        .unwrap();
    assert_eq!(
        (host.id(), host.hostname().as_str()),
        (rekeyed.host_id, "gpu-3")
    );
    let err = f
        .service
        .authenticate_host(&old_credential)
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::InvalidCredential), "{err:?}");
    // Only gpu-3's credential changed.
    let after = hashes().await;
    assert_eq!(after[..2], before[..2]);
    assert_ne!(after[2], before[2]);
    assert_eq!(f.audit_actions().await.last().unwrap(), "host.reenroll");
    let tokens = f.service.list_join_tokens(&proof).await.unwrap();
    let t = tokens.iter().find(|t| t.id == created.token.id).unwrap();
    assert_eq!(t.status, JoinTokenStatus::Used);
    assert_eq!(t.for_host.as_deref(), Some("gpu-3"));
    assert_eq!(t.used_by_host.as_deref(), Some("gpu-3"));
}

#[tokio::test]
async fn reenrol_token_needs_an_enrolled_host() {
    let f = fixture().await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    for (host, expected) in [
        (
            "gpu-nowhere",
            "for_host: no host named 'gpu-nowhere' is enrolled; leave it empty to make a token for a new host",
        ),
        ("bad host!", "for_host: 'bad host!' is not a valid host name"),
    ] {
        let err = f
            .service
            .create_join_token(&proof, &common::reenrol_token(host))
            .await
            .unwrap_err();
        assert_eq!(err.status(), 400);
        assert!(err.to_string().starts_with(expected), "{err}");
    }
    assert_eq!(f.count("join_tokens").await, 0);
    // An empty host name is a plain token.
    let mut plain = common::reenrol_token(" ");
    plain.description = "plain".into();
    let t = f.service.create_join_token(&proof, &plain).await.unwrap();
    assert_eq!(t.token.for_host, None);
}

#[tokio::test]
async fn reports_replace_gpus_and_only_for_the_own_host() {
    let f = fixture().await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let mut creds = Vec::new();
    for name in ["gpu-a", "gpu-b"] {
        let t = f
            .service
            .create_join_token(&proof, &common::join_token(name, 60))
            .await
            .unwrap();
        let r = f
            .service
            .enroll(&EnrollRequest {
                join_token: t.secret,
                hostname: host_named(name),
            })
            .await
            .unwrap();
        creds.push(f.service.authenticate_host(&r.credential).await.unwrap());
    }
    f.service
        .record_report(&creds[0], &report("gpu-a", 4, "aaaa"))
        .await
        .unwrap();
    f.service
        .record_report(&creds[1], &report("gpu-b", 2, "bbbb"))
        .await
        .unwrap();
    assert_eq!(f.count("gpus").await, 6);

    // Reporting as another host is forbidden and changes nothing.
    let err = f
        .service
        .record_report(&creds[0], &report("gpu-b", 1, "cccc"))
        .await
        .unwrap_err();
    assert_eq!(err.status(), 403);
    // Claiming another host's GPU is a conflict.
    let err = f
        .service
        .record_report(&creds[0], &report("gpu-a", 2, "bbbb"))
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409);
    assert_eq!(f.count("gpus").await, 6);

    // A GPU gone from the report is gone from the fleet.
    f.service
        .record_report(&creds[0], &report("gpu-a", 3, "aaaa"))
        .await
        .unwrap();
    let fleet = f
        .service
        .fleet_view(&proof, &Default::default())
        .await
        .unwrap();
    let a = fleet.hosts.iter().find(|h| h.hostname == "gpu-a").unwrap();
    assert_eq!(a.gpus.len(), 3);
    assert_eq!(
        a.gpus[0].model, "H100-80GB",
        "NVML names resolve to catalogue models"
    );
    assert!(a.gpus[0].mig_enabled && !a.gpus[1].mig_enabled);
    assert_eq!(
        a.gpus[0].pool.as_deref(),
        Some("h100-mig"),
        "GPUs join pools by model"
    );
    let pool = &fleet.pools[0];
    assert_eq!(
        (
            pool.name.as_str(),
            pool.sharing,
            pool.gpus,
            pool.gpus_online
        ),
        ("h100-mig", SharingMode::Mig, 5, 5)
    );
    assert_eq!(a.cpu_milli, 64_000);
}

#[tokio::test]
async fn malformed_reports_name_the_field_and_store_nothing() {
    let f = fixture().await;
    let host = f.enrolled_host("h").await;

    type Mutation = Box<dyn Fn(&mut HostReport)>;
    let cases: Vec<(Mutation, &str)> = vec![
        (Box::new(|r| r.gpus[1].uuid = "nope".into()), "gpus[1].uuid"),
        (Box::new(|r| r.gpus[0].memory_mib = 0), "gpus[0].memory_mib"),
        (Box::new(|r| r.gpus[1].index = 0), "gpus"),
        (
            Box::new(|r| r.gpus[0].nvlink_peers = vec![9]),
            "gpus[0].nvlink_peers",
        ),
        (
            Box::new(|r| {
                r.gpus[0].mig_capable = false;
                r.gpus[0].mig_enabled = true;
            }),
            "gpus[0].mig_enabled",
        ),
        (Box::new(|r| r.cpu_milli = 0), "cpu_milli"),
        (
            Box::new(|r| r.gpus[1].uuid = r.gpus[0].uuid.clone()),
            "gpus[1].uuid",
        ),
    ];
    for (mutate, field) in cases {
        let mut bad = report("h", 2, "dddd");
        mutate(&mut bad);
        let err = f.service.record_report(&host, &bad).await.unwrap_err();
        assert_eq!(err.status(), 400, "{err}");
        assert!(
            err.to_string().starts_with(&format!("{field}:")),
            "expected {field}, got {err}"
        );
    }
    assert_eq!(f.count("gpus").await, 0);
}

#[tokio::test]
async fn hosts_turn_offline_after_the_grace_period() {
    let f = fixture().await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let host = f.enrolled_host("h").await;
    let status = |fleet: tessera_protocol::views::FleetView| fleet.hosts[0].status;

    assert_eq!(
        status(
            f.service
                .fleet_view(&proof, &Default::default())
                .await
                .unwrap()
        ),
        HostStatus::Offline,
        "never reported"
    );
    f.service
        .record_report(&host, &report("h", 1, "eeee"))
        .await
        .unwrap();
    assert_eq!(
        status(
            f.service
                .fleet_view(&proof, &Default::default())
                .await
                .unwrap()
        ),
        HostStatus::Online
    );
    f.clock.advance(Duration::seconds(30));
    assert_eq!(
        status(
            f.service
                .fleet_view(&proof, &Default::default())
                .await
                .unwrap()
        ),
        HostStatus::Online
    );
    f.clock.advance(Duration::seconds(1));
    assert_eq!(
        status(
            f.service
                .fleet_view(&proof, &Default::default())
                .await
                .unwrap()
        ),
        HostStatus::Offline
    );
}

#[tokio::test]
async fn every_mutation_leaves_exactly_one_audit_event() {
    let f = fixture().await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let before = f.audit_actions().await.len();
    let t = f
        .service
        .create_join_token(&proof, &common::join_token("audited", 60))
        .await
        .unwrap();
    let t2 = f
        .service
        .create_join_token(&proof, &common::join_token("audited 2", 60))
        .await
        .unwrap();
    f.service
        .revoke_join_token(&proof, t2.token.id)
        .await
        .unwrap();
    let r = f
        .service
        .enroll(&EnrollRequest {
            join_token: t.secret,
            hostname: host_named("aud"),
        })
        .await
        .unwrap();
    let host = f.service.authenticate_host(&r.credential).await.unwrap();
    f.service
        .record_report(&host, &report("aud", 1, "ffff"))
        .await
        .unwrap();
    f.service
        .record_report(&host, &report("aud", 1, "ffff"))
        .await
        .unwrap();
    let actions = f.audit_actions().await;
    assert_eq!(
        &actions[before..],
        &[
            "join_token.create",
            "join_token.create",
            "join_token.revoke",
            "host.enroll",
            "host.first_report"
        ]
    );
    // A refused action leaves no event.
    let _ = f
        .service
        .revoke_join_token(&proof, t2.token.id)
        .await
        .unwrap_err();
    assert_eq!(f.audit_actions().await.len(), actions.len());
}

#[tokio::test]
async fn tenants_sync_from_config_idempotently() {
    let f = fixture().await;
    assert_eq!(f.count("tenants").await, 2);
    f.service.seed_policy().await.unwrap();
    assert_eq!(f.count("tenants").await, 2);
    let creates = f
        .audit_actions()
        .await
        .iter()
        .filter(|a| *a == "tenant.create")
        .count();
    assert_eq!(creates, 2);
}

#[tokio::test]
async fn reported_mig_instances_show_on_the_fleet() {
    use tessera_core::mig::MigPlacement;
    use tessera_core::plan::{ComputeInstance, GpuObserved, ObservedInstance};
    let f = fixture().await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let host = f.enrolled_host("mig").await;
    let mut r = report("mig", 1, "abab");
    let instance = |profile: &str, start, in_use| ObservedInstance {
        placement: MigPlacement::new(profile, start),
        compute_instances: vec![ComputeInstance::whole(1)],
        in_use,
    };
    r.gpus[0].sharing = Some(GpuObserved {
        mig_enabled: true,
        instances: vec![instance("1g.10gb", 6, false), instance("3g.40gb", 0, true)],
        ..GpuObserved::default()
    });
    f.service.record_report(&host, &r).await.unwrap();
    let fleet = f
        .service
        .fleet_view(&proof, &Default::default())
        .await
        .unwrap();
    let shown: Vec<(String, u8, bool)> = fleet.hosts[0].gpus[0]
        .mig_instances
        .iter()
        .map(|i| (i.profile.clone(), i.start, i.in_use))
        .collect();
    assert_eq!(
        shown,
        vec![("3g.40gb".into(), 0, true), ("1g.10gb".into(), 6, false)]
    );

    // A sharing report that contradicts the GPU's MIG mode is refused.
    let mut bad = r.clone();
    bad.gpus[0].mig_enabled = false;
    bad.gpus[0].mig_capable = true;
    let err = f.service.record_report(&host, &bad).await.unwrap_err();
    assert!(
        err.to_string().starts_with("gpus[0].sharing.mig_enabled:"),
        "{err}"
    );
}

#[tokio::test]
async fn concurrent_logins_and_reports_never_fail_on_locks() {
    // On SQLite a deferred transaction that upgrades to a writer after another
    // writer committed fails at once ("database is locked"); writers must take turns.
    let f = fixture().await;
    let mut hosts = Vec::new();
    for i in 0..4 {
        hosts.push(f.enrolled_host(&format!("busy-{i}")).await);
    }
    let mut tasks = Vec::new();
    for round in 0..10 {
        for (i, host) in hosts.iter().enumerate() {
            let service = f.service.clone();
            let host = host.clone();
            let r = report(&format!("busy-{i}"), 2, &format!("{i:04}"));
            tasks.push(tokio::spawn(async move {
                service.record_report(&host, &r).await.map(|_| ())
            }));
        }
        let service = f.service.clone();
        let claims = common::claims(&format!("user-{round}"), &["vision"]);
        tasks.push(tokio::spawn(async move {
            service.login(&claims).await.map(|_| ())
        }));
    }
    for t in futures::future::join_all(tasks).await {
        t.unwrap().unwrap();
    }
    assert_eq!(f.count("gpus").await, 8);
}

#[tokio::test]
async fn audit_log_is_scoped_filtered_paged_and_exported() {
    use tessera_protocol::views::AuditFilter;
    let f = fixture().await;
    let admin = f.admin().await;
    let lead = f.login("lead", &["vision-leads"]).await;
    let member = f.login("member", &["vision"]).await;
    // Events for both tenants: API tokens created by the operator.
    for _ in 0..3 {
        f.service
            .create_api_token_as_system(&slug("vision"), "ci", None, TokenScope::Request)
            .await
            .unwrap();
    }
    f.service
        .create_api_token_as_system(&slug("nlp"), "ci", None, TokenScope::Request)
        .await
        .unwrap();

    // Platform admins see everything; tenant admins only their tenant; members nothing.
    let all = f
        .service
        .audit_log(&admin, &AuditFilter::default())
        .await
        .unwrap();
    assert!(all
        .events
        .iter()
        .any(|e| e.tenant.as_deref() == Some("nlp")));
    let mine = f
        .service
        .audit_log(&lead, &AuditFilter::default())
        .await
        .unwrap();
    assert!(!mine.events.is_empty());
    assert!(
        mine.events
            .iter()
            .all(|e| e.tenant.as_deref() == Some("vision")),
        "{:?}",
        mine.events
    );
    assert_eq!(
        mine.tenants,
        vec![("vision".to_owned(), "Vision".to_owned())]
    );
    let err = f
        .service
        .audit_log(&member, &AuditFilter::default())
        .await
        .unwrap_err();
    assert_eq!(err.status(), 403);
    // Naming another tenant is not found, not an empty page.
    let forged = AuditFilter {
        tenant: Some("nlp".into()),
        ..Default::default()
    };
    assert_eq!(
        f.service
            .audit_log(&lead, &forged)
            .await
            .unwrap_err()
            .status(),
        404
    );

    // Filters: action prefix, actor, time range.
    let tokens = AuditFilter {
        action: Some("api_token.".into()),
        ..Default::default()
    };
    let page = f.service.audit_log(&admin, &tokens).await.unwrap();
    assert_eq!(page.total, 4);
    assert!(
        page.events.windows(2).all(|w| w[0].id > w[1].id),
        "newest first"
    );
    let by_actor = AuditFilter {
        actor: Some("system".into()),
        action: Some("api_token.create".into()),
        tenant: Some("vision".into()),
        ..Default::default()
    };
    assert_eq!(
        f.service.audit_log(&admin, &by_actor).await.unwrap().total,
        3
    );
    let future = AuditFilter {
        from: Some(f.clock.now() + chrono::Duration::days(1)),
        ..Default::default()
    };
    assert_eq!(f.service.audit_log(&admin, &future).await.unwrap().total, 0);
    let backwards = AuditFilter {
        from: Some(f.clock.now()),
        until: Some(f.clock.now() - chrono::Duration::days(1)),
        ..Default::default()
    };
    assert_eq!(
        f.service
            .audit_log(&admin, &backwards)
            .await
            .unwrap_err()
            .status(),
        400
    );

    // Paging: 50 per page.
    for _ in 0..60 {
        f.service
            .create_api_token_as_system(&slug("vision"), "bulk", None, TokenScope::Request)
            .await
            .unwrap();
    }
    let p1 = f.service.audit_log(&admin, &tokens).await.unwrap();
    assert_eq!((p1.total, p1.pages, p1.events.len()), (64, 2, 50));
    let p2 = f
        .service
        .audit_log(
            &admin,
            &AuditFilter {
                page: Some(2),
                ..tokens.clone()
            },
        )
        .await
        .unwrap();
    assert_eq!(p2.events.len(), 14);
    assert!(p2.events[0].id < p1.events[49].id);

    // CSV: a header and one line per matching event.
    let csv = f.service.audit_csv(&lead, &tokens).await.unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(
        lines[0],
        "id,at,actor,tenant,action,target_type,target_id,before,after"
    );
    assert_eq!(lines.len(), 1 + 63, "vision's 63 token events only");
    assert!(
        lines[1].contains(",vision,api_token.create,api_token,"),
        "{}",
        lines[1]
    );
}

#[tokio::test]
async fn audit_filters_at_the_edges_of_time_are_refused_cleanly() {
    use chrono::{DateTime, TimeZone, Utc};
    use tessera_protocol::views::{AuditFilter, AuditQuery};
    let f = fixture().await;
    let admin = f.admin().await;
    f.service
        .create_api_token_as_system(&slug("vision"), "ci", None, TokenScope::Request)
        .await
        .unwrap();
    let all = f
        .service
        .audit_log(&admin, &AuditFilter::default())
        .await
        .unwrap()
        .total;

    // The query string of /audit.csv?until=+262142-12-31: the day after the
    // last date chrono knows does not exist.
    let q = AuditQuery {
        until: "+262142-12-31".into(),
        ..Default::default()
    };
    assert_eq!(q.filter().unwrap_err().0, "until");

    // Dates outside 1970-01-01..9999-12-31 are a 400 naming the field, in
    // the page and in the CSV export.
    let far = |from: Option<DateTime<Utc>>, until: Option<DateTime<Utc>>| AuditFilter {
        from,
        until,
        ..Default::default()
    };
    let year = |y: i32| Utc.with_ymd_and_hms(y, 1, 1, 0, 0, 0).unwrap();
    for (filter, field) in [
        (far(Some(DateTime::<Utc>::MAX_UTC), None), "from"),
        (far(Some(DateTime::<Utc>::MIN_UTC), None), "from"),
        (far(Some(year(1969)), None), "from"),
        (far(None, Some(DateTime::<Utc>::MAX_UTC)), "until"),
        (
            far(None, Some(year(10_000) + chrono::Duration::seconds(1))),
            "until",
        ),
        (far(None, Some(DateTime::<Utc>::MIN_UTC)), "until"),
    ] {
        for err in [
            f.service.audit_log(&admin, &filter).await.unwrap_err(),
            f.service.audit_csv(&admin, &filter).await.unwrap_err(),
        ] {
            assert!(
                matches!(&err, ServiceError::Invalid { field: got, message }
                    if got == field && message.contains("9999-12-31")),
                "{filter:?}: {err:?}"
            );
        }
    }

    // The last day there is, inclusive, means no upper bound.
    let last = AuditQuery {
        from: "1970-01-01".into(),
        until: "9999-12-31".into(),
        ..Default::default()
    }
    .filter()
    .unwrap();
    assert_eq!(f.service.audit_log(&admin, &last).await.unwrap().total, all);
    let csv = f.service.audit_csv(&admin, &last).await.unwrap();
    assert_eq!(csv.lines().count() as u64, 1 + all);
}

#[tokio::test]
async fn api_tokens_get_a_bounded_lifetime_and_expire() {
    let f = fixture().await;
    let lead = f.login("lead", &["vision-leads"]).await;
    let actor = f
        .service
        .tenant_actor(&lead, &slug("vision"))
        .await
        .unwrap();
    let t0 = f.clock.now();

    // Without a lifetime: the default (90 days).
    let default = f
        .service
        .create_api_token(&lead, &actor, "default", None, TokenScope::Request)
        .await
        .unwrap();
    assert_eq!(default.token.expires_at, t0 + Duration::days(90));
    assert!(!default.token.expired);
    let day = f
        .service
        .create_api_token(&lead, &actor, "one day", Some(1), TokenScope::Request)
        .await
        .unwrap();
    assert_eq!(day.token.expires_at, t0 + Duration::days(1));
    let longest = f
        .service
        .create_api_token_as_system(&slug("vision"), "longest", Some(365), TokenScope::Request)
        .await
        .unwrap();
    assert_eq!(longest.token.expires_at, t0 + Duration::days(365));

    // Above the maximum (or zero): a 400 naming the limit, nothing stored.
    let (tokens, audit) = (f.count("api_tokens").await, f.audit_actions().await.len());
    for days in [0, 366, u32::MAX] {
        for err in [
            f.service
                .create_api_token(&lead, &actor, "too long", Some(days), TokenScope::Request)
                .await
                .unwrap_err(),
            f.service
                .create_api_token_as_system(
                    &slug("vision"),
                    "too long",
                    Some(days),
                    TokenScope::Request,
                )
                .await
                .unwrap_err(),
        ] {
            assert_eq!(err.status(), 400);
            assert_eq!(
                err.to_string(),
                format!("days: an API token lives between 1 and 365 days; got {days}")
            );
        }
    }
    assert_eq!(f.count("api_tokens").await, tokens);
    assert_eq!(f.audit_actions().await.len(), audit);

    // Works until the last second of its life, not after.
    f.clock.advance(Duration::days(1) - Duration::seconds(1));
    f.service.authenticate_api_token(&day.secret).await.unwrap();
    f.clock.advance(Duration::seconds(1));
    let err = f
        .service
        .authenticate_api_token(&day.secret)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServiceError::ExpiredApiToken { expired_at } if expired_at == t0 + Duration::days(1)),
        "{err:?}"
    );
    assert_eq!(
        (err.status(), err.code()),
        (401, tessera_service::ErrorCode::ExpiredApiToken)
    );
    assert_eq!(
        err.to_string(),
        "the API token expired on 2026-11-30 12:00 UTC; create a new one on your tenant's API tokens page"
    );
    f.service
        .authenticate_api_token(&default.secret)
        .await
        .unwrap();
    let listed = f.service.list_api_tokens(&lead, &actor).await.unwrap();
    let expired: Vec<&str> = listed
        .iter()
        .filter(|t| t.expired)
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(expired, ["one day"]);
    // The audit log records the expiry.
    let created = f
        .service
        .audit_log(
            &f.admin().await,
            &tessera_protocol::views::AuditFilter {
                action: Some("api_token.create".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(
        created.events.iter().all(|e| e
            .after
            .as_deref()
            .is_some_and(|a| a.contains("\"expires_at\""))),
        "{:?}",
        created.events
    );
}

#[tokio::test]
async fn tokens_from_before_expiry_existed_get_the_default_lifetime() {
    use sea_orm::{ConnectionTrait, EntityTrait, Statement};
    use tessera_migrations::{Migrator, MigratorTrait};
    let db = common::fresh_db().await;
    // The schema before API tokens expired, with one token in it.
    Migrator::up(&db, Some(6)).await.unwrap();
    let backend = db.get_database_backend();
    let created = chrono::Utc::now() - Duration::days(400);
    // Rows as that schema had them (the entities follow the newest one).
    let tenant_sql = match backend {
        sea_orm::DbBackend::Postgres => {
            "INSERT INTO tenants (slug, name, created_at) VALUES ('old', 'Old', $1)"
        }
        _ => "INSERT INTO tenants (slug, name, created_at) VALUES ('old', 'Old', ?)",
    };
    db.execute(Statement::from_sql_and_values(
        backend,
        tenant_sql,
        [created.into()],
    ))
    .await
    .unwrap();
    #[derive(sea_orm::FromQueryResult)]
    struct Id {
        id: i64,
    }
    let tenant = <Id as sea_orm::FromQueryResult>::find_by_statement(Statement::from_string(
        backend,
        "SELECT id FROM tenants WHERE slug = 'old'",
    ))
    .one(&db)
    .await
    .unwrap()
    .unwrap();
    let insert = match backend {
        sea_orm::DbBackend::Postgres => {
            "INSERT INTO api_tokens (tenant_id, name, token_hash, prefix, created_by, created_at) VALUES ($1, 'legacy', 'h', 'tsk_x', 'system', $2)"
        }
        _ => {
            "INSERT INTO api_tokens (tenant_id, name, token_hash, prefix, created_by, created_at) VALUES (?, 'legacy', 'h', 'tsk_x', 'system', ?)"
        }
    };
    db.execute(Statement::from_sql_and_values(
        backend,
        insert,
        [tenant.id.into(), created.into()],
    ))
    .await
    .unwrap();

    let before = chrono::Utc::now();
    Migrator::up(&db, None).await.unwrap();
    let after = chrono::Utc::now();
    let t = tessera_service::entity::api_token::Entity::find()
        .one(&db)
        .await
        .unwrap()
        .unwrap();
    let expires = t
        .expires_at
        .expect("the migration gives old tokens an expiry");
    assert!(
        expires >= before + Duration::days(90) - Duration::seconds(1)
            && expires <= after + Duration::days(90),
        "{expires}"
    );
}

/// Samples not yet counted when the rollup flags went away have their
/// minutes and hours marked due; counted ones nothing; and going back down
/// restores the flags from what is still due.
#[tokio::test]
async fn samples_not_rolled_up_become_due_rollups() {
    use sea_orm::{ConnectionTrait, EntityTrait, Statement};
    use tessera_migrations::{Migrator, MigratorTrait};
    use tessera_service::entity::gpu_rollup_pending;
    let db = common::fresh_db().await;
    // The schema with flags on every sample (before migration 18).
    Migrator::up(&db, Some(17)).await.unwrap();
    let backend = db.get_database_backend();
    // (device, at_ms, rolled, hour_rolled): d1's minute 1 has two samples
    // not counted; d2's minute 2 is counted but not its hour; d3 is done.
    for (device, at, rolled, hour) in [
        ("d1", 60_500_i64, false, false),
        ("d1", 61_500, false, false),
        ("d2", 120_000, true, false),
        ("d3", 180_000, true, true),
    ] {
        db.execute(Statement::from_string(
            backend,
            format!(
                "INSERT INTO gpu_samples (host_id, at_ms, gpu_uuid, device_uuid, weight_milli, \
                 mem_used_mib, covered_ms, rolled, hour_rolled) \
                 VALUES (1, {at}, 'g', '{device}', 0, 0, 10000, {rolled}, {hour})"
            ),
        ))
        .await
        .unwrap();
    }
    Migrator::up(&db, None).await.unwrap();
    let mut due: Vec<(i64, String, i64)> = gpu_rollup_pending::Entity::find()
        .all(&db)
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.period_ms, p.device_uuid, p.start_ms))
        .collect();
    due.sort();
    assert_eq!(
        due,
        vec![
            (60_000, "d1".to_owned(), 60_000),
            (3_600_000, "d1".to_owned(), 0),
            (3_600_000, "d2".to_owned(), 0),
        ]
    );
    // The samples read under the newest schema.
    assert_eq!(
        tessera_service::entity::gpu_sample::Entity::find()
            .all(&db)
            .await
            .unwrap()
            .len(),
        4
    );

    // Back before migration 18 (those after it first).
    let after_17 = u32::try_from(Migrator::migrations().len() - 17).unwrap();
    Migrator::down(&db, Some(after_17)).await.unwrap();
    #[derive(sea_orm::FromQueryResult, Debug, PartialEq)]
    struct Flags {
        device_uuid: String,
        rolled: bool,
        hour_rolled: bool,
    }
    let flags = <Flags as sea_orm::FromQueryResult>::find_by_statement(Statement::from_string(
        backend,
        "SELECT device_uuid, rolled, hour_rolled FROM gpu_samples ORDER BY id",
    ))
    .all(&db)
    .await
    .unwrap();
    let flags: Vec<(&str, bool, bool)> = flags
        .iter()
        .map(|f| (f.device_uuid.as_str(), f.rolled, f.hour_rolled))
        .collect();
    assert_eq!(
        flags,
        vec![
            ("d1", false, false),
            ("d1", false, false),
            ("d2", true, false),
            ("d3", true, true),
        ]
    );
    // And up again to the newest schema.
    Migrator::up(&db, None).await.unwrap();
    assert_eq!(
        Migrator::get_pending_migrations(&db).await.unwrap().len(),
        0
    );
}
