//! Building the state and the router. All routes are registered here.

use crate::auth::{login, oidc, session::DbSessionStore, viewer};
use crate::bundle;
use crate::config::Config;
use crate::routes::{
    agent, allocations, audit, fleet, health, kubernetes, metrics, openapi, people, policy, quotas,
    rightsizing, usage,
};
use crate::security::{self, csrf, headers, limits};
use crate::state::{stopped, AppState};
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use axum::{Json, Router};
use leptos::config::LeptosOptions;
use leptos_axum::{generate_route_list, LeptosRoutes};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tessera_app::{shell, App};
use tessera_protocol::agent::{AGENT_API_PREFIX, TELEMETRY_ROUTE};
use tessera_service::{Clock, Service, Settings};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::compression::CompressionLayer;
use tower_http::decompression::RequestDecompressionLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
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
/// Largest telemetry batch once decompressed.
const TELEMETRY_MAX_BYTES: usize = 8 * 1024 * 1024;
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

/// Connects, migrates, seeds pools and tenants, and builds the shared state.
pub async fn build_state(
    config: Config,
    clock: Arc<dyn Clock>,
) -> Result<(AppState, DbSessionStore), StartError> {
    let db = tessera_service::connect(config.database.url.expose()).await?;
    // Replicas started together take turns: migrate, make the session
    // table, seed pools and tenants.
    let startup = tessera_service::StartupLock::acquire(&db).await?;
    tessera_service::migrate(&db).await?;
    let store = DbSessionStore::new(&db).await?;
    let settings = Settings {
        directory: config.directory.clone(),
        host_offline_after: chrono::Duration::seconds(config.agents.offline_after_seconds),
        host_lost_after: chrono::Duration::seconds(config.agents.lost_after_seconds),
        report_interval: chrono::Duration::seconds(config.agents.report_interval_seconds),
        pools: config.pools.clone(),
        provision_timeout: chrono::Duration::seconds(config.agents.provision_timeout_seconds),
        four_eyes: config.approvals.four_eyes,
        webhook_egress: config.webhooks.allowed_networks.clone(),
        api_tokens: config.api_tokens.policy(),
        priority_classes: tessera_service::pools::priority_classes(
            config.priority_classes.clone(),
            &config.pools,
            &config.directory,
        )?,
        telemetry: config.telemetry,
        audit: config.audit,
        rightsizing: config.rightsizing,
    };
    tessera_service::pools::validate_pools(&settings.pools)?;
    tessera_service::pools::validate_pool_tenants(&settings.pools, &settings.directory)?;
    let service = Service::new(db, settings, clock);
    let store = store.in_turns_with(service.writer_turns());
    service.seed_policy().await?;
    startup.release().await;
    let oidc = Arc::new(oidc::Oidc::new(&config)?);
    let hash_file = bundle::find_hash_file(Path::new(&config.server.site_root));
    match &hash_file {
        Some(p) => tracing::debug!("bundle file names from {}", p.display()),
        None => tracing::info!(
            "no {} in the site root: the bundle's file names carry no hash",
            bundle::HASH_FILE
        ),
    }
    let leptos_options = LeptosOptions::builder()
        .output_name("tessera")
        .site_root(config.server.site_root.clone())
        .site_pkg_dir("pkg")
        .site_addr(config.server.listen)
        .env(leptos::config::Env::PROD)
        .hash_files(hash_file.is_some())
        .hash_file(Arc::from(
            hash_file
                .as_deref()
                .map_or_else(|| bundle::HASH_FILE.into(), Path::to_string_lossy),
        ))
        .build();
    let limits = Arc::new(limits::Limits::new(&config.limits));
    Ok((
        AppState {
            service,
            oidc,
            limits,
            config: Arc::new(config),
            list_bodies: Arc::default(),
            leptos_options,
            shutdown: Arc::new(tokio::sync::watch::Sender::new(false)),
        },
        store,
    ))
}

/// The whole HTTP app.
pub fn router(state: AppState, store: DbSessionStore) -> Router {
    let config = state.config.clone();
    let sessions = SessionManagerLayer::new(store)
        .with_name(config.session_cookie_name())
        .with_http_only(true)
        .with_same_site(SameSite::Lax)
        .with_secure(config.secure_cookies())
        .with_expiry(Expiry::OnInactivity(
            tower_sessions::cookie::time::Duration::minutes(config.session.idle_timeout_minutes),
        ));
    let limited = |which| from_fn_with_state((state.limits.clone(), which), limits::limit);

    let agent_api = Router::new()
        .route(
            "/enroll",
            post(agent::enroll_host).route_layer(limited(limits::Limited::Enroll)),
        )
        .route("/report", post(agent::record_report))
        .route(
            TELEMETRY_ROUTE,
            post(agent::record_telemetry)
                // Compressed on the wire; up to 8 MiB of JSON once inflated.
                .route_layer(axum::extract::DefaultBodyLimit::max(TELEMETRY_MAX_BYTES))
                .route_layer(RequestDecompressionLayer::new()),
        )
        .route("/desired", get(agent::get_desired_state));

    let (rest_api, mut api_doc) = rest_api().split_for_parts();
    openapi::add_common_answers(&mut api_doc);
    let rest_api = rest_api.layer(limited(limits::Limited::ApiToken));
    let api_doc = Arc::new(api_doc);
    let serve_api_doc = get(move || std::future::ready(Json(api_doc.as_ref().clone())));
    let api_docs_page =
        SwaggerUi::new(API_DOCS_PATH).config(utoipa_swagger_ui::Config::from(OPENAPI_PATH));

    let routes = route_list();
    let service = state.service.clone();
    let page_context = move || {
        leptos::prelude::provide_context(service.clone());
        headers::provide_nonce_from_request();
    };
    let leptos_options = state.leptos_options.clone();
    let pages = Router::new()
        .leptos_routes_with_context(&state, routes, page_context.clone(), move || {
            shell(leptos_options.clone())
        })
        .nest(API_PREFIX, rest_api)
        .route("/audit.csv", get(audit::download_audit_csv))
        .route("/audit.jsonl", get(audit::download_audit_jsonl))
        .route(
            "/auth/login",
            get(login::login).route_layer(limited(limits::Limited::SignIn)),
        )
        .route("/auth/callback", get(login::callback))
        .route("/auth/logout", post(login::logout))
        .route("/auth/logout-everywhere", post(login::logout_everywhere))
        .fallback(leptos_axum::file_and_error_handler_with_context::<
            AppState,
            _,
        >(page_context, shell))
        .layer(axum::middleware::from_fn(crate::error::server_fn_status))
        .layer(from_fn_with_state(state.clone(), viewer::resolve_viewer))
        .layer(sessions)
        // Agents' long polls are outside: they hold a request up to 30 s.
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            std::time::Duration::from_secs(config.limits.request_timeout_seconds),
        ));

    let site_root = PathBuf::from(state.leptos_options.site_root.as_ref());
    let hash_file = state
        .leptos_options
        .hash_files
        .then(|| PathBuf::from(state.leptos_options.hash_file.as_ref()));
    let site_files = Arc::new(bundle::site_files(&site_root));
    let csrf_policy = Arc::new(csrf::CsrfPolicy::new(
        &config.server.public_url,
        config.session_cookie_name(),
    ));
    let http_metrics = metrics::HttpMetrics::register(state.service.metrics().registry());
    let header_policy = Arc::new(headers::HeaderPolicy::new(
        &config.server.public_url,
        &config.oidc.issuer_url,
    ));

    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(metrics::metrics))
        .route(OPENAPI_PATH, serve_api_doc)
        .merge(api_docs_page)
        .nest(AGENT_API_PREFIX, agent_api)
        .nest("/pkg", bundle::pkg_router(&site_root, hash_file.as_deref()))
        .merge(pages)
        .route_layer(from_fn_with_state(http_metrics, metrics::track))
        .layer(from_fn_with_state(
            site_files,
            bundle::site_file_cache_control,
        ))
        // Pages, JSON and files without a precompressed variant; the
        // precompressed `/pkg` files already carry a Content-Encoding and pass.
        .layer(CompressionLayer::new())
        .layer(axum::middleware::from_fn(security::input::refuse_nul))
        .layer(from_fn_with_state(csrf_policy, csrf::guard))
        .layer(RequestBodyLimitLayer::new(
            config.limits.max_body_kib * 1024,
        ))
        // The last line of defence: a handler that panics is a 500 and a
        // log line, never a dropped connection.
        .layer(CatchPanicLayer::custom(security::panic_response))
        .layer(from_fn_with_state(header_policy, headers::set_headers))
        // A failed request is logged once, by the error table (a 500 with
        // its cause at error level, a busy 503 as a warning): the layer's
        // own failure line would repeat each at error level.
        .layer(
            tower_http::trace::TraceLayer::new_for_http().on_failure(
                tower_http::trace::DefaultOnFailure::new().level(tracing::Level::DEBUG),
            ),
        )
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
        .routes(routes!(allocations::get_allocation_activity))
        .routes(routes!(rightsizing::allocation_recommendation))
        .routes(routes!(rightsizing::resize_allocation))
        .routes(routes!(rightsizing::request_instead))
        .routes(routes!(rightsizing::list_recommendations))
        .routes(routes!(rightsizing::fleet_recommendations))
        .routes(routes!(allocations::release_allocation))
        .routes(routes!(allocations::extend_allocation))
        .routes(routes!(allocations::keep_allocation))
        .routes(routes!(allocations::requeue_allocation))
        .routes(routes!(fleet::get_fleet))
        .routes(routes!(fleet::get_fleet_insights))
        .routes(routes!(fleet::operate_host))
        .routes(routes!(fleet::operate_gpu))
        .routes(routes!(fleet::host_mig_parted))
        .routes(routes!(fleet::host_device_plugin))
        .routes(routes!(kubernetes::allocation_kubernetes))
        .routes(routes!(kubernetes::tenant_kubernetes))
        .routes(routes!(policy::list_pools, policy::create_pool))
        .routes(routes!(policy::update_pool))
        .routes(routes!(policy::preview_pool))
        .routes(routes!(policy::cancel_pool_change))
        .routes(routes!(policy::list_tenants, policy::create_tenant))
        .routes(routes!(policy::update_tenant))
        .routes(routes!(usage::get_usage))
        .routes(routes!(usage::get_usage_csv))
        .routes(routes!(usage::get_ledger))
        .routes(routes!(usage::list_prices, usage::set_price))
        .routes(routes!(usage::list_budgets, usage::set_budget))
        .routes(routes!(usage::delete_budget))
        .routes(routes!(usage::request_budget))
        .routes(routes!(usage::decide_budget_request))
        .routes(routes!(usage::get_statement))
        .routes(routes!(usage::get_statement_csv))
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
        .routes(routes!(people::list_people))
        .routes(routes!(people::sign_out_person))
        .routes(routes!(people::deactivate_person))
        .routes(routes!(people::reactivate_person))
        .routes(routes!(people::sign_out_everywhere))
}

/// Writes the API tokens' last uses and the hosts' sightings this process
/// noted (a failure is logged; they are kept for the next round).
async fn flush_noted(service: &Service) {
    if let Err(e) = service.flush_token_uses().await {
        tracing::warn!("recording API tokens' last use: {e:?}");
    }
    if let Err(e) = service.flush_heartbeats().await {
        tracing::warn!("recording when hosts were last seen: {e:?}");
    }
}

/// Runs the allocation timer (lease ends, provisioning timeouts, the queue)
/// on the replica that leads, and writes the API tokens' last uses and the
/// hosts' sightings on every replica, until `stop` turns `true` (a round in
/// progress is finished first, what was noted is written, and the lead is
/// given up).
pub async fn run_scheduler(
    service: Service,
    every: std::time::Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut interval = tokio::time::interval(every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut prune_due = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            () = stopped(&mut stop) => {
                flush_noted(&service).await;
                service.resign().await;
                return;
            }
        }
        // Every replica writes what it noted; one runs the rest.
        flush_noted(&service).await;
        if !service.lead().await {
            continue;
        }
        match service.roll_up_telemetry().await {
            Ok(r) if r.samples + r.expired > 0 => tracing::debug!(
                samples = r.samples,
                minutes = r.minutes,
                hours = r.hours,
                expired = r.expired,
                "telemetry rollup"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!("telemetry rollup: {e:?}"),
        }
        // Retention once a minute, or at once again while a backlog is
        // left (a round deletes at most a batch).
        if prune_due <= tokio::time::Instant::now() {
            let rows = match service.prune_audit().await {
                Ok(rows) => rows,
                Err(e) => {
                    tracing::warn!("audit retention: {e:?}");
                    0
                }
            };
            if rows > 0 {
                tracing::info!(rows, "audit retention deleted the oldest rows");
            }
            if rows < tessera_service::audit_retention::PRUNE_BATCH {
                prune_due = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
            }
        }
        match service.tick().await {
            Ok(r) if r != Default::default() => tracing::info!(
                expired = r.expired,
                timed_out = r.timed_out,
                placed = r.placed,
                drained = r.drained,
                lost = r.lost,
                "allocation timer"
            ),
            Ok(_) => {}
            Err(e) => tracing::warn!("allocation timer: {e:?}"),
        }
    }
}

/// The pages' routes, listed once per process. Listing them runs the whole
/// app with resource loading suppressed process-wide (leptos_server's
/// `SuppressResourceLoad`): a page rendered on another thread meanwhile
/// would wait forever (leptos-rs/leptos#4773), so a process that builds
/// several routers (the tests, replicas in one process) must not list them
/// again while serving.
fn route_list() -> Vec<leptos_axum::AxumRouteListing> {
    static ROUTES: std::sync::OnceLock<Vec<leptos_axum::AxumRouteListing>> =
        std::sync::OnceLock::new();
    ROUTES.get_or_init(|| generate_route_list(App)).clone()
}
