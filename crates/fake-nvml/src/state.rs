//! The simulated host behind the library, loaded at `nvmlInit` and kept
//! for the life of the process (and in `TESSERA_FAKE_NVML_STATE` across
//! processes).

use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use tessera_core::health::HealthSignals;
use tessera_sim_host::{HealthFile, HostState, SavedState, SimHost};

/// The fake driver's state.
pub struct Fake {
    pub host: SimHost,
    pub state: HostState,
    /// Where `health_file` is, resolved.
    health_path: Option<PathBuf>,
    state_path: Option<PathBuf>,
    processes_path: Option<PathBuf>,
    /// Per GPU: a MIG mode set but not active yet (`nvmlDeviceGetMigMode`'s
    /// pending mode).
    pub pending_mig: Vec<Option<bool>>,
    /// `nvmlInit` calls not yet matched by `nvmlShutdown`.
    pub inits: u32,
}

static FAKE: Mutex<Option<Fake>> = Mutex::new(None);

/// The state, loaded or not.
pub fn lock() -> MutexGuard<'static, Option<Fake>> {
    FAKE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One process on a GPU, from `TESSERA_FAKE_NVML_PROCESSES`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    pub gpu: u32,
    /// The GPU instance it runs in (by start memory slice), with MIG on.
    #[serde(default)]
    pub gi_start: Option<u8>,
    /// Framebuffer memory it holds, MiB.
    #[serde(default)]
    pub used_mib: u64,
    /// An MPS client (listed by `nvmlDeviceGetMPSComputeRunningProcesses`).
    #[serde(default)]
    pub mps: bool,
    /// Its SM utilisation, percent of the GPU (`nvmlDeviceGetProcessUtilization`);
    /// by default the GPU's, split evenly over its processes.
    #[serde(default)]
    pub sm_util: Option<u8>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProcessFile {
    #[serde(default)]
    process: Vec<Process>,
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

impl Fake {
    /// Loads the host from the environment.
    pub fn load() -> Result<Self, String> {
        let host_path = std::env::var_os("TESSERA_FAKE_NVML_HOST")
            .map(PathBuf::from)
            .ok_or("TESSERA_FAKE_NVML_HOST is not set")?;
        let text = std::fs::read_to_string(&host_path)
            .map_err(|e| format!("{}: {e}", host_path.display()))?;
        let host: SimHost =
            toml::from_str(&text).map_err(|e| format!("{}: {e}", host_path.display()))?;
        let mut state = HostState::new(&host)?;
        let state_path = std::env::var_os("TESSERA_FAKE_NVML_STATE").map(PathBuf::from);
        if let Some(path) = &state_path {
            match std::fs::read_to_string(path) {
                Ok(text) => {
                    let saved: SavedState = serde_json::from_str(&text)
                        .map_err(|e| format!("{}: {e}", path.display()))?;
                    state.restore(saved)?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("{}: {e}", path.display())),
            }
        }
        let health_path = host.health_file.as_ref().map(|f| {
            host_path
                .parent()
                .map_or_else(|| f.clone(), |dir| dir.join(f))
        });
        let gpus = state.reports().len();
        Ok(Self {
            host,
            state,
            health_path,
            state_path,
            processes_path: std::env::var_os("TESSERA_FAKE_NVML_PROCESSES").map(PathBuf::from),
            pending_mig: vec![None; gpus],
            inits: 0,
        })
    }

    /// Keeps the GPUs' state for the next process (best effort: a state
    /// that cannot be written is the next process's fresh start).
    pub fn save(&self) {
        if let Some(path) = &self.state_path {
            if let Ok(json) = serde_json::to_string(&self.state.save()) {
                let tmp = path.with_extension("tmp");
                if std::fs::write(&tmp, json).is_ok() {
                    let _ = std::fs::rename(&tmp, path);
                }
            }
        }
    }

    /// GPU `index`'s injected hardware faults.
    pub fn health(&self, index: u32) -> HealthSignals {
        let Some(path) = &self.health_path else {
            return HealthSignals::default();
        };
        read_toml::<HealthFile>(path)
            .unwrap_or_default()
            .gpu
            .into_iter()
            .find(|g| g.index == index)
            .map(|g| g.signals)
            .unwrap_or_default()
    }

    /// The live processes on GPU `gpu`.
    pub fn processes(&self, gpu: u32) -> Vec<Process> {
        let Some(path) = &self.processes_path else {
            return Vec::new();
        };
        read_toml::<ProcessFile>(path)
            .unwrap_or_default()
            .process
            .into_iter()
            .filter(|p| p.gpu == gpu && alive(p.pid))
            .collect()
    }

    /// The number of GPUs.
    pub fn count(&self) -> u32 {
        self.state.reports().len() as u32
    }

    /// The clock the load follows, ms since the epoch.
    pub fn now_ms(&self) -> i64 {
        if let Some(fixed) = std::env::var("TESSERA_FAKE_NVML_CLOCK_MS")
            .ok()
            .and_then(|v| v.parse().ok())
        {
            return fixed;
        }
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0)
    }
}

fn read_toml<T: for<'de> Deserialize<'de> + Default>(path: &Path) -> Option<T> {
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text).ok(),
        Err(_) => Some(T::default()),
    }
}
