//! `GET /audit.csv`: the audit log, filtered like the page, as CSV.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{Query, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::Extension;
use tessera_protocol::views::AuditQuery;
use tessera_service::{ServiceError, Viewer};

/// The CSV download (same authorization as the page).
pub async fn csv(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    Query(q): Query<AuditQuery>,
) -> Result<impl IntoResponse, ApiError> {
    let filter = q
        .filter()
        .map_err(|(field, message)| ServiceError::invalid(field, message))?;
    let body = state.service.audit_csv(viewer.require()?, &filter).await?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"tessera-audit.csv\"",
            ),
        ],
        body,
    ))
}
