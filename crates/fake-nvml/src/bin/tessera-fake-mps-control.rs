//! A stand-in for `nvidia-cuda-mps-control` that speaks its control
//! protocol and keeps the daemon's state in `$CUDA_MPS_PIPE_DIRECTORY/fake-mps.json`,
//! recording every command it was told. It follows NVIDIA's "Multi-Process
//! Service" guide (MPS v2 interface, "nvidia-cuda-mps-control") and the
//! `nvidia-cuda-mps-control(1)` manual page:
//!
//! - `-d` starts the daemon (again: "An instance of this daemon is already
//!   running"); commands without one fail ("Cannot find MPS control daemon
//!   process");
//! - a client's first connection starts a server for its Linux user, at the
//!   daemon's defaults *as they are then*: `set_default_*` "will only affect
//!   the next server";
//! - `set_active_thread_percentage <PID>` / `set_device_pinned_mem_limit <PID>`
//!   change one server, for the clients that connect afterwards;
//! - a client's `CUDA_MPS_ACTIVE_THREAD_PERCENTAGE` and
//!   `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT` "only further constrain" its
//!   server's limits (it gets the lower of the two);
//! - `terminate_client <server> <client>` ends the client's GPU work and
//!   drops it from the server's client list (the process is left running,
//!   as the driver leaves it); `quit` ends the daemon and its servers.
//!
//! Test hooks (not NVIDIA commands): `fake_connect <client pid>` is a CUDA
//! process connecting (the real driver does it in `cuInit`), and
//! `fake_clients` prints each client's effective limits as JSON.

use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

/// Fake server pids start above Linux's largest pid (2^22), so they never
/// name a real process.
const FIRST_SERVER_PID: u32 = 5_000_000;

#[derive(Default, Serialize, Deserialize)]
struct Daemon {
    running: bool,
    default_pct: u8,
    default_mem_mib: Option<u64>,
    servers: Vec<Server>,
    /// Every command line it was given, in order.
    log: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct Server {
    pid: u32,
    uid: u32,
    pct: u8,
    mem_mib: Option<u64>,
    clients: Vec<Client>,
}

#[derive(Serialize, Deserialize)]
struct Client {
    pid: u32,
    /// What it got: the lower of its variables and its server's limits.
    pct: u8,
    mem_mib: Option<u64>,
}

fn state_file() -> PathBuf {
    let dir = std::env::var_os("CUDA_MPS_PIPE_DIRECTORY")
        .map_or_else(|| PathBuf::from("/tmp/nvidia-mps"), PathBuf::from);
    dir.join("fake-mps.json")
}

fn load() -> Daemon {
    std::fs::read_to_string(state_file())
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

fn save(d: &Daemon) -> Result<(), String> {
    let path = state_file();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    }
    let text = serde_json::to_string_pretty(d).map_err(|e| e.to_string())?;
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `4096M`, `2G` → MiB.
fn mib(value: &str) -> Option<u64> {
    let (n, unit) = value.split_at(value.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = n.parse().ok()?;
    match unit {
        "M" | "m" => Some(n),
        "G" | "g" => Some(n * 1024),
        _ => None,
    }
}

fn environ(pid: u32) -> Vec<(String, String)> {
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter_map(|v| std::str::from_utf8(v).ok()?.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn uid(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn server_mut<'d>(d: &'d mut Daemon, pid: &str) -> Result<&'d mut Server, String> {
    let pid: u32 = pid.parse().map_err(|_| format!("Invalid PID {pid}"))?;
    d.servers
        .iter_mut()
        .find(|s| s.pid == pid)
        .ok_or_else(|| format!("Server {pid} not found"))
}

fn percentage(n: &str) -> Result<u8, String> {
    match n.parse::<f64>() {
        Ok(v) if (0.0..=100.0).contains(&v) => Ok(v.round() as u8),
        _ => Err(format!("Invalid percentage {n}")),
    }
}

/// One command; its output.
fn command(d: &mut Daemon, words: &[&str]) -> Result<String, String> {
    match words {
        ["get_server_list"] => Ok(d.servers.iter().map(|s| format!("{}\n", s.pid)).collect()),
        ["get_client_list", pid] => {
            let s = server_mut(d, pid)?;
            Ok(s.clients.iter().map(|c| format!("{}\n", c.pid)).collect())
        }
        ["set_default_active_thread_percentage", n] => {
            d.default_pct = percentage(n)?;
            Ok(String::new())
        }
        ["get_default_active_thread_percentage"] => Ok(format!("{}.0\n", d.default_pct)),
        ["set_default_device_pinned_mem_limit", "0", v] => {
            d.default_mem_mib = Some(mib(v).ok_or(format!("Invalid limit {v}"))?);
            Ok(String::new())
        }
        ["get_default_device_pinned_mem_limit", "0"] => Ok(d
            .default_mem_mib
            .map(|m| format!("{m}M\n"))
            .unwrap_or_default()),
        ["set_active_thread_percentage", pid, n] => {
            let pct = percentage(n)?;
            server_mut(d, pid)?.pct = pct;
            Ok(String::new())
        }
        ["get_active_thread_percentage", pid] => Ok(format!("{}.0\n", server_mut(d, pid)?.pct)),
        ["set_device_pinned_mem_limit", pid, "0", v] => {
            let m = mib(v).ok_or(format!("Invalid limit {v}"))?;
            server_mut(d, pid)?.mem_mib = Some(m);
            Ok(String::new())
        }
        ["get_device_pinned_mem_limit", pid, "0"] => Ok(server_mut(d, pid)?
            .mem_mib
            .map(|m| format!("{m}M\n"))
            .unwrap_or_default()),
        ["terminate_client", server, client] => {
            let s = server_mut(d, server)?;
            let client: u32 = client
                .parse()
                .map_err(|_| format!("Invalid PID {client}"))?;
            let before = s.clients.len();
            s.clients.retain(|c| c.pid != client);
            if s.clients.len() == before {
                return Err(format!("Client {client} not found"));
            }
            // The guide: it "terminates all the outstanding GPU work" of
            // the client; the process itself is not signalled (its next
            // CUDA call fails), so whoever asked stops it.
            Ok(String::new())
        }
        ["quit"] => {
            d.running = false;
            d.servers.clear();
            Ok(String::new())
        }
        ["fake_connect", pid] => {
            let pid: u32 = pid.parse().map_err(|_| format!("Invalid PID {pid}"))?;
            let uid = uid(pid).ok_or(format!("no process {pid}"))?;
            let env = environ(pid);
            let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
            let asked_pct =
                get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE").and_then(|v| percentage(&v).ok());
            let asked_mem = get("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT").and_then(|v| {
                v.split(',')
                    .find_map(|p| p.trim().strip_prefix("0=").and_then(mib))
            });
            if !d.servers.iter().any(|s| s.uid == uid) {
                let next = d
                    .servers
                    .iter()
                    .map(|s| s.pid + 1)
                    .max()
                    .unwrap_or(FIRST_SERVER_PID);
                d.servers.push(Server {
                    pid: next.max(FIRST_SERVER_PID),
                    uid,
                    pct: d.default_pct,
                    mem_mib: d.default_mem_mib,
                    clients: Vec::new(),
                });
            }
            let s = d
                .servers
                .iter_mut()
                .find(|s| s.uid == uid)
                .ok_or("no server")?;
            let pct = asked_pct.map_or(s.pct, |a| a.min(s.pct));
            let mem_mib = match (asked_mem, s.mem_mib) {
                (Some(a), Some(m)) => Some(a.min(m)),
                (a, m) => a.or(m),
            };
            s.clients.push(Client { pid, pct, mem_mib });
            Ok(String::new())
        }
        ["fake_clients"] => {
            let all: Vec<&Client> = d.servers.iter().flat_map(|s| &s.clients).collect();
            serde_json::to_string(&all).map_err(|e| e.to_string())
        }
        _ => Err(format!("Unknown command: {}", words.join(" "))),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut d = load();
    if args.iter().any(|a| a == "-d") {
        if d.running {
            eprintln!("An instance of this daemon is already running");
            return ExitCode::FAILURE;
        }
        d = Daemon {
            running: true,
            default_pct: 100,
            log: d.log,
            ..Daemon::default()
        };
        d.log.push("-d".to_owned());
        return match save(&d) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
        };
    }
    let mut input = String::new();
    if std::io::stdin().read_to_string(&mut input).is_err() {
        return ExitCode::FAILURE;
    }
    if !d.running {
        eprintln!("Cannot find MPS control daemon process");
        return ExitCode::FAILURE;
    }
    let mut ok = true;
    for line in input.lines().filter(|l| !l.trim().is_empty()) {
        d.log.push(line.trim().to_owned());
        let words: Vec<&str> = line.split_whitespace().collect();
        match command(&mut d, &words) {
            Ok(out) => print!("{out}"),
            Err(e) => {
                eprintln!("{e}");
                ok = false;
            }
        }
    }
    if let Err(e) = save(&d) {
        eprintln!("{e}");
        return ExitCode::FAILURE;
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
