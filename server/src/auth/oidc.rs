//! The OpenID Connect relying party: sign-in (authorization code + PKCE
//! S256) and RP-initiated logout; the routes are in [`super::login`].
//!
//! `state`, `nonce` and the PKCE verifier live in an encrypted cookie only
//! between the redirect to the IdP and the callback (no session row until a
//! sign-in succeeds), and the callback removes it, so each is good for one
//! try. The id_token's signature,
//! issuer, audience, expiry and nonce are verified by `openidconnect`; the
//! groups claim comes from the same verified claims ([`IdpClaims`]).

use super::pending::{PendingCookies, PendingLogin};
use crate::config::Config;
use crate::security::redirect::safe_next;
use axum::http::{HeaderMap, HeaderValue};
use openidconnect::core::{
    CoreAuthenticationFlow, CoreGenderClaim, CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm, CoreTokenType,
};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, IssuerUrl, LogoutRequest, Nonce,
    PkceCodeChallenge, PkceCodeVerifier, PostLogoutRedirectUrl, ProviderMetadataWithLogout,
    RedirectUrl, Scope, TokenResponse,
};
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};
use tessera_service::LoginClaims;
use thiserror::Error;
use tokio::sync::RwLock;

/// How long discovered provider metadata (and keys) are reused.
const METADATA_TTL: Duration = Duration::from_secs(300);

/// What can go wrong while signing in; [`crate::error`] maps each to a
/// status and a page.
#[derive(Debug, Error)]
pub enum AuthError {
    /// The IdP could not be reached or answered nonsense.
    #[error("the sign-in service at {issuer} is not reachable right now; try again in a minute, and tell the platform team if it persists")]
    IdpUnavailable {
        /// Issuer URL.
        issuer: String,
        /// Detail (logged).
        detail: String,
    },
    /// The IdP's TLS certificate is not one this server trusts (an
    /// internal CA missing from `tls.ca_bundle`, most likely).
    #[error("the sign-in service at {issuer} presented a TLS certificate this server does not trust ({problem}); tell the platform team: the CA that issued it belongs in tls.ca_bundle")]
    IdpCertificate {
        /// Issuer URL.
        issuer: String,
        /// The TLS error, in words.
        problem: String,
    },
    /// Tessera's OIDC settings are wrong.
    #[error("single sign-on is misconfigured ({0}); tell the platform team")]
    Misconfigured(String),
    /// The callback's state is unknown, already used, or does not match.
    #[error("this sign-in link is invalid or was already used; start again from the sign-in page")]
    BadState,
    /// The IdP reported an error.
    #[error("the sign-in service refused: {0}")]
    IdpRefused(String),
    /// Token exchange or verification failed.
    #[error("the sign-in could not be verified; start again from the sign-in page")]
    BadToken(String),
    /// Session store failure.
    #[error("sessions are unavailable right now; try again")]
    Session(String),
    /// Database failure while recording the login.
    #[error("{0}")]
    Service(#[from] tessera_service::ServiceError),
}

impl From<tower_sessions::session::Error> for AuthError {
    fn from(e: tower_sessions::session::Error) -> Self {
        Self::Session(e.to_string())
    }
}

/// The relying party: settings, HTTP client and cached discovery.
#[derive(Debug)]
pub struct Oidc {
    issuer: String,
    client_id: String,
    client_secret: crate::config::Secret,
    redirect_url: String,
    post_logout_url: String,
    groups_claim: String,
    scopes: Vec<String>,
    pending: PendingCookies,
    http: reqwest::Client,
    metadata: RwLock<Option<(ProviderMetadataWithLogout, Instant)>>,
}

impl Oidc {
    /// Builds the relying party from configuration (no network yet).
    pub fn new(config: &Config) -> Result<Self, AuthError> {
        let builder = reqwest::ClientBuilder::new()
            // Following redirects during token exchange would open SSRF holes.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            // No idle connections kept: reusing one the IdP has just closed
            // (its keep-alive ran out) fails a sign-in at random. Sign-ins are
            // rare enough that a fresh connection each time costs nothing.
            .pool_max_idle_per_host(0);
        let http = config
            .tls
            .trust()
            .map_err(|e| AuthError::Misconfigured(e.to_string()))?
            .build(builder)
            .map_err(|e| AuthError::Misconfigured(format!("HTTP client: {e}")))?;
        Ok(Self {
            issuer: config.oidc.issuer_url.clone(),
            client_id: config.oidc.client_id.clone(),
            client_secret: config.oidc.client_secret.clone(),
            redirect_url: config.redirect_url(),
            post_logout_url: format!(
                "{}/signed-out",
                config.server.public_url.trim_end_matches('/')
            ),
            groups_claim: config.oidc.groups_claim.clone(),
            scopes: config.oidc.scopes.clone(),
            pending: PendingCookies::new(
                config.oidc.client_secret.expose(),
                config.secure_cookies(),
            ),
            http,
            metadata: RwLock::new(None),
        })
    }

    /// Provider metadata, discovered at most every [`METADATA_TTL`].
    async fn metadata(&self) -> Result<ProviderMetadataWithLogout, AuthError> {
        if let Some((m, at)) = self.metadata.read().await.as_ref() {
            if at.elapsed() < METADATA_TTL {
                return Ok(m.clone());
            }
        }
        let issuer = IssuerUrl::new(self.issuer.clone())
            .map_err(|e| AuthError::Misconfigured(format!("oidc.issuer_url: {e}")))?;
        let m = ProviderMetadataWithLogout::discover_async(issuer, &self.http)
            .await
            .map_err(|e| unreachable(&self.issuer, &e))?;
        *self.metadata.write().await = Some((m.clone(), Instant::now()));
        Ok(m)
    }

    async fn client(&self) -> Result<(ProviderMetadataWithLogout, ConfiguredClient), AuthError> {
        let metadata = self.metadata().await?;
        let redirect = RedirectUrl::new(self.redirect_url.clone())
            .map_err(|e| AuthError::Misconfigured(format!("oidc.redirect_url: {e}")))?;
        let client = ConfiguredClient::from_provider_metadata(
            metadata.clone(),
            ClientId::new(self.client_id.clone()),
            Some(ClientSecret::new(self.client_secret.expose().to_owned())),
        )
        .set_redirect_uri(redirect);
        Ok((metadata, client))
    }

    /// Discovers the provider now, for `/readyz`-style checks and early warnings.
    pub async fn check(&self) -> Result<(), AuthError> {
        self.metadata().await.map(|_| ())
    }
}

/// A sign-in the IdP vouched for: who, and the id_token to hint at logout.
#[derive(Debug)]
pub struct SignedIn {
    /// Who the verified id_token names, with their groups.
    pub claims: LoginClaims,
    /// The id_token as received.
    pub id_token: String,
    /// Where to go next (checked when the login started).
    pub next: String,
}

/// The IdP's answer at the callback.
#[derive(Debug, Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

impl Oidc {
    /// Starts a login: the IdP's authorization URL (PKCE S256, the
    /// configured scopes) and the sealed pending-login cookie that carries
    /// `state`, `nonce` and the verifier to the callback.
    pub async fn start(&self, next: Option<&str>) -> Result<(url::Url, HeaderValue), AuthError> {
        let (_, client) = self.client().await?;
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, csrf, nonce) = authorize(&client, &self.scopes, challenge);
        let pending = PendingLogin {
            state: csrf.secret().clone(),
            nonce: nonce.secret().clone(),
            pkce_verifier: verifier.secret().clone(),
            next: safe_next(next),
        };
        let sealed = self
            .pending
            .seal(&pending)
            .ok_or_else(|| AuthError::Session("could not seal the sign-in cookie".to_owned()))?;
        Ok((url, sealed))
    }

    /// The pending login the callback's cookie carries, if it opens.
    pub fn pending_login(&self, headers: &HeaderMap) -> Option<PendingLogin> {
        self.pending.open(headers)
    }

    /// The cookie value that removes the pending login.
    pub fn clear_pending(&self) -> Option<HeaderValue> {
        self.pending.clear()
    }

    /// Checks the callback against the pending login, trades the code for
    /// tokens and verifies the id_token (signature, issuer, audience,
    /// expiry, nonce).
    pub async fn finish(
        &self,
        pending: Option<PendingLogin>,
        q: CallbackQuery,
    ) -> Result<SignedIn, AuthError> {
        let pending = pending.ok_or(AuthError::BadState)?;
        let state_ok = q
            .state
            .as_deref()
            .is_some_and(|s| constant_time_eq(s.as_bytes(), pending.state.as_bytes()));
        if !state_ok {
            return Err(AuthError::BadState);
        }
        if let Some(err) = q.error {
            return Err(AuthError::IdpRefused(q.error_description.unwrap_or(err)));
        }
        let code = q
            .code
            .ok_or_else(|| AuthError::BadToken("no code in callback".to_owned()))?;
        let (_, client) = self.client().await?;
        let token = client
            .exchange_code(AuthorizationCode::new(code))
            .map_err(|e| AuthError::Misconfigured(format!("token endpoint: {e}")))?
            .set_pkce_verifier(PkceCodeVerifier::new(pending.pkce_verifier))
            .request_async(&self.http)
            .await
            .map_err(|e| token_error(&self.issuer, e))?;
        let id_token = token
            .id_token()
            .ok_or_else(|| AuthError::BadToken("no id_token in token response".to_owned()))?;
        let verified = verify(
            &client,
            id_token,
            &Nonce::new(pending.nonce),
            &self.groups_claim,
        )?;
        Ok(SignedIn {
            claims: LoginClaims {
                issuer: verified.issuer,
                subject: verified.subject,
                email: verified.email,
                name: verified.name,
                groups: verified.groups,
            },
            id_token: id_token.to_string(),
            next: pending.next,
        })
    }

    /// Where to send a signed-out browser to end the IdP session too
    /// (RP-initiated logout), when the IdP has an end-session endpoint.
    pub async fn end_session_url(&self, id_token: Option<&str>) -> Option<url::Url> {
        let endpoint = match self.metadata().await {
            Ok(m) => m.additional_metadata().end_session_endpoint.clone(),
            Err(e) => {
                tracing::warn!(error = ?e, "IdP unreachable at logout; signing out locally only");
                None
            }
        }?;
        let mut req =
            LogoutRequest::from(endpoint).set_client_id(ClientId::new(self.client_id.clone()));
        if let Ok(url) = PostLogoutRedirectUrl::new(self.post_logout_url.clone()) {
            req = req.set_post_logout_redirect_uri(url);
        }
        if let Some(token) = id_token.and_then(|t| t.parse::<IdpIdToken>().ok()) {
            req = req.set_id_token_hint(&token);
        }
        Some(req.http_get_url())
    }
}

/// The id_token's claims beyond the standard ones. The groups claim's name
/// is configured (`oidc.groups_claim`), so they are kept whole and the
/// claim is picked out after the token is verified.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IdpClaims(serde_json::Map<String, serde_json::Value>);

impl openidconnect::AdditionalClaims for IdpClaims {}

impl IdpClaims {
    /// Group names from the claim called `claim`.
    fn groups(&self, claim: &str) -> Vec<String> {
        groups_in(&self.0, claim)
    }
}

/// An id_token carrying [`IdpClaims`].
type IdpIdToken = openidconnect::IdToken<
    IdpClaims,
    CoreGenderClaim,
    CoreJweContentEncryptionAlgorithm,
    CoreJwsSigningAlgorithm,
>;

/// The token endpoint's answer, with an [`IdpIdToken`].
type IdpTokenResponse = openidconnect::StandardTokenResponse<
    openidconnect::IdTokenFields<
        IdpClaims,
        openidconnect::EmptyExtraTokenFields,
        CoreGenderClaim,
        CoreJweContentEncryptionAlgorithm,
        CoreJwsSigningAlgorithm,
    >,
    CoreTokenType,
>;

/// Group names from a claim that is an array of strings or a single string.
fn groups_in(claims: &serde_json::Map<String, serde_json::Value>, claim: &str) -> Vec<String> {
    match claims.get(claim) {
        Some(serde_json::Value::Array(items)) => items
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        Some(serde_json::Value::String(s)) => vec![s.clone()],
        _ => Vec::new(),
    }
}

struct LoginClaimsPartial {
    issuer: String,
    subject: String,
    email: Option<String>,
    name: String,
    groups: Vec<String>,
}

type ConfiguredClient = openidconnect::Client<
    IdpClaims,
    openidconnect::core::CoreAuthDisplay,
    openidconnect::core::CoreGenderClaim,
    openidconnect::core::CoreJweContentEncryptionAlgorithm,
    openidconnect::core::CoreJsonWebKey,
    openidconnect::core::CoreAuthPrompt,
    openidconnect::StandardErrorResponse<openidconnect::core::CoreErrorResponseType>,
    IdpTokenResponse,
    openidconnect::core::CoreTokenIntrospectionResponse,
    openidconnect::core::CoreRevocableToken,
    openidconnect::core::CoreRevocationErrorResponse,
    openidconnect::EndpointSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointNotSet,
    openidconnect::EndpointMaybeSet,
    openidconnect::EndpointMaybeSet,
>;

/// The authorization URL with PKCE and the configured scopes.
fn authorize(
    client: &ConfiguredClient,
    scopes: &[String],
    challenge: PkceCodeChallenge,
) -> (url::Url, CsrfToken, Nonce) {
    let mut req = client
        .authorize_url(
            CoreAuthenticationFlow::AuthorizationCode,
            CsrfToken::new_random,
            Nonce::new_random,
        )
        .set_pkce_challenge(challenge);
    for s in scopes {
        req = req.add_scope(Scope::new(s.clone()));
    }
    req.url()
}

/// Verifies the id_token (signature, issuer, audience, expiry, nonce) and
/// reads who it names.
fn verify(
    client: &ConfiguredClient,
    id_token: &IdpIdToken,
    nonce: &Nonce,
    groups_claim: &str,
) -> Result<LoginClaimsPartial, AuthError> {
    let verifier = client.id_token_verifier();
    let claims = id_token
        .claims(&verifier, nonce)
        .map_err(|e| AuthError::BadToken(format!("id_token: {e}")))?;
    let email = claims.email().map(|e| e.as_str().to_owned());
    let name = claims
        .name()
        .and_then(|n| n.get(None))
        .map(|n| n.as_str().to_owned())
        .or_else(|| claims.preferred_username().map(|u| u.as_str().to_owned()))
        .or_else(|| email.clone())
        .unwrap_or_else(|| claims.subject().as_str().to_owned());
    Ok(LoginClaimsPartial {
        issuer: claims.issuer().as_str().to_owned(),
        subject: claims.subject().as_str().to_owned(),
        email,
        name,
        groups: claims.additional_claims().groups(groups_claim),
    })
}

type TokenError<RE> = openidconnect::RequestTokenError<
    RE,
    openidconnect::StandardErrorResponse<openidconnect::core::CoreErrorResponseType>,
>;

/// Tells Tessera's own misconfiguration (wrong client credentials: 503) and an
/// unreachable IdP (503) apart from a bad or replayed code (400).
fn token_error<RE: std::error::Error + 'static>(issuer: &str, e: TokenError<RE>) -> AuthError {
    use openidconnect::core::CoreErrorResponseType as T;
    match e {
        openidconnect::RequestTokenError::ServerResponse(resp) => match resp.error() {
            T::InvalidClient | T::UnauthorizedClient => AuthError::Misconfigured(format!(
                "the identity provider rejected Tessera's client credentials ({}); check oidc.client_id and oidc.client_secret",
                resp.error().as_ref()
            )),
            other => AuthError::BadToken(format!("token endpoint: {}", other.as_ref())),
        },
        openidconnect::RequestTokenError::Request(err) => unreachable(issuer, &err),
        other => AuthError::BadToken(format!("token exchange: {other}")),
    }
}

/// The IdP could not be asked: its certificate was refused, or it was not
/// reachable at all.
fn unreachable(issuer: &str, err: &(dyn std::error::Error + 'static)) -> AuthError {
    match tessera_trust::certificate_problem(err) {
        Some(problem) => AuthError::IdpCertificate {
            issuer: issuer.to_owned(),
            problem,
        },
        None => AuthError::IdpUnavailable {
            issuer: issuer.to_owned(),
            detail: format!("{err:?}"),
        },
    }
}

/// Whether `a` and `b` are equal, in time that does not depend on where they
/// differ (`subtle`; a length mismatch returns at once: lengths are public).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    bool::from(subtle::ConstantTimeEq::ct_eq(a, b))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::error::auth_status;
    use axum::http::StatusCode;

    #[test]
    fn groups_claim_array_or_string() {
        let claims: IdpClaims =
            serde_json::from_str(r#"{"groups":["a","b",3],"roles":"x"}"#).unwrap();
        assert_eq!(claims.groups("groups"), vec!["a", "b"]);
        assert_eq!(claims.groups("roles"), vec!["x"]);
        assert!(claims.groups("missing").is_empty());
    }

    #[test]
    fn the_groups_claim_is_read_from_the_id_token_claims() {
        // The standard claims and the extra ones come from one payload.
        let payload = r#"{"iss":"https://idp.example.com","aud":["tessera"],"exp":4102444800,"iat":1700000000,"sub":"u1","nonce":"n","groups":["vision","platform"]}"#;
        let claims: openidconnect::IdTokenClaims<IdpClaims, CoreGenderClaim> =
            serde_json::from_str(payload).unwrap();
        assert_eq!(claims.subject().as_str(), "u1");
        assert_eq!(
            claims.additional_claims().groups("groups"),
            vec!["vision", "platform"]
        );
    }

    #[test]
    fn constant_time_comparison() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }

    fn server_error(
        code: openidconnect::core::CoreErrorResponseType,
    ) -> TokenError<std::io::Error> {
        openidconnect::RequestTokenError::ServerResponse(openidconnect::StandardErrorResponse::new(
            code, None, None,
        ))
    }

    #[test]
    fn token_errors_separate_misconfiguration_from_bad_codes() {
        use openidconnect::core::CoreErrorResponseType as T;
        let e = token_error("http://idp", server_error(T::InvalidClient));
        assert!(matches!(e, AuthError::Misconfigured(_)), "{e:?}");
        assert_eq!(auth_status(&e), StatusCode::SERVICE_UNAVAILABLE);
        assert!(e.to_string().contains("oidc.client_secret"), "{e}");
        let e = token_error("http://idp", server_error(T::InvalidGrant));
        assert_eq!(auth_status(&e), StatusCode::BAD_REQUEST);
        let e = token_error(
            "http://idp",
            TokenError::Request(std::io::Error::other("refused")),
        );
        assert_eq!(auth_status(&e), StatusCode::SERVICE_UNAVAILABLE);
    }
}
