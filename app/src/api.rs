//! Server functions: get the service and the viewer, call the use-case, convert
//! the result. Nothing else belongs here.

use crate::error::AppError;
use leptos::prelude::*;
use tessera_protocol::views::{CreatedJoinToken, FleetView, JoinTokenView, TenantView, ViewerView};

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
