//! Cross-site request forgery defence for everything a session cookie can
//! authorise.
//!
//! `SameSite=Lax` alone lets any *same-site* origin (a sibling host of the
//! company domain, another port on the same host) post forms with the
//! session cookie attached. So every state-changing request (any method but
//! GET, HEAD, OPTIONS and TRACE) that carries the session cookie must prove it
//! comes from Tessera's own pages, in this order (the model is Go's
//! `net/http.CrossOriginProtection` and the OWASP cheat sheet):
//!
//! 1. `Sec-Fetch-Site` (every current browser sends it): `same-origin`, or
//!    `none` (the person typed or bookmarked it), passes; `same-site`,
//!    `cross-site` are refused.
//! 2. Otherwise `Origin`: it must be Tessera's public origin.
//! 3. Otherwise (an old browser, or a script) the request must carry the
//!    [`CSRF_HEADER`], which a cross-origin page cannot set without a CORS
//!    preflight that Tessera never grants.
//!
//! Requests without the session cookie (API tokens, agents) carry no ambient
//! authority and pass. Plain HTML forms keep working without WASM: browsers
//! send `Sec-Fetch-Site`/`Origin` on form posts.

use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use tessera_service::ServiceError;

/// The header scripts without `Origin` send to show they are not a form on
/// another site (any value).
pub const CSRF_HEADER: &str = "x-tessera-csrf";

/// What a request must match.
#[derive(Debug, Clone)]
pub struct CsrfPolicy {
    /// Tessera's public origin, e.g. `https://gpus.example.com`.
    pub origin: String,
    /// The session cookie's name.
    pub cookie_name: String,
}

impl CsrfPolicy {
    /// The policy for a public URL and session cookie name.
    pub fn new(public_url: &str, cookie_name: &str) -> Self {
        let origin = url::Url::parse(public_url)
            .map(|u| u.origin().ascii_serialization())
            .unwrap_or_default();
        Self {
            origin,
            cookie_name: cookie_name.to_owned(),
        }
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The browser said the request came from another site or origin.
    CrossSite,
    /// `Origin` names another origin.
    ForeignOrigin,
    /// Neither fetch metadata, `Origin` nor the CSRF header.
    Unproven,
}

impl Refusal {
    fn message(self) -> String {
        match self {
            Self::CrossSite | Self::ForeignOrigin => {
                "cross-site request refused: this action can only be taken from Tessera's own pages".to_owned()
            }
            Self::Unproven => format!(
                "request refused: a request signed in with the session cookie must come from Tessera's pages (send an Origin header or the {CSRF_HEADER} header), or use an API token"
            ),
        }
    }
}

fn is_safe(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::TRACE
    )
}

/// Whether the request carries the session cookie.
fn has_cookie(headers: &HeaderMap, name: &str) -> bool {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .any(|pair| pair.trim_start().split('=').next() == Some(name))
}

/// The decision for one request.
pub fn check(policy: &CsrfPolicy, method: &Method, headers: &HeaderMap) -> Result<(), Refusal> {
    if is_safe(method) || !has_cookie(headers, &policy.cookie_name) {
        return Ok(());
    }
    let text = |name: &str| headers.get(name).map(|v| v.to_str().unwrap_or("\u{fffd}"));
    if let Some(site) = text("sec-fetch-site") {
        return match site {
            "same-origin" | "none" => Ok(()),
            _ => Err(Refusal::CrossSite),
        };
    }
    if let Some(origin) = text(header::ORIGIN.as_str()) {
        return if origin == policy.origin {
            Ok(())
        } else {
            Err(Refusal::ForeignOrigin)
        };
    }
    if headers.contains_key(CSRF_HEADER) {
        Ok(())
    } else {
        Err(Refusal::Unproven)
    }
}

/// The middleware: refuses with 403 and changes nothing.
pub async fn guard(State(policy): State<Arc<CsrfPolicy>>, req: Request, next: Next) -> Response {
    match check(&policy, req.method(), req.headers()) {
        Ok(()) => next.run(req).await,
        Err(refusal) => {
            tracing::warn!(
                path = req.uri().path(),
                ?refusal,
                origin = ?req.headers().get(header::ORIGIN),
                "refused a cross-site request"
            );
            ApiError(ServiceError::Forbidden(refusal.message())).into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn policy() -> CsrfPolicy {
        CsrfPolicy::new("https://gpus.example.com/", "tessera_session")
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    const COOKIE: (&str, &str) = ("cookie", "theme=dark; tessera_session=abc");

    #[test]
    fn the_public_origin_has_no_path() {
        assert_eq!(policy().origin, "https://gpus.example.com");
    }

    #[test]
    fn safe_methods_and_cookieless_requests_pass() {
        let cross = headers(&[COOKIE, ("sec-fetch-site", "cross-site")]);
        assert_eq!(check(&policy(), &Method::GET, &cross), Ok(()));
        let token = headers(&[
            ("authorization", "Bearer tsk_x"),
            ("origin", "https://evil.example"),
        ]);
        assert_eq!(check(&policy(), &Method::POST, &token), Ok(()));
        let other_cookie = headers(&[("cookie", "tessera_session_x=1; theme=dark")]);
        assert_eq!(check(&policy(), &Method::POST, &other_cookie), Ok(()));
    }

    #[test]
    fn fetch_metadata_decides_first() {
        for (site, ok) in [
            ("same-origin", true),
            ("none", true),
            ("same-site", false),
            ("cross-site", false),
            ("nonsense", false),
        ] {
            let h = headers(&[
                COOKIE,
                ("sec-fetch-site", site),
                ("origin", "https://gpus.example.com"),
            ]);
            assert_eq!(check(&policy(), &Method::POST, &h).is_ok(), ok, "{site}");
        }
    }

    #[test]
    fn origin_must_be_tessera() {
        for (origin, ok) in [
            ("https://gpus.example.com", true),
            ("https://gpus.example.com:443", false),
            ("http://gpus.example.com", false),
            ("https://wiki.example.com", false),
            ("https://gpus.example.com.evil.example", false),
            ("null", false),
        ] {
            let h = headers(&[COOKIE, ("origin", origin)]);
            assert_eq!(
                check(&policy(), &Method::DELETE, &h).is_ok(),
                ok,
                "{origin}"
            );
        }
    }

    #[test]
    fn without_origin_the_custom_header_is_required() {
        let bare = headers(&[COOKIE]);
        assert_eq!(
            check(&policy(), &Method::POST, &bare),
            Err(Refusal::Unproven)
        );
        let scripted = headers(&[COOKIE, (CSRF_HEADER, "1")]);
        assert_eq!(check(&policy(), &Method::POST, &scripted), Ok(()));
        assert!(Refusal::Unproven.message().contains(CSRF_HEADER));
    }
}
