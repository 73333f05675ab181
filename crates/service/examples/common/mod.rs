//! What the service's benchmarks share: a service on a database URL, and a
//! fleet of simulated hosts (8 H100s each) enrolled and reported.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use futures::stream::{self, StreamExt};
use std::sync::Arc;
use tessera_protocol::agent::{EnrollRequest, GpuReport, HostReport};
use tessera_service::audit::Actor;
use tessera_service::fleet::{AuthenticatedHost, NewJoinToken};
use tessera_service::pools::PoolSpec;
use tessera_service::{Directory, Service, Settings, SystemClock};

/// GPUs per simulated host.
pub const GPUS: u32 = 8;

/// The GPUs of host number `host`.
pub fn gpus(host: usize) -> Vec<GpuReport> {
    (0..GPUS)
        .map(|g| GpuReport {
            index: g,
            uuid: format!("GPU-{host:08x}-{g:04x}"),
            name: "NVIDIA H100 80GB HBM3".into(),
            memory_mib: 81_559,
            mig_capable: true,
            mig_enabled: false,
            nvlink_peers: Vec::new(),
            health: Default::default(),
            sharing: None,
            mig_devices: Vec::new(),
        })
        .collect()
}

/// A migrated service on `url`, with `directory` and `pools`.
pub async fn service(url: &str, directory: Directory, pools: Vec<PoolSpec>) -> Arc<Service> {
    let db = tessera_service::connect(url).await.unwrap();
    tessera_service::migrate(&db).await.unwrap();
    let settings = Settings {
        priority_classes: tessera_service::pools::priority_classes(Vec::new(), &[], &directory)
            .unwrap(),
        directory,
        host_offline_after: chrono::Duration::seconds(30),
        host_lost_after: chrono::Duration::seconds(300),
        report_interval: chrono::Duration::seconds(5),
        pools,
        provision_timeout: chrono::Duration::seconds(300),
        four_eyes: true,
        webhook_egress: Default::default(),
        api_tokens: Default::default(),
        telemetry: Default::default(),
        rightsizing: Default::default(),
        audit: Default::default(),
    };
    Arc::new(Service::new(db, settings, Arc::new(SystemClock)))
}

/// Enrols host number `i` (`bench-00042`) and stores its first report.
pub async fn enrol(service: &Service, i: usize) -> AuthenticatedHost {
    let hostname = tessera_core::checked::Hostname::parse(&format!("bench-{i:05}")).unwrap();
    let token = service
        .create_join_token_as(
            Actor::System,
            &NewJoinToken {
                description: "benchmark".into(),
                ttl_minutes: 60,
                for_host: None,
            },
        )
        .await
        .unwrap()
        .secret;
    let credential = service
        .enroll(&EnrollRequest {
            join_token: token,
            hostname: hostname.clone(),
        })
        .await
        .unwrap()
        .credential;
    let host = service.authenticate_host(&credential).await.unwrap();
    service
        .record_report(
            &host,
            &HostReport {
                hostname,
                agent_version: "bench".into(),
                cpu_milli: 96_000,
                memory_mib: 1 << 20,
                backend: "simulated".into(),
                driver_version: None,
                gpus: gpus(i),
                applied_generation: None,
                errors: Vec::new(),
                stopped: Vec::new(),
            },
        )
        .await
        .unwrap();
    host
}

/// Enrols hosts `0..n`, 16 at a time.
pub async fn enrol_fleet(service: &Arc<Service>, n: usize) -> Vec<AuthenticatedHost> {
    stream::iter(0..n)
        .map(|i| {
            let s = Arc::clone(service);
            async move { enrol(&s, i).await }
        })
        .buffered(16)
        .collect()
        .await
}

/// The `p`th percentile of `xs` (sorts it).
pub fn pct(xs: &mut [f64], p: usize) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[(xs.len() * p / 100).min(xs.len() - 1)]
}
