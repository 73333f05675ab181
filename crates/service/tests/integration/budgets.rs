//! Recovery policies, budgets and statements against a real database
//! (SQLite, or PostgreSQL when `TESSERA_TEST_POSTGRES_URL` is set): two
//! whole A100s, one held by Vision, priced by the hour on the test clock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use chrono::Duration;
use common::agent::*;
use common::{fixture, Fixture};
use tessera_core::budget::BudgetAlert;
use tessera_core::ledger::recovery::RecoveryPolicy;
use tessera_core::notify::NotificationKind;
use tessera_core::schedule::QosClass;
use tessera_core::sharing::SliceShape;
use tessera_protocol::views::{
    BudgetQuery, LedgerQuery, NewBudget, NewPrice, StatementQuery, UsageQuery,
};
use tessera_service::{Principal, ServiceError};

fn whole() -> SliceShape {
    SliceShape::Whole {
        count: 1,
        nvlink_local: false,
    }
}

async fn price(f: &Fixture, gpu_hour: &str, recovery: Option<RecoveryPolicy>) {
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    f.service
        .set_price(
            &proof,
            &NewPrice {
                pool: "a100-whole".parse().unwrap(),
                currency: "EUR".into(),
                gpu_hour: gpu_hour.into(),
                gib_hour: "0".into(),
                effective_from: None,
                recovery,
            },
        )
        .await
        .unwrap();
}

/// `minutes` of the agent heard every 30 s and the timer running.
async fn run(f: &Fixture, agent: &mut Agent, minutes: i64) {
    for _ in 0..minutes * 2 {
        f.clock.advance(Duration::seconds(30));
        agent.converge(f).await;
        f.service.tick().await.unwrap();
    }
}

/// Two A100s, the ledger recording, and Vision holding one of them.
async fn one_of_two_held(f: &Fixture) -> Agent {
    let mut agent = Agent::enrol(f, "gpu-1", vec![a100(0, "GPU-c1"), a100(1, "GPU-c2")]).await;
    agent.converge(f).await;
    f.service.tick().await.unwrap();
    agent
}

async fn hold(f: &Fixture, agent: &mut Agent, qos: QosClass) -> Result<(), ServiceError> {
    let alice = actor(f, "alice", &["vision"], "vision").await;
    let mut req = ask("a100-whole", whole(), 48);
    req.qos = qos;
    f.service.request_allocation(&alice, &req).await?;
    agent.converge(f).await;
    Ok(())
}

fn micros(text: &str) -> u128 {
    tessera_core::metering::parse_micros(text).unwrap() as u128
}

#[tokio::test]
async fn each_policy_splits_the_pools_cost_and_a_change_never_reprices_the_past() {
    let f = fixture().await;
    let start = f.service.now();
    let mut agent = one_of_two_held(&f).await;
    price(&f, "10", None).await;
    hold(&f, &mut agent, QosClass::Guaranteed).await.unwrap();
    run(&f, &mut agent, 60).await;
    let first_hour = f.service.now();
    price(&f, "10", Some(RecoveryPolicy::FullRecovery)).await;
    run(&f, &mut agent, 60).await;
    let second_hour = f.service.now();
    price(&f, "10", Some(RecoveryPolicy::UsedBased)).await;
    run(&f, &mut agent, 60).await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let ledger = |from, to| {
        let q = LedgerQuery {
            from: Some(from),
            to: Some(to),
            ..LedgerQuery::default()
        };
        let (f, proof) = (&f, &proof);
        async move { f.service.ledger(proof, &q).await.unwrap() }
    };
    // The slice became active a moment after the first price: a few
    // seconds of the first hour are free time.
    let l = ledger(start, first_hour).await;
    let c = &l.charges[0];
    assert_eq!(c.currency, "EUR");
    assert!(c.balanced);
    let vision = &c.tenants[0];
    assert_eq!(vision.tenant, "vision");
    assert_eq!(vision.overhead, "0.00", "showback: {c:?}");
    // Two GPUs for the hour (less what came before the price) at 10.00.
    let cost = micros(&c.cost);
    assert!(cost > 19_900_000 && cost <= 20_000_000, "{c:?}");
    assert_eq!(micros(&vision.direct) + micros(&c.platform), cost);
    let direct_h1 = micros(&vision.direct);
    assert!(direct_h1 > 9_900_000, "{c:?}");

    // Full recovery from the second hour: the free GPU is Vision's too.
    let l = ledger(first_hour, second_hour).await;
    let c = &l.charges[0];
    assert_eq!(c.platform, "0.00", "{c:?}");
    assert_eq!(c.tenants[0].direct, "10.00");
    assert_eq!(c.tenants[0].overhead, "10.00");
    assert_eq!(c.tenants[0].total, c.cost);

    // Used-based from the third: no telemetry, so nothing measurably used:
    // the slice's cost is all idle, spread by what was held; the free GPU
    // stays with the platform.
    let l = ledger(second_hour, f.service.now()).await;
    let c = &l.charges[0];
    assert_eq!(c.tenants[0].direct, "0.00", "{c:?}");
    assert_eq!(c.tenants[0].overhead, "10.00");
    assert_eq!(c.platform, "10.00");

    // The first hour again, after the policy changed twice: unchanged.
    let again = ledger(start, first_hour).await;
    assert_eq!(micros(&again.charges[0].tenants[0].direct), direct_h1);
    assert_eq!(again.charges[0].tenants[0].overhead, "0.00");
    // The whole period names each policy in force, in time order.
    let all = ledger(start, f.service.now()).await;
    let policies: Vec<RecoveryPolicy> = all.charges[0].pools.iter().map(|p| p.policy).collect();
    assert_eq!(
        policies,
        [
            RecoveryPolicy::Showback,
            RecoveryPolicy::FullRecovery,
            RecoveryPolicy::UsedBased
        ]
    );
    assert!(all.charges[0].balanced);
    // No telemetry came: every held hour counts as idle.
    assert!(all.totals.allocated > 2.9, "{:?}", all.totals);
    assert!((all.idle_gpu_hours - all.totals.allocated).abs() < 1e-9);
    // A price without a policy keeps the pool's.
    price(&f, "12", None).await;
    let prices = f.service.prices(&admin).await.unwrap();
    assert_eq!(prices[0].recovery, RecoveryPolicy::UsedBased, "{prices:?}");

    // The tenant's statement: the same split, and its slice.
    let member = f.login("alice", &["vision"]).await;
    let s = f
        .service
        .statement(
            &member,
            &StatementQuery {
                tenant: Some("vision".into()),
                ..StatementQuery::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(s.lines.len(), 1);
    assert_eq!(s.lines[0].pool, "a100-whole");
    assert_eq!(
        micros(&s.totals[0].total),
        micros(&all.charges[0].tenants[0].total)
    );
    assert_eq!(s.slices.len(), 1);
    let csv = f
        .service
        .statement_csv(
            &member,
            &StatementQuery {
                tenant: Some("vision".into()),
                ..StatementQuery::default()
            },
        )
        .await
        .unwrap();
    assert!(csv.starts_with("month,tenant,"), "{csv}");
    assert!(csv.contains(",vision,Vision,CC-1,a100-whole,EUR,"), "{csv}");
    // Another tenant's member sees no such statement; a cost centre's is
    // for platform admins.
    let bob = f.login("bob", &["nlp"]).await;
    let q = StatementQuery {
        tenant: Some("vision".into()),
        ..StatementQuery::default()
    };
    assert!(matches!(
        f.service.statement(&bob, &q).await,
        Err(ServiceError::NotFound { .. })
    ));
    let q = StatementQuery {
        cost_centre: Some("CC-1".into()),
        ..StatementQuery::default()
    };
    assert!(matches!(
        f.service.statement(&member, &q).await,
        Err(ServiceError::Forbidden(_))
    ));
    let cc = f.service.statement(&admin, &q).await.unwrap();
    assert_eq!(cc.subject, "Cost centre CC-1");
    assert_eq!(cc.totals, s.totals);
}

fn budget_of(tenant: &str, amount: &str, block: Option<bool>) -> NewBudget {
    NewBudget {
        tenant: Some(tenant.into()),
        cost_centre: None,
        amount: amount.into(),
        currency: "EUR".into(),
        block_when_exceeded: block,
    }
}

async fn budget_notices(f: &Fixture, who: &Principal) -> Vec<String> {
    f.service
        .notifications(who)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|n| n.kind == NotificationKind::BudgetThreshold)
        .map(|n| n.title)
        .rev()
        .collect()
}

#[tokio::test]
async fn a_budget_tells_its_thresholds_once_and_blocks_all_but_guaranteed_requests() {
    let f = fixture().await;
    let mut agent = one_of_two_held(&f).await;
    price(&f, "10", None).await;
    let admin = f.admin().await;
    let lead = f.login("lena", &["vision", "vision-leads"]).await;
    let member = f.login("alice", &["vision"]).await;

    // Bad input changes nothing.
    for (bad, field) in [
        (budget_of("vision", "-3", None), "amount"),
        (budget_of("vision", "lots", None), "amount"),
        (
            NewBudget {
                currency: "euro".into(),
                ..budget_of("vision", "25", None)
            },
            "currency",
        ),
        (
            NewBudget {
                cost_centre: Some("CC-1".into()),
                ..budget_of("vision", "25", None)
            },
            "tenant",
        ),
    ] {
        let err = f.service.set_budget(&admin, &bad).await.unwrap_err();
        assert!(
            matches!(err, ServiceError::Invalid { field: ref got, .. } if got == field),
            "{err:?}"
        );
    }
    // Members do not set budgets; tenant admins do not make them block,
    // nor set a cost centre's.
    assert!(matches!(
        f.service
            .set_budget(&member, &budget_of("vision", "25", None))
            .await,
        Err(ServiceError::Forbidden(_))
    ));
    assert!(matches!(
        f.service
            .set_budget(&lead, &budget_of("vision", "25", Some(true)))
            .await,
        Err(ServiceError::Forbidden(_))
    ));
    let cc = NewBudget {
        tenant: None,
        cost_centre: Some("CC-1".into()),
        ..budget_of("vision", "25", None)
    };
    assert!(matches!(
        f.service.set_budget(&lead, &cc).await,
        Err(ServiceError::Forbidden(_))
    ));
    let q = BudgetQuery {
        tenant: Some("vision".into()),
    };
    assert!(f.service.budgets(&member, &q).await.unwrap().is_empty());

    // The tenant admin sets 25.00; the platform admin makes it block.
    f.service
        .set_budget(&lead, &budget_of("vision", "25", None))
        .await
        .unwrap();
    let b = f
        .service
        .set_budget(&admin, &budget_of("vision", "25.00", Some(true)))
        .await
        .unwrap();
    assert!(b.block_when_exceeded && !b.blocking);
    assert_eq!((b.amount.as_str(), b.spent.as_str()), ("25.00", "0.00"));
    // Now only platform admins change it.
    assert!(matches!(
        f.service
            .set_budget(&lead, &budget_of("vision", "90", None))
            .await,
        Err(ServiceError::Forbidden(_))
    ));

    // The tenant's webhook gets what its admins are told.
    f.service
        .set_webhook(
            &lead,
            &"vision".parse().unwrap(),
            "https://chat.example.com/h",
        )
        .await
        .unwrap();
    // A whole A100 at 10.00 an hour, 35 hours before the month ends: the
    // forecast passes 100 % at once — one notice, not two.
    hold(&f, &mut agent, QosClass::Guaranteed).await.unwrap();
    run(&f, &mut agent, 60).await;
    let told = budget_notices(&f, &lead).await;
    assert_eq!(
        told,
        ["Vision is on course for 100 % of its budget"],
        "{told:?}"
    );
    let sent: Vec<serde_json::Value> = f
        .service
        .due_webhook_deliveries(|_| 100)
        .await
        .unwrap()
        .into_iter()
        .filter(|d| d.event == NotificationKind::BudgetThreshold)
        .map(|d| serde_json::from_str(&d.payload).unwrap())
        .collect();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0]["event"], "budget.threshold");
    assert_eq!(sent[0]["data"]["alert"], "forecast_100", "{:?}", sent[0]);
    assert!(
        budget_notices(&f, &member).await.is_empty(),
        "members are not told"
    );
    let b = &f.service.budgets(&member, &q).await.unwrap()[0];
    assert_eq!(
        b.alerts,
        [BudgetAlert::Forecast80, BudgetAlert::Forecast100]
    );
    assert!(b.percent > 39.0 && b.percent <= 40.0, "{b:?}");

    // Two hours: 80 % spent.
    run(&f, &mut agent, 60).await;
    assert_eq!(
        budget_notices(&f, &lead).await.last().unwrap(),
        "Vision has spent 80 % of its budget"
    );
    // Burstable requests still go through below 100 %.
    hold(&f, &mut agent, QosClass::Burstable).await.unwrap();
    // Past 100 % (two slices now): told once, and only guaranteed
    // requests go through.
    run(&f, &mut agent, 30).await;
    run(&f, &mut agent, 5).await;
    let told = budget_notices(&f, &lead).await;
    assert_eq!(told.len(), 3, "{told:?}");
    assert_eq!(told[2], "Vision has spent 100 % of its budget");
    let b = &f.service.budgets(&member, &q).await.unwrap()[0];
    assert!(b.blocking, "{b:?}");
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    for qos in [QosClass::Burstable, QosClass::BestEffort] {
        let mut req = ask("a100-whole", whole(), 1);
        req.qos = qos;
        let err = f
            .service
            .request_allocation(&alice, &req)
            .await
            .unwrap_err();
        assert_eq!(err.status(), 403);
        assert!(
            matches!(err, ServiceError::BudgetExceeded(ref m) if m.contains("only guaranteed requests") && m.contains("/t/vision/budget")),
            "{err:?}"
        );
    }
    // A guaranteed request is not refused by the budget (here: no GPU is
    // free, so it waits in the queue).
    f.service
        .request_allocation(&alice, &ask("a100-whole", whole(), 1))
        .await
        .unwrap();
    // Raised by a platform admin: the block lifts, and the new thresholds
    // of the month are not told again for the levels already told.
    f.service
        .set_budget(&admin, &budget_of("vision", "1000", None))
        .await
        .unwrap();
    let mut req = ask("a100-whole", whole(), 1);
    req.qos = QosClass::BestEffort;
    f.service.request_allocation(&alice, &req).await.unwrap();
    assert_eq!(budget_notices(&f, &lead).await.len(), 3);
    // Removing it is the platform admins' call while it blocks.
    let id = b.id;
    assert!(matches!(
        f.service.delete_budget(&lead, id).await,
        Err(ServiceError::Forbidden(_))
    ));
    f.service.delete_budget(&admin, id).await.unwrap();
    assert!(f.service.budgets(&member, &q).await.unwrap().is_empty());
    // The usage report's period is untouched by budgets.
    assert!(f
        .service
        .usage_report(&admin, &UsageQuery::default())
        .await
        .is_ok());
}

#[tokio::test]
async fn a_tenant_admin_asks_for_more_and_another_platform_admin_decides() {
    use tessera_core::budget::BudgetRequestState;
    use tessera_protocol::views::{BudgetDecision, NewBudgetRequest};
    let f = fixture().await;
    let admin = f.admin().await;
    let other_admin = f.login("ops", &["platform"]).await;
    // A platform admin who also leads Vision.
    let lead = f
        .login("lena", &["vision", "vision-leads", "platform"])
        .await;
    let member = f.login("alice", &["vision"]).await;
    let b = f
        .service
        .set_budget(&admin, &budget_of("vision", "100", Some(true)))
        .await
        .unwrap();
    let ask = |amount: &str, reason: &str| NewBudgetRequest {
        amount: amount.into(),
        reason: reason.into(),
    };
    // Members do not ask; the amount must be above the budget; a reason.
    assert!(matches!(
        f.service
            .request_budget(&member, b.id, &ask("150", "x"))
            .await,
        Err(ServiceError::Forbidden(_))
    ));
    for (bad, field) in [(ask("100", "more"), "amount"), (ask("150", "  "), "reason")] {
        let err = f
            .service
            .request_budget(&lead, b.id, &bad)
            .await
            .unwrap_err();
        assert!(
            matches!(err, ServiceError::Invalid { field: ref got, .. } if got == field),
            "{err:?}"
        );
    }
    // Two asks race: one is filed, the other told one waits.
    let (a1, a2) = (
        ask("150", "the December training run"),
        ask("160", "the December training run"),
    );
    let (one, two) = tokio::join!(
        f.service.request_budget(&lead, b.id, &a1),
        f.service.request_budget(&lead, b.id, &a2),
    );
    assert!(
        matches!(
            (&one, &two),
            (Ok(_), Err(ServiceError::Conflict(_))) | (Err(ServiceError::Conflict(_)), Ok(_))
        ),
        "{one:?} {two:?}"
    );
    let r = one.or(two).unwrap();
    assert_eq!(r.state, BudgetRequestState::Pending);
    // One waits at a time.
    assert!(matches!(
        f.service
            .request_budget(&lead, b.id, &ask("200", "more"))
            .await,
        Err(ServiceError::Conflict(_))
    ));
    // The platform admins are told; the budget shows it waiting.
    let told = f.service.notifications(&other_admin).await.unwrap().items;
    assert!(
        told.iter()
            .any(|n| n.kind == NotificationKind::BudgetRequestCreated
                && n.title == format!("Vision asks for a budget of {} EUR", r.amount)),
        "{told:?}"
    );
    let q = BudgetQuery {
        tenant: Some("vision".into()),
    };
    let shown = &f.service.budgets(&member, &q).await.unwrap()[0];
    assert_eq!(shown.pending_request.as_ref().map(|p| p.id), Some(r.id));
    // Four eyes: the admin who asked does not decide.
    let lead_proof = lead.require_platform_admin().unwrap();
    let approve = BudgetDecision {
        approve: true,
        note: "ok for December".into(),
    };
    assert!(matches!(
        f.service
            .decide_budget_request(&lead_proof, r.id, &approve)
            .await,
        Err(ServiceError::Forbidden(_))
    ));
    let proof = other_admin.require_platform_admin().unwrap();
    let done = f
        .service
        .decide_budget_request(&proof, r.id, &approve)
        .await
        .unwrap();
    assert_eq!(done.state, BudgetRequestState::Approved);
    assert_eq!(done.note.as_deref(), Some("ok for December"));
    let shown = &f.service.budgets(&member, &q).await.unwrap()[0];
    assert_eq!(shown.amount, r.amount);
    assert!(shown.block_when_exceeded && shown.pending_request.is_none());
    // Decided once.
    assert!(matches!(
        f.service
            .decide_budget_request(&proof, r.id, &approve)
            .await,
        Err(ServiceError::Conflict(_))
    ));
    let told = f.service.notifications(&lead).await.unwrap().items;
    assert!(
        told.iter()
            .any(|n| n.kind == NotificationKind::BudgetRequestDecided
                && n.title == format!("Budget raised to {} EUR", r.amount)),
        "{told:?}"
    );
    // A rejection leaves the budget as it was.
    let r = f
        .service
        .request_budget(&lead, b.id, &ask("900", "everything"))
        .await
        .unwrap();
    let proof = admin.require_platform_admin().unwrap();
    f.service
        .decide_budget_request(
            &proof,
            r.id,
            &BudgetDecision {
                approve: false,
                note: String::new(),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        f.service.budgets(&member, &q).await.unwrap()[0].amount,
        done.amount
    );
}
