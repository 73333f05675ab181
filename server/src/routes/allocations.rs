//! The REST API `/api/v1/...`: the same use-cases and authorization as the
//! UI, authenticated by a tenant API token (`Authorization: Bearer tsk_...`)
//! or by the session cookie.

use super::extract::JsonBody;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::{Extension, Json};
use serde::Deserialize;
use tessera_protocol::views::{AllocationView, ExtendLease, NewAllocation};
use tessera_service::allocations::TenantActor;
use tessera_service::{ServiceError, Viewer};

/// Path prefix of the REST API.
pub const API_PREFIX: &str = "/api/v1";

/// Who is calling: a tenant token, or a signed-in user.
enum Caller {
    Token(TenantActor),
    User(tessera_service::Principal),
}

async fn caller(
    state: &AppState,
    headers: &HeaderMap,
    viewer: &Viewer,
) -> Result<Caller, ApiError> {
    let bearer = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if let Some(token) = bearer {
        return Ok(Caller::Token(
            state.service.authenticate_api_token(token).await?,
        ));
    }
    match &viewer.0 {
        Some(p) => Ok(Caller::User(p.clone())),
        None => Err(ApiError(ServiceError::Unauthenticated)),
    }
}

impl Caller {
    /// The tenant to act in: the token's, or the one named (a user with a
    /// single tenant may leave it out).
    async fn in_tenant(
        &self,
        state: &AppState,
        slug: Option<&str>,
    ) -> Result<TenantActor, ApiError> {
        match self {
            Caller::Token(actor) => match slug {
                Some(s) if s != actor.tenant_slug => {
                    Err(ServiceError::not_found(format!("tenant '{s}'")).into())
                }
                _ => Ok(actor.clone()),
            },
            Caller::User(p) => {
                let slug = match (slug, p.memberships.as_slice()) {
                    (Some(s), _) => s.to_owned(),
                    (None, [(_, only)]) => only.slug.clone(),
                    (None, _) => {
                        return Err(ServiceError::invalid(
                            "tenant",
                            "name the tenant (its slug): you belong to several, or to none",
                        )
                        .into())
                    }
                };
                Ok(state.service.tenant_actor(p, &slug).await?)
            }
        }
    }

    async fn for_allocation(&self, state: &AppState, id: i64) -> Result<TenantActor, ApiError> {
        match self {
            Caller::Token(actor) => Ok(actor.clone()),
            Caller::User(p) => Ok(state.service.actor_for_allocation(p, id).await?),
        }
    }
}

/// The tenant actor for allocation `id`, whoever calls.
async fn actor_for(
    state: &AppState,
    headers: &HeaderMap,
    viewer: &Viewer,
    id: i64,
) -> Result<TenantActor, ApiError> {
    caller(state, headers, viewer)
        .await?
        .for_allocation(state, id)
        .await
}

/// `?tenant=<slug>`.
#[derive(Debug, Deserialize)]
pub struct TenantQuery {
    tenant: Option<String>,
}

/// `GET /api/v1/allocations`.
pub async fn list(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Query(q): Query<TenantQuery>,
) -> Result<Json<Vec<AllocationView>>, ApiError> {
    let actor = caller(&state, &headers, &viewer)
        .await?
        .in_tenant(&state, q.tenant.as_deref())
        .await?;
    Ok(Json(state.service.list_allocations(&actor).await?))
}

/// `POST /api/v1/allocations`: 201 with the allocation (active soon, or queued).
pub async fn create(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    JsonBody(req): JsonBody<NewAllocation>,
) -> Result<(StatusCode, Json<AllocationView>), ApiError> {
    let actor = caller(&state, &headers, &viewer)
        .await?
        .in_tenant(&state, req.tenant.as_deref())
        .await?;
    let view = state.service.request_allocation(&actor, &req).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// `GET /api/v1/allocations/{id}`.
pub async fn get(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<Json<AllocationView>, ApiError> {
    let actor = actor_for(&state, &headers, &viewer, id).await?;
    Ok(Json(state.service.get_allocation(&actor, id).await?))
}

/// `POST /api/v1/allocations/{id}/release`.
pub async fn release(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(id): Path<i64>,
) -> Result<Json<AllocationView>, ApiError> {
    let actor = actor_for(&state, &headers, &viewer, id).await?;
    Ok(Json(state.service.release_allocation(&actor, id).await?))
}

/// `POST /api/v1/allocations/{id}/extend`.
pub async fn extend(
    State(state): State<AppState>,
    Extension(viewer): Extension<Viewer>,
    headers: HeaderMap,
    Path(id): Path<i64>,
    JsonBody(body): JsonBody<ExtendLease>,
) -> Result<Json<AllocationView>, ApiError> {
    let actor = actor_for(&state, &headers, &viewer, id).await?;
    Ok(Json(
        state
            .service
            .extend_allocation(&actor, id, body.hours)
            .await?,
    ))
}

/// `GET /api/v1/openapi.json`.
pub async fn openapi() -> Json<serde_json::Value> {
    Json(super::openapi::document())
}
