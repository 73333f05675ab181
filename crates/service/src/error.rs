//! The one error type of the use-cases, and its mapping to HTTP.

pub use tessera_core::error_code::ErrorCode;
use thiserror::Error;

/// Everything a use-case can refuse or fail with.
#[derive(Debug, Error)]
pub enum ServiceError {
    /// No signed-in user.
    #[error("sign in to continue")]
    Unauthenticated,
    /// Signed in, but not allowed.
    #[error("{0}")]
    Forbidden(String),
    /// The thing does not exist, or the caller may not know it exists.
    #[error("{what} not found")]
    NotFound {
        /// What was looked for (e.g. `tenant 'ml-research'`).
        what: String,
    },
    /// Bad input: names the field and says what to change.
    #[error("{field}: {message}")]
    Invalid {
        /// The offending field, as the caller named it.
        field: String,
        /// What is wrong and what would be right.
        message: String,
    },
    /// The request conflicts with the current state.
    #[error("{0}")]
    Conflict(String),
    /// A join token that is unknown, used, revoked or expired.
    #[error("the join token is invalid, already used, revoked or expired; create a new one on the Admin page")]
    InvalidJoinToken,
    /// A host credential that is unknown.
    #[error("the host credential is not valid; enrol the agent again with a new join token")]
    InvalidCredential,
    /// The metrics endpoint's bearer token is missing or wrong.
    #[error("the metrics endpoint needs its bearer token ([metrics] bearer_token)")]
    InvalidMetricsToken,
    /// A tenant API token that is unknown or revoked.
    #[error("the API token is not valid or was revoked; create a new one on your tenant's page")]
    InvalidApiToken,
    /// A tenant API token that follows a person who lost the right to it.
    #[error("the API token no longer works: {0}; a current tenant admin can make a new one on the tenant's API tokens page")]
    SuspendedApiToken(String),
    /// A tenant API token whose lifetime ended.
    #[error("the API token expired on {}; create a new one on your tenant's API tokens page", expired_at.format("%Y-%m-%d %H:%M UTC"))]
    ExpiredApiToken {
        /// When it expired.
        expired_at: chrono::DateTime<chrono::Utc>,
    },
    /// The request does not fit in what is left of the tenant's quota.
    #[error("{0}")]
    QuotaExceeded(String),
    /// The month's budget is spent and blocks requests that are not guaranteed.
    #[error("{0}")]
    BudgetExceeded(String),
    /// The request body is larger than the server accepts.
    #[error("the request is too large: {0}")]
    TooLarge(String),
    /// Too many of something in too short a time.
    #[error("too many requests: {what}; try again in {retry_after_s} s")]
    RateLimited {
        /// What the limit is.
        what: String,
        /// When trying again can succeed.
        retry_after_s: u64,
    },
    /// The database failed; the detail is logged, never shown.
    #[error("database error")]
    Database(#[from] sea_orm::DbErr),
    /// Something inside Tessera failed (stored data that does not read
    /// back, a machinery fault); the detail is logged, never shown.
    #[error("internal error: {0}")]
    Internal(String),
}

/// What a busy server asks clients to wait before retrying, seconds.
pub const BUSY_RETRY_AFTER_S: u64 = 2;

impl ServiceError {
    /// Shorthand for [`ServiceError::Invalid`].
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }

    /// Shorthand for [`ServiceError::Internal`].
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::Internal(detail.into())
    }

    /// A failure on Tessera's side (the database or an internal fault),
    /// not a refusal of the request.
    pub fn is_failure(&self) -> bool {
        matches!(self, Self::Database(_) | Self::Internal(_))
    }

    /// Shorthand for [`ServiceError::NotFound`].
    pub fn not_found(what: impl Into<String>) -> Self {
        Self::NotFound { what: what.into() }
    }

    /// HTTP status code for this error.
    pub fn status(&self) -> u16 {
        match self {
            Self::Unauthenticated
            | Self::InvalidJoinToken
            | Self::InvalidCredential
            | Self::InvalidMetricsToken
            | Self::InvalidApiToken
            | Self::SuspendedApiToken(_)
            | Self::ExpiredApiToken { .. } => 401,
            Self::QuotaExceeded(_) | Self::BudgetExceeded(_) => 403,
            Self::Forbidden(_) => 403,
            Self::NotFound { .. } => 404,
            Self::Invalid { .. } => 400,
            Self::Conflict(_) => 409,
            Self::RateLimited { .. } => 429,
            Self::TooLarge(_) => 413,
            Self::Database(_) if self.is_busy() => 503,
            Self::Database(_) | Self::Internal(_) => 500,
        }
    }

    /// The database had no connection free in time: the server is
    /// overloaded, not broken, and the request can be retried (503 with
    /// `Retry-After`).
    /// So is SQLite's "database is locked" (`SQLITE_BUSY`, `SQLITE_LOCKED`
    /// and their extended codes): another writer held the file for longer
    /// than the busy timeout.
    pub fn is_busy(&self) -> bool {
        match self {
            Self::Database(sea_orm::DbErr::ConnectionAcquire(_)) => true,
            Self::Database(e) => sqlite_busy(e),
            _ => false,
        }
    }

    /// Seconds a client should wait before retrying, where that is known.
    pub fn retry_after_s(&self) -> Option<u64> {
        match self {
            Self::RateLimited { retry_after_s, .. } => Some(*retry_after_s),
            _ if self.is_busy() => Some(BUSY_RETRY_AFTER_S),
            _ => None,
        }
    }

    /// Stable machine-readable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Unauthenticated => ErrorCode::Unauthenticated,
            Self::Forbidden(_) => ErrorCode::Forbidden,
            Self::NotFound { .. } => ErrorCode::NotFound,
            Self::Invalid { .. } => ErrorCode::InvalidRequest,
            Self::Conflict(_) => ErrorCode::Conflict,
            Self::InvalidJoinToken => ErrorCode::InvalidJoinToken,
            Self::InvalidCredential => ErrorCode::InvalidCredential,
            Self::InvalidMetricsToken => ErrorCode::InvalidMetricsToken,
            Self::InvalidApiToken | Self::SuspendedApiToken(_) => ErrorCode::InvalidApiToken,
            Self::ExpiredApiToken { .. } => ErrorCode::ExpiredApiToken,
            Self::QuotaExceeded(_) => ErrorCode::QuotaExceeded,
            Self::BudgetExceeded(_) => ErrorCode::BudgetExceeded,
            Self::RateLimited { .. } => ErrorCode::RateLimited,
            Self::TooLarge(_) => ErrorCode::TooLarge,
            Self::Database(_) if self.is_busy() => ErrorCode::Busy,
            Self::Database(_) | Self::Internal(_) => ErrorCode::Internal,
        }
    }

    /// The message a user sees. Internal failures say only that something went wrong.
    pub fn public_message(&self) -> String {
        match self {
            Self::Database(_) if self.is_busy() => {
                "the server is busy; try again in a few seconds".to_owned()
            }
            Self::Database(_) | Self::Internal(_) => {
                "something went wrong on our side; try again, and tell the platform team if it persists"
                    .to_owned()
            }
            other => other.to_string(),
        }
    }
}

/// Whether a database error is SQLite's "database is locked" or "database
/// table is locked" (primary result codes 5 and 6, in any extended form).
fn sqlite_busy(e: &sea_orm::DbErr) -> bool {
    use sea_orm::sqlx::sqlite::SqliteError;
    use sea_orm::{DbErr, RuntimeErr};
    let (DbErr::Exec(RuntimeErr::SqlxError(sea_orm::sqlx::Error::Database(db)))
    | DbErr::Query(RuntimeErr::SqlxError(sea_orm::sqlx::Error::Database(db)))
    | DbErr::Conn(RuntimeErr::SqlxError(sea_orm::sqlx::Error::Database(db)))) = e
    else {
        return false;
    };
    let Some(sqlite) = db.try_downcast_ref::<SqliteError>() else {
        return false;
    };
    let code = sea_orm::sqlx::error::DatabaseError::code(sqlite)
        .and_then(|c| c.parse::<i32>().ok())
        .unwrap_or(0);
    matches!(code & 0xff, SQLITE_BUSY | SQLITE_LOCKED)
}

/// SQLite's primary result codes for a locked database and table.
const SQLITE_BUSY: i32 = 5;
const SQLITE_LOCKED: i32 = 6;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_and_code_table() {
        let cases: Vec<(ServiceError, u16, &str)> = vec![
            (ServiceError::internal("a fault"), 500, "internal"),
            (ServiceError::Unauthenticated, 401, "unauthenticated"),
            (ServiceError::Forbidden("no".into()), 403, "forbidden"),
            (ServiceError::not_found("tenant 'x'"), 404, "not_found"),
            (
                ServiceError::invalid("ttl", "too long"),
                400,
                "invalid_request",
            ),
            (ServiceError::Conflict("busy".into()), 409, "conflict"),
            (ServiceError::InvalidJoinToken, 401, "invalid_join_token"),
            (ServiceError::InvalidCredential, 401, "invalid_credential"),
            (
                ServiceError::InvalidMetricsToken,
                401,
                "invalid_metrics_token",
            ),
            (ServiceError::InvalidApiToken, 401, "invalid_api_token"),
            (
                ServiceError::SuspendedApiToken("Bob was deactivated".into()),
                401,
                "invalid_api_token",
            ),
            (
                ServiceError::ExpiredApiToken {
                    expired_at: chrono::DateTime::UNIX_EPOCH,
                },
                401,
                "expired_api_token",
            ),
            (
                ServiceError::QuotaExceeded("no".into()),
                403,
                "quota_exceeded",
            ),
            (ServiceError::TooLarge("x".into()), 413, "too_large"),
            (
                ServiceError::Database(sea_orm::DbErr::ConnectionAcquire(
                    sea_orm::ConnAcquireErr::Timeout,
                )),
                503,
                "busy",
            ),
            (
                ServiceError::RateLimited {
                    what: "x".into(),
                    retry_after_s: 3,
                },
                429,
                "rate_limited",
            ),
            (
                ServiceError::Database(sea_orm::DbErr::Custom("secret detail".into())),
                500,
                "internal",
            ),
        ];
        for (err, status, code) in cases {
            assert_eq!(err.status(), status, "{err:?}");
            assert_eq!(err.code().as_str(), code, "{err:?}");
        }
    }

    #[test]
    fn internal_errors_do_not_leak_detail() {
        let err = ServiceError::Database(sea_orm::DbErr::Custom("password=hunter2".into()));
        assert!(!err.public_message().contains("hunter2"));
        assert!(!ServiceError::internal("password=hunter2")
            .public_message()
            .contains("hunter2"));
        assert_eq!(
            ServiceError::invalid("hostname", "must not be empty").public_message(),
            "hostname: must not be empty"
        );
        assert_eq!(
            ServiceError::not_found("tenant 'a'").public_message(),
            "tenant 'a' not found"
        );
        assert_eq!(
            ServiceError::ExpiredApiToken {
                expired_at: chrono::DateTime::UNIX_EPOCH,
            }
            .public_message(),
            "the API token expired on 1970-01-01 00:00 UTC; create a new one on your tenant's API tokens page"
        );
    }
}
