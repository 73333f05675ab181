//! Server functions: get the service and the viewer, call the use-case, convert
//! the result. Nothing else belongs here.

use crate::error::AppError;
use leptos::prelude::*;
#[cfg(feature = "ssr")]
use tessera_protocol::views::NewAllocation;
use tessera_protocol::views::{
    AllocationView, ApiTokenView, AuditPage, AuditQuery, CreatedApiToken, CreatedJoinToken,
    FleetView, JoinTokenView, RequestOptions, TenantView, ViewerView,
};

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

/// Hosts and GPUs (platform admins).
#[server(prefix = "/api/ui", endpoint = "get_fleet")]
pub async fn get_fleet() -> Result<FleetView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    Ok(service.fleet_view(&admin).await?)
}

/// Join tokens (platform admins).
#[server(prefix = "/api/ui", endpoint = "list_join_tokens")]
pub async fn list_join_tokens() -> Result<Vec<JoinTokenView>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    Ok(service.list_join_tokens(&admin).await?)
}

/// Creates a join token valid for `ttl_hours`.
#[server(prefix = "/api/ui", endpoint = "create_join_token")]
pub async fn create_join_token(
    description: String,
    ttl_hours: i64,
) -> Result<CreatedJoinToken, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    Ok(service
        .create_join_token(&admin, &description, chrono::Duration::hours(ttl_hours))
        .await?)
}

/// Revokes a join token.
#[server(prefix = "/api/ui", endpoint = "revoke_join_token")]
pub async fn revoke_join_token(id: i64) -> Result<(), AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    Ok(service.revoke_join_token(&admin, id).await?)
}

/// The request form's pools, quotas and use.
#[server(prefix = "/api/ui", endpoint = "get_request_options")]
pub async fn get_request_options(slug: String) -> Result<RequestOptions, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let actor = service.tenant_actor(viewer.require()?, &slug).await?;
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
) -> Result<AllocationView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let actor = service.tenant_actor(viewer.require()?, &slug).await?;
    let shape = serde_json::from_str(&shape).map_err(|e| AppError {
        status: 400,
        code: "invalid_request".to_owned(),
        message: format!("shape: {e}"),
    })?;
    let req = NewAllocation {
        tenant: None,
        pool,
        shape,
        lease_hours,
        purpose,
    };
    Ok(service.request_allocation(&actor, &req).await?)
}

/// One allocation of the tenant.
#[server(prefix = "/api/ui", endpoint = "get_allocation")]
pub async fn get_allocation(slug: String, id: i64) -> Result<AllocationView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let actor = service.tenant_actor(viewer.require()?, &slug).await?;
    Ok(service.get_allocation(&actor, id).await?)
}

/// Releases an allocation.
#[server(prefix = "/api/ui", endpoint = "release_slice")]
pub async fn release_slice(slug: String, id: i64) -> Result<AllocationView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let actor = service.tenant_actor(viewer.require()?, &slug).await?;
    Ok(service.release_allocation(&actor, id).await?)
}

/// Extends an active lease by `hours`.
#[server(prefix = "/api/ui", endpoint = "extend_slice")]
pub async fn extend_slice(slug: String, id: i64, hours: u32) -> Result<AllocationView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let actor = service.tenant_actor(viewer.require()?, &slug).await?;
    Ok(service.extend_allocation(&actor, id, hours).await?)
}

/// The tenant's API tokens (tenant admins).
#[server(prefix = "/api/ui", endpoint = "list_api_tokens")]
pub async fn list_api_tokens(slug: String) -> Result<Vec<ApiTokenView>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    let actor = service.tenant_actor(who, &slug).await?;
    Ok(service.list_api_tokens(who, &actor).await?)
}

/// Creates an API token (tenant admins); the secret is shown once.
#[server(prefix = "/api/ui", endpoint = "create_api_token")]
pub async fn create_api_token(slug: String, name: String) -> Result<CreatedApiToken, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    let actor = service.tenant_actor(who, &slug).await?;
    Ok(service.create_api_token(who, &actor, &name).await?)
}

/// Revokes an API token (tenant admins).
#[server(prefix = "/api/ui", endpoint = "revoke_api_token")]
pub async fn revoke_api_token(slug: String, id: i64) -> Result<ApiTokenView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    let actor = service.tenant_actor(who, &slug).await?;
    Ok(service.revoke_api_token(who, &actor, id).await?)
}

/// A page of the audit log (platform admins: all; tenant admins: their tenants).
#[server(prefix = "/api/ui", endpoint = "get_audit")]
pub async fn get_audit(query: AuditQuery) -> Result<AuditPage, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let filter = query.filter().map_err(|(field, message)| AppError {
        status: 400,
        code: "invalid_request".to_owned(),
        message: format!("{field}: {message}"),
    })?;
    Ok(service.audit_log(viewer.require()?, &filter).await?)
}
