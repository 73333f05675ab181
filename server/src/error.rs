//! Turning errors into HTTP answers: JSON for APIs, a page for browsers. The
//! status and message come from one table ([`ServiceError::status`] and
//! friends); the detail goes to the log only.

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

fn status_of(err: &ServiceError) -> StatusCode {
    StatusCode::from_u16(err.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

fn log(err: &ServiceError) {
    if err.status() >= 500 {
        tracing::error!(error = ?err, "request failed");
    } else {
        tracing::debug!(error = %err, "request refused");
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        log(&self.0);
        let body = ApiErrorBody {
            code: self.0.code().to_owned(),
            message: self.0.public_message(),
        };
        (status_of(&self.0), Json(body)).into_response()
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

    #[tokio::test]
    async fn api_errors_are_json_with_stable_codes() {
        let resp = ApiError(ServiceError::invalid("gpus[0].uuid", "bad")).into_response();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let text = body(resp).await;
        let parsed: ApiErrorBody = serde_json::from_str(&text).unwrap();
        assert_eq!(parsed.code, "invalid_request");
        assert_eq!(parsed.message, "gpus[0].uuid: bad");
    }

    #[tokio::test]
    async fn internal_errors_hide_detail() {
        let resp = ApiError(ServiceError::Database(sea_orm::DbErr::Custom(
            "SELECT secret".into(),
        )))
        .into_response();
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!body(resp).await.contains("SELECT"));
        let page = html_error_page(&ServiceError::Database(sea_orm::DbErr::Custom(
            "SELECT secret".into(),
        )));
        assert_eq!(page.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!body(page).await.contains("SELECT"));
    }

    #[tokio::test]
    async fn pages_escape_messages() {
        let resp = error_page(StatusCode::BAD_REQUEST, "Bad", "<script>x</script>");
        let text = body(resp).await;
        assert!(text.contains("&lt;script&gt;"));
        assert!(!text.contains("<script>x"));
    }
}
