//! `GET /audit.csv` and `GET /audit.jsonl`: the audit log, filtered like
//! the page, as CSV or as JSON lines with each row's chain hash.

use crate::auth::extract::Person;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{FromRequestParts, Query, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::response::IntoResponse;
use tessera_protocol::views::{AuditFilter, AuditQuery};
use tessera_service::ServiceError;

/// The audit log's filters from the query string; a 400 naming the field
/// that does not parse.
#[derive(Debug)]
pub struct AuditFilterQuery(pub AuditFilter);

impl<S: Send + Sync> FromRequestParts<S> for AuditFilterQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let Query(q) = Query::<AuditQuery>::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_body("query", e.body_text()))?;
        q.filter()
            .map(Self)
            .map_err(|(field, message)| ServiceError::invalid(field, message).into())
    }
}

/// The CSV download (same authorization as the page). The filters are
/// checked before the caller.
pub async fn download_audit_csv(
    State(state): State<AppState>,
    AuditFilterQuery(filter): AuditFilterQuery,
    Person(p): Person,
) -> Result<impl IntoResponse, ApiError> {
    let body = state.service.audit_csv(&p, &filter).await?;
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

/// The JSON lines download, oldest first, with each row's chain hash (same
/// authorization as the page), for a SIEM to keep an independent copy.
pub async fn download_audit_jsonl(
    State(state): State<AppState>,
    AuditFilterQuery(filter): AuditFilterQuery,
    Person(p): Person,
) -> Result<impl IntoResponse, ApiError> {
    let body = state.service.audit_jsonl(&p, &filter).await?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/jsonl; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"tessera-audit.jsonl\"",
            ),
        ],
        body,
    ))
}
