//! Metering and chargeback against a real database (SQLite, or PostgreSQL
//! when `TESSERA_TEST_POSTGRES_URL` is set): slices run through their
//! lifecycle on the test clock, prices change, and the report and the
//! FOCUS CSV give the exact figures.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use chrono::{Duration, TimeZone, Utc};
use common::agent::*;
use common::{fixture, Fixture};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use tessera_core::lifecycle::AllocationPhase;
use tessera_protocol::agent::{GpuSample, InstanceSample, TelemetryBatch, TelemetryRound};
use tessera_protocol::views::{NewPrice, UsageGrouping, UsageQuery};
use tessera_service::entity::{gpu_rollup, gpu_sample};
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

fn round(at_ms: i64, gpu: &str, gpu_util: u8, mig: Option<(&str, u8)>) -> TelemetryRound {
    TelemetryRound {
        at_ms,
        gpus: vec![GpuSample {
            uuid: gpu.into(),
            util_pct: gpu_util,
            mem_used_mib: 20_000,
            power_mw: Some(350_000),
            temp_c: Some(60),
            sm_clock_mhz: Some(1980),
            instances: mig
                .map(|(uuid, util)| InstanceSample {
                    uuid: uuid.into(),
                    util_pct: Some(util),
                    mem_used_mib: 10_000,
                })
                .into_iter()
                .collect(),
        }],
    }
}

fn batch(host: &str, rounds: Vec<TelemetryRound>) -> TelemetryBatch {
    TelemetryBatch {
        hostname: host.into(),
        interval_ms: 10_000,
        rounds,
    }
}

async fn hours_of(f: &Fixture, device: &str) -> Vec<gpu_rollup::Model> {
    gpu_rollup::Entity::find()
        .filter(gpu_rollup::Column::DeviceUuid.eq(device))
        .filter(gpu_rollup::Column::PeriodMs.eq(3_600_000))
        .all(f.service.db())
        .await
        .unwrap()
}

async fn samples(f: &Fixture) -> usize {
    gpu_sample::Entity::find()
        .all(f.service.db())
        .await
        .unwrap()
        .len()
}

/// Telemetry is stored once whatever the agent resends, attributed to the
/// slice holding each device, rolled up per minute and hour (again when
/// late samples come), expired after the raw window, and gives used
/// GPU-hours and efficiency in the usage report, figured by hand here.
#[tokio::test]
async fn used_gpu_hours_come_from_telemetry_stored_once() {
    let f = fixture().await;
    let start = Utc.with_ymd_and_hms(2026, 11, 30, 22, 0, 0).unwrap();
    f.clock.advance(start - f.service.now());
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
    let other = Agent::enrol(&f, "gpu-2", vec![h100(0, "GPU-b2")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let s = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("3g.40gb"), 24))
        .await
        .unwrap();
    agent.converge(&f).await;
    assert_eq!(get(&f, &alice, s.id).await.state, AllocationPhase::Active);
    let device = rows(&f)
        .await
        .into_iter()
        .find(|a| a.id == s.id)
        .and_then(|a| a.mig_device_uuid)
        .unwrap();
    // Two minutes of rounds every 10 s from 22:01:00: the instance at 80 %,
    // the GPU at 40 %.
    let t0 = Utc
        .with_ymd_and_hms(2026, 11, 30, 22, 1, 0)
        .unwrap()
        .timestamp_millis();
    let rounds: Vec<_> = (0..12)
        .map(|i| round(t0 + i * 10_000, "GPU-a1", 40, Some((&device, 80))))
        .collect();
    f.clock.advance(Duration::minutes(3));

    // Refused whole, storing nothing: another host's GPU, a bad figure,
    // another host's name.
    let err = f
        .service
        .record_telemetry(&other.host, &batch("gpu-2", rounds.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServiceError::Invalid { ref field, .. } if field == "rounds[0].gpus[0].uuid"),
        "{err:?}"
    );
    let mut bad = rounds.clone();
    bad[3].gpus[0].util_pct = 101;
    let err = f
        .service
        .record_telemetry(&agent.host, &batch("gpu-1", bad))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServiceError::Invalid { ref field, .. } if field == "rounds[3].gpus[0].util_pct"),
        "{err:?}"
    );
    let err = f
        .service
        .record_telemetry(&agent.host, &batch("gpu-2", rounds.clone()))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Forbidden(_)), "{err:?}");
    assert_eq!(samples(&f).await, 0);

    // The first 9 rounds, then all 12 (an ack lost): stored once.
    let ack = f
        .service
        .record_telemetry(&agent.host, &batch("gpu-1", rounds[..9].to_vec()))
        .await
        .unwrap();
    assert_eq!(
        (ack.stored, ack.duplicates, ack.last_at_ms),
        (9, 0, t0 + 80_000)
    );
    // One row per round for the GPU, one for the MIG device.
    assert_eq!(samples(&f).await, 18);
    // Minutes 22:01 and 22:02 are over: rolled up with what they have.
    let r = f.service.roll_up_telemetry().await.unwrap();
    assert_eq!(r.samples, 18, "{r:?}");
    let ack = f
        .service
        .record_telemetry(&agent.host, &batch("gpu-1", rounds.clone()))
        .await
        .unwrap();
    assert_eq!(
        (ack.stored, ack.duplicates, ack.last_at_ms),
        (3, 9, t0 + 110_000)
    );
    assert_eq!(samples(&f).await, 24);
    let r = f.service.roll_up_telemetry().await.unwrap();
    assert_eq!(r.samples, 6, "{r:?}");

    let minutes: Vec<gpu_rollup::Model> = gpu_rollup::Entity::find()
        .filter(gpu_rollup::Column::DeviceUuid.eq(device.as_str()))
        .filter(gpu_rollup::Column::PeriodMs.eq(60_000))
        .all(f.service.db())
        .await
        .unwrap();
    assert_eq!(minutes.len(), 2, "{minutes:?}");
    for m in &minutes {
        assert_eq!(m.allocation_id, Some(s.id));
        assert_eq!((m.samples, m.util_avg, m.util_p95), (6, 80, 80));
        // 6 × 10 s at 80 % = 48 s busy, × 428 thousandths of a GPU.
        assert_eq!((m.busy_ms, m.covered_ms), (48_000, 60_000));
        assert_eq!(m.used_milli_ms, 48_000 * 428);
    }
    // The hour is still running: minutes only.
    assert!(hours_of(&f, &device).await.is_empty());
    // The whole GPU is MIG: its rows belong to no slice.
    let gpu_rows = gpu_rollup::Entity::find()
        .filter(gpu_rollup::Column::DeviceUuid.eq("GPU-a1"))
        .filter(gpu_rollup::Column::PeriodMs.eq(60_000))
        .all(f.service.db())
        .await
        .unwrap();
    assert!(gpu_rows
        .iter()
        .all(|r| r.allocation_id.is_none() && r.util_avg == 40));

    // The report: used = 96 s × 0.428 GPU, of 4 minutes × 0.428 allocated.
    let report = f
        .service
        .usage_report(&f.admin().await, &query(None, UsageGrouping::Allocation))
        .await
        .unwrap();
    let row = &report.rows[0];
    let used = 96.0 * 0.428 / 3600.0;
    assert!(
        (row.used_gpu_hours.unwrap() - used).abs() < 1e-12,
        "{row:?}"
    );
    let efficiency = used * 100.0 / row.gpu_hours;
    assert!(
        (row.efficiency_pct.unwrap() - efficiency).abs() < 1e-9,
        "{row:?}"
    );
    assert!((report.totals[0].used_gpu_hours.unwrap() - used).abs() < 1e-12);

    // The slice's page: sample by sample while it is young.
    let activity = f.service.allocation_activity(&alice, s.id).await.unwrap();
    assert_eq!(
        (activity.points.len(), activity.period_s),
        (12, 10),
        "{activity:?}"
    );
    assert!(activity
        .points
        .iter()
        .all(|p| p.util_avg == 80 && p.mem_used_mib == 10_000));
    // Another tenant's member cannot see it.
    let nora = actor(&f, "nora", &["nlp"], "nlp").await;
    assert!(matches!(
        f.service
            .allocation_activity(&nora, s.id)
            .await
            .unwrap_err(),
        ServiceError::NotFound { .. }
    ));

    // Past the raw window the samples go, once counted in their hour; the
    // rollups stay.
    f.clock.advance(Duration::hours(49));
    let r = f.service.roll_up_telemetry().await.unwrap();
    assert_eq!(r.expired, 24, "{r:?}");
    let hour = hours_of(&f, &device).await;
    assert_eq!(hour.len(), 1);
    assert_eq!((hour[0].samples, hour[0].busy_ms), (12, 96_000));
    assert_eq!(samples(&f).await, 0);
    let again = f
        .service
        .usage_report(&f.admin().await, &query(None, UsageGrouping::Allocation))
        .await
        .unwrap();
    assert_eq!(again.rows[0].used_gpu_hours, row.used_gpu_hours);
    // Two days on, the page charts hours, from the rollups.
    let activity = f.service.allocation_activity(&alice, s.id).await.unwrap();
    assert_eq!(activity.period_s, 3600);
    assert_eq!(activity.points.len(), 1, "{activity:?}");
    assert_eq!(
        (activity.points[0].util_avg, activity.points[0].util_max),
        (80, 80)
    );
    // Rounds older than the raw window are dropped, not stored.
    let stale = vec![round(t0 + 200_000, "GPU-a1", 10, None)];
    let ack = f
        .service
        .record_telemetry(&agent.host, &batch("gpu-1", stale))
        .await
        .unwrap();
    assert_eq!((ack.stored, ack.expired), (0, 1));
}
