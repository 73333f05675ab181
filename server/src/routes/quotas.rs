//! REST endpoints for quotas, quota requests, notifications and tenant
//! webhooks. These act for a [`Person`] (the session cookie): a tenant API
//! token is for slices only and gets a 403 here.

use super::extract::{JsonBody, PathParams};
use super::openapi::{BadRequest, Conflict, Forbidden, NotFound, Unauthorized};
use crate::auth::extract::Person;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use tessera_core::checked::TenantSlug;
use tessera_core::ids::{NotificationId, QuotaGrantId, QuotaRequestId};
use tessera_protocol::quotas::{
    ApprovalQueueView, CreatedWebhook, NewQuotaGrant, NewQuotaRequest, NotificationsPage,
    QuotaChange, QuotaDecision, QuotaRequestView, SetQuota, TenantQuotaPage, TenantQuotasView,
    WebhookView,
};
use tessera_service::ServiceError;

/// Quota (permanent and temporary), use and headroom per pool, and the
/// tenant's quota requests.
#[utoipa::path(
    get, path = "/tenants/{slug}/quotas", tag = "quotas",
    params(("slug" = String, Path, description = "Tenant slug")),
    responses((status = 200, description = "The tenant's quota page", body = TenantQuotaPage),
              Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn get_tenant_quotas(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(slug): PathParams<TenantSlug>,
) -> Result<Json<TenantQuotaPage>, ApiError> {
    Ok(Json(state.service.tenant_quota_page(&p, &slug).await?))
}

/// Ask for more quota: tenant admins submit (`pending`), members propose
/// (`proposed`).
#[utoipa::path(
    post, path = "/quota-requests", tag = "quotas",
    request_body = NewQuotaRequest,
    responses((status = 201, description = "The request", body = QuotaRequestView),
              BadRequest, Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn create_quota_request(
    State(state): State<AppState>,
    Person(p): Person,
    JsonBody(req): JsonBody<NewQuotaRequest>,
) -> Result<(StatusCode, Json<QuotaRequestView>), ApiError> {
    let view = state.service.create_quota_request(&p, &req).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// One quota request.
#[utoipa::path(
    get, path = "/quota-requests/{id}", tag = "quotas",
    params(("id" = i64, Path, description = "Quota request id")),
    responses((status = 200, description = "The request", body = QuotaRequestView),
              Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn get_quota_request(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(id): PathParams<QuotaRequestId>,
) -> Result<Json<QuotaRequestView>, ApiError> {
    Ok(Json(state.service.quota_request_view(&p, id).await?))
}

/// A tenant admin submits a member's proposal.
#[utoipa::path(
    post, path = "/quota-requests/{id}/submit", tag = "quotas",
    params(("id" = i64, Path, description = "Quota request id")),
    responses((status = 200, description = "Now pending", body = QuotaRequestView),
              Unauthorized, Forbidden, NotFound, Conflict),
    security(("session" = [])),
)]
pub async fn submit_quota_request(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(id): PathParams<QuotaRequestId>,
) -> Result<Json<QuotaRequestView>, ApiError> {
    Ok(Json(state.service.submit_quota_request(&p, id).await?))
}

/// The requester or a tenant admin withdraws it before a decision.
#[utoipa::path(
    post, path = "/quota-requests/{id}/withdraw", tag = "quotas",
    params(("id" = i64, Path, description = "Quota request id")),
    responses((status = 200, description = "Withdrawn", body = QuotaRequestView),
              Unauthorized, Forbidden, NotFound, Conflict),
    security(("session" = [])),
)]
pub async fn withdraw_quota_request(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(id): PathParams<QuotaRequestId>,
) -> Result<Json<QuotaRequestView>, ApiError> {
    Ok(Json(state.service.withdraw_quota_request(&p, id).await?))
}

/// `approve` or `reject`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// Grant it.
    Approve,
    /// Refuse it.
    Reject,
}

/// A platform admin's decision. Flat (rather than the tagged
/// [`QuotaDecision`]) so a bad field is named in the 400.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideBody {
    /// Approve or reject.
    decision: DecisionKind,
    /// Approve this amount instead of what was asked.
    #[serde(default)]
    amount: Option<tessera_core::quota::QuotaAmount>,
    /// Approve until then instead.
    #[serde(default)]
    ends_at: Option<tessera_protocol::timestamp::Timestamp>,
    /// Why (required when rejecting; the tenant sees it).
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

/// A platform admin approves (optionally a different amount or end) or
/// rejects with a reason; 409 when it was decided meanwhile.
#[utoipa::path(
    post, path = "/quota-requests/{id}/decide", tag = "quotas",
    params(("id" = i64, Path, description = "Quota request id")),
    request_body = DecideBody,
    responses((status = 200, description = "Decided", body = QuotaRequestView),
              BadRequest, Unauthorized, Forbidden, NotFound, Conflict),
    security(("session" = [])),
)]
pub async fn decide_quota_request(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(id): PathParams<QuotaRequestId>,
    JsonBody(body): JsonBody<DecideBody>,
) -> Result<Json<QuotaRequestView>, ApiError> {
    let admin = p.require_platform_admin()?;
    let decision = body.decision();
    let view = state.service.decide_quota_request(&admin, id, &decision);
    Ok(Json(view.await?))
}

/// Pending quota requests, oldest first, with the tenant's quota, use and
/// history and the pool's capacity (platform admins).
#[utoipa::path(
    get, path = "/approvals", tag = "quotas",
    responses((status = 200, description = "The approval queue", body = ApprovalQueueView),
              Unauthorized, Forbidden),
    security(("session" = [])),
)]
pub async fn list_approvals(
    State(state): State<AppState>,
    Person(p): Person,
) -> Result<Json<ApprovalQueueView>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.approval_queue(&admin).await?))
}

/// Every tenant's quota and use per pool (platform admins).
#[utoipa::path(
    get, path = "/admin/quotas", tag = "quotas",
    responses((status = 200, description = "Quotas", body = [TenantQuotasView]),
              Unauthorized, Forbidden),
    security(("session" = [])),
)]
pub async fn list_quotas(
    State(state): State<AppState>,
    Person(p): Person,
) -> Result<Json<Vec<TenantQuotasView>>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.admin_quotas(&admin).await?))
}

/// Set a tenant's permanent quota in a pool (platform admins). With
/// four-eyes on, lowering applies at once and a raise waits as a quota
/// request for another platform admin (202 with the request).
#[utoipa::path(
    put, path = "/admin/quotas", tag = "quotas",
    request_body = SetQuota,
    responses((status = 200, description = "Applied: the quota now", body = QuotaChange),
              (status = 202, description = "The raise waits for another platform admin", body = QuotaChange),
              BadRequest, Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn set_quota(
    State(state): State<AppState>,
    Person(p): Person,
    JsonBody(req): JsonBody<SetQuota>,
) -> Result<(StatusCode, Json<QuotaChange>), ApiError> {
    let admin = p.require_platform_admin()?;
    let change = state.service.set_quota(&admin, &req).await?;
    let status = if change.proposal.is_some() {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(change)))
}

/// Grant temporary extra quota until `ends_at` (platform admins). With
/// four-eyes on it waits as a quota request for another platform admin
/// (202 with the request).
#[utoipa::path(
    post, path = "/admin/quota-grants", tag = "quotas",
    request_body = NewQuotaGrant,
    responses((status = 201, description = "Granted: the quota now", body = QuotaChange),
              (status = 202, description = "The grant waits for another platform admin", body = QuotaChange),
              BadRequest, Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn grant_quota(
    State(state): State<AppState>,
    Person(p): Person,
    JsonBody(req): JsonBody<NewQuotaGrant>,
) -> Result<(StatusCode, Json<QuotaChange>), ApiError> {
    let admin = p.require_platform_admin()?;
    let change = state.service.grant_quota(&admin, &req).await?;
    let status = if change.proposal.is_some() {
        StatusCode::ACCEPTED
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(change)))
}

/// End a temporary grant now (platform admins).
#[utoipa::path(
    delete, path = "/admin/quota-grants/{id}", tag = "quotas",
    params(("id" = i64, Path, description = "Grant id")),
    responses((status = 204, description = "Ended"), Unauthorized, Forbidden, NotFound, Conflict),
    security(("session" = [])),
)]
pub async fn end_quota_grant(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(id): PathParams<QuotaGrantId>,
) -> Result<StatusCode, ApiError> {
    let admin = p.require_platform_admin()?;
    state.service.end_quota_grant(&admin, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The caller's notifications, newest first, and the unread count.
#[utoipa::path(
    get, path = "/notifications", tag = "notifications",
    responses((status = 200, description = "Notifications", body = NotificationsPage),
              Unauthorized, Forbidden),
    security(("session" = [])),
)]
pub async fn list_notifications(
    State(state): State<AppState>,
    Person(p): Person,
) -> Result<Json<NotificationsPage>, ApiError> {
    Ok(Json(state.service.notifications(&p).await?))
}

/// Which notifications to mark read: one id, or all when omitted.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MarkRead {
    /// The notification; every one when omitted.
    #[serde(default)]
    id: Option<NotificationId>,
}

/// Mark one (`{"id": 5}`) or all (`{}`) notifications read.
#[utoipa::path(
    post, path = "/notifications/read", tag = "notifications",
    request_body = MarkRead,
    responses((status = 200, description = "Notifications", body = NotificationsPage),
              BadRequest, Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn mark_notifications_read(
    State(state): State<AppState>,
    Person(p): Person,
    JsonBody(body): JsonBody<MarkRead>,
) -> Result<Json<NotificationsPage>, ApiError> {
    state.service.mark_notifications_read(&p, body.id).await?;
    Ok(Json(state.service.notifications(&p).await?))
}

/// The tenant's webhook and its latest deliveries (tenant admins); 404 when
/// none is set up.
#[utoipa::path(
    get, path = "/tenants/{slug}/webhook", tag = "webhooks",
    params(("slug" = String, Path, description = "Tenant slug")),
    responses((status = 200, description = "The webhook", body = WebhookView),
              Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn get_webhook(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(slug): PathParams<TenantSlug>,
) -> Result<Json<WebhookView>, ApiError> {
    match state.service.webhook_view(&p, &slug).await? {
        Some(w) => Ok(Json(w)),
        None => Err(ServiceError::not_found(format!("a webhook for tenant '{slug}'")).into()),
    }
}

/// Where a tenant's webhook posts events.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SetWebhook {
    /// An `http(s)` URL.
    #[schema(format = "uri")]
    url: String,
}

/// Set the webhook URL; answers the HMAC signing secret once (tenant admins).
#[utoipa::path(
    put, path = "/tenants/{slug}/webhook", tag = "webhooks",
    params(("slug" = String, Path, description = "Tenant slug")),
    request_body = SetWebhook,
    responses((status = 200, description = "The webhook and its secret", body = CreatedWebhook),
              BadRequest, Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn set_webhook(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(slug): PathParams<TenantSlug>,
    JsonBody(body): JsonBody<SetWebhook>,
) -> Result<Json<CreatedWebhook>, ApiError> {
    Ok(Json(state.service.set_webhook(&p, &slug, &body.url).await?))
}

/// Remove the webhook (tenant admins).
#[utoipa::path(
    delete, path = "/tenants/{slug}/webhook", tag = "webhooks",
    params(("slug" = String, Path, description = "Tenant slug")),
    responses((status = 204, description = "Removed"), Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn delete_webhook(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(slug): PathParams<TenantSlug>,
) -> Result<StatusCode, ApiError> {
    state.service.delete_webhook(&p, &slug).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Queue a `webhook.test` event (tenant admins).
#[utoipa::path(
    post, path = "/tenants/{slug}/webhook/test", tag = "webhooks",
    params(("slug" = String, Path, description = "Tenant slug")),
    responses((status = 202, description = "Queued"), Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn test_webhook(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(slug): PathParams<TenantSlug>,
) -> Result<StatusCode, ApiError> {
    state.service.test_webhook(&p, &slug).await?;
    Ok(StatusCode::ACCEPTED)
}
