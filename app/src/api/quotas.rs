//! Server functions of quotas: a tenant's quota and requests, the approval queue, and platform admins' quotas and grants.

use super::*;

/// A tenant's quota, use and quota requests.
#[server(prefix = "/api/ui", endpoint = "get_tenant_quota")]
pub async fn get_tenant_quota(slug: String) -> Result<Stamped<TenantQuotaPage>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let page = service
        .tenant_quota_page(viewer.require()?, &ssr::checked("tenant", &slug)?)
        .await?;
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
        tenant: ssr::checked("tenant", &slug)?,
        pool: ssr::checked("pool", &pool)?,
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
    #[server(default)] reason: String,
) -> Result<QuotaChange, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let req = tessera_protocol::quotas::SetQuota {
        tenant: ssr::checked("tenant", &tenant)?,
        pool: ssr::checked("pool", &pool)?,
        amount: ssr::amount(gpus, memory_gib, max_slices),
        reason,
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
) -> Result<QuotaChange, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let ends_at = ssr::end_of_day("ends_at", &ends_on)?
        .ok_or_else(|| ssr::invalid("ends_at", "choose the day the extra quota ends"))?;
    let req = tessera_protocol::quotas::NewQuotaGrant {
        tenant: ssr::checked("tenant", &tenant)?,
        pool: ssr::checked("pool", &pool)?,
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
