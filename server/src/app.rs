//! Building the state and the router. All routes are registered here.

use crate::auth::{oidc, session::DbSessionStore, viewer};
use crate::config::Config;
use crate::routes::{agent, allocations, audit, health, metrics, openapi, quotas};
use crate::state::AppState;
use axum::routing::{get, post};
use axum::{Json, Router};
use leptos::config::LeptosOptions;
use leptos_axum::{generate_route_list, LeptosRoutes};
use std::sync::Arc;
use tessera_app::{shell, App};
use tessera_protocol::agent::AGENT_API_PREFIX;
use tessera_service::{Clock, Service, Settings};
use tower_sessions::cookie::SameSite;
use tower_sessions::{Expiry, SessionManagerLayer};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use utoipa_swagger_ui::SwaggerUi;

/// Path prefix of the REST API.
pub const API_PREFIX: &str = "/api/v1";
/// Where the REST API's OpenAPI document is served.
pub const OPENAPI_PATH: &str = "/api/v1/openapi.json";
/// The browsable API documentation (Swagger UI, served from the binary).
pub const API_DOCS_PATH: &str = "/api/docs";

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Database connection or migration.
    #[error("database: {0}")]
    Database(#[from] sea_orm::DbErr),
    /// Session store.
    #[error("session store: {0}")]
    Sessions(#[from] sea_orm::sqlx::Error),
    /// Tenants in the configuration.
    #[error("configuration: {0}")]
    Directory(#[from] tessera_service::ServiceError),
    /// OIDC settings.
    #[error("single sign-on: {0}")]
    Oidc(#[from] oidc::AuthError),
}

/// Connects, migrates, syncs tenants and builds the shared state.
pub async fn build_state(
    config: Config,
    clock: Arc<dyn Clock>,
) -> Result<(AppState, DbSessionStore), StartError> {
    let db = tessera_service::connect(config.database.url.expose()).await?;
    tessera_service::migrate(&db).await?;
    let store = DbSessionStore::new(&db).await?;
    let settings = Settings {
        directory: config.directory.clone(),
        host_offline_after: chrono::Duration::seconds(config.agents.offline_after_seconds),
        report_interval: chrono::Duration::seconds(config.agents.report_interval_seconds),
        pools: config.pools.clone(),
        provision_timeout: chrono::Duration::seconds(config.agents.provision_timeout_seconds),
        four_eyes: config.approvals.four_eyes,
    };
    tessera_service::pools::validate_pools(&settings.pools)?;
    let service = Service::new(db, settings, clock);
    service.sync_tenants().await?;
    let oidc = Arc::new(oidc::Oidc::new(&config)?);
    let leptos_options = LeptosOptions::builder()
        .output_name("tessera")
        .site_root(config.server.site_root.clone())
        .site_pkg_dir("pkg")
        .site_addr(config.server.listen)
        .env(leptos::config::Env::PROD)
        .build();
    Ok((
        AppState {
            service,
            oidc,
            config: Arc::new(config),
            leptos_options,
        },
        store,
    ))
}

/// The whole HTTP app.
pub fn router(state: AppState, store: DbSessionStore) -> Router {
    let sessions = SessionManagerLayer::new(store)
        .with_name("tessera_session")
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(state.config.secure_cookies())
        .with_expiry(Expiry::OnInactivity(
            tower_sessions::cookie::time::Duration::minutes(
                state.config.session.idle_timeout_minutes,
            ),
        ));

    let agent_api = Router::new()
        .route("/enroll", post(agent::enroll_host))
        .route("/report", post(agent::record_report))
        .route("/desired", get(agent::get_desired_state));

    let (rest_api, api_doc) = rest_api().split_for_parts();
    let api_doc = Arc::new(api_doc);
    let serve_api_doc = get(move || std::future::ready(Json(api_doc.as_ref().clone())));
    let api_docs_page =
        SwaggerUi::new(API_DOCS_PATH).config(utoipa_swagger_ui::Config::from(OPENAPI_PATH));

    let routes = generate_route_list(App);
    let service = state.service.clone();
    let leptos_options = state.leptos_options.clone();
    let pages = Router::new()
        .leptos_routes_with_context(
            &state,
            routes,
            move || leptos::prelude::provide_context(service.clone()),
            move || shell(leptos_options.clone()),
        )
        .nest(API_PREFIX, rest_api)
        .route("/audit.csv", get(audit::download_audit_csv))
        .route("/auth/login", get(oidc::login))
        .route("/auth/callback", get(oidc::callback))
        .route("/auth/logout", post(oidc::logout))
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            viewer::resolve_viewer,
        ))
        .layer(sessions);

    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(metrics::metrics))
        .route(OPENAPI_PATH, serve_api_doc)
        .merge(api_docs_page)
        .nest(AGENT_API_PREFIX, agent_api)
        .merge(pages)
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// The REST API under [`API_PREFIX`]: each `routes!` registers the handlers
/// of one path with the router and their `#[utoipa::path]` with the OpenAPI
/// document, so the two cannot disagree.
pub fn rest_api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::ApiDoc::openapi())
        .routes(routes!(
            allocations::list_allocations,
            allocations::request_allocation
        ))
        .routes(routes!(allocations::get_allocation))
        .routes(routes!(allocations::release_allocation))
        .routes(routes!(allocations::extend_allocation))
        .routes(routes!(quotas::get_tenant_quotas))
        .routes(routes!(quotas::create_quota_request))
        .routes(routes!(quotas::get_quota_request))
        .routes(routes!(quotas::submit_quota_request))
        .routes(routes!(quotas::withdraw_quota_request))
        .routes(routes!(quotas::decide_quota_request))
        .routes(routes!(quotas::list_approvals))
        .routes(routes!(quotas::list_quotas, quotas::set_quota))
        .routes(routes!(quotas::grant_quota))
        .routes(routes!(quotas::end_quota_grant))
        .routes(routes!(quotas::list_notifications))
        .routes(routes!(quotas::mark_notifications_read))
        .routes(routes!(
            quotas::get_webhook,
            quotas::set_webhook,
            quotas::delete_webhook
        ))
        .routes(routes!(quotas::test_webhook))
}

/// Runs the allocation timer (lease ends, provisioning timeouts, the queue)
/// until the task is dropped.
pub async fn run_scheduler(service: Service, every: std::time::Duration) {
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        match service.tick().await {
            Ok(r) if r != Default::default() => tracing::info!(
                expired = r.expired,
                timed_out = r.timed_out,
                placed = r.placed,
                "allocation timer"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!("allocation timer: {e:?}"),
        }
    }
}
