//! The agent API: `POST /api/agent/v1/enroll` and `POST /api/agent/v1/report`.

use super::extract::{Bearer, JsonBody};
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use tessera_protocol::agent::{EnrollRequest, EnrollResponse, HostReport, ReportAck};

/// Trades a join token for a host credential.
pub async fn enroll(
    State(state): State<AppState>,
    JsonBody(req): JsonBody<EnrollRequest>,
) -> Result<Json<EnrollResponse>, ApiError> {
    let resp = state.service.enroll(&req).await?;
    tracing::info!(host_id = resp.host_id, hostname = %req.hostname, "host enrolled");
    Ok(Json(resp))
}

/// Stores a host's report.
pub async fn report(
    State(state): State<AppState>,
    Bearer(credential): Bearer,
    JsonBody(report): JsonBody<HostReport>,
) -> Result<Json<ReportAck>, ApiError> {
    let host = state.service.authenticate_host(&credential).await?;
    Ok(Json(state.service.record_report(&host, &report).await?))
}
