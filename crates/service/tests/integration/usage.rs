//! Metering and chargeback against a real database (SQLite, or PostgreSQL
//! when `TESSERA_TEST_POSTGRES_URL` is set): slices run through their
//! lifecycle on the test clock, prices change, and the report and the
//! FOCUS CSV give the exact figures.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use chrono::{Duration, TimeZone, Utc};
use common::agent::*;
use common::{fixture, host_named, Fixture};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::telemetry::ROLLUP_SETTLE_MS;
use tessera_protocol::agent::{GpuSample, InstanceSample, TelemetryBatch, TelemetryRound};
use tessera_protocol::views::{
    FleetFilter, FullProjection, NewPrice, TimelineStep, UsageGrouping, UsageQuery,
};
use tessera_service::entity::{gpu_rollup, gpu_sample};
use tessera_service::ServiceError;

/// One CSV line's fields (quotes and doubled quotes undone).
fn csv_fields(line: &str) -> Vec<String> {
    let (mut out, mut field, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut field)),
            _ => field.push(c),
        }
    }
    out.push(field);
    out
}

fn query(tenant: Option<&str>, group_by: UsageGrouping) -> UsageQuery {
    UsageQuery {
        from: Some(Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap()),
        to: Some(Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap()),
        tenant: tenant.map(|t| t.parse().unwrap()),
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
                pool: pool.parse().unwrap(),
                currency: "eur".into(),
                gpu_hour: gpu_hour.into(),
                gib_hour: "0".into(),
                effective_from: None,
                recovery: None,
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
    // A 3g.40gb: the placer puts the first at memory slices 0–3, half the
    // GPU's memory (it bills 1/2 a GPU: the share model, docs/chargeback.md).
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
                pool: "h100-mig".parse().unwrap(),
                currency: "EUR".into(),
                gpu_hour: "1".into(),
                gib_hour: String::new(),
                effective_from: Some(start),
                recovery: None,
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
    // November: 2 h × 1/2 = 1 GPU-h at 7 = 7.
    assert!((nov.gpu_hours - 1.0).abs() < 1e-9, "{nov:?}");
    assert_eq!(
        (nov.cost.as_str(), nov.currency.as_deref()),
        ("7.00", Some("EUR"))
    );
    // December: 2 h at 7 and 1 h at 14 = 1 × 7 + 0.5 × 14 = 14.
    assert!((dec.gpu_hours - 1.5).abs() < 1e-9, "{dec:?}");
    assert_eq!(dec.cost, "14.00");
    assert_eq!(r.totals.len(), 1);
    assert_eq!(r.totals[0].cost, "21.00");
    // The chart's timeline: per day (the period is 61 days), cut at midnight.
    assert_eq!(r.timeline_step, TimelineStep::Day);
    let days: Vec<(String, String, f64)> = r
        .timeline
        .iter()
        .map(|p| {
            (
                p.start.format("%Y-%m-%d").to_string(),
                p.pool.clone(),
                (p.gpu_hours * 1000.0).round() / 1000.0,
            )
        })
        .collect();
    assert_eq!(
        days,
        [
            ("2026-11-30".to_owned(), "h100-mig".to_owned(), 1.0),
            ("2026-12-01".to_owned(), "h100-mig".to_owned(), 1.5),
        ]
    );
    assert!(r.timeline.iter().all(|p| p.used_gpu_hours.is_none()));
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
    let header: Vec<&str> = lines[0].split(',').collect();
    for column in [
        "BilledCost",
        "BillingCurrency",
        "ChargeCategory",
        "ChargePeriodStart",
        "PricingUnit",
        "ServiceCategory",
        "SubAccountId",
        "x_GpuShare",
        "x_SharingMode",
    ] {
        assert!(header.contains(&column), "{column} missing: {}", lines[0]);
    }
    let col = |line: &str, name: &str| -> String {
        let i = header.iter().position(|h| *h == name).unwrap();
        csv_fields(line).swap_remove(i)
    };
    assert_eq!(lines.len(), 4, "{csv}");
    let costs: Vec<String> = lines[1..].iter().map(|l| col(l, "BilledCost")).collect();
    assert_eq!(costs, ["7.00", "7.00", "7.00"]);
    assert_eq!(col(lines[1], "BillingPeriodStart"), "2026-11-01T00:00:00Z");
    assert_eq!(col(lines[1], "BillingPeriodEnd"), "2026-12-01T00:00:00Z");
    assert_eq!(col(lines[1], "x_GpuShare"), "0.500000");
    assert_eq!(col(lines[1], "x_SharingMode"), "mig");
    assert_eq!(col(lines[1], "SubAccountId"), "tenant/vision");
    assert_eq!(col(lines[1], "BillingCurrency"), "EUR");
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
            util_pct: Some(gpu_util),
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
            clients: Vec::new(),
        }],
    }
}

fn batch(host: &str, rounds: Vec<TelemetryRound>) -> TelemetryBatch {
    TelemetryBatch {
        hostname: host_named(host),
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
    bad[3].gpus[0].util_pct = Some(101);
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
    // Minutes 22:01 and 22:02 are over but have not settled (the batches
    // that close them may still be on their way): nothing rolled up yet.
    let r = f.service.roll_up_telemetry().await.unwrap();
    assert_eq!((r.samples, r.minutes, r.analyzed), (0, 0, false), "{r:?}");
    f.clock.advance(Duration::milliseconds(ROLLUP_SETTLE_MS));
    // Settled: rolled up with what they have.
    let r = f.service.roll_up_telemetry().await.unwrap();
    assert_eq!(r.samples, 18, "{r:?}");
    // On PostgreSQL the minute's first round refreshed the statistics its
    // reads are planned by (of the newest samples, too).
    let postgres = f.service.db().get_database_backend() == sea_orm::DbBackend::Postgres;
    assert_eq!(r.analyzed, postgres, "{r:?}");
    if postgres {
        let stats = f
            .service
            .db()
            .query_one(sea_orm::Statement::from_string(
                sea_orm::DbBackend::Postgres,
                "SELECT count(*) AS n FROM pg_stats WHERE tablename = 'gpu_samples' AND attname IN ('device_uuid', 'at_ms')",
            ))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stats.try_get::<i64>("", "n").unwrap(), 2);
    }
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
    // The late rounds' minute is due again: recomputed from all its
    // samples (its first three rounds and the late three, two rows each).
    let r = f.service.roll_up_telemetry().await.unwrap();
    assert_eq!((r.samples, r.minutes), (12, 2), "{r:?}");
    assert!(!r.analyzed, "once a minute: {r:?}");
    let r = f.service.roll_up_telemetry().await.unwrap();
    assert_eq!((r.samples, r.minutes), (0, 0), "nothing is due: {r:?}");

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
    // Efficiency is used / allocated compute (0.428 of the GPU), not the
    // billed share (the 3g.40gb at slices 0–3 pays 1/2 for its memory).
    let efficiency = used * 100.0 / (row.gpu_hours * 0.428 / 0.5);
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

/// Hosts storing telemetry while rollups run (on PostgreSQL, on other
/// connections at the same time): every sample ends up in its minute's
/// rollup, none twice — a batch that lands during a rollup marks its minute
/// due again.
#[tokio::test]
async fn samples_stored_during_rollups_are_all_rolled_up() {
    let f = fixture().await;
    let start = Utc.with_ymd_and_hms(2026, 11, 30, 22, 0, 0).unwrap();
    f.clock.advance(start - f.service.now());
    let mut agents = Vec::new();
    for h in 0..4 {
        let gpu = format!("GPU-c{h}");
        agents.push(Agent::enrol(&f, &format!("gpu-{h}"), vec![h100(0, &gpu)]).await);
    }
    // Five ended minutes of rounds every 10 s, one round per batch.
    let t0 = Utc
        .with_ymd_and_hms(2026, 11, 30, 21, 0, 0)
        .unwrap()
        .timestamp_millis();
    let senders = agents.iter().enumerate().map(|(h, agent)| {
        let f = &f;
        async move {
            for i in 0..30 {
                let one = vec![round(t0 + i * 10_000, &format!("GPU-c{h}"), 50, None)];
                f.service
                    .record_telemetry(&agent.host, &batch(&format!("gpu-{h}"), one))
                    .await
                    .unwrap();
            }
        }
    });
    let rollups = async {
        for _ in 0..40 {
            f.service.roll_up_telemetry().await.unwrap();
        }
    };
    futures::join!(futures::future::join_all(senders), rollups);
    f.service.roll_up_telemetry().await.unwrap();

    let minutes = gpu_rollup::Entity::find()
        .filter(gpu_rollup::Column::PeriodMs.eq(60_000))
        .all(f.service.db())
        .await
        .unwrap();
    let mut counted: Vec<(String, i64, i32)> = minutes
        .iter()
        .map(|m| (m.device_uuid.clone(), (m.start_ms - t0) / 60_000, m.samples))
        .collect();
    counted.sort();
    let expected: Vec<(String, i64, i32)> = (0..4)
        .flat_map(|h| (0..5).map(move |m| (format!("GPU-c{h}"), m, 6)))
        .collect();
    assert_eq!(counted, expected);
    assert_eq!(samples(&f).await, 4 * 30);
}

/// The fleet's insights: allocation per day against capacity with the
/// trend and the day it fills, the queue (waits, queued, refused), the heat
/// map from the latest telemetry, and the admission counters of `/metrics`.
#[tokio::test]
async fn insights_show_capacity_trend_queue_and_heat() {
    let f = fixture().await;
    let start = Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0).unwrap();
    f.clock.advance(start - f.service.now());
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let nora = actor(&f, "nora", &["nlp"], "nlp").await;
    // Day one: a 3g.40gb (3/7 of the pool's one GPU) all day.
    let s1 = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("3g.40gb"), 72))
        .await
        .unwrap();
    agent.converge(&f).await;
    // Day two (the agent reports on): another; then a 4g.40gb does not fit
    // (queued) and a second is over NLP's quota of one GPU (refused).
    f.clock.advance(Duration::days(1));
    agent.converge(&f).await;
    let s2 = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("3g.40gb"), 72))
        .await
        .unwrap();
    agent.converge(&f).await;
    let waiting = f
        .service
        .request_allocation(&nora, &ask("h100-mig", mig("4g.40gb"), 4))
        .await
        .unwrap();
    assert_eq!(waiting.state, AllocationPhase::Queued);
    let err = f
        .service
        .request_allocation(&nora, &ask("h100-mig", mig("4g.40gb"), 4))
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::QuotaExceeded(_)), "{err:?}");
    // Half an hour later the first slice goes and the waiting one starts.
    f.clock.advance(Duration::minutes(30));
    f.service.release_allocation(&alice, s1.id).await.unwrap();
    agent.converge(&f).await;
    f.service.tick().await.unwrap();
    assert_ne!(
        get(&f, &nora, waiting.id).await.state,
        AllocationPhase::Queued
    );
    // The GPU's latest round: s2's instance at 90 %.
    let device = rows(&f)
        .await
        .into_iter()
        .find(|a| a.id == s2.id)
        .and_then(|a| a.mig_device_uuid)
        .unwrap();
    let now_ms = f.service.now().timestamp_millis();
    f.service
        .record_telemetry(
            &agent.host,
            &batch(
                "gpu-1",
                vec![round(now_ms - 10_000, "GPU-a1", 0, Some((&device, 90)))],
            ),
        )
        .await
        .unwrap();

    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    let all = FleetFilter::default();
    let err = f
        .service
        .fleet_insights(&proof, 12, &all)
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Invalid { ref field, .. } if field == "days"));
    let i = f.service.fleet_insights(&proof, 7, &all).await.unwrap();
    assert_eq!(i.days, 7);
    assert_eq!(i.from, Utc.with_ymd_and_hms(2026, 11, 25, 0, 0, 0).unwrap());

    let pool = i.pools.iter().find(|p| p.pool == "h100-mig").unwrap();
    assert_eq!(pool.capacity_gpus, 1);
    let per_day: Vec<f64> = pool
        .days
        .iter()
        .map(|d| (d.allocated_gpus * 1000.0).round() / 1000.0)
        .collect();
    // Nov 25-29 nothing; Nov 30 one 3g (at slices 0–3: 1/2) all day; Dec
    // 1 (half an hour so far) both 3g slices (the second at 4–7: 3/7).
    assert_eq!(per_day, [0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.929]);
    // The trend from the first day with use: +3/7 GPU a day, reaching the
    // one GPU later today.
    assert!(
        (pool.trend_gpus_per_day.unwrap() - 3.0 / 7.0).abs() < 1e-9,
        "{pool:?}"
    );
    assert_eq!(
        pool.full,
        FullProjection::FullOn {
            day: Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap()
        }
    );
    let empty = i.pools.iter().find(|p| p.pool == "a100-whole").unwrap();
    assert_eq!(
        (empty.capacity_gpus, empty.full.clone()),
        (0, FullProjection::Unknown)
    );

    let q: Vec<(u32, u32, u32)> = i
        .queue
        .iter()
        .map(|d| (d.requests, d.queued, d.refused))
        .collect();
    assert_eq!(q.len(), 7);
    assert_eq!(q[5], (1, 0, 0));
    assert_eq!(q[6], (2, 1, 1));
    let today = &i.queue[6];
    // Waits: 0 (placed at once) and 30 minutes.
    assert_eq!(
        (today.wait_p50_s, today.wait_p95_s),
        (Some(0.0), Some(1800.0))
    );

    assert_eq!(i.heat.len(), 1);
    let cell = &i.heat[0].gpus[0];
    assert_eq!((cell.index, cell.util_pct), (0, Some(90)));
    assert_eq!(cell.pool.as_deref(), Some("h100-mig"));

    // The process counted the same admissions for /metrics.
    let families = f.service.metrics().registry().gather();
    let admissions = families
        .iter()
        .find(|m| m.name() == "tessera_admissions_total")
        .unwrap();
    let mut counted: Vec<(String, u64)> = admissions
        .get_metric()
        .iter()
        .map(|m| {
            let outcome = m
                .get_label()
                .iter()
                .find(|l| l.name() == "outcome")
                .unwrap()
                .value()
                .to_owned();
            (outcome, m.get_counter().get_value() as u64)
        })
        .collect();
    counted.sort();
    assert_eq!(
        counted,
        [
            ("placed".to_owned(), 2),
            ("queued".to_owned(), 1),
            ("refused_quota".to_owned(), 1)
        ]
    );
}

/// `minutes` minutes of telemetry at `util` for the MIG `device` (a round
/// every 10 s, the agent reporting on), then the rollup and a tick.
async fn run_for(
    f: &Fixture,
    agent: &mut Agent,
    device: &str,
    minutes: i64,
    util: u8,
) -> tessera_service::allocations::TickReport {
    run_with(f, agent, device, minutes, util, false).await
}

/// [`run_for`], the agent saying whether processes run in the MIG instances.
async fn run_with(
    f: &Fixture,
    agent: &mut Agent,
    device: &str,
    minutes: i64,
    util: u8,
    in_use: bool,
) -> tessera_service::allocations::TickReport {
    for _ in 0..minutes {
        f.clock.advance(Duration::minutes(1));
        let now_ms = f.service.now().timestamp_millis();
        let rounds = (0..6)
            .map(|i| {
                round(
                    now_ms - 60_000 + i * 10_000,
                    "GPU-a1",
                    util,
                    Some((device, util)),
                )
            })
            .collect();
        f.service
            .record_telemetry(&agent.host, &batch("gpu-1", rounds))
            .await
            .unwrap();
        let d = agent.fetch(f).await;
        let mut gpus = agent.applied(&d);
        for g in &mut gpus {
            for i in g.sharing.iter_mut().flat_map(|s| s.instances.iter_mut()) {
                i.in_use = in_use;
            }
        }
        agent.send(f, gpus, Some(d.generation), vec![]).await;
    }
    f.service.roll_up_telemetry().await.unwrap();
    f.service.tick().await.unwrap()
}

/// Idle reclaim on the test clock: a slice measured below the pool's
/// threshold for its window is warned (notification with the deadline);
/// its owner keeps it with a reason, as often as the pool allows; one that
/// gets busy again is cleared; one still idle at the deadline is released
/// and its owner told. Each step is in the audit log.
#[tokio::test]
async fn idle_slices_are_warned_kept_cleared_and_reclaimed() {
    use tessera_core::audit::AuditAction;
    use tessera_core::idle::IdlePolicy;
    use tessera_core::notify::NotificationKind;
    use tessera_service::entity::{audit_event, notification};
    let mut pools = common::pools();
    pools[0].idle_reclaim = Some(IdlePolicy {
        below_pct: 15,
        idle_minutes: 10,
        notice_minutes: 5,
        max_keeps: 1,
    });
    let f = common::fixture_with_pools(pools).await;
    let start = Utc.with_ymd_and_hms(2026, 11, 30, 10, 0, 0).unwrap();
    f.clock.advance(start - f.service.now());
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let s = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 24))
        .await
        .unwrap();
    agent.converge(&f).await;
    let device = rows(&f)
        .await
        .into_iter()
        .find(|a| a.id == s.id)
        .and_then(|a| a.mig_device_uuid)
        .unwrap();
    let notices = |kind: NotificationKind| {
        let db = f.service.db().clone();
        async move {
            notification::Entity::find()
                .filter(notification::Column::Kind.eq(kind))
                .all(&db)
                .await
                .unwrap()
        }
    };
    let audited = |action: AuditAction| {
        let db = f.service.db().clone();
        async move {
            audit_event::Entity::find()
                .filter(audit_event::Column::Action.eq(action))
                .all(&db)
                .await
                .unwrap()
                .len()
        }
    };

    // Busy: nothing happens. Idle by its telemetry, but the driver says a
    // process holds the instance: still in use.
    assert_eq!(run_for(&f, &mut agent, &device, 5, 90).await.idle_warned, 0);
    assert_eq!(
        run_with(&f, &mut agent, &device, 14, 2, true)
            .await
            .idle_warned,
        0
    );
    assert!(get(&f, &alice, s.id).await.idle.is_none());
    // The process exits: the idle minutes behind it make a full window, so
    // it is warned at once, with a deadline five minutes out.
    assert_eq!(run_for(&f, &mut agent, &device, 1, 3).await.idle_warned, 1);
    let v = get(&f, &alice, s.id).await;
    let idle = v.idle.clone().unwrap();
    assert_eq!(idle.deadline, f.service.now() + Duration::minutes(5));
    assert_eq!((idle.keeps, idle.max_keeps), (0, 1));
    let told = notices(NotificationKind::AllocationIdle).await;
    assert_eq!(told.len(), 1);
    assert!(
        told[0].body.contains("below 15 % busy for 10 min"),
        "{}",
        told[0].body
    );

    // Kept, with a reason (a blank one is refused and changes nothing).
    let err = f
        .service
        .keep_allocation(&alice, s.id, "  ")
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServiceError::Invalid { ref field, .. } if field == "reason"),
        "{err:?}"
    );
    assert!(get(&f, &alice, s.id).await.idle.is_some());
    let nora = actor(&f, "nora", &["nlp"], "nlp").await;
    let err = f
        .service
        .keep_allocation(&nora, s.id, "mine")
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::NotFound { .. }), "{err:?}");
    let kept = f
        .service
        .keep_allocation(&alice, s.id, "evaluation runs tonight")
        .await
        .unwrap();
    assert!(kept.idle.is_none());
    assert_eq!(audited(AuditAction::AllocationKeep).await, 1);
    let err = f
        .service
        .keep_allocation(&alice, s.id, "again")
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Conflict(_)), "{err:?}");

    // Idle time counts afresh from the keep: warned again after its window,
    // and now it may not be kept again.
    assert_eq!(run_for(&f, &mut agent, &device, 11, 0).await.idle_warned, 0);
    assert_eq!(run_for(&f, &mut agent, &device, 2, 0).await.idle_warned, 1);
    let err = f
        .service
        .keep_allocation(&alice, s.id, "please")
        .await
        .unwrap_err();
    assert!(
        matches!(err, ServiceError::Conflict(ref m) if m.contains("kept 1 time already; the pool allows 1")),
        "{err:?}"
    );
    // Busy again before the deadline: the warning is cleared.
    run_for(&f, &mut agent, &device, 3, 80).await;
    assert!(get(&f, &alice, s.id).await.idle.is_none());
    assert_eq!(audited(AuditAction::AllocationIdleClear).await, 1);

    // Idle again, warned, and still idle at the deadline: reclaimed.
    assert_eq!(run_for(&f, &mut agent, &device, 12, 1).await.idle_warned, 1);
    assert_eq!(run_for(&f, &mut agent, &device, 4, 1).await.reclaimed, 0);
    assert_eq!(run_for(&f, &mut agent, &device, 1, 1).await.reclaimed, 1);
    assert_eq!(
        get(&f, &alice, s.id).await.state,
        AllocationPhase::Releasing
    );
    let row = rows(&f).await.into_iter().find(|a| a.id == s.id).unwrap();
    assert_eq!(row.reclaimed_at, Some(f.service.now()));
    let told = notices(NotificationKind::AllocationReclaimed).await;
    assert_eq!(told.len(), 1);
    assert_eq!(audited(AuditAction::AllocationReclaim).await, 1);
    assert_eq!(audited(AuditAction::AllocationIdle).await, 3);
    agent.converge(&f).await;
    assert_eq!(get(&f, &alice, s.id).await.state, AllocationPhase::Released);
    // The usage report counts what reclaim gave back: a 1g.10gb's share
    // (142 thousandths of a GPU) for the rest of its lease.
    let r = f
        .service
        .usage_report(
            &f.admin().await,
            &query(Some("vision"), UsageGrouping::Tenant),
        )
        .await
        .unwrap();
    let left_h = (row.lease_ends_at.unwrap() - row.reclaimed_at.unwrap()).num_milliseconds() as f64
        / 3_600_000.0;
    assert!(left_h > 23.0, "{left_h}");
    assert_eq!(r.reclaimed.slices, 1);
    assert!(
        (r.reclaimed.gpu_hours - left_h / 7.0).abs() < 1e-9,
        "{:?}",
        r.reclaimed
    );
}

#[tokio::test]
async fn focus_rows_price_gpu_hours_and_memory_apart_and_each_cost_is_unit_price_times_quantity() {
    let f = fixture().await;
    let admin = f.admin().await;
    let proof = admin.require_platform_admin().unwrap();
    f.service
        .set_price(
            &proof,
            &NewPrice {
                pool: "h100-mig".parse().unwrap(),
                currency: "EUR".into(),
                gpu_hour: "7".into(),
                gib_hour: "0.01".into(),
                effective_from: None,
                recovery: None,
            },
        )
        .await
        .unwrap();
    let mut agent = Agent::enrol(&f, "gpu-1", vec![h100(0, "GPU-a1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let s = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("1g.10gb"), 24))
        .await
        .unwrap();
    agent.converge(&f).await;
    assert_eq!(get(&f, &alice, s.id).await.state, AllocationPhase::Active);
    f.clock.advance(Duration::hours(3));
    let csv = f
        .service
        .usage_focus_csv(&admin, &query(None, UsageGrouping::Tenant))
        .await
        .unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    let header = csv_fields(lines[0]);
    let col = |line: &str, name: &str| -> String {
        let i = header.iter().position(|h| h == name).unwrap();
        csv_fields(line).swap_remove(i)
    };
    let units: Vec<String> = lines[1..].iter().map(|l| col(l, "PricingUnit")).collect();
    assert_eq!(units, ["GPU-Hours", "GiB-Hours"], "{csv}");
    for l in &lines[1..] {
        let num = |c: &str| col(l, c).parse::<f64>().unwrap();
        let product = num("ListUnitPrice") * num("PricingQuantity");
        assert!((num("BilledCost") - product).abs() < 1e-5, "{l}");
        assert_eq!(col(l, "BilledCost"), col(l, "ListCost"));
    }
    // 3 h × 1/7 GPU at 7 = 3.00; 3 h × the instance's GiB at 0.01.
    assert_eq!(col(lines[1], "BilledCost"), "3.00");
    assert_eq!(col(lines[2], "SkuId"), "pool/h100-mig/memory");
}
