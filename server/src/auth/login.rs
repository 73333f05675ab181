//! The sign-in routes: `GET /auth/login`, `GET /auth/callback`,
//! `POST /auth/logout`, `POST /auth/logout-everywhere`. The relying party itself is [`super::oidc::Oidc`];
//! these wire it to the session and the service.

use super::oidc::{AuthError, CallbackQuery};
use super::pending::PendingCookies;
use super::session::keys;
use crate::state::AppState;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use serde::Deserialize;
use tower_sessions::Session;

/// `?next=` of the login route.
#[derive(Debug, Deserialize)]
pub struct LoginQuery {
    next: Option<String>,
}

/// `GET /auth/login`: start a login at the IdP. Writes no session: the
/// pending login travels in an encrypted cookie ([`PendingCookies`]).
pub async fn login(
    State(state): State<AppState>,
    Query(q): Query<LoginQuery>,
) -> Result<Response, AuthError> {
    let (url, sealed) = state.oidc.start(q.next.as_deref()).await?;
    let mut res = Redirect::to(url.as_str()).into_response();
    PendingCookies::set(res.headers_mut(), Some(sealed));
    Ok(res)
}

/// `GET /auth/callback`: finish the login. The pending-login cookie is
/// removed whatever the outcome, so it is good for one try.
pub async fn callback(
    State(state): State<AppState>,
    session: Session,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Response {
    let pending = state.oidc.pending_login(&headers);
    let mut res = match finish_login(&state, &session, pending, q).await {
        Ok(next) => Redirect::to(&next).into_response(),
        Err(e) => e.into_response(),
    };
    PendingCookies::set(res.headers_mut(), state.oidc.clear_pending());
    res
}

/// The IdP's answer verified, the person signed in and the session
/// started; returns where to go.
async fn finish_login(
    state: &AppState,
    session: &Session,
    pending: Option<super::pending::PendingLogin>,
    q: CallbackQuery,
) -> Result<String, AuthError> {
    let signed_in = state.oidc.finish(pending, q).await?;
    let user_id = state.service.login(&signed_in.claims).await?;
    // A fresh session id at privilege change defeats session fixation.
    session.cycle_id().await?;
    session.insert(keys::USER_ID, user_id).await?;
    session
        .insert(keys::LOGIN_AT, state.service.now().timestamp())
        .await?;
    session.insert(keys::ID_TOKEN, signed_in.id_token).await?;
    tracing::info!(
        user_id = user_id.get(),
        groups = signed_in.claims.groups.len(),
        "signed in"
    );
    Ok(signed_in.next)
}

/// `POST /auth/logout`: end the local session and, when the IdP supports it,
/// the IdP session too (RP-initiated logout).
pub async fn logout(
    State(state): State<AppState>,
    session: Session,
) -> Result<Response, AuthError> {
    let id_token: Option<String> = session.get(keys::ID_TOKEN).await?;
    session.flush().await?;
    let to = match state.oidc.end_session_url(id_token.as_deref()).await {
        Some(url) => url.to_string(),
        None => "/signed-out".to_owned(),
    };
    Ok(Redirect::to(&to).into_response())
}

/// `POST /auth/logout-everywhere`: end every session of the signed-in
/// person (other browsers sign in again at their next page), then sign out
/// here as [`logout`] does.
pub async fn logout_everywhere(
    State(state): State<AppState>,
    session: Session,
) -> Result<Response, AuthError> {
    if let Some(user_id) = session
        .get::<tessera_core::ids::UserId>(keys::USER_ID)
        .await?
    {
        // A person already gone or deactivated has no sessions left to end.
        match state.service.principal(user_id).await {
            Ok(me) => {
                state.service.sign_out_everywhere(&me, user_id).await?;
            }
            Err(tessera_service::ServiceError::Unauthenticated) => {}
            Err(e) => return Err(e.into()),
        }
    }
    logout(State(state), session).await
}
