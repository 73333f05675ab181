//! `GET /metrics` in the Prometheus text format.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use std::fmt::Write;
use tessera_service::fleet::FleetCounts;

/// Renders fleet counts as Prometheus text.
pub fn render(c: &FleetCounts) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# HELP tessera_build_info Tessera server version.");
    let _ = writeln!(out, "# TYPE tessera_build_info gauge");
    let _ = writeln!(
        out,
        "tessera_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(out, "# HELP tessera_hosts Enrolled GPU hosts by liveness.");
    let _ = writeln!(out, "# TYPE tessera_hosts gauge");
    let _ = writeln!(out, "tessera_hosts{{status=\"online\"}} {}", c.hosts_online);
    let _ = writeln!(
        out,
        "tessera_hosts{{status=\"offline\"}} {}",
        c.hosts_offline
    );
    let _ = writeln!(out, "# HELP tessera_gpus GPUs by model and MIG mode.");
    let _ = writeln!(out, "# TYPE tessera_gpus gauge");
    for ((model, mig), n) in &c.gpus {
        let model = model.replace('\\', "\\\\").replace('"', "\\\"");
        let _ = writeln!(out, "tessera_gpus{{model=\"{model}\",mig=\"{mig}\"}} {n}");
    }
    out
}

/// Whether `authorization` (the header's value) carries `expected` as a
/// bearer token, compared in constant time.
pub fn bearer_matches(authorization: Option<&str>, expected: &str) -> bool {
    authorization
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| {
            bool::from(subtle::ConstantTimeEq::ct_eq(
                t.trim().as_bytes(),
                expected.as_bytes(),
            ))
        })
}

/// The handler: 401 without the bearer token when `[metrics] bearer_token` is set.
pub async fn metrics(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    if let Some(token) = &state.config.metrics.bearer_token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if !bearer_matches(given, token.expose()) {
            return Err(ApiError(tessera_service::ServiceError::Forbidden(
                "the metrics endpoint needs its bearer token ([metrics] bearer_token)".to_owned(),
            )));
        }
    }
    let counts = state.service.fleet_counts().await?;
    Ok((
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        render(&counts),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metrics_token_is_checked() {
        assert!(bearer_matches(Some("Bearer s3cret"), "s3cret"));
        assert!(!bearer_matches(Some("Bearer s3cre"), "s3cret"));
        assert!(!bearer_matches(Some("s3cret"), "s3cret"));
        assert!(!bearer_matches(None, "s3cret"));
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
        let text = render(&c);
        assert!(text.contains("tessera_hosts{status=\"online\"} 2\n"));
        assert!(text.contains("tessera_hosts{status=\"offline\"} 1\n"));
        assert!(text.contains("tessera_gpus{model=\"H100-80GB\",mig=\"enabled\"} 8\n"));
        assert!(text.contains("tessera_gpus{model=\"odd \\\"name\\\"\",mig=\"n/a\"} 1\n"));
    }
}
