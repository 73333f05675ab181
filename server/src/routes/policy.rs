//! `/api/v1/pools` and `/api/v1/tenants`: pools and tenants as platform
//! admins edit them. A change to a pool that moves GPUs with slices on them
//! is planned (the GPUs drain first); `.../preview` shows what a change
//! would do without doing it. Platform admins only, signed in.

use super::extract::{JsonBody, PathParams};
use super::openapi::{BadRequest, Conflict, Forbidden, NotFound, Unauthorized};
use crate::auth::extract::Person;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use tessera_core::checked::TenantSlug;
use tessera_protocol::views::{
    PoolAdminView, PoolChangePreview, PoolEdit, PoolsAdminView, TenantAdminView, TenantEdit,
};

/// Every pool, in the order that decides which pool a GPU joins (the first
/// that takes its model and host), with what it holds and any planned change.
#[utoipa::path(
    get, path = "/pools", tag = "policy",
    responses((status = 200, description = "The pools", body = PoolsAdminView),
              Unauthorized, Forbidden),
    security(("session" = [])),
)]
pub async fn list_pools(
    State(state): State<AppState>,
    Person(p): Person,
) -> Result<Json<PoolsAdminView>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.pools_admin(&admin).await?))
}

/// Creates a pool (last in the order: it takes only GPUs no other pool takes).
#[utoipa::path(
    post, path = "/pools", tag = "policy",
    request_body = PoolEdit,
    responses((status = 200, description = "The new pool", body = PoolAdminView),
              BadRequest, Unauthorized, Forbidden, Conflict),
    security(("session" = [])),
)]
pub async fn create_pool(
    State(state): State<AppState>,
    Person(p): Person,
    JsonBody(edit): JsonBody<PoolEdit>,
) -> Result<Json<PoolAdminView>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.create_pool(&admin, &edit).await?))
}

/// Changes a pool (send the whole definition and the `revision` it was
/// read at). Applies at once unless GPUs with slices on them change pool
/// or sharing mode: then those are drained (`reason`, `drain_minutes`),
/// empty ones cordoned, and the change takes effect when they are empty.
#[utoipa::path(
    put, path = "/pools/{name}", tag = "policy",
    params(("name" = String, Path, description = "Pool name")),
    request_body = PoolEdit,
    responses((status = 200, description = "The pool, with any planned change", body = PoolAdminView),
              BadRequest, Unauthorized, Forbidden, NotFound, Conflict),
    security(("session" = [])),
)]
pub async fn update_pool(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(name): PathParams<String>,
    JsonBody(edit): JsonBody<PoolEdit>,
) -> Result<Json<PoolAdminView>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.update_pool(&admin, &name, &edit).await?))
}

/// What saving a pool would do: fields, GPUs that move, slices that end
/// (for a name no pool has yet: what creating it would do).
#[utoipa::path(
    post, path = "/pools/{name}/preview", tag = "policy",
    params(("name" = String, Path, description = "Pool name")),
    request_body = PoolEdit,
    responses((status = 200, description = "What would happen", body = PoolChangePreview),
              BadRequest, Unauthorized, Forbidden, NotFound, Conflict),
    security(("session" = [])),
)]
pub async fn preview_pool(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(name): PathParams<String>,
    JsonBody(edit): JsonBody<PoolEdit>,
) -> Result<Json<PoolChangePreview>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(
        state
            .service
            .preview_pool_change(&admin, &name, &edit)
            .await?,
    ))
}

/// Calls off a planned change: the GPUs drained or cordoned for it take
/// slices again.
#[utoipa::path(
    delete, path = "/pools/{name}/planned-change", tag = "policy",
    params(("name" = String, Path, description = "Pool name")),
    responses((status = 200, description = "The pool", body = PoolAdminView),
              Unauthorized, Forbidden, NotFound, Conflict),
    security(("session" = [])),
)]
pub async fn cancel_pool_change(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(name): PathParams<String>,
) -> Result<Json<PoolAdminView>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.cancel_pool_change(&admin, &name).await?))
}

/// Every tenant with its IdP groups.
#[utoipa::path(
    get, path = "/tenants", tag = "policy",
    responses((status = 200, description = "The tenants", body = Vec<TenantAdminView>),
              Unauthorized, Forbidden),
    security(("session" = [])),
)]
pub async fn list_tenants(
    State(state): State<AppState>,
    Person(p): Person,
) -> Result<Json<Vec<TenantAdminView>>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.tenants_admin(&admin).await?))
}

/// Creates a tenant; members of its groups get their roles at their next
/// sign-in.
#[utoipa::path(
    post, path = "/tenants", tag = "policy",
    request_body = TenantEdit,
    responses((status = 200, description = "The new tenant", body = TenantAdminView),
              BadRequest, Unauthorized, Forbidden, Conflict),
    security(("session" = [])),
)]
pub async fn create_tenant(
    State(state): State<AppState>,
    Person(p): Person,
    JsonBody(edit): JsonBody<TenantEdit>,
) -> Result<Json<TenantAdminView>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.create_tenant(&admin, &edit).await?))
}

/// Changes a tenant's name, cost centre or groups (send the `revision` it
/// was read at).
#[utoipa::path(
    put, path = "/tenants/{slug}", tag = "policy",
    params(("slug" = String, Path, description = "Tenant slug")),
    request_body = TenantEdit,
    responses((status = 200, description = "The tenant", body = TenantAdminView),
              BadRequest, Unauthorized, Forbidden, NotFound, Conflict),
    security(("session" = [])),
)]
pub async fn update_tenant(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(slug): PathParams<TenantSlug>,
    JsonBody(edit): JsonBody<TenantEdit>,
) -> Result<Json<TenantAdminView>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(
        state.service.update_tenant(&admin, &slug, &edit).await?,
    ))
}
