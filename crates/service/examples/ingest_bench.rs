//! Telemetry ingest benchmark: `hosts` hosts with 8 GPUs each send one
//! round every 10 s (as agents do by default); how long the server takes to
//! store a round of the whole fleet, and to roll it up. Keeping up means a
//! fleet round is stored well within its 10 s.
//!
//! `cargo run --release -p tessera-service --example ingest_bench -- URL [hosts] [rounds] [clients]`
//! (`make bench-ingest`; the database should be empty).
// A benchmark against the real clock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

use common::{enrol_fleet, gpus, pct, GPUS};
use futures::stream::{self, StreamExt};
use std::sync::Arc;
use std::time::Instant;
use tessera_core::telemetry::{MINUTE_MS, ROLLUP_SETTLE_MS};
use tessera_protocol::agent::{GpuSample, TelemetryBatch, TelemetryRound};
use tessera_service::Directory;

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = args
        .get(1)
        .expect("usage: ingest_bench URL [hosts] [rounds] [clients]");
    let hosts: usize = args.get(2).map_or(1000, |a| a.parse().unwrap());
    let rounds: i64 = args.get(3).map_or(6, |a| a.parse().unwrap());
    let clients: usize = args.get(4).map_or(32, |a| a.parse().unwrap());
    let service = common::service(url, Directory::default(), Vec::new()).await;

    let started = Instant::now();
    let fleet = enrol_fleet(&service, hosts).await;
    let enrol_s = started.elapsed().as_secs_f64();

    // Rounds of the minutes before the last settled one, oldest first, as
    // the agents would send them (so that the rollup below takes them all).
    let now = chrono::Utc::now().timestamp_millis() - 2 * MINUTE_MS - ROLLUP_SETTLE_MS;
    let mut round_s = Vec::new();
    let mut batch_ms = Vec::new();
    for r in 0..rounds {
        let at_ms = now - (rounds - r) * 10_000;
        let t = Instant::now();
        let times: Vec<f64> = stream::iter(fleet.iter().enumerate())
            .map(|(i, host)| {
                let s = Arc::clone(&service);
                let batch = TelemetryBatch {
                    hostname: host.hostname().to_owned(),
                    interval_ms: 10_000,
                    rounds: vec![TelemetryRound {
                        at_ms,
                        gpus: gpus(i)
                            .into_iter()
                            .map(|g| GpuSample {
                                util_pct: Some(u8::try_from((i + r as usize) % 101).unwrap()),
                                mem_used_mib: 40_000,
                                power_mw: Some(400_000),
                                temp_c: Some(60),
                                sm_clock_mhz: Some(1980),
                                instances: Vec::new(),
                                clients: Vec::new(),
                                uuid: g.uuid,
                            })
                            .collect(),
                    }],
                };
                async move {
                    let t = Instant::now();
                    let ack = s.record_telemetry(host, &batch).await.unwrap();
                    assert_eq!(ack.stored, 1);
                    t.elapsed().as_secs_f64() * 1000.0
                }
            })
            .buffer_unordered(clients)
            .collect()
            .await;
        round_s.push(t.elapsed().as_secs_f64());
        batch_ms.extend(times);
    }
    let t = Instant::now();
    let mut rolled = 0;
    loop {
        let r = service.roll_up_telemetry().await.unwrap();
        rolled += r.samples;
        if r.samples == 0 {
            break;
        }
    }
    let rollup_s = t.elapsed().as_secs_f64();
    let samples = hosts as f64 * f64::from(GPUS);
    let mean_round = round_s.iter().sum::<f64>() / round_s.len() as f64;
    println!(
        "{}",
        serde_json::json!({
            "database": url.split(':').next(),
            "hosts": hosts,
            "gpus": hosts * GPUS as usize,
            "rounds": rounds,
            "clients": clients,
            "enrol_s": (enrol_s * 10.0).round() / 10.0,
            "fleet_round_s_mean": (mean_round * 100.0).round() / 100.0,
            "fleet_round_s_max": (round_s.iter().copied().fold(0.0, f64::max) * 100.0).round() / 100.0,
            "share_of_10s_interval": (mean_round / 10.0 * 1000.0).round() / 1000.0,
            "samples_per_s": (samples / mean_round).round(),
            "batch_ms_p50": (pct(&mut batch_ms, 50) * 10.0).round() / 10.0,
            "batch_ms_p99": (pct(&mut batch_ms, 99) * 10.0).round() / 10.0,
            "rolled_up_samples": rolled,
            "rollup_s": (rollup_s * 100.0).round() / 100.0,
        })
    );
}
