//! MPS through `nvidia-cuda-mps-control`: one control daemon per GPU, with
//! its own pipe directory (`<MPS_PIPE_ROOT>/<gpu uuid>`, which clients put in
//! `CUDA_MPS_PIPE_DIRECTORY`) and log directory, and only that GPU visible.
//!
//! Start: `nvidia-cuda-mps-control -d`; configure: write
//! `set_default_active_thread_percentage <n>` and
//! `set_default_device_pinned_mem_limit 0 <limit>M` to its stdin (device 0 is
//! the one visible GPU); stop: `quit`. Observed: the pipe directory exists
//! and the daemon answers `get_default_active_thread_percentage`.
//!
//! Commands go through [`CommandRunner`] so tests can record them.

use crate::backend::BackendError;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tessera_core::plan::{MpsClient, MpsServer, MpsSettings};
use tessera_core::sharing::{
    ENV_ALLOCATION, ENV_MPS_ACTIVE_THREAD_PERCENTAGE, ENV_MPS_PINNED_DEVICE_MEM_LIMIT,
};
use tessera_core::units::MemMiB;
use wait_timeout::ChildExt;

/// The control program.
pub const MPS_CONTROL: &str = "nvidia-cuda-mps-control";
/// Where the daemons log, one folder per GPU UUID.
pub const MPS_LOG_ROOT: &str = "/var/log/tessera/mps";
/// The file in the pipe directory where Tessera notes the pinned-memory
/// limit it set (the daemon has no reliable way to read it back).
const PINNED_LIMIT_FILE: &str = "tessera-pinned-mem-limit";
/// The same for each server's own limit: lines of `<server pid> <MiB>`.
const SERVER_LIMITS_FILE: &str = "tessera-server-mem-limits";

/// One command to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    /// Program.
    pub program: String,
    /// Arguments.
    pub args: Vec<String>,
    /// Environment added to the agent's.
    pub env: Vec<(String, String)>,
    /// Text written to its stdin (then closed).
    pub stdin: Option<String>,
    /// The program forks a daemon and returns: do not capture its output
    /// (the daemon would keep the pipes open).
    pub daemon: bool,
}

/// What a command did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommandOutput {
    /// It exited with status 0.
    pub success: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Runs commands (the real processes, or a recording in tests).
pub trait CommandRunner: Send + Sync {
    /// Runs `cmd` to completion. `Err` when it could not be started (or
    /// timed out); a non-zero exit is `Ok` with `success: false`.
    fn run(&self, cmd: &CommandSpec) -> std::io::Result<CommandOutput>;
}

/// Runs real processes, each with a time limit.
#[derive(Debug, Clone, Copy)]
pub struct SystemRunner {
    /// How long a command may take before it is killed.
    pub timeout: Duration,
}

impl Default for SystemRunner {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(10),
        }
    }
}

fn read_all(r: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut r) = r {
            let _ = r.read_to_string(&mut s);
        }
        s
    })
}

impl CommandRunner for SystemRunner {
    fn run(&self, cmd: &CommandSpec) -> std::io::Result<CommandOutput> {
        let mut command = std::process::Command::new(&cmd.program);
        command
            .args(&cmd.args)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(if cmd.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            });
        if cmd.daemon {
            command.stdout(Stdio::null()).stderr(Stdio::null());
        } else {
            command.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        let mut child = command.spawn()?;
        if let (Some(text), Some(mut stdin)) = (&cmd.stdin, child.stdin.take()) {
            // A daemon that is gone may close the pipe early; its answer
            // (or exit status) says what happened.
            let _ = stdin.write_all(text.as_bytes());
            let _ = stdin.write_all(b"\n");
        }
        let stdout = read_all(child.stdout.take());
        let stderr = read_all(child.stderr.take());
        let Some(status) = child.wait_timeout(self.timeout)? else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("{} did not finish within {:?}", cmd.program, self.timeout),
            ));
        };
        Ok(CommandOutput {
            success: status.success(),
            stdout: stdout.join().unwrap_or_default(),
            stderr: stderr.join().unwrap_or_default(),
        })
    }
}

/// The MPS control daemons of a host.
pub struct MpsControl {
    runner: Box<dyn CommandRunner>,
    /// The control program ([`MPS_CONTROL`] unless told otherwise).
    program: String,
    pipe_root: PathBuf,
    log_root: PathBuf,
    /// Tries (100 ms apart) for a freshly started daemon to answer.
    start_tries: u32,
}

impl std::fmt::Debug for MpsControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpsControl")
            .field("pipe_root", &self.pipe_root)
            .field("log_root", &self.log_root)
            .finish_non_exhaustive()
    }
}

fn mps_err(detail: impl Into<String>) -> BackendError {
    BackendError::Nvml {
        call: MPS_CONTROL,
        detail: detail.into(),
    }
}

impl MpsControl {
    /// Daemons with pipe directories under `pipe_root` and logs under
    /// `log_root` (normally [`tessera_core::slice::MPS_PIPE_ROOT`] and
    /// [`MPS_LOG_ROOT`]).
    pub fn new(runner: Box<dyn CommandRunner>, pipe_root: PathBuf, log_root: PathBuf) -> Self {
        Self {
            runner,
            program: MPS_CONTROL.to_owned(),
            pipe_root,
            log_root,
            start_tries: 50,
        }
    }

    /// Runs `program` as the control program (a path, or a name on `PATH`).
    pub fn with_program(mut self, program: impl Into<String>) -> Self {
        self.program = program.into();
        self
    }

    /// The pipe directory of the GPU `uuid` (what clients set as
    /// `CUDA_MPS_PIPE_DIRECTORY`).
    pub fn pipe_dir(&self, uuid: &str) -> PathBuf {
        self.pipe_root.join(uuid)
    }

    /// The log directory of the GPU `uuid`.
    pub fn log_dir(&self, uuid: &str) -> PathBuf {
        self.log_root.join(uuid)
    }

    fn command(&self, uuid: &str, args: &[&str], stdin: Option<String>) -> CommandSpec {
        CommandSpec {
            program: self.program.clone(),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            env: vec![
                ("CUDA_VISIBLE_DEVICES".to_owned(), uuid.to_owned()),
                (
                    "CUDA_MPS_PIPE_DIRECTORY".to_owned(),
                    self.pipe_dir(uuid).display().to_string(),
                ),
                (
                    "CUDA_MPS_LOG_DIRECTORY".to_owned(),
                    self.log_dir(uuid).display().to_string(),
                ),
            ],
            daemon: args == ["-d"],
            stdin,
        }
    }

    fn run(&self, cmd: &CommandSpec) -> Result<CommandOutput, BackendError> {
        self.runner.run(cmd).map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                mps_err(format!(
                    "{MPS_CONTROL} was not found; install the NVIDIA driver's compute utilities \
                     (e.g. nvidia-compute-utils) so MPS can run"
                ))
            } else {
                mps_err(e.to_string())
            }
        })
    }

    /// Sends one control command to the daemon of GPU `uuid`.
    fn send(&self, uuid: &str, line: &str) -> Result<CommandOutput, BackendError> {
        self.run(&self.command(uuid, &[], Some(line.to_owned())))
    }

    fn send_ok(&self, uuid: &str, line: &str) -> Result<String, BackendError> {
        let out = self.send(uuid, line)?;
        if out.success {
            Ok(out.stdout)
        } else {
            Err(mps_err(format!(
                "`{line}` failed: {}{}",
                out.stderr.trim(),
                out.stdout.trim()
            )))
        }
    }

    /// The daemon's defaults for GPU `uuid`, or `None` when no daemon runs.
    pub fn observe(&self, uuid: &str) -> Result<Option<MpsSettings>, BackendError> {
        let dir = self.pipe_dir(uuid);
        if !dir.is_dir() {
            return Ok(None);
        }
        let Some(percentage) = self.active_thread_percentage(uuid)? else {
            return Ok(None);
        };
        let pinned = std::fs::read_to_string(dir.join(PINNED_LIMIT_FILE))
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(MemMiB);
        Ok(Some(MpsSettings {
            default_active_thread_percentage: percentage,
            default_pinned_mem_limit: pinned,
        }))
    }

    fn active_thread_percentage(&self, uuid: &str) -> Result<Option<u8>, BackendError> {
        let out = match self.send(uuid, "get_default_active_thread_percentage") {
            Ok(out) => out,
            // Not installed: no daemon can be running.
            Err(_) => return Ok(None),
        };
        if !out.success {
            return Ok(None);
        }
        Ok(parse_percentage(&out.stdout))
    }

    /// Starts, reconfigures or stops the daemon of GPU `uuid`. `memory_mib`
    /// is the GPU's memory: dropping a pinned-memory limit on a running
    /// daemon sets it to the whole GPU.
    pub fn apply(
        &self,
        uuid: &str,
        memory_mib: u64,
        settings: Option<MpsSettings>,
    ) -> Result<(), BackendError> {
        let current = self.observe(uuid)?;
        let Some(want) = settings else {
            if current.is_some() {
                self.send_ok(uuid, "quit")?;
            }
            let _ = std::fs::remove_file(self.pipe_dir(uuid).join(PINNED_LIMIT_FILE));
            return Ok(());
        };
        if !(1..=100).contains(&want.default_active_thread_percentage) {
            return Err(mps_err(
                "MPS default active thread percentage must be 1..=100",
            ));
        }
        if current.is_none() {
            self.start(uuid)?;
        }
        self.send_ok(
            uuid,
            &format!(
                "set_default_active_thread_percentage {}",
                want.default_active_thread_percentage
            ),
        )?;
        let had_limit = current.is_some_and(|c| c.default_pinned_mem_limit.is_some());
        let limit = match want.default_pinned_mem_limit {
            Some(MemMiB(m)) => Some(m),
            None if had_limit => Some(memory_mib),
            None => None,
        };
        if let Some(m) = limit {
            self.send_ok(uuid, &format!("set_default_device_pinned_mem_limit 0 {m}M"))?;
        }
        let note = self.pipe_dir(uuid).join(PINNED_LIMIT_FILE);
        match want.default_pinned_mem_limit {
            Some(MemMiB(m)) => std::fs::write(&note, format!("{m}\n"))
                .map_err(|e| mps_err(format!("{}: {e}", note.display())))?,
            None => {
                let _ = std::fs::remove_file(&note);
            }
        }
        Ok(())
    }

    /// The running servers of GPU `uuid`'s daemon (`get_server_list`) and
    /// their limits; none when no daemon runs.
    pub fn servers(&self, uuid: &str) -> Result<Vec<MpsServer>, BackendError> {
        if self.observe(uuid)?.is_none() {
            return Ok(Vec::new());
        }
        let noted = self.noted_server_limits(uuid);
        let mut servers = Vec::new();
        for pid in pids(&self.send_ok(uuid, "get_server_list")?) {
            let out = self.send_ok(uuid, &format!("get_active_thread_percentage {pid}"))?;
            let Some(pct) = parse_percentage(&out) else {
                // Gone between the two questions.
                continue;
            };
            servers.push(MpsServer {
                pid,
                active_thread_percentage: pct,
                pinned_mem_limit: noted.get(&pid).copied(),
            });
        }
        Ok(servers)
    }

    /// Sets every running server's limits: what its clients get at most
    /// (each client's own variables lower them; NVIDIA MPS docs: a new
    /// limit reaches the clients that connect afterwards).
    pub fn set_server_limits(
        &self,
        uuid: &str,
        pct: u8,
        pinned: MemMiB,
    ) -> Result<(), BackendError> {
        if !(1..=100).contains(&pct) {
            return Err(mps_err("MPS active thread percentage must be 1..=100"));
        }
        let mut noted = self.noted_server_limits(uuid);
        let running = pids(&self.send_ok(uuid, "get_server_list")?);
        noted.retain(|pid, _| running.contains(pid));
        for pid in running {
            self.send_ok(uuid, &format!("set_active_thread_percentage {pid} {pct}"))?;
            self.send_ok(
                uuid,
                &format!("set_device_pinned_mem_limit {pid} 0 {}M", pinned.0),
            )?;
            noted.insert(pid, pinned);
        }
        let text: String = noted
            .iter()
            .map(|(p, m)| format!("{p} {}\n", m.0))
            .collect();
        let note = self.pipe_dir(uuid).join(SERVER_LIMITS_FILE);
        std::fs::write(&note, text).map_err(|e| mps_err(format!("{}: {e}", note.display())))
    }

    /// Every client of every running server (`get_client_list <server>`),
    /// with what its environment names.
    pub fn clients(&self, uuid: &str) -> Result<Vec<MpsClient>, BackendError> {
        if self.observe(uuid)?.is_none() {
            return Ok(Vec::new());
        }
        let mut clients = Vec::new();
        for server in pids(&self.send_ok(uuid, "get_server_list")?) {
            let out = self.send(uuid, &format!("get_client_list {server}"))?;
            for pid in pids(&out.stdout) {
                clients.push(client_of(server, pid));
            }
        }
        Ok(clients)
    }

    /// Ends client `client`'s GPU work on server `server`
    /// (`terminate_client <server PID> <client PID>`; NVIDIA MPS guide,
    /// "nvidia-cuda-mps-control"). The process itself keeps running and
    /// is stopped by the caller.
    pub fn terminate_client(
        &self,
        uuid: &str,
        server: u32,
        client: u32,
    ) -> Result<(), BackendError> {
        self.send_ok(uuid, &format!("terminate_client {server} {client}"))
            .map(|_| ())
    }

    fn noted_server_limits(&self, uuid: &str) -> std::collections::BTreeMap<u32, MemMiB> {
        std::fs::read_to_string(self.pipe_dir(uuid).join(SERVER_LIMITS_FILE))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (pid, mib) = l.split_once(' ')?;
                Some((pid.parse().ok()?, MemMiB(mib.trim().parse().ok()?)))
            })
            .collect()
    }

    fn start(&self, uuid: &str) -> Result<(), BackendError> {
        for dir in [self.pipe_dir(uuid), self.log_dir(uuid)] {
            std::fs::create_dir_all(&dir)
                .map_err(|e| mps_err(format!("cannot create {}: {e}", dir.display())))?;
        }
        let out = self.run(&self.command(uuid, &["-d"], None))?;
        if !out.success {
            return Err(mps_err(format!(
                "`{MPS_CONTROL} -d` failed for GPU {uuid}; see {}",
                self.log_dir(uuid).join("control.log").display()
            )));
        }
        // The daemon forks: wait until it answers on its pipe.
        for attempt in 0..self.start_tries.max(1) {
            if self.active_thread_percentage(uuid)?.is_some() {
                return Ok(());
            }
            if attempt + 1 < self.start_tries {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Err(mps_err(format!(
            "the MPS control daemon for GPU {uuid} did not answer after starting; see {}",
            self.log_dir(uuid).join("control.log").display()
        )))
    }
}

/// True when process `pid` is an MPS server (`nvidia-cuda-mps-server`), by
/// its command line in `/proc` (the agent must see the host's processes).
pub fn is_mps_server(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .and_then(|cmdline| {
            let argv0 = cmdline.split(|b| *b == 0).next()?.to_vec();
            let argv0 = String::from_utf8(argv0).ok()?;
            Some(Path::new(&argv0).file_name()? == "nvidia-cuda-mps-server")
        })
        .unwrap_or(false)
}

/// `get_default_active_thread_percentage` prints e.g. `100.0`.
/// Process ids, one per line (`get_server_list`, `get_client_list`).
fn pids(stdout: &str) -> Vec<u32> {
    stdout
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// Client `pid` of `server` as its environment describes it.
fn client_of(server: u32, pid: u32) -> MpsClient {
    let env = super::stop::environ(pid).unwrap_or_default();
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    MpsClient {
        pid,
        server,
        allocation: get(ENV_ALLOCATION).and_then(|v| v.trim().parse().ok()),
        active_thread_percentage: get(ENV_MPS_ACTIVE_THREAD_PERCENTAGE)
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| (0.0..=100.0).contains(v))
            .map(|v| v.round() as u8),
        pinned_mem_limit: get(ENV_MPS_PINNED_DEVICE_MEM_LIMIT).and_then(device0_limit),
    }
}

/// Device 0's limit in `CUDA_MPS_PINNED_DEVICE_MEM_LIMIT` (`0=4096M,1=2G`).
fn device0_limit(value: &str) -> Option<MemMiB> {
    value.split(',').find_map(|part| {
        let (dev, limit) = part.trim().split_once('=')?;
        if dev.trim() != "0" {
            return None;
        }
        let limit = limit.trim();
        let (n, unit) = limit.split_at(limit.find(|c: char| !c.is_ascii_digit())?);
        let n: u64 = n.parse().ok()?;
        match unit {
            "M" | "m" => Some(MemMiB(n)),
            "G" | "g" => Some(MemMiB(n * 1024)),
            _ => None,
        }
    })
}

fn parse_percentage(stdout: &str) -> Option<u8> {
    let v: f64 = stdout.split_whitespace().last()?.parse().ok()?;
    if (0.0..=100.0).contains(&v) {
        Some(v.round() as u8)
    } else {
        None
    }
}

#[cfg(test)]
pub(crate) mod tests;
