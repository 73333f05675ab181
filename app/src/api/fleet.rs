//! Server functions of the fleet pages (platform admins): hosts, insights, operations and join tokens.

use super::*;

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

/// Right-sizing advice for every running slice, biggest savings first.
#[server(prefix = "/api/ui", endpoint = "get_fleet_recommendations")]
pub async fn get_fleet_recommendations() -> Result<Recommendations, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    Ok(service.fleet_recommendations(&admin).await?)
}
