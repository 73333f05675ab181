//! Server functions of pools and tenants (platform admins).

use super::*;

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
    #[server(default)] placement: String,
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
        placement,
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
    #[server(default)] namespaces: String,
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
        namespaces: split_list(&namespaces),
        revision,
    };
    match revision {
        Some(_) => {
            let slug = ssr::checked("tenant", &slug)?;
            service.update_tenant(&admin, &slug, &edit).await?
        }
        None => service.create_tenant(&admin, &edit).await?,
    };
    Ok(())
}
