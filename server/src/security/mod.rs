//! Web security mechanisms, each one layer of the router (see
//! [`crate::app::router`]) and each with its own tests: CSRF defence, security
//! headers with a CSP nonce, rate limits, refusing NUL characters, the post-login redirect check and
//! the panic catcher. `SECURITY.md` explains the threat model they serve.

pub mod csrf;
pub mod headers;
pub mod input;
pub mod limits;
pub mod redirect;

use axum::response::{IntoResponse, Response};
use tessera_service::ServiceError;

/// What a handler that panicked answers: a plain 500 (the detail is logged,
/// never sent), so the connection is not dropped.
pub fn panic_response(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let detail = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)");
    tracing::error!(panic = detail, "a request handler panicked");
    crate::error::ApiError(ServiceError::internal("a request handler panicked")).into_response()
}
