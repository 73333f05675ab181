//! `GET /metrics` in the Prometheus text format, through the `prometheus`
//! crate (TiKV's client: it names, escapes and orders the output as
//! Prometheus expects). A fresh registry per scrape: every figure is read
//! from the database then, so replicas agree and nothing goes stale.
//!
//! Tessera's own figures: fleet, slice and outbox gauges read from the
//! database, and this process's counters and request latency histogram
//! ([`HttpMetrics`], in the service's registry).
//!
//! Besides those, each GPU and MIG device's latest telemetry ([`dcgm`],
//! written without the crate) under the DCGM exporter's metric names and labels (`DCGM_FI_DEV_GPU_UTIL`,
//! `DCGM_FI_DEV_FB_USED`, ... with `gpu`, `UUID`, `device`, `modelName`,
//! `Hostname`, `GPU_I_PROFILE`, `GPU_I_ID`), so DCGM Grafana dashboards work
//! unchanged, plus `tenant`, `pool` and `allocation` to filter per tenant.

use crate::auth::extract::Scraper;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus::proto::MetricFamily;
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntGauge, IntGaugeVec, Opts, Registry,
    TextEncoder,
};
use tessera_service::fleet::FleetCounts;
use tessera_service::telemetry::DeviceGauges;

mod dcgm;

fn gauge(r: &Registry, name: &str, help: &str, labels: &[&str]) -> prometheus::Result<GaugeVec> {
    let g = GaugeVec::new(Opts::new(name, help), labels)?;
    r.register(Box::new(g.clone()))?;
    Ok(g)
}

/// Request latency by method, route (the router's pattern, so ids do not
/// make new series) and status.
#[derive(Clone)]
pub struct HttpMetrics {
    duration: HistogramVec,
}

impl HttpMetrics {
    /// The histogram, registered in `registry` (a second router on the same
    /// service keeps its own, unregistered: the first one's is the one
    /// scraped).
    pub fn register(registry: &Registry) -> Self {
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "tessera_http_request_duration_seconds",
                "HTTP request latency by method, route pattern and status.",
            ),
            &["method", "route", "status"],
        )
        .unwrap_or_else(|e| unreachable!("the histogram's name and labels are constants: {e}"));
        if let Err(e) = registry.register(Box::new(duration.clone())) {
            tracing::debug!("HTTP metrics not registered: {e}");
        }
        Self { duration }
    }
}

/// Middleware (a route layer, so the matched route is known): times each
/// request to a route. Requests no route matched are not counted (their
/// paths are whatever a client sends).
pub async fn track(State(m): State<HttpMetrics>, req: Request, next: Next) -> Response {
    let Some(route) = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
    else {
        return next.run(req).await;
    };
    let method = req.method().clone();
    let started = std::time::Instant::now();
    let response = next.run(req).await;
    m.duration
        .with_label_values(&[method.as_str(), &route, response.status().as_str()])
        .observe(started.elapsed().as_secs_f64());
    response
}

/// Renders fleet counts, device telemetry and this process's `own`
/// metrics as Prometheus text.
pub fn render(
    c: &FleetCounts,
    devices: &[DeviceGauges],
    own: Vec<MetricFamily>,
) -> prometheus::Result<String> {
    let r = Registry::new();
    let build = IntGaugeVec::new(
        Opts::new("tessera_build_info", "Tessera server version."),
        &["version"],
    )?;
    build.with_label_values(&[env!("CARGO_PKG_VERSION")]).set(1);
    r.register(Box::new(build))?;
    let hosts = IntGaugeVec::new(
        Opts::new("tessera_hosts", "Enrolled GPU hosts by liveness."),
        &["status"],
    )?;
    let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    hosts
        .with_label_values(&["online"])
        .set(count(c.hosts_online));
    hosts
        .with_label_values(&["offline"])
        .set(count(c.hosts_offline));
    r.register(Box::new(hosts))?;
    let gpus = IntGaugeVec::new(
        Opts::new("tessera_gpus", "GPUs by model and MIG mode."),
        &["model", "mig"],
    )?;
    for ((model, mig), n) in &c.gpus {
        gpus.with_label_values(&[model.as_str(), mig])
            .set(count(*n));
    }
    r.register(Box::new(gpus))?;
    let slices = IntGaugeVec::new(
        Opts::new(
            "tessera_allocations",
            "Slices not yet ended, by pool and state (queued: the queue depth).",
        ),
        &["pool", "state"],
    )?;
    for ((pool, phase), n) in &c.allocations {
        slices
            .with_label_values(&[pool.as_str(), phase.name()])
            .set(count(*n));
    }
    r.register(Box::new(slices))?;
    let lag = gauge(
        &r,
        "tessera_telemetry_lag_seconds",
        "Seconds since the newest telemetry round stored for each host.",
        &["Hostname"],
    )?;
    for (hostname, s) in &c.telemetry_lag_s {
        lag.with_label_values(&[hostname.as_str()]).set(*s);
    }
    let pending = IntGauge::new(
        "tessera_webhook_deliveries_pending",
        "Webhook calls waiting for their first or next try.",
    )?;
    pending.set(count(c.webhooks_pending));
    r.register(Box::new(pending))?;

    let mut families = r.gather();
    families.extend(own);
    let mut out = String::new();
    TextEncoder::new().encode_utf8(&families, &mut out)?;
    dcgm::write_devices(&mut out, devices)
        .map_err(|e| prometheus::Error::Msg(format!("writing the DCGM series: {e}")))?;
    Ok(out)
}

/// The handler: 401 without the bearer token when `[metrics] bearer_token` is set.
pub async fn metrics(
    _: Scraper,
    State(state): State<AppState>,
) -> Result<impl IntoResponse, ApiError> {
    let counts = state.service.fleet_counts().await?;
    let devices = state.service.latest_telemetry().await?;
    let own = state.service.metrics().registry().gather();
    let text = render(&counts, &devices, own).map_err(|e| {
        ApiError(tessera_service::ServiceError::internal(format!(
            "rendering the metrics: {e}"
        )))
    })?;
    Ok((
        [(
            header::CONTENT_TYPE,
            TextEncoder::new().format_type().to_owned(),
        )],
        text,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::lifecycle::AllocationPhase;

    /// The shipped Grafana dashboard queries only metrics and labels that
    /// `render` produces.
    #[test]
    fn the_grafana_dashboard_asks_for_what_we_export() {
        let text = include_str!("../../../deploy/kustomize/base/grafana-dashboard.json");
        let dashboard: serde_json::Value = serde_json::from_str(text).unwrap();
        let exported = [
            "tessera_hosts",
            "tessera_gpus",
            "DCGM_FI_DEV_GPU_UTIL",
            "DCGM_FI_DEV_FB_USED",
            "DCGM_FI_DEV_POWER_USAGE",
            "DCGM_FI_DEV_GPU_TEMP",
            "DCGM_FI_DEV_SM_CLOCK",
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            "tessera_http_request_duration_seconds",
            "tessera_admissions_total",
            "tessera_allocations",
            "tessera_webhook_deliveries_total",
            "tessera_webhook_deliveries_pending",
            "tessera_telemetry_lag_seconds",
            "tessera_telemetry_rounds_total",
        ];
        let mut exprs = Vec::new();
        for panel in dashboard["panels"].as_array().unwrap() {
            for target in panel["targets"].as_array().unwrap() {
                exprs.push(target["expr"].as_str().unwrap().to_owned());
            }
        }
        assert!(exprs.len() >= 17);
        // Labels it groups by (`by (a, b)`) or selects on (`{a="x", b=~"y"}`).
        let known: Vec<&str> = dcgm::DCGM_LABELS
            .iter()
            .copied()
            .chain([
                "model", "mig", "status", "le", "route", "outcome", "state", "result",
            ])
            .collect();
        for expr in &exprs {
            assert!(
                exported.iter().any(|m| expr.contains(m)),
                "{expr} asks for a metric /metrics does not have"
            );
            let mut labels = Vec::new();
            if let Some(by) = expr.split("by (").nth(1).and_then(|r| r.split(')').next()) {
                labels.extend(by.split(',').map(str::trim));
            }
            if let Some(sel) = expr.split('{').nth(1).and_then(|r| r.split('}').next()) {
                labels.extend(
                    sel.split(',')
                        .filter_map(|m| m.split(['=', '!']).next())
                        .map(str::trim),
                );
            }
            for label in labels.into_iter().filter(|l| !l.is_empty()) {
                assert!(
                    known.contains(&label),
                    "{expr}: /metrics has no label {label}"
                );
            }
        }
    }

    #[test]
    fn renders_prometheus_text() {
        let mut c = FleetCounts {
            hosts_online: 2,
            hosts_offline: 1,
            ..Default::default()
        };
        c.gpus.insert(("H100-80GB".into(), "enabled"), 8);
        c.gpus.insert(("odd \"name\"".into(), "n/a"), 1);
        let gpu = DeviceGauges {
            hostname: "gpu-1".into(),
            gpu_index: 3,
            gpu_uuid: "GPU-abc".into(),
            model_name: "NVIDIA H100 80GB HBM3".into(),
            mig: None,
            tenant: Some("vision".into()),
            pool: Some("h100".into()),
            allocation: Some(tessera_core::ids::AllocationId::new(42)),
            util_pct: Some(87),
            mem_used_mib: 70_000,
            power_w: Some(612.5),
            temp_c: Some(71),
            sm_clock_mhz: Some(1980),
        };
        let mig = DeviceGauges {
            mig: Some(("1g.10gb".into(), 6)),
            util_pct: Some(25),
            mem_used_mib: 4_000,
            ..gpu.clone()
        };
        c.allocations
            .insert(("h100".into(), AllocationPhase::Queued), 3);
        c.telemetry_lag_s.insert("gpu-1".into(), 4.5);
        c.webhooks_pending = 2;
        let own = tessera_service::metrics::ServiceMetrics::default();
        let http = HttpMetrics::register(own.registry());
        http.duration
            .with_label_values(&["GET", "/api/v1/allocations", "200"])
            .observe(0.012);
        let text = render(&c, &[gpu, mig], own.registry().gather()).unwrap();
        assert!(
            text.contains("tessera_allocations{pool=\"h100\",state=\"queued\"} 3\n"),
            "{text}"
        );
        assert!(text.contains("tessera_telemetry_lag_seconds{Hostname=\"gpu-1\"} 4.5\n"));
        assert!(text.contains("tessera_webhook_deliveries_pending 2\n"));
        assert!(text.contains(
            "tessera_http_request_duration_seconds_bucket{method=\"GET\",route=\"/api/v1/allocations\",status=\"200\",le=\"0.025\"} 1\n"
        ), "{text}");
        assert!(text.contains("tessera_hosts{status=\"online\"} 2\n"));
        assert!(
            text.contains("DCGM_FI_DEV_GPU_UTIL{GPU_I_ID=\"\",GPU_I_PROFILE=\"\",Hostname=\"gpu-1\",UUID=\"GPU-abc\",allocation=\"42\",device=\"nvidia3\",gpu=\"3\",modelName=\"NVIDIA H100 80GB HBM3\",pool=\"h100\",tenant=\"vision\"} 87\n"),
            "{text}"
        );
        assert!(text.contains("DCGM_FI_DEV_POWER_USAGE{"), "{text}");
        assert!(text.contains("} 612.5\n"), "{text}");
        assert!(
            text.contains(
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE{GPU_I_ID=\"6\",GPU_I_PROFILE=\"1g.10gb\","
            ),
            "{text}"
        );
        assert!(text.contains("} 0.25\n"), "{text}");
        assert!(text.contains("tessera_hosts{status=\"offline\"} 1\n"));
        assert!(text.contains("tessera_gpus{mig=\"enabled\",model=\"H100-80GB\"} 8\n"));
        assert!(
            text.contains("tessera_gpus{mig=\"n/a\",model=\"odd \\\"name\\\"\"} 1\n"),
            "{text}"
        );
    }
}
