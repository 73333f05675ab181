//! Resolves the signed-in user for each request and guards pages.

use super::session::keys;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use tessera_core::ids::UserId;
use tessera_protocol::query::encode_component;
use tessera_service::{ServiceError, Viewer};
use tower_sessions::Session;

/// Paths that are not pages: they need no redirect to the login.
fn is_page(path: &str) -> bool {
    let non_page_prefixes = [
        "/api/",
        "/auth/",
        "/pkg/",
        "/healthz",
        "/readyz",
        "/metrics",
        // Where the IdP sends the browser after logout: public.
        "/signed-out",
    ];
    if non_page_prefixes.iter().any(|p| path.starts_with(p)) {
        return false;
    }
    // Static files (favicon.svg, robots.txt) have an extension in their last segment.
    !path.rsplit('/').next().unwrap_or("").contains('.')
}

/// Loads the session's principal into the request extensions as a [`Viewer`];
/// sends a visitor without a session from a page to the login and back.
pub async fn resolve_viewer(
    State(state): State<AppState>,
    session: Session,
    mut req: Request,
    next: Next,
) -> Response {
    let path = req.uri().path().to_owned();
    if path.starts_with("/pkg/") {
        return next.run(req).await;
    }
    let viewer = match load(&state, &session).await {
        Ok(v) => v,
        Err(err) => {
            tracing::error!(error = ?err, "could not load the session's user");
            return crate::error::html_error_page(&ServiceError::from(err)).into_response();
        }
    };
    if viewer.0.is_none() && is_page(&path) && req.method() == axum::http::Method::GET {
        let next_path = req
            .uri()
            .path_and_query()
            .map(|pq| pq.as_str().to_owned())
            .unwrap_or_else(|| "/".to_owned());
        let target = format!("/auth/login?next={}", encode_component(&next_path));
        return Redirect::to(&target).into_response();
    }
    req.extensions_mut().insert(viewer);
    next.run(req).await
}

#[derive(Debug, thiserror::Error)]
enum LoadError {
    #[error("session store: {0}")]
    Session(#[from] tower_sessions::session::Error),
    #[error(transparent)]
    Service(#[from] ServiceError),
}

impl From<LoadError> for ServiceError {
    fn from(e: LoadError) -> Self {
        match e {
            LoadError::Service(s) => s,
            LoadError::Session(s) => ServiceError::internal(format!("session store: {s}")),
        }
    }
}

async fn load(state: &AppState, session: &Session) -> Result<Viewer, LoadError> {
    let Some(user_id) = session.get::<UserId>(keys::USER_ID).await? else {
        return Ok(Viewer(None));
    };
    let login_at = session.get::<i64>(keys::LOGIN_AT).await?.unwrap_or(0);
    // Past the absolute timeout or the membership re-check: page visits go
    // through the IdP again and pick up the current groups.
    let max_age = state.config.session.max_age_seconds();
    if past_absolute_timeout(login_at, state.service.now().timestamp(), max_age) {
        session.flush().await?;
        return Ok(Viewer(None));
    }
    // The idle timeout slides with use: a session is saved again (new
    // expiry, new cookie) once an eighth of the idle timeout has passed
    // since it was last, so a busy person stays signed in and a session
    // costs at most one write per eighth of the timeout.
    let now = state.service.now().timestamp();
    let touched_at = session
        .get::<i64>(keys::TOUCHED_AT)
        .await?
        .unwrap_or(login_at);
    if needs_touch(touched_at, now, state.config.session.idle_timeout_minutes) {
        session.insert(keys::TOUCHED_AT, now).await?;
    }
    let signed_in_at = chrono::DateTime::from_timestamp(login_at, 0);
    match state.service.session_principal(user_id, signed_in_at).await {
        Ok(p) => Ok(Viewer(Some(p))),
        Err(ServiceError::Unauthenticated) => {
            session.flush().await?;
            Ok(Viewer(None))
        }
        Err(e) => Err(e.into()),
    }
}

/// Whether a session last touched at `touched_at` (Unix seconds) should be
/// saved again at `now` to push its idle timeout of `idle_minutes` back: once
/// an eighth of it has passed (at least a second).
pub fn needs_touch(touched_at: i64, now: i64, idle_minutes: i64) -> bool {
    let every = (idle_minutes.saturating_mul(60) / 8).max(1);
    now.saturating_sub(touched_at) >= every
}

/// Whether a session that logged in at `login_at` (Unix seconds) is older than
/// `max_age_s` at `now`, used or not.
pub fn past_absolute_timeout(login_at: i64, now: i64, max_age_s: i64) -> bool {
    now.saturating_sub(login_at) > max_age_s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_non_pages() {
        assert!(is_page("/"));
        assert!(is_page("/fleet"));
        assert!(is_page("/t/vision"));
        assert!(!is_page("/api/v1/allocations"));
        assert!(!is_page("/auth/callback"));
        assert!(!is_page("/favicon.svg"));
        assert!(!is_page("/healthz"));
        assert!(
            !is_page("/signed-out"),
            "public: where the IdP sends users after logout"
        );
    }

    #[test]
    fn the_idle_timeout_is_pushed_back_every_eighth_of_it() {
        // 8 hours idle: touched again after an hour of use.
        assert!(!needs_touch(1_000, 1_000, 480));
        assert!(!needs_touch(1_000, 1_000 + 3599, 480));
        assert!(needs_touch(1_000, 1_000 + 3600, 480));
        // A minute idle: every 7 seconds; never less than a second.
        assert!(needs_touch(0, 7, 1));
        assert!(!needs_touch(0, 6, 1));
        assert!(
            !needs_touch(10, 5, 1),
            "a clock that went back touches nothing"
        );
    }

    #[test]
    fn absolute_timeout_counts_from_login() {
        let day = 24 * 3600;
        assert!(!past_absolute_timeout(1_000, 1_000 + day, day));
        assert!(past_absolute_timeout(1_000, 1_000 + day + 1, day));
        assert!(
            past_absolute_timeout(0, 1_800_000_000, day),
            "a session without a login time is expired"
        );
    }
}
