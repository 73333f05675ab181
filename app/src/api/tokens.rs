//! Server functions of a tenant's API tokens (tenant admins).

use super::*;

/// The tenant's API tokens (tenant admins).
#[server(prefix = "/api/ui", endpoint = "list_api_tokens")]
pub async fn list_api_tokens(slug: String) -> Result<Vec<ApiTokenView>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    let actor = service
        .tenant_actor(who, &ssr::checked("tenant", &slug)?)
        .await?;
    Ok(service.list_api_tokens(who, &actor).await?)
}

/// Creates an API token (tenant admins) that lives `days` (empty: the
/// configured default) with `scope` (absent: a member's rights); the secret
/// is shown once.
#[server(prefix = "/api/ui", endpoint = "create_api_token")]
pub async fn create_api_token(
    slug: String,
    name: String,
    #[server(default)] days: String,
    #[server(default)] scope: TokenScope,
) -> Result<CreatedApiToken, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    let actor = service
        .tenant_actor(who, &ssr::checked("tenant", &slug)?)
        .await?;
    let days = ssr::optional_count("days", &days)?;
    Ok(service
        .create_api_token(who, &actor, &name, days, scope)
        .await?)
}

/// Revokes an API token (tenant admins).
#[server(prefix = "/api/ui", endpoint = "revoke_api_token")]
pub async fn revoke_api_token(slug: String, id: ApiTokenId) -> Result<ApiTokenView, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    let actor = service
        .tenant_actor(who, &ssr::checked("tenant", &slug)?)
        .await?;
    Ok(service.revoke_api_token(who, &actor, id).await?)
}
