//! Server functions of a tenant's home page and its slices: the request form, one slice's page and its actions.

use super::*;

/// A tenant's home page.
#[server(prefix = "/api/ui", endpoint = "get_tenant")]
pub async fn get_tenant(slug: String) -> Result<TenantView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service
        .tenant_view(viewer.require()?, &ssr::checked("tenant", &slug)?)
        .await?)
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
    let shape = serde_json::from_str(&shape).map_err(|e| AppError::invalid("shape", e))?;
    let qos = match qos.trim() {
        "" => tessera_core::schedule::QosClass::default(),
        name => tessera_core::schedule::QosClass::parse(name).ok_or_else(|| {
            AppError::invalid(
                "qos",
                format!("'{name}' is not one of guaranteed, burstable, best-effort"),
            )
        })?,
    };
    let req = NewAllocation {
        tenant: None,
        pool: ssr::checked("pool", &pool)?,
        shape,
        lease_hours,
        purpose,
        priority_class: Some(priority_class),
        qos,
        replaces: None,
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

/// Right-sizing advice for one running slice (`None` unless it runs).
#[server(prefix = "/api/ui", endpoint = "get_allocation_advice")]
pub async fn get_allocation_advice(
    slug: String,
    id: AllocationId,
) -> Result<Option<SliceAdvice>, AppError> {
    let (service, actor) = ssr::in_tenant(&slug).await?;
    Ok(service.allocation_advice(&actor, id).await?)
}

/// Asks for the advised smaller shape instead; the old slice is released
/// once the new one is active.
#[server(prefix = "/api/ui", endpoint = "resize_slice")]
pub async fn resize_slice(slug: String, id: AllocationId) -> Result<AllocationView, AppError> {
    let (service, actor) = ssr::in_tenant(&slug).await?;
    Ok(service.resize_allocation(&actor, id).await?)
}

/// Right-sizing advice for the tenant's running slices.
#[server(prefix = "/api/ui", endpoint = "get_recommendations")]
pub async fn get_recommendations(slug: String) -> Result<Recommendations, AppError> {
    let (service, actor) = ssr::in_tenant(&slug).await?;
    Ok(service.recommendations(&actor).await?)
}

/// Asks for another shape instead of a slice (`shape` is the JSON of a
/// `SliceShape`); the slice is withdrawn once the new one is active.
#[server(prefix = "/api/ui", endpoint = "request_instead")]
pub async fn request_instead(
    slug: String,
    id: AllocationId,
    pool: String,
    shape: String,
) -> Result<AllocationView, AppError> {
    let (service, actor) = ssr::in_tenant(&slug).await?;
    let shape = serde_json::from_str(&shape).map_err(|e| AppError::invalid("shape", e))?;
    Ok(service.request_instead(&actor, id, &pool, shape).await?)
}
