//! The OpenAPI 3.1 document of the REST API. The paths, bodies and schemas
//! come from the handlers' `#[utoipa::path]` and the wire types'
//! `ToSchema`, registered together with the routes in
//! [`crate::app::rest_api`]; this module adds what is common: the title, the
//! server prefix, the security schemes and the error answers.

use tessera_protocol::agent::ApiErrorBody;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

/// Title, prefix and shared components of the document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Tessera API",
        description = "Self-service GPU slices. Authenticate with a tenant API token \
            (`Authorization: Bearer tsk_...`, created on the tenant page) or the browser \
            session. Quotas, approvals, notifications and webhooks act for a signed-in \
            person only. Every error is `{code, message}`; `message` says what to change."
    ),
    servers((url = "/api/v1")),
    components(schemas(ApiErrorBody)),
    modifiers(&SecuritySchemes),
    tags(
        (name = "allocations", description = "GPU slices: request, list, extend, release, request again"),
        (name = "fleet", description = "Hosts and GPUs: health, cordon, drain, maintenance, decommission (platform admins)"),
        (name = "policy", description = "Pools and tenants: create, change, planned pool changes (platform admins)"),
        (name = "usage", description = "Usage and cost: allocated GPU-hours, prices, the FOCUS CSV"),
        (name = "quotas", description = "Quotas, quota requests and approvals"),
        (name = "notifications", description = "In-app notifications"),
        (name = "webhooks", description = "A tenant's outgoing webhook"),
        (name = "people", description = "People: sign out everywhere, deactivate and reactivate (platform admins; sign-out also for oneself)"),
    )
)]
pub struct ApiDoc;

/// `apiToken` (a tenant token) and `session` (the browser's cookie).
struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "apiToken",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("Tenant API token `tsk_...`"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "session",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                "tessera_session",
                "The browser session after signing in",
            ))),
        );
    }
}

/// 400 `invalid_request`.
#[derive(utoipa::IntoResponses)]
#[response(
    status = 400,
    description = "Invalid input (`invalid_request`): `message` names the field and what to change"
)]
pub struct BadRequest(pub ApiErrorBody);

/// 401.
#[derive(utoipa::IntoResponses)]
#[response(
    status = 401,
    description = "No session and no valid API token (`unauthenticated`, `invalid_api_token`, `expired_api_token`)"
)]
pub struct Unauthorized(pub ApiErrorBody);

/// 403.
#[derive(utoipa::IntoResponses)]
#[response(
    status = 403,
    description = "Not allowed (`forbidden`), or beyond the tenant's quota (`quota_exceeded`)"
)]
pub struct Forbidden(pub ApiErrorBody);

/// 404.
#[derive(utoipa::IntoResponses)]
#[response(
    status = 404,
    description = "Nothing of that name or id visible to the caller (`not_found`)"
)]
pub struct NotFound(pub ApiErrorBody);

/// 409.
#[derive(utoipa::IntoResponses)]
#[response(
    status = 409,
    description = "Not possible in its current state (`conflict`)"
)]
pub struct Conflict(pub ApiErrorBody);
