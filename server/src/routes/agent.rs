//! The agent API: `POST /api/agent/v1/enroll`, `POST /api/agent/v1/report`,
//! `POST /api/agent/v1/telemetry` and the desired-state long poll
//! `GET /api/agent/v1/desired`.

use super::extract::{JsonBody, QueryParams};
use crate::auth::extract::Host;
use crate::error::ApiError;
use crate::state::{stopped, AppState};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use std::time::Duration;
use tessera_protocol::agent::{
    EnrollRequest, EnrollResponse, HostReport, PolledReport, ReportAck, TelemetryAck,
    TelemetryBatch, REPORT_DIGEST_HEADER, REPORT_HEADER,
};

/// Trades a join token for a host credential.
pub async fn enroll_host(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<EnrollRequest>,
) -> Result<Json<EnrollResponse>, ApiError> {
    let resp = state.service.enroll(&req).await?;
    tracing::info!(host_id = resp.host_id.get(), hostname = %req.hostname, "host enrolled");
    Ok(Json(resp))
}

/// Stores a host's report.
pub async fn record_report(
    State(state): State<AppState>,
    Host(host): Host,
    JsonBody(report): JsonBody<HostReport>,
) -> Result<Json<ReportAck>, ApiError> {
    Ok(Json(state.service.record_report(&host, &report).await?))
}

/// Stores a host's telemetry batch (gzip-compressed or plain JSON).
pub async fn record_telemetry(
    State(state): State<AppState>,
    Host(host): Host,
    JsonBody(batch): JsonBody<TelemetryBatch>,
) -> Result<Json<TelemetryAck>, ApiError> {
    Ok(Json(state.service.record_telemetry(&host, &batch).await?))
}

/// `?after=<generation>&wait_s=<seconds>`.
#[derive(Debug, Deserialize)]
pub struct DesiredQuery {
    after: Option<i64>,
    #[serde(default)]
    wait_s: u64,
}

/// The host's desired state, held until it changes from `after` or `wait_s`
/// passes. An agent that sends `Prefer: return=minimal` (RFC 7240) gets
/// `204 No Content` when the generation is still `after`: it has that state.
/// A poll with `Tessera-Report-Digest` may stand for the report it names
/// (answered `Tessera-Report: noted`); when it does not, it is answered at
/// once with `Tessera-Report: wanted`.
pub async fn get_desired_state(
    State(state): State<AppState>,
    Host(host): Host,
    QueryParams(q): QueryParams<DesiredQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let report = headers
        .get(REPORT_DIGEST_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(|digest| {
            if state.service.note_polled_report(&host, digest) {
                PolledReport::Noted
            } else {
                PolledReport::Wanted
            }
        });
    // A poll that did not stand for the report is answered at once: the
    // host counts as seen only once the report arrives.
    let wait_s = if report == Some(PolledReport::Wanted) {
        0
    } else {
        q.wait_s
    };
    let minimal = headers
        .get_all(header::HeaderName::from_static("prefer"))
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|p| p.trim().eq_ignore_ascii_case("return=minimal"));
    // A shutting-down server answers held polls at once, so that finishing
    // the requests in flight does not take a whole poll.
    let mut stop = state.shutdown.subscribe();
    let (service, host, after) = (&state.service, &host, q.after);
    let poll = |wait: Duration| async move {
        if minimal {
            service.wait_desired_change(host, after, wait).await
        } else {
            service.wait_desired(host, after, wait).await.map(Some)
        }
    };
    let desired = tokio::select! {
        desired = poll(Duration::from_secs(wait_s)) => desired?,
        () = stopped(&mut stop) => poll(Duration::ZERO).await?,
    };
    let mut response = match desired {
        Some(desired) => Json(desired).into_response(),
        None => (
            StatusCode::NO_CONTENT,
            [(
                header::HeaderName::from_static("preference-applied"),
                "return=minimal",
            )],
        )
            .into_response(),
    };
    if let Some(report) = report {
        response.headers_mut().insert(
            header::HeaderName::from_static(REPORT_HEADER),
            header::HeaderValue::from_static(report.as_str()),
        );
    }
    Ok(response)
}
