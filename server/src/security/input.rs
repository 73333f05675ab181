//! One rule for every request: no NUL character anywhere in the URL or the
//! body, in any encoding. PostgreSQL cannot store NUL in text, so a NUL that
//! reached a query would be a 500 on one database and stored garbage on the
//! other; refused here it is a 400 that says what to fix, before any handler.
//! (Bodies are already bounded by the body limit, so buffering them is safe.)

use crate::error::ApiError;
use axum::body::Body;
use axum::extract::Request;
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tessera_protocol::agent::{AGENT_API_PREFIX, TELEMETRY_ROUTE};
use tessera_service::ServiceError;

/// Whether `text` carries a NUL as a raw byte or as `%00`.
fn nul_in_url(text: &[u8]) -> bool {
    text.contains(&0) || text.windows(3).any(|w| w == b"%00")
}

/// Whether a JSON body carries a NUL as a raw byte or as a `\u0000` escape.
fn nul_in_json(body: &[u8]) -> bool {
    body.contains(&0)
        || body
            .windows(6)
            .any(|w| w[0] == b'\\' && (w[1] == b'u' || w[1] == b'U') && &w[2..] == b"0000")
}

/// The middleware.
pub async fn refuse_nul(req: Request, next: Next) -> Response {
    let refuse = |where_: &str| {
        ApiError(ServiceError::invalid(
            where_,
            "must not contain NUL characters",
        ))
        .into_response()
    };
    let uri = req.uri().to_string();
    if nul_in_url(uri.as_bytes()) {
        return refuse("url");
    }
    // A compressed body is binary: its NUL bytes are the encoding's, not
    // text. Only agents' telemetry may be compressed; it is inflated on its
    // route and parsed as strict JSON whose every string is checked against
    // a pattern. Anywhere else a compressed body would not be inflated, and
    // skipping the check for it would let NULs through: refused.
    let compressed = req
        .headers()
        .get(axum::http::header::CONTENT_ENCODING)
        .is_some_and(|v| !v.as_bytes().eq_ignore_ascii_case(b"identity"));
    if compressed {
        let telemetry = req.uri().path().strip_prefix(AGENT_API_PREFIX) == Some(TELEMETRY_ROUTE);
        if telemetry {
            return next.run(req).await;
        }
        return ApiError(ServiceError::invalid(
            "body",
            "only agents' telemetry may be sent compressed; send this body without Content-Encoding",
        ))
        .into_response();
    }
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let (parts, body) = req.into_parts();
    // The body limit layer has already bounded it.
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        // Over the body limit (the limit layer's error) or a broken upload.
        Err(_) => {
            return ApiError(ServiceError::TooLarge(
                "the body is over the server's limit ([limits] max_body_kib)".to_owned(),
            ))
            .into_response()
        }
    };
    let nul = if content_type.starts_with("application/x-www-form-urlencoded") {
        nul_in_url(&bytes)
    } else if content_type.contains("json") {
        nul_in_json(&bytes)
    } else {
        bytes.contains(&0)
    };
    if nul {
        return refuse("body");
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_is_found_in_every_spelling() {
        assert!(nul_in_url(b"/api/v1/tenants/%00/quotas"));
        assert!(nul_in_url(b"slug=a%00b"));
        assert!(
            !nul_in_url(b"slug=a%2500b"),
            "an encoded percent sign is text"
        );
        assert!(nul_in_json(br#"{"name":"a\u0000b"}"#));
        assert!(nul_in_json(br#"{"name":"a\U0000b"}"#));
        assert!(nul_in_json(b"{\"name\":\"a\0b\"}"));
        assert!(!nul_in_json(br#"{"name":"a\u0001b","n":0}"#));
    }
}
