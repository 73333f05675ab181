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
        (name = "usage", description = "Usage and cost: allocated GPU-hours, prices, the FOCUS CSV, the fleet ledger, budgets"),
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

/// Adds the answers any operation may give whatever its handler does, so a
/// client (and the fuzzer in `make test`) finds every status it can meet
/// documented: 401 and 403 (no caller, the wrong role or token scope, a
/// refused cross-site request), 429 (a rate limit), 503 (the database is
/// busy: try again); 400 where there are parameters or a body to get wrong,
/// 404 where the path names something, 413 where there is a body. Each is
/// `{code, message}` ([`ApiErrorBody`]); 408 (the request took over
/// `[limits] request_timeout_seconds`) has no body.
pub fn add_common_answers(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
    let answer = |description: &str| {
        RefOr::T(
            ResponseBuilder::new()
                .description(description)
                .content(
                    "application/json",
                    ContentBuilder::new()
                        .schema(Some(Ref::from_schema_name("ApiErrorBody")))
                        .build(),
                )
                .build(),
        )
    };
    for (path, item) in doc.paths.paths.iter_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for op in operations.into_iter().flatten() {
            let has_body = op.request_body.is_some();
            let has_params = op.parameters.as_ref().is_some_and(|p| !p.is_empty());
            let mut common = vec![
                ("401", "No session and no valid API token (`unauthenticated`, `invalid_api_token`, `expired_api_token`)"),
                ("403", "Not allowed (`forbidden`): the caller's role or the token's scope does not allow it, or a cross-site request was refused"),
                ("429", "Too many requests (`rate_limited`): `Retry-After` says when to try again"),
                ("503", "The server is busy (`busy`): try again after `Retry-After`"),
            ];
            if has_body || has_params {
                common.push(("400", "Invalid input (`invalid_request`): `message` names the field and what to change"));
            }
            if path.contains('{') {
                common.push((
                    "404",
                    "Nothing of that name or id visible to the caller (`not_found`)",
                ));
            }
            if has_body {
                common.push(("413", "The body is over the server's limit (`too_large`)"));
            }
            for (status, description) in common {
                op.responses
                    .responses
                    .entry(status.to_owned())
                    .or_insert_with(|| answer(description));
            }
            op.responses
                .responses
                .entry("408".to_owned())
                .or_insert_with(|| {
                    RefOr::T(
                        ResponseBuilder::new()
                            .description("The request took longer than `[limits] request_timeout_seconds` allows (no body)")
                            .build(),
                    )
                });
        }
    }
}
