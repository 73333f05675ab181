//! Admin pages at fleet size: the service time of what the fleet page, the
//! fleet insights and the audit log read and build, with `hosts` hosts of 8
//! H100s enrolled and reported (the HTML around it adds little: see
//! docs/benchmarks.md). Each view is built `runs` times one after another; prints
//! p50/p99 in ms per view as JSON.
//!
//! `cargo run --release -p tessera-service --example pages_bench -- URL [hosts] [runs]`
//! (`make bench-pages`; the database should be empty).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{enrol_fleet, pct};
use std::future::Future;
use std::time::Instant;
use tessera_core::sharing::SharingMode;
use tessera_protocol::query::{AuditFilter, FleetFilter, HostFilter};
use tessera_service::pools::PoolSpec;
use tessera_service::{Directory, LoginClaims};

/// Builds a view `runs` times; p50 and p99 in ms.
async fn time<T, E: std::fmt::Debug, F: Future<Output = Result<T, E>>>(
    runs: usize,
    mut view: impl FnMut() -> F,
) -> serde_json::Value {
    let mut ms = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        std::hint::black_box(view().await.unwrap());
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let round = |x: f64| (x * 100.0).round() / 100.0;
    serde_json::json!({ "p50_ms": round(pct(&mut ms, 50)), "p99_ms": round(pct(&mut ms, 99)) })
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = args.get(1).expect("usage: pages_bench URL [hosts] [runs]");
    let hosts: usize = args.get(2).map_or(1000, |a| a.parse().unwrap());
    let runs: usize = args.get(3).map_or(30, |a| a.parse().unwrap());
    let directory = Directory {
        platform_admin_groups: vec!["platform".into()],
        tenants: Vec::new(),
    };
    let pools = vec![PoolSpec::new(
        "h100".parse().unwrap(),
        SharingMode::Exclusive,
        &["H100-80GB"],
    )];
    let service = common::service(url, directory, pools).await;
    let started = Instant::now();
    enrol_fleet(&service, hosts).await;
    let enrol_s = started.elapsed().as_secs_f64();
    let id = service
        .login(&LoginClaims {
            issuer: "http://idp.bench".into(),
            subject: "root".into(),
            email: None,
            name: "Bench admin".into(),
            groups: vec!["platform".into()],
        })
        .await
        .unwrap();
    let admin = service.principal(id).await.unwrap();
    let proof = admin.require_platform_admin().unwrap();
    let fleet = |filter: FleetFilter| {
        let (s, proof) = (&service, &proof);
        move || {
            let filter = filter.clone();
            async move { s.fleet_view(proof, &filter).await }
        }
    };
    let middle = FleetFilter {
        page: Some(u32::try_from(hosts / 50 / 2).unwrap().max(1)),
        ..Default::default()
    };
    let search = FleetFilter {
        q: Some(format!("bench-{:05}", hosts / 3)),
        ..Default::default()
    };
    let attention = FleetFilter {
        status: Some(HostFilter::Attention),
        ..Default::default()
    };
    let everything = AuditFilter::default();
    let all = FleetFilter::default();
    let out = serde_json::json!({
        "database": url.split(':').next(),
        "hosts": hosts,
        "gpus": hosts * common::GPUS as usize,
        "runs": runs,
        "enrol_s": (enrol_s * 10.0).round() / 10.0,
        "fleet_first_page": time(runs, fleet(FleetFilter::default())).await,
        "fleet_middle_page": time(runs, fleet(middle)).await,
        "fleet_search": time(runs, fleet(search.clone())).await,
        "fleet_attention": time(runs, fleet(attention)).await,
        "fleet_insights_7d": time(runs, || service.fleet_insights(&proof, 7, &all)).await,
        "fleet_insights_search": time(runs, || service.fleet_insights(&proof, 7, &search)).await,
        "audit_log_first_page": time(runs, || service.audit_log(&admin, &everything)).await,
    });
    println!("{out}");
}
