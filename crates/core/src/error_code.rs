//! The stable codes of error answers: the `code` of every JSON error body
//! the server sends and of every error a page shows. The server and the
//! pages compare these, never the strings.

use crate::names::stable_names;

stable_names! {
    /// What kind of refusal or failure an error answer is.
    pub enum ErrorCode ("error_code") {
        /// No signed-in user (401).
        Unauthenticated = "unauthenticated",
        /// Signed in, but not allowed (403).
        Forbidden = "forbidden",
        /// The thing does not exist, or the caller may not know it (404).
        NotFound = "not_found",
        /// Bad input; the message names the field (400).
        InvalidRequest = "invalid_request",
        /// The request conflicts with the current state (409).
        Conflict = "conflict",
        /// A join token that is unknown, used, revoked or expired (401).
        InvalidJoinToken = "invalid_join_token",
        /// A host credential that is unknown (401).
        InvalidCredential = "invalid_credential",
        /// The metrics bearer token is missing or wrong (401).
        InvalidMetricsToken = "invalid_metrics_token",
        /// A tenant API token that is unknown or revoked (401).
        InvalidApiToken = "invalid_api_token",
        /// A tenant API token whose lifetime ended (401).
        ExpiredApiToken = "expired_api_token",
        /// The request does not fit the tenant's quota (403).
        QuotaExceeded = "quota_exceeded",
        /// The tenant's budget for the month is spent and blocks all but
        /// guaranteed requests (403).
        BudgetExceeded = "budget_exceeded",
        /// Too many requests; retry after the `Retry-After` seconds (429).
        RateLimited = "rate_limited",
        /// The request body is too large (413).
        TooLarge = "too_large",
        /// The server is overloaded; retry after `Retry-After` (503).
        Busy = "busy",
        /// Something failed on the server's side; the detail is logged (500).
        Internal = "internal",
        /// The page could not reach the server, or the answer did not
        /// arrive whole (shown by pages only, never sent by the server).
        Transport = "transport",
    }
}
