//! `/api/v1/allocations`: GPU slices, for a tenant API token
//! (`Authorization: Bearer tsk_...`) or the signed-in person, with the same
//! use-cases and authorization as the UI.

use super::extract::{JsonBody, PathParams, QueryParams};
use super::openapi::{BadRequest, Conflict, Forbidden, NotFound, Unauthorized};
use crate::auth::extract::ApiCaller;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::Deserialize;
use tessera_core::ids::AllocationId;
use tessera_protocol::views::{
    AllocationActivity, AllocationView, ExtendLease, KeepRequest, NewAllocation,
};

/// `?tenant=<slug>`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct TenantQuery {
    /// Tenant slug; optional with a token or for a person in one tenant.
    #[param(value_type = Option<String>)]
    pub(crate) tenant: Option<tessera_core::checked::TenantSlug>,
}

/// List the tenant's allocations (open first, then the newest that ended).
#[utoipa::path(
    get, path = "/allocations", tag = "allocations",
    params(TenantQuery),
    responses((status = 200, description = "Allocations", body = [AllocationView]),
              BadRequest, Unauthorized, Forbidden, NotFound),
    security(("apiToken" = []), ("session" = [])),
)]
pub async fn list_allocations(
    State(state): State<AppState>,
    caller: ApiCaller,
    QueryParams(q): QueryParams<TenantQuery>,
    headers: axum::http::HeaderMap,
) -> Result<axum::response::Response, ApiError> {
    use super::list_bodies::{json_response, Coding};
    let actor = caller.in_tenant(&state, q.tenant.as_ref()).await?;
    let list = state.service.kept_allocations(&actor).await?;
    let coding = Coding::preferred(&headers);
    let body = state
        .list_bodies
        .body(actor.tenant_id(), &list, coding)
        .map_err(|e| {
            ApiError(tessera_service::ServiceError::internal(format!(
                "encoding the list: {e}"
            )))
        })?;
    Ok(json_response(body, coding))
}

/// Request a slice: placed at once within quota and capacity, otherwise queued.
#[utoipa::path(
    post, path = "/allocations", tag = "allocations",
    request_body = NewAllocation,
    responses((status = 201, description = "Created (state `placed` or `queued`)", body = AllocationView),
              BadRequest, Unauthorized, Forbidden, NotFound),
    security(("apiToken" = []), ("session" = [])),
)]
pub async fn request_allocation(
    State(state): State<AppState>,
    caller: ApiCaller,
    JsonBody(req): JsonBody<NewAllocation>,
) -> Result<(StatusCode, Json<AllocationView>), ApiError> {
    let actor = caller.in_tenant(&state, req.tenant.as_ref()).await?;
    let view = state.service.request_allocation(&actor, &req).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// One allocation.
#[utoipa::path(
    get, path = "/allocations/{id}", tag = "allocations",
    params(("id" = i64, Path, description = "Allocation id")),
    responses((status = 200, description = "The allocation", body = AllocationView),
              Unauthorized, Forbidden, NotFound),
    security(("apiToken" = []), ("session" = [])),
)]
pub async fn get_allocation(
    State(state): State<AppState>,
    caller: ApiCaller,
    PathParams(id): PathParams<AllocationId>,
) -> Result<Json<AllocationView>, ApiError> {
    let actor = caller.for_allocation(&state, id).await?;
    Ok(Json(state.service.get_allocation(&actor, id).await?))
}

/// What a slice did since it started: utilisation and memory per minute
/// (per hour once older than a day), from its host's telemetry.
#[utoipa::path(
    get, path = "/allocations/{id}/activity", tag = "allocations",
    params(("id" = i64, Path, description = "Allocation id")),
    responses((status = 200, description = "Utilisation and memory over time", body = AllocationActivity),
              Unauthorized, Forbidden, NotFound),
    security(("apiToken" = []), ("session" = [])),
)]
pub async fn get_allocation_activity(
    State(state): State<AppState>,
    caller: ApiCaller,
    PathParams(id): PathParams<AllocationId>,
) -> Result<Json<AllocationActivity>, ApiError> {
    let actor = caller.for_allocation(&state, id).await?;
    Ok(Json(state.service.allocation_activity(&actor, id).await?))
}

/// Release: the agent tears the slice down; capacity and quota return.
#[utoipa::path(
    post, path = "/allocations/{id}/release", tag = "allocations",
    params(("id" = i64, Path, description = "Allocation id")),
    responses((status = 200, description = "Releasing or released", body = AllocationView),
              Unauthorized, Forbidden, NotFound, Conflict),
    security(("apiToken" = []), ("session" = [])),
)]
pub async fn release_allocation(
    State(state): State<AppState>,
    caller: ApiCaller,
    PathParams(id): PathParams<AllocationId>,
) -> Result<Json<AllocationView>, ApiError> {
    let actor = caller.for_allocation(&state, id).await?;
    Ok(Json(state.service.release_allocation(&actor, id).await?))
}

/// Extend an active lease within the pool's limit.
#[utoipa::path(
    post, path = "/allocations/{id}/extend", tag = "allocations",
    params(("id" = i64, Path, description = "Allocation id")),
    request_body = ExtendLease,
    responses((status = 200, description = "The allocation with its new end", body = AllocationView),
              BadRequest, Unauthorized, Forbidden, NotFound, Conflict),
    security(("apiToken" = []), ("session" = [])),
)]
pub async fn extend_allocation(
    State(state): State<AppState>,
    caller: ApiCaller,
    PathParams(id): PathParams<AllocationId>,
    JsonBody(body): JsonBody<ExtendLease>,
) -> Result<Json<AllocationView>, ApiError> {
    let actor = caller.for_allocation(&state, id).await?;
    let view = state.service.extend_allocation(&actor, id, body.hours);
    Ok(Json(view.await?))
}

/// Keep a slice that was warned as idle (its pool reclaims idle slices):
/// the warning ends and its idle time counts afresh. As often as the pool
/// allows, with a reason for the audit log.
#[utoipa::path(
    post, path = "/allocations/{id}/keep", tag = "allocations",
    params(("id" = i64, Path, description = "Allocation id")),
    request_body = KeepRequest,
    responses((status = 200, description = "The allocation, no longer warned", body = AllocationView),
              BadRequest, Unauthorized, Forbidden, NotFound, Conflict),
    security(("apiToken" = []), ("session" = [])),
)]
pub async fn keep_allocation(
    State(state): State<AppState>,
    caller: ApiCaller,
    PathParams(id): PathParams<AllocationId>,
    JsonBody(body): JsonBody<KeepRequest>,
) -> Result<Json<AllocationView>, ApiError> {
    let actor = caller.for_allocation(&state, id).await?;
    let view = state.service.keep_allocation(&actor, id, &body.reason);
    Ok(Json(view.await?))
}

/// Ask again for a slice that lost its GPU or host (the old one is released
/// in the same step) or that has ended: same pool, shape, lease, purpose
/// and priority class, admitted like a new request.
#[utoipa::path(
    post, path = "/allocations/{id}/requeue", tag = "allocations",
    params(("id" = i64, Path, description = "Allocation id")),
    responses((status = 201, description = "The new allocation (placed or queued)", body = AllocationView),
              BadRequest, Unauthorized, Forbidden, NotFound, Conflict),
    security(("apiToken" = []), ("session" = [])),
)]
pub async fn requeue_allocation(
    State(state): State<AppState>,
    caller: ApiCaller,
    PathParams(id): PathParams<AllocationId>,
) -> Result<(StatusCode, Json<AllocationView>), ApiError> {
    let actor = caller.for_allocation(&state, id).await?;
    let view = state.service.requeue_allocation(&actor, id).await?;
    Ok((StatusCode::CREATED, Json(view)))
}
