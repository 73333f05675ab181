//! A sign-in between the redirect to the IdP and the callback, kept in an
//! encrypted, authenticated cookie (AES-256-GCM through the `cookie` crate's
//! private jar) instead of a session row: an anonymous client that starts
//! sign-in after sign-in fills no table, and replicas need no shared state.
//! The key is derived from the OIDC client secret, which every replica has
//! and nobody outside does. The callback removes the cookie, so each is good
//! for one try; `state` inside it ties the callback to this browser.

use axum::http::header::{HeaderMap, COOKIE, SET_COOKIE};
use axum::http::HeaderValue;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha512};
use tower_sessions::cookie::time::Duration;
use tower_sessions::cookie::{Cookie, CookieJar, Key, SameSite};

/// How long a sign-in may take at the IdP.
const LIFETIME_MINUTES: i64 = 10;

/// A login between redirect and callback.
#[derive(Clone, Serialize, Deserialize)]
pub struct PendingLogin {
    /// OAuth `state` (CSRF token of the flow).
    pub state: String,
    /// OIDC nonce the id_token must carry.
    pub nonce: String,
    /// PKCE verifier.
    pub pkce_verifier: String,
    /// Where to go afterwards (already checked).
    pub next: String,
}

impl std::fmt::Debug for PendingLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingLogin")
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

/// Seals and opens pending-login cookies.
pub struct PendingCookies {
    key: Key,
    name: &'static str,
    secure: bool,
}

impl std::fmt::Debug for PendingCookies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingCookies")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl PendingCookies {
    /// Cookies keyed from `client_secret`; `secure` (https) adds the
    /// `__Host-` prefix and `Secure`.
    pub fn new(client_secret: &str, secure: bool) -> Self {
        let mut h = Sha512::new();
        h.update(b"tessera pending-login cookie v1\0");
        h.update(client_secret.as_bytes());
        Self {
            key: Key::from(&h.finalize()),
            name: if secure {
                "__Host-tessera_login"
            } else {
                "tessera_login"
            },
            secure,
        }
    }

    fn cookie(&self, value: String, max_age: Duration) -> Cookie<'static> {
        Cookie::build((self.name, value))
            .path("/")
            .http_only(true)
            // Sent on the IdP's top-level redirect back to the callback.
            .same_site(SameSite::Lax)
            .secure(self.secure)
            .max_age(max_age)
            .build()
    }

    /// The `Set-Cookie` value that carries `pending`.
    pub fn seal(&self, pending: &PendingLogin) -> Option<HeaderValue> {
        let json = serde_json::to_string(pending).ok()?;
        let mut jar = CookieJar::new();
        jar.private_mut(&self.key)
            .add(self.cookie(json, Duration::minutes(LIFETIME_MINUTES)));
        let sealed = jar.get(self.name)?.clone();
        HeaderValue::from_str(&sealed.to_string()).ok()
    }

    /// The pending login in the request's cookies, if one is there and was
    /// sealed by this server (tampered or foreign cookies read as none).
    pub fn open(&self, headers: &HeaderMap) -> Option<PendingLogin> {
        let mut jar = CookieJar::new();
        for value in headers
            .get_all(COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
        {
            for c in Cookie::split_parse(value.to_owned()).flatten() {
                if c.name() == self.name {
                    jar.add_original(c.into_owned());
                }
            }
        }
        let opened = jar.private(&self.key).get(self.name)?;
        serde_json::from_str(opened.value()).ok()
    }

    /// The `Set-Cookie` value that removes the cookie.
    pub fn clear(&self) -> Option<HeaderValue> {
        HeaderValue::from_str(&self.cookie(String::new(), Duration::ZERO).to_string()).ok()
    }

    /// Adds `value` as a `Set-Cookie` header.
    pub fn set(headers: &mut HeaderMap, value: Option<HeaderValue>) {
        if let Some(v) = value {
            headers.append(SET_COOKIE, v);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pending() -> PendingLogin {
        PendingLogin {
            state: "st".into(),
            nonce: "no".into(),
            pkce_verifier: "verifier-secret".into(),
            next: "/fleet".into(),
        }
    }

    fn request_with(set_cookie: &HeaderValue) -> HeaderMap {
        let pair = set_cookie.to_str().unwrap().split(';').next().unwrap();
        let mut h = HeaderMap::new();
        h.insert(COOKIE, format!("theme=dark; {pair}").parse().unwrap());
        h
    }

    #[test]
    fn a_sealed_login_opens_only_with_the_same_key() {
        let cookies = PendingCookies::new("client-secret", false);
        let sealed = cookies.seal(&pending()).unwrap();
        let text = sealed.to_str().unwrap();
        assert!(text.starts_with("tessera_login="), "{text}");
        assert!(
            text.contains("HttpOnly") && text.contains("SameSite=Lax"),
            "{text}"
        );
        assert!(!text.contains("verifier-secret"), "encrypted: {text}");
        let opened = cookies.open(&request_with(&sealed)).unwrap();
        assert_eq!(opened.state, "st");
        assert_eq!(opened.next, "/fleet");
        let other = PendingCookies::new("another-secret", false);
        assert!(other.open(&request_with(&sealed)).is_none());
    }

    #[test]
    fn tampered_cookies_read_as_none() {
        let cookies = PendingCookies::new("client-secret", false);
        let sealed = cookies.seal(&pending()).unwrap();
        let mut text = sealed.to_str().unwrap().to_owned();
        let i = text.find('=').unwrap() + 5;
        let flipped = if &text[i..=i] == "A" { "B" } else { "A" };
        text.replace_range(i..=i, flipped);
        assert!(cookies
            .open(&request_with(&text.parse().unwrap()))
            .is_none());
        assert!(cookies.open(&HeaderMap::new()).is_none());
    }

    #[test]
    fn https_uses_the_host_prefix() {
        let cookies = PendingCookies::new("s", true);
        let text = cookies
            .seal(&pending())
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        assert!(text.starts_with("__Host-tessera_login="), "{text}");
        assert!(text.contains("Secure") && text.contains("Path=/"), "{text}");
        assert!(!format!("{:?}", pending()).contains("verifier-secret"));
    }
}
