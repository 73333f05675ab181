//! Rate limits on what anonymous or automated clients can repeat: sign-in
//! starts, agent enrolment and API-token calls. Each route has a limit per
//! client address and a global one (so many addresses together cannot flood
//! it either); over either, the answer is 429 with `Retry-After`. The
//! limiters are GCRA token buckets from `governor`, kept in memory per
//! server replica.

use axum::extract::{ConnectInfo, Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde::Deserialize;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Arc;
use tessera_service::ServiceError;

/// `[limits]`: requests per minute (the burst is the same number).
#[derive(Debug, Clone, Copy, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Sign-in starts (`/auth/login`) per client address.
    pub sign_in_per_client: u32,
    /// Sign-in starts in all.
    pub sign_in_total: u32,
    /// Agent enrolments per client address.
    pub enroll_per_client: u32,
    /// Agent enrolments in all.
    pub enroll_total: u32,
    /// REST calls with an API token per client address.
    pub api_token_per_client: u32,
    /// REST calls with an API token in all.
    pub api_token_total: u32,
    /// Largest request body in KiB (413 above).
    pub max_body_kib: usize,
    /// A request (other than an agent's long poll) taking longer fails (408).
    pub request_timeout_seconds: u64,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            sign_in_per_client: 30,
            sign_in_total: 600,
            enroll_per_client: 120,
            enroll_total: 1200,
            api_token_per_client: 1200,
            api_token_total: 12_000,
            max_body_kib: 1024,
            request_timeout_seconds: 30,
        }
    }
}

/// One limited route: per client and in all.
#[derive(Debug)]
pub struct Limiter {
    what: &'static str,
    per_client: DefaultKeyedRateLimiter<IpAddr>,
    total: DefaultDirectRateLimiter,
}

fn per_minute(n: u32) -> Quota {
    Quota::per_minute(NonZeroU32::new(n.max(1)).unwrap_or(NonZeroU32::MIN))
}

impl Limiter {
    /// A limiter of `per_client` and `total` requests a minute.
    pub fn new(what: &'static str, per_client: u32, total: u32) -> Self {
        Self {
            what,
            per_client: RateLimiter::keyed(per_minute(per_client)),
            total: RateLimiter::direct(per_minute(total)),
        }
    }

    /// `Err(seconds to wait)` when `client` is over its limit or everyone is.
    pub fn check(&self, client: IpAddr) -> Result<(), u64> {
        // Forget idle clients now and then so the table stays small.
        if self.per_client.len() > 10_000 {
            self.per_client.retain_recent();
        }
        let now = DefaultClock::default().now();
        let wait = |not_until: governor::NotUntil<_>| not_until.wait_time_from(now).as_secs() + 1;
        self.per_client.check_key(&client).map_err(wait)?;
        self.total.check().map_err(wait)
    }

    /// The refusal for a wait of `retry_after_s`.
    fn refusal(&self, retry_after_s: u64) -> Response {
        let err = ServiceError::RateLimited {
            what: self.what.to_owned(),
            retry_after_s,
        };
        crate::error::ApiError(err).into_response()
    }
}

/// Every limiter of the server.
#[derive(Debug)]
pub struct Limits {
    /// `/auth/login`.
    pub sign_in: Limiter,
    /// `/agent/v1/enroll`.
    pub enroll: Limiter,
    /// REST calls carrying `Authorization`.
    pub api_token: Limiter,
}

impl Limits {
    /// The limiters for `config`.
    pub fn new(config: &LimitsConfig) -> Self {
        Self {
            sign_in: Limiter::new(
                "sign-in starts from one address",
                config.sign_in_per_client,
                config.sign_in_total,
            ),
            enroll: Limiter::new(
                "agent enrolments",
                config.enroll_per_client,
                config.enroll_total,
            ),
            api_token: Limiter::new(
                "API calls with a token",
                config.api_token_per_client,
                config.api_token_total,
            ),
        }
    }
}

/// The client's address: the TCP peer (a reverse proxy's address when there
/// is one; the proxy should then limit per client itself).
fn client_of(req: &Request) -> IpAddr {
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip())
}

/// Which limiter a middleware applies.
#[derive(Debug, Clone, Copy)]
pub enum Limited {
    /// Sign-in starts.
    SignIn,
    /// Enrolments.
    Enroll,
    /// Calls with an API token (calls without `Authorization` pass).
    ApiToken,
}

/// The middleware: `State((limits, which))`.
pub async fn limit(
    State((limits, which)): State<(Arc<Limits>, Limited)>,
    req: Request,
    next: Next,
) -> Response {
    let limiter = match which {
        Limited::SignIn => &limits.sign_in,
        Limited::Enroll => &limits.enroll,
        Limited::ApiToken if req.headers().contains_key(AUTHORIZATION) => &limits.api_token,
        Limited::ApiToken => return next.run(req).await,
    };
    match limiter.check(client_of(&req)) {
        Ok(()) => next.run(req).await,
        Err(wait) => {
            tracing::warn!(client = %client_of(&req), what = limiter.what, "rate limited");
            limiter.refusal(wait)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_over_its_limit_waits_others_do_not() {
        let l = Limiter::new("things", 3, 100);
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        for _ in 0..3 {
            assert_eq!(l.check(a), Ok(()));
        }
        let wait = l.check(a).unwrap_err();
        assert!((1..=21).contains(&wait), "{wait}");
        assert_eq!(l.check(b), Ok(()));
    }

    #[test]
    fn the_total_limit_holds_across_clients() {
        let l = Limiter::new("things", 100, 5);
        let refused = (0..10u8)
            .filter(|i| l.check(IpAddr::from([10, 0, 0, *i])).is_err())
            .count();
        assert_eq!(refused, 5);
    }
}
