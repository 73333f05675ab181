//! The error that crosses the wire from server functions to the page.

use leptos::server_fn::codec::JsonEncoding;
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};
pub use tessera_core::error_code::ErrorCode;

/// A refusal or failure, with the HTTP status, a stable code and a message for people.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct AppError {
    /// HTTP status the page should answer with.
    pub status: u16,
    /// Stable code (`forbidden`, `not_found`, ...).
    pub code: ErrorCode,
    /// What went wrong and what to do.
    pub message: String,
}

impl AppError {
    /// A 400 naming the field of a page's query that does not parse.
    pub fn invalid(field: &str, message: impl std::fmt::Display) -> Self {
        Self {
            status: 400,
            code: ErrorCode::InvalidRequest,
            message: format!("{field}: {message}"),
        }
    }

    /// A 404: what the page names does not exist (or cannot be read as a
    /// name of anything).
    pub fn not_found(message: impl std::fmt::Display) -> Self {
        Self {
            status: 404,
            code: ErrorCode::NotFound,
            message: message.to_string(),
        }
    }

    /// Is this a "not allowed" answer?
    pub fn is_forbidden(&self) -> bool {
        self.status == 403
    }
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        let (status, message) = match &value {
            ServerFnErrorErr::Request(_) => (
                503,
                "Tessera could not be reached; check your connection and try again".to_owned(),
            ),
            ServerFnErrorErr::Args(m) | ServerFnErrorErr::MissingArg(m) => {
                (400, format!("the form was incomplete: {m}"))
            }
            _ => (
                500,
                "something went wrong; try again, and tell the platform team if it persists"
                    .to_owned(),
            ),
        };
        Self {
            status,
            code: ErrorCode::Transport,
            message,
        }
    }
}

#[cfg(feature = "ssr")]
impl From<tessera_service::ServiceError> for AppError {
    fn from(e: tessera_service::ServiceError) -> Self {
        if e.status() >= 500 {
            leptos::logging::error!("server function failed: {e:?}");
        }
        Self {
            status: e.status(),
            code: e.code(),
            message: e.public_message(),
        }
    }
}
