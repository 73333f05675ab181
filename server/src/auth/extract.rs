//! Who is calling, as proof types that handlers take as arguments: a
//! signed-in [`Person`] (the session), an [`ApiCaller`] (a tenant API token or
//! a person), an agent's [`Host`] and a metrics [`Scraper`]. This is the only place that reads the
//! `Authorization` header; a refusal is an [`ApiError`], answered by the one
//! error table.

use crate::auth::oidc::constant_time_eq;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use tessera_core::ids::AllocationId;
use tessera_service::fleet::AuthenticatedHost;
use tessera_service::TenantActor;
use tessera_service::{Principal, ServiceError, Viewer};

/// The token of an `Authorization: Bearer ...` header, if there is one.
fn bearer(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

/// The signed-in person that [`crate::auth::viewer::resolve_viewer`] put in
/// the request.
fn session_principal(parts: &Parts) -> Result<Principal, ApiError> {
    match parts.extensions.get::<Viewer>() {
        Some(viewer) => Ok(viewer.require()?.clone()),
        // A route outside the session layer: a wiring mistake, not the caller's.
        None => Err(ApiError(ServiceError::internal(
            "no viewer in the request: the route is outside the session middleware",
        ))),
    }
}

/// A person signed in through the browser session. A request carrying an
/// `Authorization` header is refused (403): API tokens act for slices only.
#[derive(Clone, Debug)]
pub struct Person(pub Principal);

impl FromRequestParts<AppState> for Person {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, ApiError> {
        if parts.headers.contains_key(AUTHORIZATION) {
            return Err(ServiceError::Forbidden(
                "API tokens act for slices only; quotas, approvals, notifications and the fleet need a signed-in person".to_owned(),
            )
            .into());
        }
        session_principal(parts).map(Person)
    }
}

/// A caller of the allocations API: a tenant API token
/// (`Authorization: Bearer tsk_...`), or else the signed-in person.
#[derive(Clone, Debug)]
pub enum ApiCaller {
    /// A tenant API token: acts in its own tenant only.
    Token(TenantActor),
    /// A signed-in person: acts in the tenants they belong to.
    Person(Principal),
}

impl FromRequestParts<AppState> for ApiCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match bearer(parts) {
            Some(token) => Ok(Self::Token(
                state.service.authenticate_api_token(token).await?,
            )),
            None => session_principal(parts).map(Self::Person),
        }
    }
}

impl ApiCaller {
    /// The tenant to act in: the token's, or the one named (a person with a
    /// single tenant may leave it out).
    pub async fn in_tenant(
        &self,
        state: &AppState,
        slug: Option<&tessera_core::checked::TenantSlug>,
    ) -> Result<TenantActor, ApiError> {
        match self {
            Self::Token(actor) => match slug {
                // Another tenant's name: not found, so nothing leaks.
                Some(s) if s != actor.tenant_slug() => {
                    Err(ServiceError::not_found(format!("tenant '{s}'")).into())
                }
                _ => Ok(actor.clone()),
            },
            Self::Person(p) => {
                let slug = match (slug, p.memberships()) {
                    (Some(s), _) => s.clone(),
                    (None, [(_, only)]) => tessera_core::checked::TenantSlug::parse(&only.slug)
                        .map_err(|e| ServiceError::internal(e.to_string()))?,
                    (None, _) => {
                        return Err(ServiceError::invalid(
                            "tenant",
                            "name the tenant (its slug): you belong to several, or to none",
                        )
                        .into())
                    }
                };
                Ok(state.service.tenant_actor(p, &slug).await?)
            }
        }
    }

    /// The tenant actor that may act on allocation `id`.
    pub async fn for_allocation(
        &self,
        state: &AppState,
        id: AllocationId,
    ) -> Result<TenantActor, ApiError> {
        match self {
            Self::Token(actor) => Ok(actor.clone()),
            Self::Person(p) => Ok(state.service.actor_for_allocation(p, id).await?),
        }
    }
}

/// An enrolled host, authenticated by its credential
/// (`Authorization: Bearer <credential>`); 401 without a valid one.
#[derive(Debug)]
pub struct Host(pub AuthenticatedHost);

impl FromRequestParts<AppState> for Host {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let credential = bearer(parts).ok_or(ApiError(ServiceError::InvalidCredential))?;
        Ok(Self(state.service.authenticate_host(credential).await?))
    }
}

/// A caller allowed to read `/metrics`: anyone when `[metrics]
/// bearer_token` is not set, else only with that token (compared in
/// constant time); 401 otherwise.
#[derive(Debug)]
pub struct Scraper(());

impl FromRequestParts<AppState> for Scraper {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match &state.config.metrics.bearer_token {
            Some(expected)
                if !bearer(parts).is_some_and(|t| {
                    constant_time_eq(t.as_bytes(), expected.expose().as_bytes())
                }) =>
            {
                Err(ServiceError::InvalidMetricsToken.into())
            }
            _ => Ok(Self(())),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use axum::http::Request;

    fn parts(authorization: Option<&str>) -> Parts {
        let mut req = Request::builder().uri("/api/v1/allocations");
        if let Some(a) = authorization {
            req = req.header(AUTHORIZATION, a);
        }
        req.body(()).unwrap().into_parts().0
    }

    #[test]
    fn bearer_tokens_are_read_from_the_header_only() {
        assert_eq!(bearer(&parts(Some("Bearer tsk_abc "))), Some("tsk_abc"));
        assert_eq!(bearer(&parts(Some("Basic dXNlcg=="))), None);
        assert_eq!(bearer(&parts(None)), None);
    }

    #[test]
    fn a_session_without_a_person_is_unauthenticated() {
        let mut p = parts(None);
        p.extensions.insert(Viewer(None));
        let err = session_principal(&p).err().map(|e| e.0.code());
        assert_eq!(err, Some(tessera_service::ErrorCode::Unauthenticated));
        let err = session_principal(&parts(None)).err().map(|e| e.0.code());
        assert_eq!(
            err,
            Some(tessera_service::ErrorCode::Internal),
            "a wiring mistake is a 500"
        );
    }
}
