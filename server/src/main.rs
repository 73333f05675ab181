//! `tessera-server`: wiring only.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::sync::Arc;
use tessera_core::role::TokenScope;
use tessera_server::app::{build_state, router, run_scheduler};
use tessera_server::config::Config;
use tessera_service::audit::Actor;
use tessera_service::fleet::NewJoinToken;
use tessera_service::SystemClock;
use tokio::net::TcpListener;
use tower_sessions::ExpiredDeletion;

/// mimalloc rather than glibc's malloc: a request allocates and frees many
/// small objects on several threads, where glibc's arenas spent about a
/// sixth of the server's CPU (profiled in an admission storm).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "tessera-server",
    version,
    about = "Tessera: self-service GPU sharing"
)]
struct Cli {
    /// Configuration file (TOML). `TESSERA_*` variables override it.
    #[arg(long, env = "TESSERA_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (default).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Load the configuration (file and environment, `*_FILE` secrets, the
    /// CA bundle), say what is wrong or "configuration OK", and exit; no
    /// database is opened.
    CheckConfig,
    /// Ask a running server on this machine (`server.listen`) whether it is
    /// alive (`/healthz`): exit 0 when it answers 200, 1 otherwise. For a
    /// container's health check, where no curl is.
    Health,
    /// Create a one-time join token for an agent and print it.
    CreateJoinToken {
        /// What the token is for.
        #[arg(long, default_value = "created on the command line")]
        description: String,
        /// Minutes until it expires.
        #[arg(long, default_value_t = 60)]
        ttl_minutes: i64,
        /// How many tokens to create (one per line), e.g. for a fleet of simulated hosts.
        #[arg(long, default_value_t = 1)]
        count: u32,
        /// Make a re-enrolment token for this already enrolled host (it
        /// replaces the host's credential and enrols nothing else). Without
        /// it the token enrols a new host name only.
        #[arg(long, value_name = "NAME")]
        for_host: Option<String>,
    },
    /// Check the audit log's hash chain from its first row to its head;
    /// exits non-zero naming the first row that breaks it.
    VerifyAudit,
    /// Create an API token for a tenant and print it (for scripts and benchmarks).
    CreateApiToken {
        /// Tenant slug.
        #[arg(long)]
        tenant: tessera_core::checked::TenantSlug,
        /// What the token is for.
        #[arg(long, default_value = "created on the command line")]
        name: String,
        /// Days until it expires (default and maximum: `[api_tokens]` in the
        /// configuration, 90 and 365 unless set).
        #[arg(long)]
        days: Option<u32>,
        /// What it may do: `read` (look only) or `request` (a member's
        /// rights: request, extend, keep, release).
        #[arg(long, default_value = "request", value_parser = parse_scope)]
        scope: TokenScope,
    },
}

/// `health`: GET /healthz on the listening address (an unspecified address
/// such as 0.0.0.0 is asked on loopback).
async fn health(listen: std::net::SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    let ip = match listen.ip() {
        std::net::IpAddr::V4(v4) if v4.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
        std::net::IpAddr::V6(v6) if v6.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
        ip => ip,
    };
    let url = format!(
        "http://{}/healthz",
        std::net::SocketAddr::new(ip, listen.port())
    );
    let status = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(5))
        .build()?
        .get(&url)
        .send()
        .await?
        .status();
    if status.is_success() {
        println!("{url}: {status}");
        Ok(())
    } else {
        Err(format!("{url}: {status}").into())
    }
}

/// A token scope named on the command line.
fn parse_scope(name: &str) -> Result<TokenScope, String> {
    TokenScope::parse(name).ok_or_else(|| {
        let names: Vec<_> = TokenScope::ALL.iter().map(|s| s.as_str()).collect();
        format!("'{name}' is not a scope; one of: {}", names.join(", "))
    })
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let config = match Config::load(cli.config.as_deref(), std::env::vars()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tessera-server: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    init_tracing(&config.server.log_format);
    match run(cli.command.unwrap_or(Command::Serve), config).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            eprintln!("tessera-server: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(command: Command, config: Config) -> Result<(), Box<dyn std::error::Error>> {
    match command {
        // Loading it (in `main`) was the check.
        Command::CheckConfig => {
            println!("configuration OK");
            Ok(())
        }
        Command::Health => health(config.server.listen).await,
        command => run_on_database(command, config).await,
    }
}

/// The commands that open the database.
async fn run_on_database(
    command: Command,
    config: Config,
) -> Result<(), Box<dyn std::error::Error>> {
    let listen = config.server.listen;
    let (state, store) = build_state(config, Arc::new(SystemClock)).await?;
    match command {
        // Handled by `run` without a database.
        Command::CheckConfig | Command::Health => Ok(()),
        Command::Migrate => Ok(()),
        Command::CreateJoinToken {
            description,
            ttl_minutes,
            count,
            for_host,
        } => {
            let new = NewJoinToken {
                description,
                ttl_minutes,
                for_host,
            };
            for _ in 0..count.max(1) {
                let created = state
                    .service
                    .create_join_token_as(Actor::System, &new)
                    .await?;
                println!("{}", created.secret);
            }
            Ok(())
        }
        Command::VerifyAudit => {
            let report = state.service.verify_audit_chain().await?;
            let before = match report.unchained {
                0 => String::new(),
                n => format!("; {n} earlier rows were written before the chain began"),
            };
            let before = match report.pruned_through {
                None => before,
                Some(id) => format!(
                    "{before}; retention deleted {} chained rows up to row {id}, the walk starts from the last one's hash",
                    report.pruned
                ),
            };
            match report.broken {
                None => {
                    let up_to = report
                        .verified_up_to
                        .map_or_else(|| "no rows yet".to_owned(), |id| format!("up to row {id}"));
                    println!(
                        "audit chain verified: {} rows, {up_to}{before}",
                        report.verified
                    );
                    Ok(())
                }
                Some(b) => {
                    let at = b
                        .row
                        .map_or_else(|| "the start".to_owned(), |id| format!("row {id}"));
                    Err(format!(
                        "audit chain broken at {at}: {} ({} rows verified before it)",
                        b.reason, report.verified
                    )
                    .into())
                }
            }
        }
        Command::CreateApiToken {
            tenant,
            name,
            days,
            scope,
        } => {
            let created = state
                .service
                .create_api_token_as_system(&tenant, &name, days, scope)
                .await?;
            println!("{}", created.secret);
            Ok(())
        }
        Command::Serve => {
            if let Err(e) = state.oidc.check().await {
                tracing::warn!("{e} (sign-in will retry discovery on first use)");
            }
            let stop = state.shutdown.clone();
            let cleanup = tokio::spawn(
                store
                    .clone()
                    .continuously_delete_expired(tokio::time::Duration::from_secs(600)),
            );
            let scheduler = tokio::spawn(run_scheduler(
                state.service.clone(),
                std::time::Duration::from_millis(
                    state.config.agents.scheduler_interval_ms.max(100),
                ),
                stop.subscribe(),
            ));
            let peers = tokio::spawn({
                let service = state.service.clone();
                let stop = stop.subscribe();
                async move { service.listen_to_peers(stop).await }
            });
            let deliveries = tokio::spawn(tessera_server::webhooks::run_deliveries(
                state.service.clone(),
                tessera_server::webhooks::DeliveryConfig {
                    timeout: std::time::Duration::from_secs(
                        state.config.webhooks.timeout_seconds.max(1),
                    ),
                    retry_base_s: state.config.webhooks.retry_base_seconds,
                    per_tenant: state.config.webhooks.per_tenant_concurrency,
                    trust: state.config.tls.trust()?,
                },
                stop.subscribe(),
            ));
            let app = router(state, store);
            let listener = TcpListener::bind(listen).await?;
            // The peer address feeds the per-client rate limits.
            let app = app.into_make_service_with_connect_info::<std::net::SocketAddr>();
            tracing::info!("listening on http://{listen}");
            // On SIGTERM or Ctrl-C: stop accepting, answer held long polls,
            // finish the requests in flight, then let the timer and the
            // webhook deliveries finish their current round.
            let stopping = stop.clone();
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    shutdown_signal().await;
                    tracing::info!("shutting down: finishing the requests in flight");
                    stopping.send_replace(true);
                })
                .await?;
            stop.send_replace(true);
            let finish = async {
                let _ = scheduler.await;
                let _ = deliveries.await;
                let _ = peers.await;
            };
            if tokio::time::timeout(std::time::Duration::from_secs(15), finish)
                .await
                .is_err()
            {
                tracing::warn!("background tasks did not finish within 15 s; stopping anyway");
            }
            cleanup.abort();
            tracing::info!("stopped");
            Ok(())
        }
    }
}

fn init_tracing(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TESSERA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,tower_http=warn,sqlx=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}
