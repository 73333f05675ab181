//! Metering and chargeback against a real database (SQLite, or PostgreSQL
//! when `TESSERA_TEST_POSTGRES_URL` is set): slices run through their
//! lifecycle on the test clock, prices change, and the report and the
//! FOCUS CSV give the exact figures.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use chrono::{Duration, TimeZone, Utc};
use common::agent::*;
use common::{fixture, Fixture};
use tessera_core::lifecycle::AllocationPhase;
use tessera_protocol::views::{NewPrice, UsageGrouping, UsageQuery};
use tessera_service::ServiceError;

fn query(tenant: Option<&str>, group_by: UsageGrouping) -> UsageQuery {
    UsageQuery {
        from: Some(Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()),
        to: Some(Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap()),
        tenant: tenant.map(str::to_owned),
        group_by: Some(group_by),
        ..UsageQuery::default()
    }
}

async fn price(f: &Fixture, pool: &str, gpu_hour: &str) -> Result<(), ServiceError> {
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    f.service
        .set_price(
            &proof,
            &NewPrice {
                pool: pool.into(),
                currency: "eur".into(),
                gpu_hour: gpu_hour.into(),
                gib_hour: "0".into(),
                effective_from: None,
            },
        )
        .await
        .map(|_| ())
}

#[tokio::test]
async fn allocated_gpu_hours_are_priced_at_the_time_and_split_at_month_ends() {
    let f = fixture().await;
    // The test clock starts on 2026-11-29; move to 2026-11-30 22:00 UTC.
    let start = Utc.with_ymd_and_hms(2026, 11, 30, 22, 0, 0).unwrap();
    f.clock.advance(start - f.service.now());
    price(&f, "h100-mig", "7").await.unwrap();
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    // A 3g.40gb: 3/7 of an H100 (428 thousandths, as the quota counts it).
    let s = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("3g.40gb"), 24))
        .await
        .unwrap();
    agent.converge(&f).await;
    assert_eq!(get(&f, &alice, s.id).await.state, AllocationPhase::Active);
    // Four hours on: two in November, two in December; then the price doubles.
    f.clock.advance(Duration::hours(4));
    price(&f, "h100-mig", "14").await.unwrap();
    // A price from the past is refused: past periods keep theirs.
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let err = f
        .service
        .set_price(
            &proof,
            &NewPrice {
                pool: "h100-mig".into(),
                currency: "EUR".into(),
                gpu_hour: "1".into(),
                gib_hour: String::new(),
                effective_from: Some(start),
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Invalid { ref field, .. } if field == "effective_from"));
    assert!(matches!(
        price(&f, "nope", "1").await.unwrap_err(),
        ServiceError::Invalid { ref field, .. } if field == "pool"
    ));
    assert!(matches!(
        price(&f, "h100-mig", "1,5").await.unwrap_err(),
        ServiceError::Invalid { ref field, .. } if field == "gpu_hour"
    ));
    f.clock.advance(Duration::hours(1));
    f.service.release_allocation(&alice, s.id).await.unwrap();
    agent.converge(&f).await;
    assert_eq!(get(&f, &alice, s.id).await.state, AllocationPhase::Released);
    // Later hours do not count: the slice ended.
    f.clock.advance(Duration::hours(10));

    let r = f
        .service
        .usage_report(&f.admin().await, &query(None, UsageGrouping::Tenant))
        .await
        .unwrap();
    assert_eq!(r.rows.len(), 2, "{r:?}");
    let (nov, dec) = (&r.rows[0], &r.rows[1]);
    assert_eq!(
        nov.month,
        Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()
    );
    assert_eq!(nov.tenant.as_deref(), Some("vision"));
    assert_eq!(nov.cost_centre.as_deref(), Some("CC-1"));
    // November: 2 h × 0.428 = 0.856 GPU-h at 7 = 5.992.
    assert!((nov.gpu_hours - 0.856).abs() < 1e-9, "{nov:?}");
    assert_eq!(
        (nov.cost.as_str(), nov.currency.as_deref()),
        ("5.992", Some("EUR"))
    );
    // December: 2 h at 7 and 1 h at 14 = 0.856 × 7 + 0.428 × 14 = 11.984.
    assert!((dec.gpu_hours - 1.284).abs() < 1e-9, "{dec:?}");
    assert_eq!(dec.cost, "11.984");
    assert_eq!(r.totals.len(), 1);
    assert_eq!(r.totals[0].cost, "17.976");
    // The slice's memory for 5 h.
    let gib = s.demand.memory.0 as f64 / 1024.0;
    assert!((r.totals[0].gib_hours - 5.0 * gib).abs() < 1e-9, "{gib}");

    // By cost centre and by slice: the same totals.
    for g in [
        UsageGrouping::CostCentre,
        UsageGrouping::Pool,
        UsageGrouping::Allocation,
    ] {
        let again = f
            .service
            .usage_report(&f.admin().await, &query(None, g))
            .await
            .unwrap();
        assert_eq!(again.totals, r.totals, "{g:?}");
    }
    let by_slice = f
        .service
        .usage_report(&f.admin().await, &query(None, UsageGrouping::Allocation))
        .await
        .unwrap();
    assert_eq!(by_slice.rows[0].allocation, Some(s.id));
    assert_eq!(by_slice.rows[0].shape.as_deref(), Some("MIG 3g.40gb"));

    // The FOCUS CSV: one row per month and price, costs summing to the total.
    let csv = f
        .service
        .usage_focus_csv(&f.admin().await, &query(None, UsageGrouping::Tenant))
        .await
        .unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with(
        "BilledCost,EffectiveCost,ListCost,ListUnitPrice,BillingCurrency,BillingPeriodStart"
    ));
    assert_eq!(lines.len(), 4, "{csv}");
    let costs: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(costs, ["5.992", "5.992", "5.992"]);
    assert!(
        lines[1].contains("2026-11-01T00:00:00Z,2026-12-01T00:00:00Z"),
        "{}",
        lines[1]
    );
    assert!(lines[3].contains(&format!("allocation/{}", s.id)));

    // Members see their own tenant only; another tenant's is not there.
    let member = f.login("bob", &["vision"]).await;
    let own = f
        .service
        .usage_report(&member, &query(Some("vision"), UsageGrouping::Tenant))
        .await
        .unwrap();
    assert_eq!(own.totals, r.totals);
    let err = f
        .service
        .usage_report(&member, &query(Some("nlp"), UsageGrouping::Tenant))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::NotFound { .. }), "{err}");
    let err = f
        .service
        .usage_report(&member, &query(None, UsageGrouping::Tenant))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Invalid { ref field, .. } if field == "tenant"));
    let nlp = f
        .service
        .usage_report(&f.admin().await, &query(Some("nlp"), UsageGrouping::Tenant))
        .await
        .unwrap();
    assert!(nlp.rows.is_empty());
    assert_eq!(count(&f.audit_actions().await, "pool.set_price"), 2);
}
