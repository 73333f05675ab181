//! Quotas, quota requests, notifications and the webhook outbox against a
//! real database (SQLite by default; PostgreSQL when
//! `TESSERA_TEST_POSTGRES_URL` is set): every transition and permission, the
//! approval race, temporary quota, and what people are told.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;
use tessera_service::notifications::DeliveryFailure;

use chrono::Duration;
use common::agent::{h100, offer_agrees};
use common::{fixture, slug, Fixture};
use tessera_core::lifecycle::{AllocationPhase, QuotaRequestState};
use tessera_core::notify::NotificationKind;
use tessera_core::quota::{shortfall, Demand, QuotaAmount};
use tessera_core::sharing::SliceShape;
use tessera_core::units::{ComputeMilli, MemMiB};
use tessera_protocol::quotas::{
    NewQuotaGrant, NewQuotaRequest, QuotaChange, QuotaDecision, SetQuota, WebhookDeliveryStatus,
};
use tessera_protocol::views::NewAllocation;
use tessera_service::{Clock, Principal, ServiceError};

// Groups: "vision" members, "vision-leads" tenant admins, "platform" admins.

async fn member(f: &Fixture) -> Principal {
    f.login("mia", &["vision"]).await
}
async fn lead(f: &Fixture) -> Principal {
    f.login("lee", &["vision", "vision-leads"]).await
}
async fn admin2(f: &Fixture) -> Principal {
    f.login("pat", &["platform"]).await
}

/// A host with `n` H100s in MIG mode.
async fn h100_host(f: &Fixture, n: u32) {
    let gpus = (0..n).map(|i| h100(i, &format!("GPU-a{i}"))).collect();
    common::agent::Agent::enrol(f, "gpu-1", gpus).await;
}

fn amount(gpus: f64, memory_gib: f64, max_slices: u32) -> QuotaAmount {
    QuotaAmount {
        gpus,
        memory_gib,
        max_slices,
    }
}

fn slice(profile: &str) -> NewAllocation {
    NewAllocation {
        tenant: None,
        pool: "h100-mig".parse().unwrap(),
        shape: SliceShape::Mig {
            profile: profile.into(),
        },
        lease_hours: 8,
        purpose: "training".into(),
        priority_class: None,
        qos: Default::default(),
        replaces: None,
    }
}

/// An entered instant (the tests' are all in range).
fn ts(t: chrono::DateTime<chrono::Utc>) -> tessera_protocol::timestamp::Timestamp {
    tessera_protocol::timestamp::Timestamp::new(t).unwrap()
}

fn ask(tenant: &str, a: QuotaAmount) -> NewQuotaRequest {
    NewQuotaRequest {
        tenant: tenant.parse().unwrap(),
        pool: "h100-mig".parse().unwrap(),
        amount: a,
        ends_at: None,
        justification: "a bigger model".into(),
        slice: None,
    }
}

/// Sets a permanent quota as four-eyes lets it happen: root sets it, and a
/// raise waits until a second platform admin (pat) approves it.
async fn set(f: &Fixture, tenant: &str, a: QuotaAmount) {
    let root = f.admin().await;
    let change = f
        .service
        .set_quota(
            &root.require_platform_admin().unwrap(),
            &SetQuota {
                tenant: tenant.parse().unwrap(),
                pool: "h100-mig".parse().unwrap(),
                amount: a,
                reason: String::new(),
            },
        )
        .await
        .unwrap();
    approve_as_second_admin(f, change).await;
}

/// Approves the raise a direct change left waiting, as pat.
async fn approve_as_second_admin(f: &Fixture, change: QuotaChange) {
    if let Some(p) = change.proposal {
        let pat = admin2(f).await;
        f.service
            .decide_quota_request(
                &pat.require_platform_admin().unwrap(),
                p.id,
                &QuotaDecision::Approve {
                    amount: None,
                    ends_at: None,
                },
            )
            .await
            .unwrap();
    }
}

async fn kinds(f: &Fixture, who: &Principal) -> Vec<String> {
    f.service
        .notifications(who)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.kind.as_str().to_owned())
        .collect()
}

fn count(actions: &[String], action: &str) -> usize {
    actions.iter().filter(|a| *a == action).count()
}

#[tokio::test]
async fn refused_slice_waits_for_quota_and_is_requested_on_approval() {
    let f = fixture().await;
    h100_host(&f, 1).await;
    // Vision has room for one 1g.10gb only.
    set(&f, "vision", amount(0.2, 10.0, 1)).await;
    let (mia, lee, pat) = (member(&f).await, lead(&f).await, admin2(&f).await);
    let mia_actor = f.service.tenant_actor(&mia, &slug("vision")).await.unwrap();

    // The slice is refused for lack of quota...
    let err = f
        .service
        .request_allocation(&mia_actor, &slice("3g.40gb"))
        .await
        .unwrap_err();
    assert_eq!(err.status(), 403, "{err:?}");
    assert_eq!(err.code(), tessera_service::ErrorCode::QuotaExceeded);
    // ...and what is missing is exactly the shortfall.
    let page = f
        .service
        .tenant_quota_page(&mia, &slug("vision"))
        .await
        .unwrap();
    let q = &page.quotas[0];
    let demand = Demand {
        compute: ComputeMilli(428),
        memory: MemMiB::from_gib(40),
        slices: 1,
    };
    let missing = shortfall(&q.quota, &q.usage, &demand);
    assert_eq!(
        (missing.compute.0, missing.memory, missing.max_slices),
        (228, MemMiB(40 * 1024 - 10 * 1024), 0)
    );

    // The member proposes it with the slice attached: tenant admins are told.
    let mut req = ask("vision", QuotaAmount::from_quota(&missing));
    req.slice = Some(slice("3g.40gb"));
    let r = f.service.create_quota_request(&mia, &req).await.unwrap();
    assert_eq!(r.state, QuotaRequestState::Proposed);
    assert_eq!(r.slice.as_deref(), Some("MIG 3g.40gb"));
    assert!(!r.can_submit && r.can_withdraw && !r.can_decide);
    assert_eq!(kinds(&f, &lee).await, ["quota_request.created"]);
    // A proposal is not in the platform admins' queue yet.
    let queue = f
        .service
        .approval_queue(&pat.require_platform_admin().unwrap())
        .await
        .unwrap();
    assert!(queue.items.is_empty());

    // The tenant admin submits it; the platform admins are told.
    let r = f.service.submit_quota_request(&lee, r.id).await.unwrap();
    assert_eq!(r.state, QuotaRequestState::Pending);
    assert_eq!(
        r.submitted_by.as_deref(),
        Some("User lee <lee@example.com>")
    );
    assert!(kinds(&f, &pat)
        .await
        .contains(&"quota_request.submitted".to_owned()));
    assert!(kinds(&f, &mia)
        .await
        .contains(&"quota_request.submitted".to_owned()));

    // The queue shows it with the tenant's quota and the pool's capacity.
    let proof = pat.require_platform_admin().unwrap();
    let queue = f.service.approval_queue(&proof).await.unwrap();
    assert_eq!(queue.items.len(), 1);
    let item = &queue.items[0];
    assert_eq!(item.request.id, r.id);
    assert!(item.request.can_decide);
    assert_eq!(item.current.quota.compute, ComputeMilli(200));
    assert_eq!(item.pool.gpus, 1);
    assert_eq!(item.pool.total.compute, ComputeMilli(1000));
    assert_eq!(item.pool.free.compute, ComputeMilli(1000));

    // Approval raises the quota and requests the waiting slice for Mia.
    let r = f
        .service
        .decide_quota_request(
            &proof,
            r.id,
            &QuotaDecision::Approve {
                amount: None,
                ends_at: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(r.state, QuotaRequestState::Approved);
    assert_eq!(r.granted, Some(missing));
    assert_eq!(r.decided_by.as_deref(), Some("User pat <pat@example.com>"));
    let id = r.allocation_id.expect("the waiting slice was requested");
    assert_eq!(r.slice_error, None);
    let a = f.service.get_allocation(&mia_actor, id).await.unwrap();
    assert_eq!(a.state, AllocationPhase::Placed);
    assert_eq!(a.requested_by, "User mia <mia@example.com>");
    let page = f
        .service
        .tenant_quota_page(&mia, &slug("vision"))
        .await
        .unwrap();
    assert_eq!(page.quotas[0].quota.compute, ComputeMilli(428));
    assert_eq!(page.quotas[0].usage.compute, ComputeMilli(428));
    assert!(kinds(&f, &mia)
        .await
        .contains(&"quota_request.approved".to_owned()));
    assert!(kinds(&f, &lee)
        .await
        .contains(&"quota_request.approved".to_owned()));

    let actions = f.audit_actions().await;
    for action in [
        "quota_request.create",
        "quota_request.submit",
        "quota_request.approve",
    ] {
        assert_eq!(count(&actions, action), 1, "{action} in {actions:?}");
    }
    assert_eq!(
        actions.last().map(String::as_str),
        Some("allocation.create")
    );
}

#[tokio::test]
async fn who_may_do_what() {
    let f = fixture().await;
    let (mia, lee, pat) = (member(&f).await, lead(&f).await, admin2(&f).await);
    let nora = f.login("nora", &["nlp"]).await;
    // A platform admin who also leads Vision.
    let boss = f.login("boss", &["platform", "vision-leads"]).await;

    // A member cannot set quota: no platform-admin proof.
    assert_eq!(mia.require_platform_admin().unwrap_err().status(), 403);
    assert_eq!(lee.require_platform_admin().unwrap_err().status(), 403);

    // A forged or foreign tenant is a 404, and nothing is stored.
    for tenant in ["nlp", "ghost"] {
        let err = f
            .service
            .create_quota_request(&mia, &ask(tenant, amount(1.0, 0.0, 0)))
            .await
            .unwrap_err();
        assert_eq!(err.status(), 404, "{tenant}: {err:?}");
    }
    assert_eq!(f.count("quota_requests").await, 0);

    // A platform admin outside the tenant asks nothing for it (sets quota instead).
    let err = f
        .service
        .create_quota_request(&pat, &ask("vision", amount(1.0, 0.0, 0)))
        .await
        .unwrap_err();
    assert_eq!(err.status(), 403);

    let proposal = f
        .service
        .create_quota_request(&mia, &ask("vision", amount(1.0, 0.0, 0)))
        .await
        .unwrap();
    // Only tenant admins submit; another tenant's user does not see it.
    let err = f
        .service
        .submit_quota_request(&mia, proposal.id)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 403);
    let err = f
        .service
        .submit_quota_request(&nora, proposal.id)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 404);
    let err = f
        .service
        .withdraw_quota_request(&nora, proposal.id)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 404);
    // A proposal cannot be decided before it is submitted.
    let err = f
        .service
        .decide_quota_request(
            &pat.require_platform_admin().unwrap(),
            proposal.id,
            &QuotaDecision::Approve {
                amount: None,
                ends_at: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409, "{err:?}");

    // Four-eyes: the requester and admins of the tenant may not decide.
    let pending = f
        .service
        .create_quota_request(&boss, &ask("vision", amount(1.0, 0.0, 0)))
        .await
        .unwrap();
    assert_eq!(pending.state, QuotaRequestState::Pending);
    let boss_view = f
        .service
        .quota_request_view(&boss, pending.id)
        .await
        .unwrap();
    assert!(!boss_view.can_decide);
    assert!(boss_view.decide_blocked.is_some());
    let err = f
        .service
        .decide_quota_request(
            &boss.require_platform_admin().unwrap(),
            pending.id,
            &QuotaDecision::Reject {
                reason: "mine".into(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), 403, "{err:?}");
    assert!(err.to_string().contains("another platform admin"), "{err}");
    // Another member may not withdraw someone else's request; a lead may.
    let other = f.login("max", &["vision"]).await;
    let err = f
        .service
        .withdraw_quota_request(&other, proposal.id)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 403);
    let w = f
        .service
        .withdraw_quota_request(&lee, proposal.id)
        .await
        .unwrap();
    assert_eq!(w.state, QuotaRequestState::Withdrawn);
    // Withdrawn is final.
    let err = f
        .service
        .submit_quota_request(&lee, proposal.id)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409);
    // Nothing above changed any quota.
    let page = f
        .service
        .tenant_quota_page(&lee, &slug("vision"))
        .await
        .unwrap();
    let h100 = page.quotas.iter().find(|q| q.pool == "h100-mig").unwrap();
    assert_eq!(h100.quota.compute, ComputeMilli(2000));
}

#[tokio::test]
async fn bad_input_is_refused_and_stores_nothing() {
    let f = fixture().await;
    let lee = lead(&f).await;
    let now = f.clock.now();
    let cases: Vec<(NewQuotaRequest, &str)> = vec![
        (ask("vision", amount(0.0, 0.0, 0)), "amount"),
        (ask("vision", amount(-1.0, 0.0, 0)), "amount.gpus"),
        (
            ask("vision", amount(1.0, f64::INFINITY, 0)),
            "amount.memory_gib",
        ),
        (
            NewQuotaRequest {
                pool: "nope".parse().unwrap(),
                ..ask("vision", amount(1.0, 0.0, 0))
            },
            "pool",
        ),
        (
            NewQuotaRequest {
                ends_at: Some(ts(now - Duration::hours(1))),
                ..ask("vision", amount(1.0, 0.0, 0))
            },
            "ends_at",
        ),
        (
            NewQuotaRequest {
                justification: "   ".into(),
                ..ask("vision", amount(1.0, 0.0, 0))
            },
            "justification",
        ),
        (
            NewQuotaRequest {
                slice: Some(NewAllocation {
                    pool: "a100-whole".parse().unwrap(),
                    ..slice("1g.10gb")
                }),
                ..ask("vision", amount(1.0, 0.0, 0))
            },
            "slice.pool",
        ),
        (
            NewQuotaRequest {
                slice: Some(slice("9g.900gb")),
                ..ask("vision", amount(1.0, 0.0, 0))
            },
            "slice",
        ),
    ];
    for (req, field) in cases {
        match f.service.create_quota_request(&lee, &req).await {
            Err(ServiceError::Invalid { field: got, .. }) => assert_eq!(got, field),
            other => panic!("{field}: {other:?}"),
        }
    }
    assert_eq!(f.count("quota_requests").await, 0);

    // Rejecting needs a reason; without one nothing changes.
    let r = f
        .service
        .create_quota_request(&lee, &ask("vision", amount(1.0, 0.0, 0)))
        .await
        .unwrap();
    let pat = admin2(&f).await;
    let proof = pat.require_platform_admin().unwrap();
    let err = f
        .service
        .decide_quota_request(&proof, r.id, &QuotaDecision::Reject { reason: " ".into() })
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServiceError::Invalid { ref field, .. } if field == "reason"),
        "{err:?}"
    );
    let r2 = f
        .service
        .decide_quota_request(
            &proof,
            r.id,
            &QuotaDecision::Reject {
                reason: "the pool is full until March".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        r2.state,
        QuotaRequestState::Rejected {
            reason: "the pool is full until March".into()
        }
    );
    assert!(kinds(&f, &lee)
        .await
        .contains(&"quota_request.rejected".to_owned()));
    // Decided once: approving it now is a conflict naming who decided.
    let err = f
        .service
        .decide_quota_request(
            &proof,
            r.id,
            &QuotaDecision::Approve {
                amount: None,
                ends_at: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409);
    assert!(
        err.to_string().contains("already rejected by User pat"),
        "{err}"
    );
    let page = f
        .service
        .tenant_quota_page(&lee, &slug("vision"))
        .await
        .unwrap();
    let h100 = page.quotas.iter().find(|q| q.pool == "h100-mig").unwrap();
    assert_eq!(h100.quota.compute, ComputeMilli(2000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_admins_approving_at_once_one_wins() {
    let f = fixture().await;
    let lee = lead(&f).await;
    let a = admin2(&f).await;
    let b = f.login("quinn", &["platform"]).await;
    for round in 0..5 {
        let r = f
            .service
            .create_quota_request(&lee, &ask("vision", amount(1.0, 8.0, 1)))
            .await
            .unwrap();
        let (pa, pb) = (
            a.require_platform_admin().unwrap(),
            b.require_platform_admin().unwrap(),
        );
        let approve = QuotaDecision::Approve {
            amount: None,
            ends_at: None,
        };
        let (ra, rb) = tokio::join!(
            f.service.decide_quota_request(&pa, r.id, &approve),
            f.service.decide_quota_request(&pb, r.id, &approve),
        );
        let wins = [&ra, &rb].iter().filter(|r| r.is_ok()).count();
        assert_eq!(wins, 1, "round {round}: {ra:?} / {rb:?}");
        let loser = if ra.is_err() { ra } else { rb };
        let err = loser.unwrap_err();
        assert_eq!(err.status(), 409, "{err:?}");
        assert!(err.to_string().contains("already approved"), "{err}");
        // The quota rose once per round.
        let page = f
            .service
            .tenant_quota_page(&lee, &slug("vision"))
            .await
            .unwrap();
        let h100 = page.quotas.iter().find(|q| q.pool == "h100-mig").unwrap();
        assert_eq!(h100.base.compute, ComputeMilli(2000 + 1000 * (round + 1)));
    }
    assert_eq!(count(&f.audit_actions().await, "quota_request.approve"), 5);
}

#[tokio::test]
async fn temporary_quota_and_different_amounts() {
    let f = fixture().await;
    let lee = lead(&f).await;
    let pat = admin2(&f).await;
    let proof = pat.require_platform_admin().unwrap();
    let t0 = f.clock.now();
    let mut req = ask("vision", amount(2.0, 80.0, 2));
    req.ends_at = Some(ts(t0 + Duration::days(7)));
    let r = f.service.create_quota_request(&lee, &req).await.unwrap();
    // The admin grants less, for two hours only.
    let r = f
        .service
        .decide_quota_request(
            &proof,
            r.id,
            &QuotaDecision::Approve {
                amount: Some(amount(1.0, 40.0, 1)),
                ends_at: Some(ts(t0 + Duration::hours(2))),
            },
        )
        .await
        .unwrap();
    assert_eq!(r.granted_ends_at, Some(t0 + Duration::hours(2)));
    let quota = |f: &Fixture| {
        let lee = lee.clone();
        let service = f.service.clone();
        async move {
            let page = service
                .tenant_quota_page(&lee, &slug("vision"))
                .await
                .unwrap();
            page.quotas
                .into_iter()
                .find(|q| q.pool == "h100-mig")
                .unwrap()
        }
    };
    let as_lee = f.service.tenant_actor(&lee, &slug("vision")).await.unwrap();
    let q = quota(&f).await;
    assert_eq!(q.base.compute, ComputeMilli(2000));
    assert_eq!(q.quota.compute, ComputeMilli(3000));
    // Admissions read the same quota in force (permanent + grant).
    assert_eq!(offer_agrees(&f, &as_lee, "h100-mig").await.0 .0, 3000);
    assert_eq!(q.quota.memory, MemMiB::from_gib(200));
    assert_eq!(q.grants.len(), 1);
    assert_eq!(q.grants[0].quota_request_id, Some(r.id));

    // An admin adds a grant directly: with four-eyes it waits for another
    // platform admin (its author may not approve it); then it is ended early.
    let root = f.admin().await;
    let root_proof = root.require_platform_admin().unwrap();
    let change = f
        .service
        .grant_quota(
            &root_proof,
            &NewQuotaGrant {
                tenant: "vision".parse().unwrap(),
                pool: "h100-mig".parse().unwrap(),
                amount: amount(0.5, 0.0, 0),
                ends_at: ts(t0 + Duration::hours(10)),
                reason: "conference deadline".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(change.quota.quota.compute, ComputeMilli(3000), "not yet");
    let proposal = change.proposal.clone().unwrap();
    assert_eq!(proposal.state, QuotaRequestState::Pending);
    assert_eq!(proposal.ends_at, Some(t0 + Duration::hours(10)));
    let err = f
        .service
        .decide_quota_request(
            &root_proof,
            proposal.id,
            &QuotaDecision::Approve {
                amount: None,
                ends_at: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), 403, "{err}");
    approve_as_second_admin(&f, change).await;
    let g = quota(&f).await;
    assert_eq!(g.quota.compute, ComputeMilli(3500));
    assert_eq!(offer_agrees(&f, &as_lee, "h100-mig").await.0 .0, 3500);
    let grant_id = g
        .grants
        .iter()
        .find(|g| g.reason == "conference deadline")
        .unwrap()
        .id;
    f.service.end_quota_grant(&proof, grant_id).await.unwrap();
    let err = f
        .service
        .end_quota_grant(&proof, grant_id)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 409);
    assert_eq!(quota(&f).await.quota.compute, ComputeMilli(3000));
    // An ended grant counts no more.
    assert_eq!(offer_agrees(&f, &as_lee, "h100-mig").await.0 .0, 3000);
    // A grant must end in the future.
    let err = f
        .service
        .grant_quota(
            &proof,
            &NewQuotaGrant {
                tenant: "vision".parse().unwrap(),
                pool: "h100-mig".parse().unwrap(),
                amount: amount(0.5, 0.0, 0),
                ends_at: ts(t0),
                reason: String::new(),
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Invalid { ref field, .. } if field == "ends_at"));

    // After two hours the temporary quota is gone by itself.
    f.clock.advance(Duration::hours(2));
    let q = quota(&f).await;
    assert_eq!(q.quota.compute, ComputeMilli(2000));
    assert!(q.grants.is_empty());
    // An expired one neither.
    assert_eq!(offer_agrees(&f, &as_lee, "h100-mig").await.0 .0, 2000);

    // A restart does not undo what admins set: configuration only seeds.
    set(&f, "vision", amount(5.0, 400.0, 10)).await;
    f.service.seed_policy().await.unwrap();
    assert_eq!(quota(&f).await.base.compute, ComputeMilli(5000));
    let actions = f.audit_actions().await;
    // With four-eyes, the direct grant was filed and approved, not granted.
    assert_eq!(count(&actions, "quota.grant"), 0);
    assert_eq!(count(&actions, "quota_request.approve"), 3);
    assert_eq!(count(&actions, "quota.grant_end"), 1);
    assert!(count(&actions, "quota.set") >= 1);
}

#[tokio::test]
async fn the_queue_is_oldest_first_and_shows_history() {
    let f = fixture().await;
    let lee = lead(&f).await;
    let nlp_member = f.login("nora", &["nlp"]).await;
    let pat = admin2(&f).await;
    let proof = pat.require_platform_admin().unwrap();
    let first = f
        .service
        .create_quota_request(&lee, &ask("vision", amount(1.0, 0.0, 0)))
        .await
        .unwrap();
    f.service
        .decide_quota_request(
            &proof,
            first.id,
            &QuotaDecision::Reject {
                reason: "no".into(),
            },
        )
        .await
        .unwrap();
    f.clock.advance(Duration::minutes(1));
    let older = f
        .service
        .create_quota_request(&lee, &ask("vision", amount(2.0, 0.0, 0)))
        .await
        .unwrap();
    f.clock.advance(Duration::minutes(1));
    // NLP has no tenant admins: a member's proposal stays a proposal.
    let nlp = f
        .service
        .create_quota_request(&nlp_member, &ask("nlp", amount(1.0, 0.0, 0)))
        .await
        .unwrap();
    assert_eq!(nlp.state, QuotaRequestState::Proposed);
    let newer = f
        .service
        .create_quota_request(&lee, &ask("vision", amount(3.0, 0.0, 0)))
        .await
        .unwrap();
    let queue = f.service.approval_queue(&proof).await.unwrap();
    let ids: Vec<_> = queue.items.iter().map(|i| i.request.id).collect();
    assert_eq!(ids, [older.id, newer.id]);
    assert!(queue.four_eyes);
    let history: Vec<_> = queue.items[0].history.iter().map(|h| h.id).collect();
    assert_eq!(history, [newer.id, first.id]);
    assert_eq!(queue.recent.len(), 1);
    assert_eq!(queue.recent[0].id, first.id);
}

#[tokio::test]
async fn webhook_events_wait_in_an_outbox_and_back_off() {
    let f = fixture().await;
    let lee = lead(&f).await;
    let mia = member(&f).await;
    // Members may not manage it; strangers do not see the tenant.
    let err = f
        .service
        .set_webhook(&mia, &slug("vision"), "https://chat.example.com/h")
        .await
        .unwrap_err();
    assert_eq!(err.status(), 403);
    let nora = f.login("nora", &["nlp"]).await;
    let err = f
        .service
        .webhook_view(&nora, &slug("vision"))
        .await
        .unwrap_err();
    assert_eq!(err.status(), 404);
    let err = f
        .service
        .set_webhook(&lee, &slug("vision"), "ftp://nope")
        .await
        .unwrap_err();
    assert_eq!(err.status(), 400);
    // Without a webhook, a tenant event queues no delivery.
    f.service
        .create_quota_request(&lee, &ask("vision", amount(0.5, 0.0, 0)))
        .await
        .unwrap();
    assert!(f
        .service
        .due_webhook_deliveries(|_| 10)
        .await
        .unwrap()
        .is_empty());

    let created = f
        .service
        .set_webhook(&lee, &slug("vision"), "https://chat.example.com/h")
        .await
        .unwrap();
    assert!(created.secret.starts_with("whsec_"));
    // A tenant event lands in the outbox.
    f.service
        .create_quota_request(&lee, &ask("vision", amount(1.0, 0.0, 0)))
        .await
        .unwrap();
    let due = f.service.due_webhook_deliveries(|_| 10).await.unwrap();
    assert_eq!(due.len(), 1);
    let d = &due[0];
    // Claimed: another server replica asking now gets nothing.
    assert!(f
        .service
        .due_webhook_deliveries(|_| 10)
        .await
        .unwrap()
        .is_empty());
    assert_eq!(d.event, NotificationKind::QuotaRequestCreated);
    assert_eq!(d.secret, created.secret);
    let payload: serde_json::Value = serde_json::from_str(&d.payload).unwrap();
    assert_eq!(payload["tenant"], "vision");
    assert_eq!(payload["event"], "quota_request.created");

    // Failures back off: 5 s, 10 s, ...; after 8 tries it is given up.
    f.service
        .finish_webhook_delivery(d.id, Err(DeliveryFailure::plain("HTTP 500")), 5)
        .await
        .unwrap();
    assert!(f
        .service
        .due_webhook_deliveries(|_| 10)
        .await
        .unwrap()
        .is_empty());
    f.clock.advance(Duration::seconds(5));
    assert_eq!(
        f.service
            .due_webhook_deliveries(|_| 10)
            .await
            .unwrap()
            .len(),
        1
    );
    for _ in 1..8 {
        // The last tries: unreachable. The tenant is told coarsely, the
        // platform admins exactly.
        let failure = DeliveryFailure {
            shown: "could not deliver: the receiver did not answer".to_owned(),
            detail: "dns error: no record for hooks.example.invalid".to_owned(),
        };
        f.service
            .finish_webhook_delivery(d.id, Err(failure), 5)
            .await
            .unwrap();
        f.clock.advance(Duration::hours(1));
    }
    assert!(f
        .service
        .due_webhook_deliveries(|_| 10)
        .await
        .unwrap()
        .is_empty());
    let view = f
        .service
        .webhook_view(&lee, &slug("vision"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(view.deliveries[0].status, WebhookDeliveryStatus::Failed);
    assert_eq!(view.deliveries[0].attempts, 8);
    assert_eq!(
        view.deliveries[0].last_error.as_deref(),
        Some("could not deliver: the receiver did not answer")
    );
    assert_eq!(
        view.deliveries[0].detail, None,
        "not for the tenant's admins"
    );
    let root = f.admin().await;
    let seen = f
        .service
        .webhook_view(&root, &slug("vision"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        seen.deliveries[0].detail.as_deref(),
        Some("dns error: no record for hooks.example.invalid"),
        "a platform admin sees why, exactly"
    );
    let err = f
        .service
        .delete_webhook(&root, &slug("vision"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServiceError::Forbidden(_)),
        "looks, does not change: {err:?}"
    );

    // A test event is delivered on the first try.
    f.service.test_webhook(&lee, &slug("vision")).await.unwrap();
    let due = f.service.due_webhook_deliveries(|_| 10).await.unwrap();
    assert_eq!(due[0].event, NotificationKind::WebhookTest);
    f.service
        .finish_webhook_delivery(due[0].id, Ok(()), 5)
        .await
        .unwrap();
    let view = f
        .service
        .webhook_view(&lee, &slug("vision"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(view.deliveries[0].status, WebhookDeliveryStatus::Delivered);
    // Removing the webhook drops what was not delivered.
    f.service
        .delete_webhook(&lee, &slug("vision"))
        .await
        .unwrap();
    assert!(f
        .service
        .webhook_view(&lee, &slug("vision"))
        .await
        .unwrap()
        .is_none());
    let actions = f.audit_actions().await;
    for a in ["webhook.set", "webhook.test", "webhook.delete"] {
        assert_eq!(count(&actions, a), 1, "{a}");
    }
}

#[tokio::test]
async fn notifications_are_per_user_and_marked_read() {
    let f = fixture().await;
    let lee = lead(&f).await;
    let mia = member(&f).await;
    let r = f
        .service
        .create_quota_request(&mia, &ask("vision", amount(1.0, 0.0, 0)))
        .await
        .unwrap();
    f.service.withdraw_quota_request(&lee, r.id).await.unwrap();
    let inbox = f.service.notifications(&mia).await.unwrap();
    assert_eq!(inbox.unread, 1);
    assert_eq!(inbox.items[0].kind, NotificationKind::QuotaRequestWithdrawn);
    // Lee's notification is not Mia's to read.
    let lees = f.service.notifications(&lee).await.unwrap();
    let err = f
        .service
        .mark_notifications_read(&mia, Some(lees.items[0].id))
        .await
        .unwrap_err();
    assert_eq!(err.status(), 404);
    assert_eq!(f.service.unread_notifications(&lee).await.unwrap(), 1);
    assert_eq!(
        f.service
            .mark_notifications_read(&mia, Some(inbox.items[0].id))
            .await
            .unwrap(),
        1
    );
    assert_eq!(f.service.unread_notifications(&mia).await.unwrap(), 0);
    assert_eq!(
        f.service.mark_notifications_read(&lee, None).await.unwrap(),
        1
    );
    assert_eq!(f.service.unread_notifications(&lee).await.unwrap(), 0);
}

#[tokio::test]
async fn changing_quota_with_a_queue_waiting_retries_it_without_deadlock() {
    let f = fixture().await;
    h100_host(&f, 1).await;
    let nora = f.login("nora", &["nlp"]).await;
    let nlp = f.service.tenant_actor(&nora, &slug("nlp")).await.unwrap();
    let full = f
        .service
        .request_allocation(&nlp, &slice("7g.80gb"))
        .await
        .unwrap();
    assert_eq!(full.state, AllocationPhase::Placed);
    let mia = member(&f).await;
    let vision = f.service.tenant_actor(&mia, &slug("vision")).await.unwrap();
    let waiting = f
        .service
        .request_allocation(&vision, &slice("1g.10gb"))
        .await
        .unwrap();
    assert_eq!(waiting.state, AllocationPhase::Queued);
    // set_quota, grant_quota and an approval each retry the queue after
    // their commit; none may wait on its own writer turn.
    let limit = std::time::Duration::from_secs(10);
    tokio::time::timeout(limit, set(&f, "vision", amount(3.0, 200.0, 8)))
        .await
        .expect("set_quota returns");
    let root = f.admin().await;
    let proof = root.require_platform_admin().unwrap();
    let change = tokio::time::timeout(
        limit,
        f.service.grant_quota(
            &proof,
            &NewQuotaGrant {
                tenant: "vision".parse().unwrap(),
                pool: "h100-mig".parse().unwrap(),
                amount: amount(1.0, 0.0, 0),
                ends_at: ts(f.clock.now() + Duration::hours(1)),
                reason: "burst".into(),
            },
        ),
    )
    .await
    .expect("grant_quota returns")
    .unwrap();
    tokio::time::timeout(limit, approve_as_second_admin(&f, change))
        .await
        .expect("the approval returns");
    // Once the GPU frees, the next retry places the waiting slice.
    f.service.release_allocation(&nlp, full.id).await.unwrap();
    f.service.tick().await.unwrap();
    let w = f.service.get_allocation(&vision, waiting.id).await.unwrap();
    assert_ne!(w.state, AllocationPhase::Queued);
}

/// SQLite's "database is locked" (another writer kept the file past the busy
/// timeout) is the server being busy: 503 with Retry-After, never a 500.
#[tokio::test]
async fn a_locked_sqlite_database_is_busy_not_broken() {
    use sea_orm::{ConnectOptions, ConnectionTrait, Database, TransactionTrait};
    let url = common::sqlite_url();
    let holder = tessera_service::connect(&url).await.unwrap();
    holder
        .execute_unprepared("CREATE TABLE t (x INTEGER)")
        .await
        .unwrap();
    let txn = holder.begin().await.unwrap();
    txn.execute_unprepared("INSERT INTO t VALUES (1)")
        .await
        .unwrap();
    let mut options = ConnectOptions::new(url);
    options.max_connections(1).sqlx_logging(false);
    let other = Database::connect(options).await.unwrap();
    other
        .execute_unprepared("PRAGMA busy_timeout = 0")
        .await
        .unwrap();
    let locked = ServiceError::Database(
        other
            .execute_unprepared("INSERT INTO t VALUES (2)")
            .await
            .unwrap_err(),
    );
    assert!(locked.is_busy(), "{locked:?}");
    assert_eq!(locked.status(), 503);
    assert!(locked.retry_after_s().is_some());
    assert_eq!(locked.code().as_str(), "busy");
    assert!(locked.public_message().contains("busy"));
    // Another database error stays an internal failure.
    let missing = ServiceError::Database(
        other
            .execute_unprepared("SELECT * FROM no_such_table")
            .await
            .unwrap_err(),
    );
    assert!(!missing.is_busy());
    assert_eq!(missing.status(), 500);
    txn.rollback().await.unwrap();
}

/// Webhook deliveries that keep failing and retrying claim their rows in the
/// writer turn: 2,000 use-case writes beside 20 delivery workers all succeed
/// (before, SQLite answered some of them "database is locked", a 500).
#[tokio::test]
async fn writes_never_fail_while_webhook_deliveries_retry() {
    let f = fixture().await;
    let lee = lead(&f).await;
    f.service
        .set_webhook(&lee, &slug("vision"), "https://chat.example.com/h")
        .await
        .unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for _ in 0..20 {
        let (service, clock, stop) = (f.service.clone(), f.clock.clone(), stop.clone());
        workers.push(tokio::spawn(async move {
            let mut tries = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for d in service.due_webhook_deliveries(|_| 5).await? {
                    service
                        .finish_webhook_delivery(d.id, Err(DeliveryFailure::plain("HTTP 500")), 1)
                        .await?;
                    tries += 1;
                }
                clock.advance(Duration::seconds(1));
                tokio::task::yield_now().await;
            }
            Ok::<u32, ServiceError>(tries)
        }));
    }
    let mut writers = Vec::new();
    for w in 0..4 {
        let (service, lee) = (f.service.clone(), lee.clone());
        writers.push(tokio::spawn(async move {
            let mut failures = Vec::new();
            for i in 0..500 {
                let outcome = if (i + w) % 2 == 0 {
                    service
                        .create_quota_request(&lee, &ask("vision", amount(0.1, 0.0, 0)))
                        .await
                        .map(drop)
                } else {
                    service.mark_notifications_read(&lee, None).await.map(drop)
                };
                if let Err(e) = outcome {
                    failures.push(e);
                }
            }
            failures
        }));
    }
    let mut failures = Vec::new();
    for w in writers {
        failures.extend(w.await.unwrap());
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut tries = 0;
    for w in workers {
        tries += w
            .await
            .unwrap()
            .expect("deliveries never fail to claim or finish");
    }
    assert!(
        failures.is_empty(),
        "{} of 2000 writes failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(3)]
    );
    // The receiver really was failing all along: deliveries were tried
    // (and retried) while the writes ran.
    assert!(tries >= 20, "only {tries} delivery tries");
}

/// Four-eyes has no back door: a platform admin who also administers the
/// tenant raises its quota directly; what lowers applies at once, the raise
/// waits as a pending request that neither she nor anyone but another
/// platform admin can approve, and the other admins are told.
#[tokio::test]
async fn a_platform_admins_own_raise_waits_for_another_admin() {
    let f = fixture().await;
    let ada = f
        .login("ada", &["platform", "vision", "vision-leads"])
        .await;
    let pat = admin2(&f).await;
    let proof = ada.require_platform_admin().unwrap();
    let h100 = |f: &Fixture| {
        let (service, ada) = (f.service.clone(), ada.clone());
        async move {
            let page = service
                .tenant_quota_page(&ada, &slug("vision"))
                .await
                .unwrap();
            page.quotas
                .into_iter()
                .find(|q| q.pool == "h100-mig")
                .unwrap()
        }
    };
    // Seeded: 2 GPUs, 160 GiB, 8 slices. Ada asks for 3 GPUs (a raise),
    // 80 GiB (lower) and 8 slices (the same).
    let change = f
        .service
        .set_quota(
            &proof,
            &SetQuota {
                tenant: "vision".parse().unwrap(),
                pool: "h100-mig".parse().unwrap(),
                amount: amount(3.0, 80.0, 8),
                reason: "the detector team doubled".into(),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        change.quota.base.compute,
        ComputeMilli(2000),
        "no raise yet"
    );
    assert_eq!(
        change.quota.base.memory,
        MemMiB::from_gib(80),
        "lowered now"
    );
    let proposal = change.proposal.clone().expect("the raise waits");
    assert_eq!(proposal.state, QuotaRequestState::Pending);
    assert_eq!(proposal.amount.compute, ComputeMilli(1000));
    assert!(proposal.amount.memory.0 == 0 && proposal.amount.max_slices == 0);
    assert_eq!(proposal.justification, "the detector team doubled");
    assert_eq!(h100(&f).await.base.compute, ComputeMilli(2000));
    // Her own raise is not hers to approve.
    let approve = QuotaDecision::Approve {
        amount: None,
        ends_at: None,
    };
    let err = f
        .service
        .decide_quota_request(&proof, proposal.id, &approve)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 403, "{err}");
    assert_eq!(h100(&f).await.base.compute, ComputeMilli(2000));
    // The other platform admins were told; the audit log has both halves.
    assert!(kinds(&f, &pat)
        .await
        .contains(&"quota_request.created".to_owned()));
    let actions = f.audit_actions().await;
    assert_eq!(
        actions[actions.len() - 2..],
        ["quota.set", "quota_request.create"],
        "{actions:?}"
    );
    // A second platform admin approves: exactly what Ada set is in force.
    f.service
        .decide_quota_request(
            &pat.require_platform_admin().unwrap(),
            proposal.id,
            &approve,
        )
        .await
        .unwrap();
    let q = h100(&f).await;
    assert_eq!(
        (q.base.compute, q.base.memory, q.base.max_slices),
        (ComputeMilli(3000), MemMiB::from_gib(80), 8)
    );
    // Lowering alone applies at once, with nothing to approve.
    let change = f
        .service
        .set_quota(
            &proof,
            &SetQuota {
                tenant: "vision".parse().unwrap(),
                pool: "h100-mig".parse().unwrap(),
                amount: amount(1.0, 80.0, 8),
                reason: String::new(),
            },
        )
        .await
        .unwrap();
    assert!(change.proposal.is_none());
    assert_eq!(change.quota.base.compute, ComputeMilli(1000));
    // A direct grant needs a reason (the approver reads it) and waits too.
    let grant = NewQuotaGrant {
        tenant: "vision".parse().unwrap(),
        pool: "h100-mig".parse().unwrap(),
        amount: amount(1.0, 0.0, 0),
        ends_at: ts(f.clock.now() + Duration::days(1)),
        reason: " ".into(),
    };
    let err = f.service.grant_quota(&proof, &grant).await.unwrap_err();
    assert!(matches!(err, ServiceError::Invalid { ref field, .. } if field == "reason"));
    let change = f
        .service
        .grant_quota(
            &proof,
            &NewQuotaGrant {
                reason: "demo day".into(),
                ..grant
            },
        )
        .await
        .unwrap();
    assert!(change.proposal.is_some());
    assert!(h100(&f).await.grants.is_empty());
}
