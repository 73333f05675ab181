//! `tessera-agent`: wiring only.

mod agent;
mod backend;
mod client;
mod commands;
mod credential;
mod reconcile;
mod telemetry;

use agent::HostAgent;
use backend::{
    nvml::{NvmlBackend, NvmlOptions},
    sim::SimBackend,
    GpuBackend,
};
#[cfg(test)]
use clap::CommandFactory;
use clap::{Parser, Subcommand, ValueEnum};
use client::ServerClient;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use telemetry::Cadence;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Backend {
    /// The NVIDIA driver through NVML.
    Nvml,
    /// Simulated GPUs from `--sim-host` files and `--sim-hosts-dir` folders.
    Sim,
}

#[derive(Parser, Debug)]
#[command(
    name = "tessera-agent",
    version,
    about = "Reports this host's GPUs to Tessera and applies their sharing state"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Tessera's URL.
    #[arg(long, env = "TESSERA_SERVER")]
    server: Option<String>,
    /// A PEM file of CA certificates trusted for an `https://` server
    /// besides the operating system's store and the bundled web roots (a
    /// company's internal CA).
    #[arg(long, env = "TESSERA_SERVER_CA", value_name = "PATH")]
    server_ca: Option<PathBuf>,
    /// Trust exactly the server certificate with this SHA-256 fingerprint
    /// (`openssl x509 -noout -fingerprint -sha256 -in server.pem`) and no
    /// CA; a renewed certificate needs the new pin.
    #[arg(
        long,
        env = "TESSERA_SERVER_CERT_SHA256",
        value_name = "HEX",
        conflicts_with = "server_ca"
    )]
    server_cert_sha256: Option<String>,
    /// One-time join token (needed on first start only). A command line is
    /// visible to every user in `ps`: prefer the environment variable or
    /// `--join-token-file`.
    #[arg(long, env = "TESSERA_JOIN_TOKEN", hide_env_values = true)]
    join_token: Option<String>,
    /// File holding the one-time join token (instead of `--join-token`).
    #[arg(
        long,
        env = "TESSERA_JOIN_TOKEN_FILE",
        value_name = "PATH",
        conflicts_with = "join_token"
    )]
    join_token_file: Option<PathBuf>,
    /// Where the host credential is kept.
    #[arg(
        long,
        env = "TESSERA_AGENT_STATE_DIR",
        default_value = "/var/lib/tessera-agent"
    )]
    state_dir: PathBuf,
    /// GPU backend.
    #[arg(long, value_enum, default_value_t = Backend::Nvml, global = true)]
    backend: Backend,
    /// Simulated host file(s) (with `--backend sim`); each is one host with its own credential.
    #[arg(long = "sim-host", global = true)]
    sim_hosts: Vec<PathBuf>,
    /// Folder of simulated host files: every `*.toml` in it (in name order) is
    /// one more simulated host, so one process can run a whole fleet.
    #[arg(long = "sim-hosts-dir", global = true)]
    sim_hosts_dirs: Vec<PathBuf>,
    /// The NVIDIA device plugin's config file (its `--config-file`), where
    /// the NVML backend writes time-slicing replicas; without it the agent
    /// cannot set time-slicing.
    #[arg(long, env = "TESSERA_DEVICE_PLUGIN_CONFIG", value_name = "PATH")]
    device_plugin_config: Option<PathBuf>,
    /// The NVML library to load instead of the system's libnvidia-ml.so.1
    /// (NVML backend), e.g. the fake library the tests run against.
    #[arg(long, env = "TESSERA_NVML_LIBRARY", value_name = "PATH", global = true)]
    nvml_library: Option<PathBuf>,
    /// The NVIDIA device plugin's process name: after changing its config
    /// the agent sends it SIGHUP, on which it reads the file again.
    #[arg(
        long,
        env = "TESSERA_DEVICE_PLUGIN_PROCESS",
        default_value = "nvidia-device-plugin",
        value_name = "NAME"
    )]
    device_plugin_process: String,
    /// The MPS control program (NVML backend): `nvidia-cuda-mps-control`
    /// on the PATH, or a path (the fake one the tests run against).
    #[arg(
        long,
        env = "TESSERA_MPS_CONTROL",
        default_value = "nvidia-cuda-mps-control",
        value_name = "PROGRAM",
        global = true
    )]
    mps_control: String,
    /// Where the MPS daemons' pipe directories live, one per GPU UUID (NVML
    /// backend). Slices tell their clients `/var/run/tessera/mps/<GPU UUID>`:
    /// change it only where clients are told otherwise (tests).
    #[arg(
        long,
        env = "TESSERA_MPS_PIPE_ROOT",
        default_value = "/var/run/tessera/mps",
        value_name = "DIR",
        global = true
    )]
    mps_pipe_root: PathBuf,
    /// Seconds a released slice's processes get between SIGTERM and SIGKILL
    /// (NVML backend).
    #[arg(long = "stop-grace-seconds", default_value_t = 30, global = true)]
    stop_grace_seconds: u64,
    /// Report under this host name instead of the machine's (NVML backend).
    #[arg(long)]
    hostname: Option<String>,
    /// Fetch the desired state, apply it, report once and exit.
    #[arg(long)]
    once: bool,
    /// Seconds between telemetry samples of every GPU (utilisation, memory,
    /// power, temperature, clocks), sent in compressed batches; 0 turns
    /// telemetry off.
    #[arg(
        long = "telemetry-interval-seconds",
        env = "TESSERA_TELEMETRY_INTERVAL_SECONDS",
        default_value_t = 10,
        global = true
    )]
    telemetry_interval_seconds: u64,
    /// Seconds between telemetry sends (what was sampled since the last
    /// one goes in one batch).
    #[arg(
        long = "telemetry-send-seconds",
        env = "TESSERA_TELEMETRY_SEND_SECONDS",
        default_value_t = 60,
        global = true
    )]
    telemetry_send_seconds: u64,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run against the server: enrol, report, reconcile (default).
    Run,
    /// Show what the agent would do to reach a desired state on a simulated
    /// host: plans each GPU, applies the plan to the simulated driver and
    /// prints one JSON line per GPU. Nothing is sent to a server.
    Plan {
        /// JSON file: `{"<gpu index>": <desired state>, ...}`.
        #[arg(long)]
        desired: PathBuf,
    },
    /// Read this host's GPUs through the backend and print one JSON
    /// document: the inventory and `--rounds` telemetry rounds (what the
    /// agent would report; `scripts/hw-check.sh` runs it on real GPUs).
    /// Changes nothing.
    Probe {
        /// Telemetry rounds to take (GPM needs two for a MIG device's activity).
        #[arg(long, default_value_t = 2)]
        rounds: u32,
        /// Milliseconds between rounds.
        #[arg(long, default_value_t = 1000)]
        interval_ms: u64,
    },
}

/// The join token from `--join-token` / `TESSERA_JOIN_TOKEN`, or read from
/// `--join-token-file`.
fn join_token(cli: &Cli) -> Result<Option<String>, String> {
    match (&cli.join_token, &cli.join_token_file) {
        // A missing file is no token: an enrolled host needs none (on
        // Kubernetes the token secret may list only the nodes yet to enrol).
        (_, Some(path)) if !path.exists() => {
            tracing::info!(
                "--join-token-file {} does not exist: starting without a join token",
                path.display()
            );
            Ok(None)
        }
        (_, Some(path)) => credential::read_join_token_file(path).map(Some),
        (Some(t), None) => Ok(Some(t.trim().to_owned()).filter(|t| !t.is_empty())),
        (None, None) => Ok(None),
    }
}

/// The simulated host files: every `--sim-host`, then each `--sim-hosts-dir`'s
/// `*.toml` files in name order.
fn sim_host_paths(cli: &Cli) -> Result<Vec<PathBuf>, backend::BackendError> {
    let mut paths = cli.sim_hosts.clone();
    for dir in &cli.sim_hosts_dirs {
        let err = |message: String| backend::BackendError::SimConfig {
            path: dir.display().to_string(),
            message,
        };
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(|e| err(e.to_string()))?
            .map(|entry| entry.map(|e| e.path()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| err(e.to_string()))?
            .into_iter()
            .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.is_file())
            .collect();
        if found.is_empty() {
            return Err(err("no *.toml simulated host files in this folder".into()));
        }
        found.sort();
        paths.extend(found);
    }
    Ok(paths)
}

/// The one backend `plan` and `probe` work on (exit code 2 otherwise).
fn one_backend(cli: &Cli) -> Result<Arc<dyn GpuBackend>, ExitCode> {
    match backends(cli) {
        Ok(mut b) if b.len() == 1 => Ok(b.remove(0)),
        Ok(_) => {
            eprintln!("tessera-agent: this command works on one host: give one --sim-host FILE");
            Err(ExitCode::from(2))
        }
        Err(e) => {
            eprintln!("tessera-agent: {e}");
            Err(ExitCode::from(2))
        }
    }
}

fn backends(cli: &Cli) -> Result<Vec<Arc<dyn GpuBackend>>, backend::BackendError> {
    match cli.backend {
        Backend::Nvml => Ok(vec![Arc::new(NvmlBackend::init(NvmlOptions {
            device_plugin_config: cli.device_plugin_config.clone(),
            device_plugin_process: cli.device_plugin_process.clone(),
            stop_grace: std::time::Duration::from_secs(cli.stop_grace_seconds),
            library: cli.nvml_library.clone(),
            mps_control: cli.mps_control.clone(),
            mps_pipe_root: cli.mps_pipe_root.clone(),
        })?)]),
        Backend::Sim => {
            let paths = sim_host_paths(cli)?;
            if paths.is_empty() {
                return Err(backend::BackendError::SimConfig {
                    path: "(none)".into(),
                    message:
                        "--backend sim needs at least one --sim-host FILE or --sim-hosts-dir DIR"
                            .into(),
                });
            }
            let backends = paths
                .iter()
                .map(|p| SimBackend::from_file(p).map(|b| Arc::new(b) as Arc<dyn GpuBackend>))
                .collect::<Result<Vec<_>, _>>()?;
            // Each host keeps its credential under its name: two files with the
            // same host name would fight over one host.
            let mut seen = std::collections::BTreeMap::new();
            for (b, p) in backends.iter().zip(&paths) {
                if let Some(first) = seen.insert(b.hostname(), p) {
                    return Err(backend::BackendError::SimConfig {
                        path: p.display().to_string(),
                        message: format!(
                            "host name '{}' is already used by {}",
                            b.hostname(),
                            first.display()
                        ),
                    });
                }
            }
            Ok(backends)
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
    match &cli.command {
        Some(Command::Plan { desired }) => {
            return match one_backend(&cli) {
                Ok(b) => commands::plan(b.as_ref(), desired),
                Err(code) => code,
            }
        }
        Some(Command::Probe {
            rounds,
            interval_ms,
        }) => {
            return match one_backend(&cli) {
                Ok(b) => commands::probe(b.as_ref(), *rounds, *interval_ms),
                Err(code) => code,
            }
        }
        Some(Command::Run) | None => {}
    }
    let Some(server) = cli.server.clone() else {
        eprintln!("tessera-agent: --server URL (or TESSERA_SERVER) is required");
        return ExitCode::from(2);
    };
    let join_token = match join_token(&cli) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("tessera-agent: {e}");
            return ExitCode::from(2);
        }
    };
    let backends = match backends(&cli) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("tessera-agent: {e}");
            return ExitCode::from(2);
        }
    };
    let trust = match (&cli.server_cert_sha256, &cli.server_ca) {
        (Some(pin), _) => tessera_trust::Trust::pinned(pin),
        (None, ca) => tessera_trust::Trust::from_optional_bundle(ca.as_deref()),
    };
    let trust = match trust {
        Ok(t) => t,
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
        // The server refuses a name that is not a host name: say so here,
        // before enrolling.
        let hostname = match tessera_core::checked::Hostname::parse(&hostname) {
            Ok(h) => h,
            Err(e) => {
                eprintln!("tessera-agent: {e}; set --hostname");
                return ExitCode::from(2);
            }
        };
        // Each host gets its own client, hence its own connection pool, as
        // separate machines would: its long poll never queues behind another's.
        let client = match ServerClient::new(&server, &trust) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("tessera-agent: {e}");
                return ExitCode::from(2);
            }
        };
        let agent = HostAgent {
            credential_path: cli.state_dir.join(format!("{hostname}.credential")),
            backend: b,
            client,
            hostname,
            // A join token is one-time: with several hosts, each needs its own enrolment.
            join_token: join_token.clone(),
            once: cli.once,
            telemetry: (cli.telemetry_interval_seconds > 0 && !cli.once).then(|| {
                let sample =
                    std::time::Duration::from_secs(cli.telemetry_interval_seconds.min(600));
                Cadence {
                    sample,
                    send: std::time::Duration::from_secs(cli.telemetry_send_seconds.min(3600))
                        .max(sample),
                }
            }),
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
            () = stop_requested() => {
                // Each host's loop ends at its next await; a GPU change in
                // progress (a blocking driver call) finishes before the
                // process exits, and nothing is torn down.
                tracing::info!("stopping; the GPUs are left as they are");
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

/// SIGTERM (systemd, Kubernetes) or Ctrl-C.
async fn stop_requested() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(e) => {
                tracing::warn!("cannot listen for SIGTERM: {e}");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("tessera-agent").chain(args.iter().copied()))
    }

    #[test]
    fn the_join_token_comes_from_a_file_or_the_command_line_not_both() {
        let path = std::env::temp_dir().join(format!("tessera-agent-cli-{}", std::process::id()));
        std::fs::write(&path, "tsj_from_file\n").unwrap();
        let p = path.to_str().unwrap();
        let cli = parse(&["--join-token-file", p]).unwrap();
        assert_eq!(join_token(&cli).unwrap().as_deref(), Some("tsj_from_file"));
        let cli = parse(&["--join-token", "tsj_argv"]).unwrap();
        assert_eq!(join_token(&cli).unwrap().as_deref(), Some("tsj_argv"));
        let err = parse(&["--join-token", "tsj_argv", "--join-token-file", p]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ArgumentConflict);
        let cli = parse(&["--join-token-file", "/nonexistent/token"]).unwrap();
        assert_eq!(join_token(&cli).unwrap(), None);
        std::fs::write(&path, " \n").unwrap();
        let cli = parse(&["--join-token-file", p]).unwrap();
        assert!(join_token(&cli).unwrap_err().contains("empty"));
        std::fs::remove_file(&path).unwrap();
    }

    /// The agent's command lines in `deploy/` (the Kubernetes DaemonSet and
    /// the systemd unit) are ones this agent accepts.
    #[test]
    fn the_deployed_command_lines_parse() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
        let text = std::fs::read_to_string(root.join("kustomize/base/agent.yaml")).unwrap();
        let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&text).unwrap();
        assert_eq!(doc["kind"].as_str(), Some("DaemonSet"));
        let container = &doc["spec"]["template"]["spec"]["containers"][0];
        let args: Vec<String> = container["args"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().replace("$(NODE_NAME)", "gpu-node-1"))
            .collect();
        let cli = parse(&args.iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
        assert_eq!(cli.hostname.as_deref(), Some("gpu-node-1"));
        assert_eq!(cli.backend, Backend::Nvml);
        assert!(cli
            .server
            .as_deref()
            .is_some_and(|s| s.starts_with("https://")));
        // The state directory is on the node, so the credential outlives the pod.
        let mounts = container["volumeMounts"].as_sequence().unwrap();
        assert!(mounts
            .iter()
            .any(|m| m["mountPath"].as_str() == cli.state_dir.to_str()));
        assert_eq!(
            join_token(&cli).unwrap(),
            None,
            "a node not in the secret starts"
        );

        let unit = std::fs::read_to_string(root.join("systemd/tessera-agent.service")).unwrap();
        let exec = unit
            .lines()
            .find_map(|l| l.strip_prefix("ExecStart="))
            .unwrap();
        let mut words = exec.split_whitespace();
        assert_eq!(words.next(), Some("/usr/local/bin/tessera-agent"));
        let cli = parse(&words.collect::<Vec<_>>()).unwrap();
        assert!(cli.join_token_file.is_some());
    }

    #[test]
    fn the_help_never_shows_the_join_token_from_the_environment() {
        let cmd = Cli::command();
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id() == "join_token")
            .map(|a| a.is_hide_env_values_set());
        assert_eq!(arg, Some(true));
    }
}
