//! Turning errors into HTTP answers: JSON for APIs, a page for browsers. This
//! is the one error→HTTP table: [`status_of`] for the use-cases' errors (whose
//! statuses and codes [`ServiceError`] defines) and [`auth_status`] for
//! sign-in's; the detail of a 5xx goes to the log only.

use crate::auth::oidc::AuthError;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use tessera_protocol::agent::ApiErrorBody;
use tessera_service::ServiceError;

/// An error answered as JSON `{code, message}`.
#[derive(Debug)]
pub struct ApiError(pub ServiceError);

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        Self(e)
    }
}

impl ApiError {
    /// A 400 that names the field, for bodies that did not parse.
    pub fn bad_body(field: &str, message: impl Into<String>) -> Self {
        Self(ServiceError::invalid(field, message))
    }
}

/// The status of a use-case error.
pub fn status_of(err: &ServiceError) -> StatusCode {
    StatusCode::from_u16(err.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The status of a sign-in error: the IdP or Tessera's own settings failing
/// is 503 (nothing the user can fix), a bad or replayed callback is 400.
pub fn auth_status(err: &AuthError) -> StatusCode {
    match err {
        AuthError::IdpUnavailable { .. }
        | AuthError::IdpCertificate { .. }
        | AuthError::Misconfigured(_)
        | AuthError::Session(_) => StatusCode::SERVICE_UNAVAILABLE,
        AuthError::BadState | AuthError::IdpRefused(_) | AuthError::BadToken(_) => {
            StatusCode::BAD_REQUEST
        }
        AuthError::Service(e) => status_of(e),
    }
}

/// What a person is told about a sign-in error (never a 5xx's detail).
fn auth_message(err: &AuthError) -> String {
    match err {
        AuthError::Service(e) => e.public_message(),
        other => other.to_string(),
    }
}

fn log(err: &ServiceError) {
    if err.is_busy() {
        tracing::warn!("request refused: no database connection free in time (503)");
    } else if err.status() >= 500 {
        tracing::error!(error = ?err, "request failed");
    } else {
        tracing::debug!(error = %err, "request refused");
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        log(&self.0);
        let body = ApiErrorBody {
            code: self.0.code().as_str().to_owned(),
            message: self.0.public_message(),
        };
        let mut res = (status_of(&self.0), Json(body)).into_response();
        if let Some(retry_after_s) = self.0.retry_after_s() {
            res.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, retry_after_s.into());
        }
        res
    }
}

/// Sign-in happens in the browser: its errors are pages.
impl IntoResponse for AuthError {
    fn into_response(self) -> Response {
        tracing::warn!(error = ?self, "sign-in failed");
        error_page(auth_status(&self), "Sign-in failed", &auth_message(&self))
    }
}

/// A small self-contained error page (used outside the Leptos app: sign-in errors).
pub fn error_page(status: StatusCode, title: &str, message: &str) -> Response {
    let body = format!(
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title} · Tessera</title><link rel="stylesheet" href="/pkg/tessera.css"></head>
<body><main class="standalone"><div class="card error-card" data-test="error-page">
<p class="eyebrow">Error {code}</p><h1>{title}</h1><p data-test="error-message">{message}</p>
<p><a class="button" href="/">Back to Tessera</a></p></div></main></body></html>"#,
        code = status.as_u16(),
        title = escape(title),
        message = escape(message),
    );
    (status, Html(body)).into_response()
}

/// The error page for a service error.
pub fn html_error_page(err: &ServiceError) -> Response {
    log(err);
    let title = tessera_protocol::views::error_title(err.status());
    error_page(status_of(err), title, &err.public_message())
}

/// Where the pages' server functions are served.
pub const SERVER_FN_PREFIX: &str = "/api/ui/";

/// Server functions answer every error with 500 and the [`AppError`] as
/// JSON, including a form that did not parse; this middleware gives the
/// response the status the error carries (400 for a bad form, 403, 404...),
/// so only real failures are 5xx.
///
/// [`AppError`]: tessera_app::error::AppError
pub async fn server_fn_status(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let is_server_fn = req.uri().path().starts_with(SERVER_FN_PREFIX);
    let res = next.run(req).await;
    if !is_server_fn || res.status() != StatusCode::INTERNAL_SERVER_ERROR {
        return res;
    }
    let (mut parts, body) = res.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 256 * 1024).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    if let Ok(err) = serde_json::from_slice::<tessera_app::error::AppError>(&bytes) {
        if let Ok(status) = StatusCode::from_u16(err.status) {
            if status.is_client_error() || status.is_server_error() {
                parts.status = status;
            }
        }
    }
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// Minimal HTML escaping for text content.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use http_body_util::BodyExt;

    async fn body(resp: Response) -> String {
        String::from_utf8(
            resp.into_body()
                .collect()
                .await
                .unwrap()
                .to_bytes()
                .to_vec(),
        )
        .unwrap()
    }

    /// The status and `code` an [`ApiError`] is answered with.
    async fn answer(err: ServiceError) -> (StatusCode, String) {
        let resp = ApiError(err).into_response();
        let status = resp.status();
        let parsed: ApiErrorBody = serde_json::from_str(&body(resp).await).unwrap();
        (status, parsed.code)
    }

    #[tokio::test]
    async fn invalid_input_is_400_naming_the_field() {
        let resp = ApiError(ServiceError::invalid("gpus[0].uuid", "bad")).into_response();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let parsed: ApiErrorBody = serde_json::from_str(&body(resp).await).unwrap();
        assert_eq!(parsed.code, "invalid_request");
        assert_eq!(parsed.message, "gpus[0].uuid: bad");
    }

    #[tokio::test]
    async fn no_session_is_401() {
        let expected = (StatusCode::UNAUTHORIZED, "unauthenticated".to_owned());
        assert_eq!(answer(ServiceError::Unauthenticated).await, expected);
    }

    #[tokio::test]
    async fn bad_credentials_are_401() {
        for (err, code) in [
            (ServiceError::InvalidApiToken, "invalid_api_token"),
            (
                ServiceError::ExpiredApiToken {
                    expired_at: chrono::DateTime::UNIX_EPOCH,
                },
                "expired_api_token",
            ),
            (ServiceError::InvalidCredential, "invalid_credential"),
            (ServiceError::InvalidJoinToken, "invalid_join_token"),
        ] {
            assert_eq!(
                answer(err).await,
                (StatusCode::UNAUTHORIZED, code.to_owned())
            );
        }
    }

    #[tokio::test]
    async fn forbidden_is_403() {
        let expected = (StatusCode::FORBIDDEN, "forbidden".to_owned());
        assert_eq!(answer(ServiceError::Forbidden("no".into())).await, expected);
    }

    #[tokio::test]
    async fn beyond_quota_is_403() {
        let expected = (StatusCode::FORBIDDEN, "quota_exceeded".to_owned());
        assert_eq!(
            answer(ServiceError::QuotaExceeded("full".into())).await,
            expected
        );
    }

    #[tokio::test]
    async fn not_found_is_404() {
        let expected = (StatusCode::NOT_FOUND, "not_found".to_owned());
        assert_eq!(
            answer(ServiceError::not_found("tenant 'x'")).await,
            expected
        );
    }

    #[tokio::test]
    async fn rate_limited_is_429_with_retry_after() {
        let resp = ApiError(ServiceError::RateLimited {
            what: "test events".into(),
            retry_after_s: 7,
        })
        .into_response();
        assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(resp.headers()[axum::http::header::RETRY_AFTER], "7");
    }

    #[tokio::test]
    async fn no_free_database_connection_is_503_with_retry_after() {
        let resp = ApiError(ServiceError::Database(sea_orm::DbErr::ConnectionAcquire(
            sea_orm::ConnAcquireErr::Timeout,
        )))
        .into_response();
        assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(resp.headers()[axum::http::header::RETRY_AFTER], "2");
        let text = body(resp).await;
        assert!(
            text.contains(r#""code":"busy""#) && text.contains("try again"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn conflict_is_409() {
        let expected = (StatusCode::CONFLICT, "conflict".to_owned());
        assert_eq!(
            answer(ServiceError::Conflict("busy".into())).await,
            expected
        );
    }

    #[tokio::test]
    async fn internal_errors_are_500_and_hide_detail() {
        let secret = || ServiceError::Database(sea_orm::DbErr::Custom("SELECT secret".into()));
        let resp = ApiError(secret()).into_response();
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!body(resp).await.contains("SELECT"));
        let page = html_error_page(&secret());
        assert_eq!(page.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!body(page).await.contains("SELECT"));
        let page = AuthError::Service(secret()).into_response();
        assert_eq!(page.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!body(page).await.contains("SELECT"));
    }

    #[tokio::test]
    async fn an_unreachable_idp_is_a_503_page_without_the_detail() {
        let page = AuthError::IdpUnavailable {
            issuer: "http://idp".into(),
            detail: "connection refused at 10.0.0.7".into(),
        }
        .into_response();
        assert_eq!(page.status(), StatusCode::SERVICE_UNAVAILABLE);
        let text = body(page).await;
        assert!(text.contains("not reachable"), "{text}");
        assert!(!text.contains("10.0.0.7"), "{text}");
    }

    #[test]
    fn misconfigured_sign_in_and_lost_sessions_are_503() {
        assert_eq!(
            auth_status(&AuthError::Misconfigured("oidc.redirect_url".into())),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            auth_status(&AuthError::Session("store down".into())),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }

    #[test]
    fn bad_or_replayed_callbacks_are_400() {
        for err in [
            AuthError::BadState,
            AuthError::IdpRefused("access_denied".into()),
            AuthError::BadToken("nonce".into()),
        ] {
            assert_eq!(auth_status(&err), StatusCode::BAD_REQUEST, "{err:?}");
        }
    }

    #[test]
    fn sign_in_refused_by_the_service_keeps_its_status() {
        let err = AuthError::Service(ServiceError::Forbidden("no tenant".into()));
        assert_eq!(auth_status(&err), StatusCode::FORBIDDEN);
    }

    #[tokio::test]
    async fn pages_escape_messages() {
        let resp = error_page(StatusCode::BAD_REQUEST, "Bad", "<script>x</script>");
        let text = body(resp).await;
        assert!(text.contains("&lt;script&gt;"));
        assert!(!text.contains("<script>x"));
    }
}
