//! Stopping the processes of a released slice, as an operator would: SIGTERM
//! (`kill -TERM`), a grace period for the work to save and exit, then
//! SIGKILL for what is left. The process list comes from NVML; the signals
//! go through the command layer ([`CommandRunner`]), so they are tested
//! with real processes.

use super::mps::{CommandRunner, CommandSpec};
use crate::backend::BackendError;
use std::time::{Duration, Instant};
use tessera_core::ids::AllocationId;
use tessera_core::sharing::ENV_ALLOCATION;

/// How often a stopping process is checked for.
const POLL: Duration = Duration::from_millis(100);

/// How long a process has after SIGKILL before it counts as unkillable.
const AFTER_KILL: Duration = Duration::from_secs(5);

/// Sends signals and waits for processes to go.
pub struct ProcessStopper {
    runner: Box<dyn CommandRunner>,
    /// Time between SIGTERM and SIGKILL.
    pub grace: Duration,
}

impl std::fmt::Debug for ProcessStopper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessStopper")
            .field("grace", &self.grace)
            .finish_non_exhaustive()
    }
}

/// Whether process `pid` still runs (a zombie has finished: it only waits
/// for its parent to collect its status).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which is in parentheses and
        // may itself contain spaces or parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

impl ProcessStopper {
    /// Signals through `runner`, with `grace` between SIGTERM and SIGKILL.
    pub fn new(runner: Box<dyn CommandRunner>, grace: Duration) -> Self {
        Self { runner, grace }
    }

    fn signal(&self, signal: &str, pids: &[u32]) -> Result<(), BackendError> {
        kill(self.runner.as_ref(), signal, pids)
    }

    /// Waits up to `limit` for every process of `pids` to end; returns those
    /// still alive.
    fn wait(pids: &[u32], limit: Duration) -> Vec<u32> {
        let until = Instant::now() + limit;
        loop {
            let left: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
            if left.is_empty() || Instant::now() >= until {
                return left;
            }
            std::thread::sleep(POLL);
        }
    }

    /// Stops `pids`: SIGTERM, up to the grace period, then SIGKILL. Errors
    /// when a process survives SIGKILL (e.g. stuck in the driver).
    pub fn stop(&self, pids: &[u32]) -> Result<StopReport, BackendError> {
        let running: Vec<u32> = pids.iter().copied().filter(|p| alive(*p)).collect();
        if running.is_empty() {
            return Ok(StopReport::default());
        }
        self.signal("TERM", &running)?;
        let stubborn = Self::wait(&running, self.grace);
        if stubborn.is_empty() {
            return Ok(StopReport {
                terminated: running.len(),
                killed: 0,
            });
        }
        tracing::warn!(
            ?stubborn,
            grace_s = self.grace.as_secs(),
            "processes ignored SIGTERM; sending SIGKILL"
        );
        self.signal("KILL", &stubborn)?;
        let survivors = Self::wait(&stubborn, AFTER_KILL);
        if !survivors.is_empty() {
            return Err(BackendError::Nvml {
                call: "kill",
                detail: format!(
                    "processes {survivors:?} survived SIGKILL (stuck in the driver?); reset the GPU"
                ),
            });
        }
        Ok(StopReport {
            terminated: running.len() - stubborn.len(),
            killed: stubborn.len(),
        })
    }
}

/// The shared slice process `pid` runs for: `TESSERA_ALLOCATION` in its
/// environment as it started (`/proc/<pid>/environ`; the agent runs as
/// root). `None` for a process without it, or one that has gone.
pub fn allocation_of(pid: u32) -> Option<AllocationId> {
    environ(pid)?
        .into_iter()
        .find(|(k, _)| k == ENV_ALLOCATION)
        .and_then(|(_, v)| v.trim().parse().ok())
}

/// Process `pid`'s environment as it started (`/proc/<pid>/environ`), or
/// `None` when it cannot be read (gone, or not ours to read).
pub fn environ(pid: u32) -> Option<Vec<(String, String)>> {
    let raw = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter_map(|var| std::str::from_utf8(var).ok()?.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
    )
}

/// Sends `signal` (`TERM`, `KILL`, `HUP`) to `pids` with `kill`, through
/// `runner`. A process that ended between listing and signalling makes
/// `kill` fail; only processes still alive make it an error.
pub fn kill(runner: &dyn CommandRunner, signal: &str, pids: &[u32]) -> Result<(), BackendError> {
    let mut args = vec![format!("-{signal}")];
    args.extend(pids.iter().map(u32::to_string));
    let out = runner
        .run(&CommandSpec {
            program: "kill".to_owned(),
            args,
            env: Vec::new(),
            stdin: None,
            daemon: false,
        })
        .map_err(|e| BackendError::Nvml {
            call: "kill",
            detail: e.to_string(),
        })?;
    if !out.success && pids.iter().any(|p| alive(*p)) {
        return Err(BackendError::Nvml {
            call: "kill",
            detail: format!("kill -{signal} {pids:?} failed: {}", out.stderr.trim()),
        });
    }
    Ok(())
}

/// What stopping did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StopReport {
    /// Processes that exited after SIGTERM.
    pub terminated: usize,
    /// Processes that needed SIGKILL.
    pub killed: usize,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::backend::nvml::mps::SystemRunner;
    use std::process::{Child, Command};

    fn stopper(grace_ms: u64) -> ProcessStopper {
        ProcessStopper::new(
            Box::new(SystemRunner::default()),
            Duration::from_millis(grace_ms),
        )
    }

    fn spawn(script: &str) -> Child {
        let child = Command::new("sh").arg("-c").arg(script).spawn().unwrap();
        // Let the shell install its trap before it is signalled.
        std::thread::sleep(Duration::from_millis(200));
        child
    }

    #[test]
    fn a_process_that_exits_on_sigterm_is_not_killed() {
        let mut child = spawn("exec sleep 30");
        let report = stopper(5_000).stop(&[child.id()]).unwrap();
        assert_eq!(
            report,
            StopReport {
                terminated: 1,
                killed: 0
            }
        );
        let status = child.wait().unwrap();
        assert!(!status.success(), "ended by a signal: {status:?}");
        assert!(!alive(child.id()));
    }

    #[test]
    fn a_process_that_ignores_sigterm_is_killed_after_the_grace_period() {
        let mut child = spawn("trap '' TERM; while true; do sleep 0.05; done");
        let started = Instant::now();
        let report = stopper(500).stop(&[child.id()]).unwrap();
        assert_eq!(
            report,
            StopReport {
                terminated: 0,
                killed: 1
            }
        );
        assert!(
            started.elapsed() >= Duration::from_millis(500),
            "the grace period was given"
        );
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(child.wait().unwrap().signal(), Some(9));
    }

    #[test]
    fn a_process_is_known_by_the_allocation_in_its_environment() {
        let mut tagged = Command::new("sleep")
            .arg("30")
            .env("TESSERA_ALLOCATION", "42")
            .spawn()
            .unwrap();
        let mut plain = Command::new("sleep")
            .arg("30")
            .env_remove("TESSERA_ALLOCATION")
            .spawn()
            .unwrap();
        assert_eq!(allocation_of(tagged.id()), Some(AllocationId::new(42)));
        assert_eq!(allocation_of(plain.id()), None);
        for c in [&mut tagged, &mut plain] {
            c.kill().unwrap();
            c.wait().unwrap();
        }
        assert_eq!(allocation_of(tagged.id()), None, "gone");
    }

    #[test]
    fn processes_already_gone_need_nothing() {
        let mut child = spawn("exit 0");
        child.wait().unwrap();
        assert_eq!(
            stopper(100).stop(&[child.id(), 4_000_000]).unwrap(),
            StopReport::default()
        );
    }

    #[test]
    fn one_of_several_ignoring_sigterm_is_the_only_one_killed() {
        let mut polite = spawn("exec sleep 30");
        let mut stubborn = spawn("trap '' TERM; while true; do sleep 0.05; done");
        let report = stopper(300).stop(&[polite.id(), stubborn.id()]).unwrap();
        assert_eq!(
            report,
            StopReport {
                terminated: 1,
                killed: 1
            }
        );
        polite.wait().unwrap();
        stubborn.wait().unwrap();
    }
}
