//! `tessera-agent`: wiring only.

mod agent;
mod backend;
mod client;

use agent::HostAgent;
use backend::{nvml::NvmlBackend, sim::SimBackend, GpuBackend};
use clap::{Parser, ValueEnum};
use client::ServerClient;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Backend {
    /// The NVIDIA driver through NVML.
    Nvml,
    /// Simulated GPUs from `--sim-host` files.
    Sim,
}

#[derive(Parser, Debug)]
#[command(
    name = "tessera-agent",
    version,
    about = "Reports this host's GPUs to Tessera and applies their sharing state"
)]
struct Cli {
    /// Tessera's URL.
    #[arg(long, env = "TESSERA_SERVER")]
    server: String,
    /// One-time join token (needed on first start only).
    #[arg(long, env = "TESSERA_JOIN_TOKEN")]
    join_token: Option<String>,
    /// Where the host credential is kept.
    #[arg(
        long,
        env = "TESSERA_AGENT_STATE_DIR",
        default_value = "/var/lib/tessera-agent"
    )]
    state_dir: PathBuf,
    /// GPU backend.
    #[arg(long, value_enum, default_value_t = Backend::Nvml)]
    backend: Backend,
    /// Simulated host file(s) (with `--backend sim`); each is one host with its own credential.
    #[arg(long = "sim-host")]
    sim_hosts: Vec<PathBuf>,
    /// Report under this host name instead of the machine's (NVML backend).
    #[arg(long)]
    hostname: Option<String>,
    /// Report once and exit.
    #[arg(long)]
    once: bool,
}

fn backends(cli: &Cli) -> Result<Vec<Arc<dyn GpuBackend>>, backend::BackendError> {
    match cli.backend {
        Backend::Nvml => Ok(vec![Arc::new(NvmlBackend::init()?)]),
        Backend::Sim => {
            if cli.sim_hosts.is_empty() {
                return Err(backend::BackendError::SimConfig {
                    path: "(none)".into(),
                    message: "--backend sim needs at least one --sim-host FILE".into(),
                });
            }
            cli.sim_hosts
                .iter()
                .map(|p| SimBackend::from_file(p).map(|b| Arc::new(b) as Arc<dyn GpuBackend>))
                .collect()
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TESSERA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let backends = match backends(&cli) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("tessera-agent: {e}");
            return ExitCode::from(2);
        }
    };
    let client = match ServerClient::new(&cli.server) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tessera-agent: {e}");
            return ExitCode::from(2);
        }
    };
    let several = backends.len() > 1;
    let mut tasks = tokio::task::JoinSet::new();
    for b in backends {
        let hostname = cli
            .hostname
            .clone()
            .filter(|_| !several)
            .unwrap_or_else(|| b.hostname());
        let agent = HostAgent {
            credential_path: cli.state_dir.join(format!("{hostname}.credential")),
            backend: b,
            client: client.clone(),
            hostname,
            // A join token is one-time: with several hosts, each needs its own enrolment.
            join_token: cli.join_token.clone(),
            once: cli.once,
        };
        tasks.spawn(agent.run());
    }
    let mut failed = false;
    loop {
        tokio::select! {
            next = tasks.join_next() => match next {
                None => break,
                Some(Ok(Ok(()))) => {}
                Some(Ok(Err(e))) => {
                    tracing::error!("{e}");
                    eprintln!("tessera-agent: {e}");
                    failed = true;
                }
                Some(Err(e)) => {
                    tracing::error!("agent task failed: {e}");
                    failed = true;
                }
            },
            _ = tokio::signal::ctrl_c() => {
                tracing::info!("stopping");
                tasks.abort_all();
                break;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
