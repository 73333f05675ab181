//! `/api/v1/recommendations`: right-sizing advice for running slices, from
//! their telemetry. A tenant's members (or its API tokens) see their
//! tenant's slices; platform admins the fleet's.

use super::allocations::TenantQuery;
use super::extract::{JsonBody, PathParams, QueryParams};
use super::openapi::{BadRequest, Conflict, Forbidden, NotFound, Unauthorized};
use crate::auth::extract::{ApiCaller, Person};
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use tessera_core::ids::AllocationId;
use tessera_protocol::views::{AllocationView, Recommendations, RequestInstead, SliceAdvice};

/// Advice for the tenant's running slices, biggest savings first: the
/// smallest shape that would have covered each one's measured peak memory
/// and activity, or why it keeps its size.
#[utoipa::path(
    get, path = "/recommendations", tag = "allocations",
    params(TenantQuery),
    responses((status = 200, description = "Advice per running slice, with totals", body = Recommendations),
              BadRequest, Unauthorized, Forbidden, NotFound),
    security(("apiToken" = []), ("session" = [])),
)]
pub async fn list_recommendations(
    State(state): State<AppState>,
    caller: ApiCaller,
    QueryParams(q): QueryParams<TenantQuery>,
) -> Result<Json<Recommendations>, ApiError> {
    let actor = caller.in_tenant(&state, q.tenant.as_ref()).await?;
    Ok(Json(state.service.recommendations(&actor).await?))
}

/// Advice for every running slice in the fleet, biggest savings first
/// (platform admins).
#[utoipa::path(
    get, path = "/fleet/recommendations", tag = "fleet",
    responses((status = 200, description = "Advice per running slice, with totals", body = Recommendations),
              Unauthorized, Forbidden),
    security(("session" = [])),
)]
pub async fn fleet_recommendations(
    State(state): State<AppState>,
    Person(p): Person,
) -> Result<Json<Recommendations>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.fleet_recommendations(&admin).await?))
}

/// Advice for one running slice (`null` once it is not running).
#[utoipa::path(
    get, path = "/allocations/{id}/recommendation", tag = "allocations",
    params(("id" = i64, Path, description = "Allocation id")),
    responses((status = 200, description = "The advice, or null", body = Option<SliceAdvice>),
              Unauthorized, Forbidden, NotFound),
    security(("apiToken" = []), ("session" = [])),
)]
pub async fn allocation_recommendation(
    State(state): State<AppState>,
    caller: ApiCaller,
    PathParams(id): PathParams<AllocationId>,
) -> Result<Json<Option<SliceAdvice>>, ApiError> {
    let actor = caller.for_allocation(&state, id).await?;
    Ok(Json(state.service.allocation_advice(&actor, id).await?))
}

/// Ask for the smaller shape the advice names instead of this slice: a new
/// request (same lease within the pool's longest, purpose and QoS) that
/// replaces it; the old slice is released once the new one is active.
#[utoipa::path(
    post, path = "/allocations/{id}/resize", tag = "allocations",
    params(("id" = i64, Path, description = "Allocation id")),
    responses((status = 201, description = "The new request (placed or queued), replacing this one", body = AllocationView),
              BadRequest, Unauthorized, Forbidden, NotFound, Conflict),
    security(("apiToken" = []), ("session" = [])),
)]
pub async fn resize_allocation(
    State(state): State<AppState>,
    caller: ApiCaller,
    PathParams(id): PathParams<AllocationId>,
) -> Result<(StatusCode, Json<AllocationView>), ApiError> {
    let actor = caller.for_allocation(&state, id).await?;
    let view = state.service.resize_allocation(&actor, id).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// Ask for another shape instead of this slice, admitted like any request
/// (e.g. one of the `starts_now` shapes of a waiting request); this slice
/// is withdrawn or released once the new one is active.
#[utoipa::path(
    post, path = "/allocations/{id}/instead", tag = "allocations",
    params(("id" = i64, Path, description = "Allocation id")),
    request_body = RequestInstead,
    responses((status = 201, description = "The new request (placed or queued), replacing this one", body = AllocationView),
              BadRequest, Unauthorized, Forbidden, NotFound, Conflict),
    security(("apiToken" = []), ("session" = [])),
)]
pub async fn request_instead(
    State(state): State<AppState>,
    caller: ApiCaller,
    PathParams(id): PathParams<AllocationId>,
    JsonBody(req): JsonBody<RequestInstead>,
) -> Result<(StatusCode, Json<AllocationView>), ApiError> {
    let actor = caller.for_allocation(&state, id).await?;
    let view = state
        .service
        .request_instead(&actor, id, req.pool.as_str(), req.shape)
        .await?;
    Ok((StatusCode::CREATED, Json(view)))
}
