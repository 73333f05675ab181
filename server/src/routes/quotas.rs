//! REST endpoints for quotas, quota requests, notifications and tenant
//! webhooks. These act for a person (the session cookie): a tenant API token
//! is for slices only and gets a 403 here.

use super::extract::JsonBody;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::{Extension, Json};
use serde::Deserialize;
use tessera_protocol::quotas::{
    ApprovalQueueView, CreatedWebhook, NewQuotaGrant, NewQuotaRequest, NotificationsPage,
    QuotaDecision, QuotaRequestView, SetQuota, TenantQuotaPage, TenantQuotasView, WebhookView,
};
use tessera_protocol::views::QuotaView;
use tessera_service::{Principal, ServiceError, Viewer};

/// The signed-in person; an API token is refused with a reason.
fn person(headers: &HeaderMap, viewer: &Viewer) -> Result<Principal, ApiError> {
    if headers.contains_key(axum::http::header::AUTHORIZATION) {
        return Err(ServiceError::Forbidden(
            "API tokens act for slices only; quotas, approvals and notifications need a signed-in person".to_owned(),
        )
        .into());
    }
    Ok(viewer.require()?.clone())
}

/// `GET /api/v1/tenants/{slug}/quotas`: quota, use, headroom and requests.
pub async fn tenant_quotas(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(slug): Path<String>,
) -> Result<Json<TenantQuotaPage>, ApiError> {
    let p = person(&headers, &viewer)?;
    Ok(Json(state.service.tenant_quota_page(&p, &slug).await?))
}

/// `POST /api/v1/quota-requests`: 201 with the request (pending, or
/// proposed when a member files it).
pub async fn create_request(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<NewQuotaRequest>,
) -> Result<(StatusCode, Json<QuotaRequestView>), ApiError> {
    let p = person(&headers, &viewer)?;
    let view = state.service.create_quota_request(&p, &req).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// `GET /api/v1/quota-requests/{id}`.
pub async fn get_request(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<Json<QuotaRequestView>, ApiError> {
    let p = person(&headers, &viewer)?;
    Ok(Json(state.service.quota_request_view(&p, id).await?))
}

/// `POST /api/v1/quota-requests/{id}/submit` (tenant admins).
pub async fn submit_request(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<Json<QuotaRequestView>, ApiError> {
    let p = person(&headers, &viewer)?;
    Ok(Json(state.service.submit_quota_request(&p, id).await?))
}

/// `POST /api/v1/quota-requests/{id}/withdraw`.
pub async fn withdraw_request(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<Json<QuotaRequestView>, ApiError> {
    let p = person(&headers, &viewer)?;
    Ok(Json(state.service.withdraw_quota_request(&p, id).await?))
}

/// `approve` or `reject`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// Grant it.
    Approve,
    /// Refuse it.
    Reject,
}

/// Body of `POST /api/v1/quota-requests/{id}/decide`. Flat (rather than the
/// tagged [`QuotaDecision`]) so a bad field is named in the 400.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecideBody {
    decision: DecisionKind,
    #[serde(default)]
    amount: Option<tessera_core::quota::QuotaAmount>,
    #[serde(default)]
    ends_at: Option<chrono::DateTime<chrono::Utc>>,
    #[serde(default)]
    reason: String,
}

impl DecideBody {
    fn decision(self) -> QuotaDecision {
        match self.decision {
            DecisionKind::Approve => QuotaDecision::Approve {
                amount: self.amount,
                ends_at: self.ends_at,
            },
            DecisionKind::Reject => QuotaDecision::Reject {
                reason: self.reason,
            },
        }
    }
}

/// `POST /api/v1/quota-requests/{id}/decide` (platform admins): approve or
/// reject; 409 when it was decided meanwhile.
pub async fn decide_request(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    JsonBody(body): JsonBody<DecideBody>,
) -> Result<Json<QuotaRequestView>, ApiError> {
    let decision = body.decision();
    let p = person(&headers, &viewer)?;
    let admin = p.require_platform_admin()?;
    Ok(Json(
        state
            .service
            .decide_quota_request(&admin, id, &decision)
            .await?,
    ))
}

/// `GET /api/v1/approvals` (platform admins): pending requests, oldest first.
pub async fn approvals(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
) -> Result<Json<ApprovalQueueView>, ApiError> {
    let p = person(&headers, &viewer)?;
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.approval_queue(&admin).await?))
}

/// `GET /api/v1/admin/quotas` (platform admins).
pub async fn admin_quotas(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
) -> Result<Json<Vec<TenantQuotasView>>, ApiError> {
    let p = person(&headers, &viewer)?;
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.admin_quotas(&admin).await?))
}

/// `PUT /api/v1/admin/quotas` (platform admins): set a permanent quota.
pub async fn set_quota(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<SetQuota>,
) -> Result<Json<QuotaView>, ApiError> {
    let p = person(&headers, &viewer)?;
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.set_quota(&admin, &req).await?))
}

/// `POST /api/v1/admin/quota-grants` (platform admins): temporary quota.
pub async fn grant_quota(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<NewQuotaGrant>,
) -> Result<(StatusCode, Json<QuotaView>), ApiError> {
    let p = person(&headers, &viewer)?;
    let admin = p.require_platform_admin()?;
    Ok((
        StatusCode::CREATED,
        Json(state.service.grant_quota(&admin, &req).await?),
    ))
}

/// `DELETE /api/v1/admin/quota-grants/{id}` (platform admins): end it now.
pub async fn end_grant(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<StatusCode, ApiError> {
    let p = person(&headers, &viewer)?;
    let admin = p.require_platform_admin()?;
    state.service.end_quota_grant(&admin, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/v1/notifications`.
pub async fn notifications(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
) -> Result<Json<NotificationsPage>, ApiError> {
    let p = person(&headers, &viewer)?;
    Ok(Json(state.service.notifications(&p).await?))
}

/// Body of `POST /api/v1/notifications/read`: one id, or all when omitted.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarkRead {
    #[serde(default)]
    id: Option<i64>,
}

/// `POST /api/v1/notifications/read`: `{"id": 5}` or `{}` for all.
pub async fn mark_read(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<MarkRead>,
) -> Result<Json<NotificationsPage>, ApiError> {
    let p = person(&headers, &viewer)?;
    state.service.mark_notifications_read(&p, body.id).await?;
    Ok(Json(state.service.notifications(&p).await?))
}

/// `GET /api/v1/tenants/{slug}/webhook` (tenant admins); 404 when none.
pub async fn get_webhook(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(slug): Path<String>,
) -> Result<Json<WebhookView>, ApiError> {
    let p = person(&headers, &viewer)?;
    match state.service.webhook_view(&p, &slug).await? {
        Some(w) => Ok(Json(w)),
        None => Err(ServiceError::not_found(format!("a webhook for tenant '{slug}'")).into()),
    }
}

/// Body of `PUT /api/v1/tenants/{slug}/webhook`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetWebhook {
    url: String,
}

/// `PUT /api/v1/tenants/{slug}/webhook` (tenant admins): the signing secret
/// is in the answer, once.
pub async fn set_webhook(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(slug): Path<String>,
    JsonBody(body): JsonBody<SetWebhook>,
) -> Result<Json<CreatedWebhook>, ApiError> {
    let p = person(&headers, &viewer)?;
    Ok(Json(state.service.set_webhook(&p, &slug, &body.url).await?))
}

/// `DELETE /api/v1/tenants/{slug}/webhook` (tenant admins).
pub async fn delete_webhook(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(slug): Path<String>,
) -> Result<StatusCode, ApiError> {
    let p = person(&headers, &viewer)?;
    state.service.delete_webhook(&p, &slug).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/v1/tenants/{slug}/webhook/test` (tenant admins): 202.
pub async fn test_webhook(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(slug): Path<String>,
) -> Result<StatusCode, ApiError> {
    let p = person(&headers, &viewer)?;
    state.service.test_webhook(&p, &slug).await?;
    Ok(StatusCode::ACCEPTED)
}
