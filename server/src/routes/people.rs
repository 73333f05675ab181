//! REST endpoints for people: the platform admin's list, sign-out
//! everywhere (for oneself or, by a platform admin, for anyone), and
//! deactivating or reactivating a person. These act for a [`Person`] (the
//! session cookie).

use super::extract::PathParams;
use super::openapi::{Conflict, Forbidden, NotFound, Unauthorized};
use crate::auth::extract::Person;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use tessera_core::ids::UserId;
use tessera_protocol::views::PersonView;

/// Everyone who has signed in, with their roles (from their last sign-in),
/// their live API tokens and whether they are deactivated (platform admins).
#[utoipa::path(
    get, path = "/admin/people", tag = "people",
    responses((status = 200, description = "People by name", body = Vec<PersonView>),
              Unauthorized, Forbidden),
    security(("session" = [])),
)]
pub async fn list_people(
    State(state): State<AppState>,
    Person(p): Person,
) -> Result<Json<Vec<PersonView>>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.people(&admin).await?))
}

/// End every session a person has (platform admins): each of their browsers
/// signs in again, picking up their current groups.
#[utoipa::path(
    post, path = "/admin/people/{id}/sign-out", tag = "people",
    params(("id" = i64, Path, description = "User id")),
    responses((status = 200, description = "The person", body = PersonView),
              Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn sign_out_person(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(id): PathParams<UserId>,
) -> Result<Json<PersonView>, ApiError> {
    p.require_platform_admin()?;
    Ok(Json(state.service.sign_out_everywhere(&p, id).await?))
}

/// Deactivate a person (platform admins, not themselves): sign-in is
/// refused, their sessions end and the API tokens they made are revoked.
#[utoipa::path(
    post, path = "/admin/people/{id}/deactivate", tag = "people",
    params(("id" = i64, Path, description = "User id")),
    responses((status = 200, description = "The person", body = PersonView),
              Unauthorized, Forbidden, NotFound, Conflict),
    security(("session" = [])),
)]
pub async fn deactivate_person(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(id): PathParams<UserId>,
) -> Result<Json<PersonView>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(
        state.service.set_person_active(&admin, id, false).await?,
    ))
}

/// Let a deactivated person sign in again (platform admins). Their revoked
/// tokens stay revoked.
#[utoipa::path(
    post, path = "/admin/people/{id}/reactivate", tag = "people",
    params(("id" = i64, Path, description = "User id")),
    responses((status = 200, description = "The person", body = PersonView),
              Unauthorized, Forbidden, NotFound, Conflict),
    security(("session" = [])),
)]
pub async fn reactivate_person(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(id): PathParams<UserId>,
) -> Result<Json<PersonView>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(
        state.service.set_person_active(&admin, id, true).await?,
    ))
}

/// End every session of the signed-in person, this one included.
#[utoipa::path(
    post, path = "/me/sign-out-everywhere", tag = "people",
    responses((status = 200, description = "You, signed out everywhere", body = PersonView),
              Unauthorized),
    security(("session" = [])),
)]
pub async fn sign_out_everywhere(
    State(state): State<AppState>,
    Person(p): Person,
) -> Result<Json<PersonView>, ApiError> {
    let me = p.user_id();
    Ok(Json(state.service.sign_out_everywhere(&p, me).await?))
}
