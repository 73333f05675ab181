//! Right-sizing against a real database (SQLite, or PostgreSQL when
//! `TESSERA_TEST_POSTGRES_URL` is set): a 3g.40gb MIG slice that used
//! 10,000 MiB and a tenth of its compute for two hours is told a 1g.20gb
//! would do; asking for it replaces the slice, which is released once the
//! new one is active.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use chrono::Duration;
use common::agent::*;
use common::{fixture, host_named, Fixture};
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::rightsize::{Advice, Confidence};
use tessera_core::telemetry::ROLLUP_SETTLE_MS;
use tessera_protocol::agent::{GpuSample, InstanceSample, TelemetryBatch, TelemetryRound};
use tessera_service::ServiceError;

/// One round a minute: the GPU at 5 %, the slice's MIG device at `util` %
/// with 10,000 MiB in use.
fn round(at_ms: i64, device: &str, util: u8) -> TelemetryRound {
    TelemetryRound {
        at_ms,
        gpus: vec![GpuSample {
            uuid: "GPU-e1".into(),
            util_pct: Some(5),
            mem_used_mib: 10_000,
            power_mw: Some(120_000),
            temp_c: Some(40),
            sm_clock_mhz: Some(1980),
            instances: vec![InstanceSample {
                uuid: device.into(),
                util_pct: Some(util),
                mem_used_mib: 10_000,
            }],
            clients: Vec::new(),
        }],
    }
}

async fn send_minutes(f: &Fixture, agent: &Agent, device: &str, from_ms: i64, minutes: i64) {
    let rounds: Vec<TelemetryRound> = (0..minutes)
        .map(|i| {
            round(
                from_ms + i * 60_000,
                device,
                if i % 20 == 0 { 30 } else { 10 },
            )
        })
        .collect();
    for chunk in rounds.chunks(60) {
        f.service
            .record_telemetry(
                &agent.host,
                &TelemetryBatch {
                    hostname: host_named("gpu-r"),
                    interval_ms: 60_000,
                    rounds: chunk.to_vec(),
                },
            )
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn a_slice_that_used_a_tenth_is_told_a_smaller_shape_and_replaced_by_it() {
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-r", vec![h100(0, "GPU-e1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let dave = actor(&f, "dave", &["nlp"], "nlp").await;
    let big = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("3g.40gb"), 24))
        .await
        .unwrap();
    agent.converge(&f).await;
    assert_eq!(get(&f, &alice, big.id).await.state, AllocationPhase::Active);
    let device = rows(&f)
        .await
        .into_iter()
        .find(|a| a.id == big.id)
        .and_then(|a| a.mig_device_uuid)
        .unwrap();

    // No telemetry yet: no advice, and no resize.
    let first = f.service.recommendations(&alice).await.unwrap();
    assert_eq!(first.slices.len(), 1);
    assert!(
        matches!(
            first.slices[0].advice,
            Advice::TooLittleData { measured_ms: 0, .. }
        ),
        "{first:?}"
    );
    let err = f
        .service
        .resize_allocation(&alice, big.id)
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::Conflict(_)), "{err:?}");

    // Two hours, a minute per round: 10 % busy with a 30 % minute every
    // 20 (5 % of the minutes, at the 95th percentile's edge), 10,000 MiB.
    let start = f.service.now().timestamp_millis() + 60_000;
    f.clock.advance(Duration::minutes(125));
    send_minutes(&f, &agent, &device, start, 120).await;
    // Rolled up in part: the advice reads hours, minutes and samples.
    f.clock.advance(Duration::milliseconds(ROLLUP_SETTLE_MS));
    f.service.roll_up_telemetry().await.unwrap();
    f.service.roll_up_telemetry().await.unwrap();
    // The host kept reporting meanwhile.
    agent.converge(&f).await;

    let advice = f
        .service
        .allocation_advice(&alice, big.id)
        .await
        .unwrap()
        .expect("advice for a running slice");
    assert_eq!(advice.used.peak_mem_mib, 10_000);
    assert_eq!(advice.used.measured_ms, 120 * 60_000, "{advice:?}");
    assert!(advice.used.util_p95_pct <= 30, "{advice:?}");
    let Advice::Smaller { resize, confidence } = &advice.advice else {
        panic!("expected a smaller shape: {advice:?}");
    };
    // 10,000 MiB + 10 % is more than a 1g.10gb holds; a 1g.20gb holds it
    // and a tenth of three sevenths of the compute fits its one seventh.
    assert_eq!(resize.label, "MIG 1g.20gb");
    assert_eq!(resize.pool, "h100-mig");
    assert_eq!(*confidence, Confidence::Low);
    assert!(resize.saves_gpu_hours_month > 100.0, "{resize:?}");
    assert!(
        advice.sentence.starts_with("Used at most 9.8 GiB"),
        "{}",
        advice.sentence
    );

    // Another tenant sees nothing of it; the platform admin sees the fleet.
    let err = f
        .service
        .allocation_advice(&dave, big.id)
        .await
        .unwrap_err();
    assert!(matches!(err, ServiceError::NotFound { .. }), "{err:?}");
    assert!(f
        .service
        .recommendations(&dave)
        .await
        .unwrap()
        .slices
        .is_empty());
    let admin = f.admin().await;
    let fleet = f
        .service
        .fleet_recommendations(&admin.require_platform_admin().unwrap())
        .await
        .unwrap();
    assert_eq!(fleet.smaller, 1);
    assert_eq!(fleet.slices[0].allocation, big.id);
    assert_eq!(fleet.slices[0].tenant, "vision");

    // One click: the new request replaces the old slice, which runs on
    // until the new one is active.
    let small = f.service.resize_allocation(&alice, big.id).await.unwrap();
    assert_eq!(small.replaces, Some(big.id));
    assert_eq!(small.shape_label, "MIG 1g.20gb", "{small:?}");
    assert_eq!(small.state, AllocationPhase::Placed, "{small:?}");
    assert_eq!(f.service.tick().await.unwrap().replaced, 0);
    assert_eq!(get(&f, &alice, big.id).await.state, AllocationPhase::Active);
    agent.converge(&f).await;
    assert_eq!(
        get(&f, &alice, small.id).await.state,
        AllocationPhase::Active
    );
    assert_eq!(f.service.tick().await.unwrap().replaced, 1);
    let old = get(&f, &alice, big.id).await;
    assert!(
        matches!(
            old.state,
            AllocationPhase::Releasing | AllocationPhase::Released
        ),
        "{old:?}"
    );
    // Once: the next tick finds nothing more to release.
    assert_eq!(f.service.tick().await.unwrap().replaced, 0);
    agent.converge(&f).await;
    assert_eq!(
        get(&f, &alice, big.id).await.state,
        AllocationPhase::Released
    );

    // `replaces` must name one of the tenant's open slices.
    for (replaces, who) in [(big.id, &alice), (small.id, &dave)] {
        let req = tessera_protocol::views::NewAllocation {
            replaces: Some(replaces),
            ..ask("h100-mig", mig("1g.10gb"), 4)
        };
        let err = f.service.request_allocation(who, &req).await.unwrap_err();
        assert!(
            matches!(&err, ServiceError::Invalid { field, .. } if field == "replaces"),
            "{err:?}"
        );
    }
}

#[tokio::test]
async fn a_waiting_request_is_offered_what_would_start_now_and_replaced_by_it() {
    let f = fixture().await;
    let mut agent = Agent::enrol(&f, "gpu-q", vec![h100(0, "GPU-f1")]).await;
    let alice = actor(&f, "alice", &["vision"], "vision").await;
    let first = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("4g.40gb"), 8))
        .await
        .unwrap();
    agent.converge(&f).await;
    assert_eq!(
        get(&f, &alice, first.id).await.state,
        AllocationPhase::Active
    );
    // A second 4g.40gb has no room on the GPU; a 3g.40gb beside the first has.
    let waiting = f
        .service
        .request_allocation(&alice, &ask("h100-mig", mig("4g.40gb"), 8))
        .await
        .unwrap();
    assert_eq!(waiting.state, AllocationPhase::Queued);
    let view = get(&f, &alice, waiting.id).await;
    let labels: Vec<&str> = view.starts_now.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(
        labels.first(),
        Some(&"MIG 3g.40gb"),
        "{:?}",
        view.starts_now
    );
    assert!(!labels.contains(&"MIG 4g.40gb"), "{labels:?}");
    assert!(labels.len() <= 3);
    // Asked for instead, replacing the waiting request: it starts, and the
    // waiting request is withdrawn.
    let alt = &view.starts_now[0];
    let now = f
        .service
        .request_allocation(
            &alice,
            &tessera_protocol::views::NewAllocation {
                replaces: Some(waiting.id),
                ..ask(&alt.pool, alt.shape.clone(), 8)
            },
        )
        .await
        .unwrap();
    assert_eq!(now.state, AllocationPhase::Placed);
    agent.converge(&f).await;
    assert_eq!(f.service.tick().await.unwrap().replaced, 1);
    let gone = get(&f, &alice, waiting.id).await;
    assert!(gone.is_terminal(), "{gone:?}");
    // An active slice carries no alternatives.
    assert!(get(&f, &alice, first.id).await.starts_now.is_empty());
}
