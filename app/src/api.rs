//! Server functions: get the service and the viewer, call the use-case, convert
//! the result. Nothing else belongs here.
// Server functions take a form's flat fields (forms post before the WASM
// has loaded), so a form with many fields makes a function with many
// arguments, here and in the client stub the macro generates.
#![allow(clippy::too_many_arguments)]

use crate::error::AppError;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};
use tessera_core::ids::{
    AllocationId, ApiTokenId, HostId, JoinTokenId, NotificationId, QuotaGrantId, QuotaRequestId,
};
use tessera_protocol::quotas::{
    ApprovalQueueView, CreatedWebhook, NotificationsPage, QuotaRequestView, TenantQuotaPage,
    TenantQuotasView, WebhookView,
};
#[cfg(feature = "ssr")]
use tessera_protocol::views::NewAllocation;
use tessera_protocol::views::{
    AllocationActivity, AllocationView, ApiTokenView, AuditPage, AuditQuery, CreatedApiToken,
    CreatedJoinToken, FleetInsights, FleetQuery, FleetView, JoinTokenView, QuotaView,
    RequestOptions, TenantView, ViewerView,
};

/// A view with the server's time when it was read, so relative times ("3 h
/// ago") render the same on the server and in the browser.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamped<T> {
    /// The view.
    pub value: T,
    /// When it was read.
    pub now: chrono::DateTime<chrono::Utc>,
}

#[cfg(feature = "ssr")]
mod ssr {
    use crate::error::AppError;
    use leptos::prelude::use_context;
    use tessera_service::{Service, Viewer};

    /// The service and the request's viewer.
    pub async fn ctx() -> Result<(Service, Viewer), AppError> {
        let service = use_context::<Service>().ok_or_else(|| AppError {
            status: 500,
            code: "internal".to_owned(),
            message: "the server is not set up correctly".to_owned(),
        })?;
        let axum::Extension(viewer) = leptos_axum::extract::<axum::Extension<Viewer>>()
            .await
            .unwrap_or_else(|_| axum::Extension(Viewer::default()));
        Ok((service, viewer))
    }

    /// The service and the viewer's access to tenant `slug` (signed in, a
    /// member or a platform admin), for the server functions of a tenant's
    /// pages.
    pub async fn in_tenant(
        slug: &str,
    ) -> Result<(Service, tessera_service::allocations::TenantActor), AppError> {
        let (service, viewer) = ctx().await?;
        let actor = service.tenant_actor(viewer.require()?, slug).await?;
        Ok((service, actor))
    }

    /// `value`, stamped with the time it was read.
    pub fn stamped<T>(service: &Service, value: T) -> super::Stamped<T> {
        super::Stamped {
            value,
            now: service.now(),
        }
    }

    /// A 400 naming the field, for input the page could not convert.
    pub fn invalid(field: &str, message: impl std::fmt::Display) -> AppError {
        AppError {
            status: 400,
            code: "invalid_request".to_owned(),
            message: format!("{field}: {message}"),
        }
    }

    /// An optional whole-number field: empty is `None`.
    pub fn optional_count(field: &str, value: &str) -> Result<Option<u32>, AppError> {
        match value.trim() {
            "" => Ok(None),
            v => v
                .parse()
                .map(Some)
                .map_err(|_| invalid(field, format!("'{v}' is not a whole number"))),
        }
    }

    /// A date field ("2026-11-29") as the end of that day in UTC.
    pub fn end_of_day(
        field: &str,
        value: &str,
    ) -> Result<Option<chrono::DateTime<chrono::Utc>>, AppError> {
        crate::format::end_of_day(value).map_err(|m| invalid(field, m))
    }

    /// A quota amount from a form's three fields.
    pub fn amount(gpus: f64, memory_gib: f64, max_slices: u32) -> tessera_core::quota::QuotaAmount {
        tessera_core::quota::QuotaAmount {
            gpus,
            memory_gib,
            max_slices,
        }
    }
}

/// The signed-in user, if any.
#[server(prefix = "/api/ui", endpoint = "get_viewer")]
pub async fn get_viewer() -> Result<Option<ViewerView>, AppError> {
    let (_, viewer) = ssr::ctx().await?;
    Ok(viewer.0.map(|p| p.view()))
}

/// A tenant's home page.
#[server(prefix = "/api/ui", endpoint = "get_tenant")]
pub async fn get_tenant(slug: String) -> Result<TenantView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service.tenant_view(viewer.require()?, &slug).await?)
}

/// One page of the hosts that match `query`, the fleet's numbers and the
/// pools (platform admins).
#[server(prefix = "/api/ui", endpoint = "get_fleet")]
pub async fn get_fleet(query: FleetQuery) -> Result<FleetView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let filter = query
        .filter()
        .map_err(|(field, message)| AppError::invalid(field, message))?;
    Ok(service.fleet_view(&admin, &filter).await?)
}

/// The names of every enrolled host (platform admins).
#[server(prefix = "/api/ui", endpoint = "list_host_names")]
pub async fn list_host_names() -> Result<Vec<String>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    Ok(service.enrolled_host_names(&admin).await?)
}

/// The fleet's insights over the last `days` days, the heat map showing
/// the hosts `heat` selects (platform admins).
#[server(prefix = "/api/ui", endpoint = "get_fleet_insights")]
pub async fn get_fleet_insights(days: u32, heat: FleetQuery) -> Result<FleetInsights, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let heat = heat
        .filter()
        .map_err(|(field, message)| AppError::invalid(field, message))?;
    Ok(service.fleet_insights(&admin, days, &heat).await?)
}

/// Cordons, drains, puts into maintenance, resumes or decommissions a host
/// (`target` = `host`) or one of its GPUs (`target` = its index).
#[server(prefix = "/api/ui", endpoint = "operate_fleet")]
pub async fn operate_fleet(
    host_id: HostId,
    target: String,
    action: String,
    #[server(default)] deadline_minutes: Option<u32>,
    reason: String,
) -> Result<(), AppError> {
    use tessera_core::availability::OpsAction;
    use tessera_service::ServiceError;
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let action = OpsAction::from_form(&action, deadline_minutes)
        .map_err(|m| ServiceError::invalid("action", m))?;
    let req = tessera_protocol::views::OpsRequest { action, reason };
    match target.as_str() {
        "host" => service.operate_host(&admin, host_id, &req).await?,
        index => {
            let index: u32 = index.parse().map_err(|_| {
                ServiceError::invalid("target", "choose the host or one of its GPUs")
            })?;
            service.operate_gpu(&admin, host_id, index, &req).await?
        }
    };
    Ok(())
}

/// Join tokens (platform admins).
#[server(prefix = "/api/ui", endpoint = "list_join_tokens")]
pub async fn list_join_tokens() -> Result<Vec<JoinTokenView>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    Ok(service.list_join_tokens(&admin).await?)
}

/// Creates a join token valid for `ttl_hours`; with `for_host`, a
/// re-enrolment token for that enrolled host.
#[server(prefix = "/api/ui", endpoint = "create_join_token")]
pub async fn create_join_token(
    description: String,
    ttl_hours: i64,
    #[server(default)] for_host: Option<String>,
) -> Result<CreatedJoinToken, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let new = tessera_service::fleet::NewJoinToken {
        description,
        ttl_minutes: ttl_hours.saturating_mul(60),
        for_host,
    };
    Ok(service.create_join_token(&admin, &new).await?)
}

/// Revokes a join token.
#[server(prefix = "/api/ui", endpoint = "revoke_join_token")]
pub async fn revoke_join_token(id: JoinTokenId) -> Result<(), AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    Ok(service.revoke_join_token(&admin, id).await?)
}

/// The request form's pools, quotas and use.
#[server(prefix = "/api/ui", endpoint = "get_request_options")]
pub async fn get_request_options(slug: String) -> Result<RequestOptions, AppError> {
    let (service, actor) = ssr::in_tenant(&slug).await?;
    Ok(service.request_options(&actor).await?)
}

/// Requests a slice; `shape` is the JSON of a `SliceShape`.
#[server(prefix = "/api/ui", endpoint = "request_slice")]
pub async fn request_slice(
    slug: String,
    pool: String,
    shape: String,
    lease_hours: u32,
    purpose: String,
    /// Empty: the default class.
    #[server(default)]
    priority_class: String,
    /// `guaranteed` (also when empty), `burstable` or `best-effort`.
    #[server(default)]
    qos: String,
) -> Result<AllocationView, AppError> {
    let (service, actor) = ssr::in_tenant(&slug).await?;
    let shape = serde_json::from_str(&shape).map_err(|e| AppError {
        status: 400,
        code: "invalid_request".to_owned(),
        message: format!("shape: {e}"),
    })?;
    let qos = match qos.trim() {
        "" => tessera_core::schedule::QosClass::default(),
        name => tessera_core::schedule::QosClass::parse(name).ok_or_else(|| AppError {
            status: 400,
            code: "invalid_request".to_owned(),
            message: format!("qos: '{name}' is not one of guaranteed, burstable, best-effort"),
        })?,
    };
    let req = NewAllocation {
        tenant: None,
        pool,
        shape,
        lease_hours,
        purpose,
        priority_class: Some(priority_class),
        qos,
    };
    Ok(service.request_allocation(&actor, &req).await?)
}

/// One allocation of the tenant.
#[server(prefix = "/api/ui", endpoint = "get_allocation")]
pub async fn get_allocation(slug: String, id: AllocationId) -> Result<AllocationView, AppError> {
    let (service, actor) = ssr::in_tenant(&slug).await?;
    Ok(service.get_allocation(&actor, id).await?)
}

/// An allocation's utilisation and memory since it started.
#[server(prefix = "/api/ui", endpoint = "get_allocation_activity")]
pub async fn get_allocation_activity(
    slug: String,
    id: AllocationId,
) -> Result<AllocationActivity, AppError> {
    let (service, actor) = ssr::in_tenant(&slug).await?;
    Ok(service.allocation_activity(&actor, id).await?)
}

/// Releases an allocation.
#[server(prefix = "/api/ui", endpoint = "release_slice")]
pub async fn release_slice(slug: String, id: AllocationId) -> Result<AllocationView, AppError> {
    let (service, actor) = ssr::in_tenant(&slug).await?;
    Ok(service.release_allocation(&actor, id).await?)
}

/// Asks again for a slice that lost its GPU or host, or has ended.
#[server(prefix = "/api/ui", endpoint = "requeue_slice")]
pub async fn requeue_slice(slug: String, id: AllocationId) -> Result<AllocationView, AppError> {
    let (service, actor) = ssr::in_tenant(&slug).await?;
    Ok(service.requeue_allocation(&actor, id).await?)
}

/// Extends an active lease by `hours`.
#[server(prefix = "/api/ui", endpoint = "extend_slice")]
pub async fn extend_slice(
    slug: String,
    id: AllocationId,
    hours: u32,
) -> Result<AllocationView, AppError> {
    let (service, actor) = ssr::in_tenant(&slug).await?;
    Ok(service.extend_allocation(&actor, id, hours).await?)
}

/// Keeps a slice warned as idle, with a reason.
#[server(prefix = "/api/ui", endpoint = "keep_slice")]
pub async fn keep_slice(
    slug: String,
    id: AllocationId,
    reason: String,
) -> Result<AllocationView, AppError> {
    let (service, actor) = ssr::in_tenant(&slug).await?;
    Ok(service.keep_allocation(&actor, id, &reason).await?)
}

/// The tenant's API tokens (tenant admins).
#[server(prefix = "/api/ui", endpoint = "list_api_tokens")]
pub async fn list_api_tokens(slug: String) -> Result<Vec<ApiTokenView>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    let actor = service.tenant_actor(who, &slug).await?;
    Ok(service.list_api_tokens(who, &actor).await?)
}

/// Creates an API token (tenant admins) that lives `days` (empty: the
/// configured default); the secret is shown once.
#[server(prefix = "/api/ui", endpoint = "create_api_token")]
pub async fn create_api_token(
    slug: String,
    name: String,
    #[server(default)] days: String,
) -> Result<CreatedApiToken, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    let actor = service.tenant_actor(who, &slug).await?;
    let days = ssr::optional_count("days", &days)?;
    Ok(service.create_api_token(who, &actor, &name, days).await?)
}

/// Revokes an API token (tenant admins).
#[server(prefix = "/api/ui", endpoint = "revoke_api_token")]
pub async fn revoke_api_token(slug: String, id: ApiTokenId) -> Result<ApiTokenView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    let actor = service.tenant_actor(who, &slug).await?;
    Ok(service.revoke_api_token(who, &actor, id).await?)
}

/// A page of the audit log (platform admins: all; tenant admins: their tenants).
#[server(prefix = "/api/ui", endpoint = "get_audit")]
pub async fn get_audit(query: AuditQuery) -> Result<AuditPage, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let filter = query
        .filter()
        .map_err(|(field, message)| AppError::invalid(field, message))?;
    Ok(service.audit_log(viewer.require()?, &filter).await?)
}

/// A tenant's quota, use and quota requests.
#[server(prefix = "/api/ui", endpoint = "get_tenant_quota")]
pub async fn get_tenant_quota(slug: String) -> Result<Stamped<TenantQuotaPage>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let page = service.tenant_quota_page(viewer.require()?, &slug).await?;
    Ok(ssr::stamped(&service, page))
}

/// Asks for more quota (a member proposes, a tenant admin submits).
/// `ends_on` is a date (temporary until the end of that day, UTC) or empty
/// (permanent); `slice` is the JSON of a refused `NewAllocation`, or empty.
#[server(prefix = "/api/ui", endpoint = "create_quota_request")]
pub async fn create_quota_request(
    slug: String,
    pool: String,
    gpus: f64,
    memory_gib: f64,
    max_slices: u32,
    ends_on: String,
    justification: String,
    slice: String,
) -> Result<QuotaRequestView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let slice = match slice.trim() {
        "" => None,
        json => Some(
            serde_json::from_str::<NewAllocation>(json).map_err(|e| ssr::invalid("slice", e))?,
        ),
    };
    let req = tessera_protocol::quotas::NewQuotaRequest {
        tenant: slug,
        pool,
        amount: ssr::amount(gpus, memory_gib, max_slices),
        ends_at: ssr::end_of_day("ends_at", &ends_on)?,
        justification,
        slice,
    };
    Ok(service
        .create_quota_request(viewer.require()?, &req)
        .await?)
}

/// A tenant admin submits a member's proposal.
#[server(prefix = "/api/ui", endpoint = "submit_quota_request")]
pub async fn submit_quota_request(id: QuotaRequestId) -> Result<QuotaRequestView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service.submit_quota_request(viewer.require()?, id).await?)
}

/// The tenant takes a quota request back.
#[server(prefix = "/api/ui", endpoint = "withdraw_quota_request")]
pub async fn withdraw_quota_request(id: QuotaRequestId) -> Result<QuotaRequestView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service
        .withdraw_quota_request(viewer.require()?, id)
        .await?)
}

/// Pending quota requests with what a decision needs (platform admins).
#[server(prefix = "/api/ui", endpoint = "get_approval_queue")]
pub async fn get_approval_queue() -> Result<Stamped<ApprovalQueueView>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    Ok(ssr::stamped(
        &service,
        service.approval_queue(&admin).await?,
    ))
}

/// Approves a quota request, granting the amount given (platform admins).
#[server(prefix = "/api/ui", endpoint = "approve_quota_request")]
pub async fn approve_quota_request(
    id: QuotaRequestId,
    gpus: f64,
    memory_gib: f64,
    max_slices: u32,
) -> Result<QuotaRequestView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let decision = tessera_protocol::quotas::QuotaDecision::Approve {
        amount: Some(ssr::amount(gpus, memory_gib, max_slices)),
        ends_at: None,
    };
    Ok(service.decide_quota_request(&admin, id, &decision).await?)
}

/// Rejects a quota request with a reason (platform admins).
#[server(prefix = "/api/ui", endpoint = "reject_quota_request")]
pub async fn reject_quota_request(
    id: QuotaRequestId,
    reason: String,
) -> Result<QuotaRequestView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let decision = tessera_protocol::quotas::QuotaDecision::Reject { reason };
    Ok(service.decide_quota_request(&admin, id, &decision).await?)
}

/// Every tenant's quotas (platform admins).
#[server(prefix = "/api/ui", endpoint = "get_admin_quotas")]
pub async fn get_admin_quotas() -> Result<Stamped<Vec<TenantQuotasView>>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    Ok(ssr::stamped(&service, service.admin_quotas(&admin).await?))
}

/// Sets a tenant's permanent quota in a pool (platform admins).
#[server(prefix = "/api/ui", endpoint = "set_tenant_quota")]
pub async fn set_tenant_quota(
    tenant: String,
    pool: String,
    gpus: f64,
    memory_gib: f64,
    max_slices: u32,
) -> Result<QuotaView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let req = tessera_protocol::quotas::SetQuota {
        tenant,
        pool,
        amount: ssr::amount(gpus, memory_gib, max_slices),
    };
    Ok(service.set_quota(&admin, &req).await?)
}

/// Grants temporary extra quota until the end of `ends_on` (platform admins).
#[server(prefix = "/api/ui", endpoint = "grant_tenant_quota")]
pub async fn grant_tenant_quota(
    tenant: String,
    pool: String,
    gpus: f64,
    memory_gib: f64,
    max_slices: u32,
    ends_on: String,
    reason: String,
) -> Result<QuotaView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let ends_at = ssr::end_of_day("ends_at", &ends_on)?
        .ok_or_else(|| ssr::invalid("ends_at", "choose the day the extra quota ends"))?;
    let req = tessera_protocol::quotas::NewQuotaGrant {
        tenant,
        pool,
        amount: ssr::amount(gpus, memory_gib, max_slices),
        ends_at,
        reason,
    };
    Ok(service.grant_quota(&admin, &req).await?)
}

/// Ends a temporary grant now (platform admins).
#[server(prefix = "/api/ui", endpoint = "end_quota_grant")]
pub async fn end_quota_grant(id: QuotaGrantId) -> Result<(), AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    Ok(service.end_quota_grant(&admin, id).await?)
}

/// The viewer's notifications, newest first.
#[server(prefix = "/api/ui", endpoint = "get_notifications")]
pub async fn get_notifications() -> Result<Stamped<NotificationsPage>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(ssr::stamped(
        &service,
        service.notifications(viewer.require()?).await?,
    ))
}

/// How many of the viewer's notifications are unread (0 when signed out).
#[server(prefix = "/api/ui", endpoint = "get_unread_notifications")]
pub async fn get_unread_notifications() -> Result<u64, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    match viewer.0.as_ref() {
        Some(who) => Ok(service.unread_notifications(who).await?),
        None => Ok(0),
    }
}

/// Marks one notification read.
#[server(prefix = "/api/ui", endpoint = "mark_notification_read")]
pub async fn mark_notification_read(id: NotificationId) -> Result<u64, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service
        .mark_notifications_read(viewer.require()?, Some(id))
        .await?)
}

/// Marks all of the viewer's notifications read.
#[server(prefix = "/api/ui", endpoint = "mark_all_notifications_read")]
pub async fn mark_all_notifications_read() -> Result<u64, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service
        .mark_notifications_read(viewer.require()?, None)
        .await?)
}

/// The tenant's webhook and its latest deliveries (tenant admins).
#[server(prefix = "/api/ui", endpoint = "get_webhook")]
pub async fn get_webhook(slug: String) -> Result<Stamped<Option<WebhookView>>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(ssr::stamped(
        &service,
        service.webhook_view(viewer.require()?, &slug).await?,
    ))
}

/// Sets the tenant's webhook URL; the new signing secret is shown once.
#[server(prefix = "/api/ui", endpoint = "set_webhook")]
pub async fn set_webhook(slug: String, url: String) -> Result<CreatedWebhook, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service.set_webhook(viewer.require()?, &slug, &url).await?)
}

/// Removes the tenant's webhook.
#[server(prefix = "/api/ui", endpoint = "delete_webhook")]
pub async fn delete_webhook(slug: String) -> Result<(), AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service.delete_webhook(viewer.require()?, &slug).await?)
}

/// Queues a test event to the tenant's webhook.
#[server(prefix = "/api/ui", endpoint = "send_test_webhook")]
pub async fn send_test_webhook(slug: String) -> Result<(), AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service.test_webhook(viewer.require()?, &slug).await?)
}

/// Pools with what they hold and any planned change (platform admins).
#[server(prefix = "/api/ui", endpoint = "list_pools_admin")]
pub async fn list_pools_admin() -> Result<tessera_protocol::views::PoolsAdminView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    Ok(service.pools_admin(&admin).await?)
}

/// What saving a pool would do, with the checked edit to apply after.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolReview {
    /// The pool as it would be.
    pub edit: tessera_protocol::views::PoolEdit,
    /// The pool exists (a change) or not (new).
    pub existing: bool,
    /// What would happen.
    pub preview: tessera_protocol::views::PoolChangePreview,
}

/// Reviews a new or changed pool from the pools page form.
#[server(prefix = "/api/ui", endpoint = "review_pool")]
pub async fn review_pool(
    #[server(default)] revision: Option<i64>,
    name: String,
    #[server(default)] description: String,
    sharing: String,
    isolation: String,
    models: String,
    #[server(default)] hosts: String,
    time_slice_replicas: u32,
    #[server(default)] allowed_mig_profiles: String,
    max_lease_hours: u32,
    queue: String,
    reserve_after_minutes: u32,
    #[server(default)] fair_share_weights: String,
    usage_half_life_hours: u32,
    on_release: String,
    #[server(default)] mps_strays: String,
    #[server(default)] idle_minutes: u32,
    #[server(default)] idle_below_pct: u8,
    #[server(default)] idle_notice_minutes: u32,
    #[server(default)] idle_max_keeps: u32,
    #[server(default)] preemption_grace_minutes: u32,
    #[server(default)] reason: String,
    drain_minutes: u32,
) -> Result<PoolReview, AppError> {
    use tessera_core::pool::PoolForm;
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let form = PoolForm {
        name,
        description,
        sharing,
        isolation,
        models,
        hosts,
        time_slice_replicas,
        allowed_mig_profiles,
        max_lease_hours,
        queue,
        reserve_after_minutes,
        fair_share_weights,
        usage_half_life_hours,
        on_release,
        mps_strays,
        idle_minutes,
        idle_below_pct,
        idle_notice_minutes,
        idle_max_keeps,
        preemption_grace_minutes,
    };
    let spec = form.spec().map_err(tessera_service::ServiceError::from)?;
    let edit = tessera_protocol::views::PoolEdit {
        spec,
        revision,
        reason,
        drain_minutes,
    };
    let name = edit.spec.name.clone();
    let preview = service.preview_pool_change(&admin, &name, &edit).await?;
    Ok(PoolReview {
        existing: revision.is_some(),
        edit,
        preview,
    })
}

/// Saves a reviewed pool (`review`: the [`PoolReview`] as JSON, from the
/// review's hidden field; checked again in full).
#[server(prefix = "/api/ui", endpoint = "save_pool")]
pub async fn save_pool(review: String) -> Result<(), AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let review: PoolReview = serde_json::from_str(&review).map_err(|e| {
        tessera_service::ServiceError::invalid("review", format!("review the change again ({e})"))
    })?;
    if review.existing {
        let name = review.edit.spec.name.clone();
        service.update_pool(&admin, &name, &review.edit).await?;
    } else {
        service.create_pool(&admin, &review.edit).await?;
    }
    Ok(())
}

/// Calls off a pool's planned change.
#[server(prefix = "/api/ui", endpoint = "cancel_pool_change")]
pub async fn cancel_pool_change(name: String) -> Result<(), AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    service.cancel_pool_change(&admin, &name).await?;
    Ok(())
}

/// Tenants with their IdP groups (platform admins).
#[server(prefix = "/api/ui", endpoint = "list_tenants_admin")]
pub async fn list_tenants_admin() -> Result<Vec<tessera_protocol::views::TenantAdminView>, AppError>
{
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    Ok(service.tenants_admin(&admin).await?)
}

/// Creates (no `revision`) or changes a tenant from the tenants page form;
/// group lists are comma- or newline-separated.
#[server(prefix = "/api/ui", endpoint = "save_tenant")]
pub async fn save_tenant(
    #[server(default)] revision: Option<i64>,
    slug: String,
    name: String,
    #[server(default)] cost_centre: String,
    #[server(default)] member_groups: String,
    #[server(default)] admin_groups: String,
) -> Result<(), AppError> {
    use tessera_core::pool::split_list;
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let edit = tessera_protocol::views::TenantEdit {
        slug: slug.clone(),
        name,
        cost_centre: Some(cost_centre),
        member_groups: split_list(&member_groups),
        admin_groups: split_list(&admin_groups),
        revision,
    };
    match revision {
        Some(_) => service.update_tenant(&admin, &slug, &edit).await?,
        None => service.create_tenant(&admin, &edit).await?,
    };
    Ok(())
}

/// The usage page: the report, the tenant it is for (`""`: all), and the
/// tenants the viewer may choose.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UsagePageData {
    /// The report.
    pub report: tessera_protocol::views::UsageReport,
    /// The tenant shown (`""`: every tenant, for platform admins).
    pub tenant: String,
    /// (slug, name) the viewer may choose.
    pub tenants: Vec<(String, String)>,
    /// Whether the viewer is a platform admin.
    pub admin: bool,
    /// Pool names a platform admin can price.
    pub pools: Vec<String>,
}

/// Usage and cost for a month (`""`: this one), a tenant (`""`: all for
/// platform admins, else the viewer's first) and a grouping.
#[server(prefix = "/api/ui", endpoint = "get_usage")]
pub async fn get_usage(
    #[server(default)] month: String,
    #[server(default)] tenant: String,
    #[server(default)] group_by: String,
) -> Result<UsagePageData, AppError> {
    use tessera_protocol::views::{UsageGrouping, UsageQuery};
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    let admin = who.is_platform_admin();
    let mut tenants: Vec<(String, String)> = who
        .memberships()
        .iter()
        .map(|(_, m)| (m.slug.clone(), m.name.clone()))
        .collect();
    let mut pools = Vec::new();
    if admin {
        let proof = who.require_platform_admin()?;
        tenants = service
            .tenants_admin(&proof)
            .await?
            .into_iter()
            .map(|t| (t.slug, t.name))
            .collect();
        pools = service
            .pools_admin(&proof)
            .await?
            .pools
            .into_iter()
            .map(|p| p.spec.name)
            .collect();
    }
    let tenant = match tenant {
        t if t.is_empty() && !admin => tenants.first().map(|t| t.0.clone()).unwrap_or_default(),
        t => t,
    };
    let query = UsageQuery {
        month: (!month.is_empty()).then_some(month),
        tenant: (!tenant.is_empty()).then(|| tenant.clone()),
        group_by: UsageGrouping::parse(&group_by),
        ..UsageQuery::default()
    };
    Ok(UsagePageData {
        report: service.usage_report(who, &query).await?,
        tenant,
        tenants,
        admin,
        pools,
    })
}

/// Every pool's prices.
#[server(prefix = "/api/ui", endpoint = "list_prices")]
pub async fn list_prices() -> Result<Vec<tessera_protocol::views::PriceView>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service.prices(viewer.require()?).await?)
}

/// Sets a pool's price from now (platform admins).
#[server(prefix = "/api/ui", endpoint = "set_price")]
pub async fn set_price(
    pool: String,
    currency: String,
    gpu_hour: String,
    #[server(default)] gib_hour: String,
) -> Result<(), AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let new = tessera_protocol::views::NewPrice {
        pool,
        currency,
        gpu_hour,
        gib_hour,
        effective_from: None,
    };
    service.set_price(&admin, &new).await?;
    Ok(())
}
