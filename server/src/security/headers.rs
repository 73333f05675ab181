//! Security headers on every response: a Content-Security-Policy with a
//! fresh nonce per response (Leptos puts it on its hydration scripts, so no
//! `'unsafe-inline'` for scripts), no framing, no MIME sniffing, a strict
//! referrer policy, and HSTS when Tessera is served over https.

use axum::extract::{Request, State};
use axum::http::header::{
    CONTENT_SECURITY_POLICY, REFERRER_POLICY, STRICT_TRANSPORT_SECURITY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use std::fmt::Write as _;
use std::sync::Arc;

/// The nonce of one response, in the request's extensions for the page
/// renderer (see [`crate::app`]) and in the response's policy.
#[derive(Debug, Clone)]
pub struct CspNonce(pub String);

impl CspNonce {
    /// 128 random bits, hex (a valid CSP `base64-value`).
    fn fresh() -> Self {
        let bytes: [u8; 16] = rand::random();
        let mut s = String::with_capacity(32);
        for b in bytes {
            let _ = write!(s, "{b:02x}");
        }
        Self(s)
    }
}

/// What the policy depends on.
#[derive(Debug, Clone)]
pub struct HeaderPolicy {
    /// Served over https: send HSTS.
    pub https: bool,
    /// The IdP's origin: the logout form is redirected there.
    pub idp_origin: Option<String>,
}

impl HeaderPolicy {
    /// The policy for Tessera's public URL and IdP issuer.
    pub fn new(public_url: &str, issuer_url: &str) -> Self {
        Self {
            https: public_url.starts_with("https://"),
            idp_origin: url::Url::parse(issuer_url)
                .ok()
                .map(|u| u.origin().ascii_serialization())
                .filter(|o| o != "null"),
        }
    }

    /// The Content-Security-Policy for a response with `nonce`.
    pub fn csp(&self, nonce: &CspNonce) -> String {
        let form_action = match &self.idp_origin {
            Some(idp) => format!("'self' {idp}"),
            None => "'self'".to_owned(),
        };
        format!(
            "default-src 'self'; \
             script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
             style-src 'self'; style-src-attr 'unsafe-inline'; \
             img-src 'self' data:; font-src 'self'; connect-src 'self'; \
             object-src 'none'; base-uri 'none'; frame-ancestors 'none'; \
             form-action {form_action}",
            nonce = nonce.0
        )
    }
}

/// Hands the response's nonce to Leptos (from the request the page is
/// rendered for), so its hydration scripts carry the nonce the policy names.
/// Call in the page renderer's context.
pub fn provide_nonce_from_request() {
    let nonce = leptos::prelude::use_context::<axum::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<CspNonce>().cloned());
    if let Some(n) = nonce {
        leptos::prelude::provide_context(leptos::nonce::Nonce::from_value(n.0));
    }
}

/// The middleware.
pub async fn set_headers(
    State(policy): State<Arc<HeaderPolicy>>,
    mut req: Request,
    next: Next,
) -> Response {
    let nonce = CspNonce::fresh();
    req.extensions_mut().insert(nonce.clone());
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&policy.csp(&nonce)) {
        h.insert(CONTENT_SECURITY_POLICY, v);
    }
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        REFERRER_POLICY,
        HeaderValue::from_static("strict-origin-when-cross-origin"),
    );
    h.insert(
        HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
    if policy.https {
        h.insert(
            STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static("max-age=31536000"),
        );
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_no_inline_script() {
        let p = HeaderPolicy::new(
            "https://gpus.example.com",
            "https://login.example.com/realms/x",
        );
        let csp = p.csp(&CspNonce("abc".to_owned()));
        let script = csp
            .split(';')
            .find(|d| d.trim().starts_with("script-src"))
            .unwrap_or_default();
        assert!(script.contains("'nonce-abc'"), "{csp}");
        assert!(!script.contains("unsafe-inline"), "{csp}");
        assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
        assert!(
            csp.contains("form-action 'self' https://login.example.com"),
            "{csp}"
        );
        assert!(p.https);
        assert!(!HeaderPolicy::new("http://127.0.0.1:3000", "x").https);
    }

    #[test]
    fn nonces_are_fresh() {
        let (a, b) = (CspNonce::fresh(), CspNonce::fresh());
        assert_ne!(a.0, b.0);
        assert_eq!(a.0.len(), 32);
    }
}
