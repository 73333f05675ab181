//! The real thing: NVML through `nvml-wrapper`. The library is loaded at run
//! time, so the agent starts (and says clearly what is missing) on a machine
//! without the NVIDIA driver.
//!
//! - MIG: raw NVML calls (`raw`, the only `unsafe` code), driven by the logic
//!   in `mig` over the [`mig::MigDriver`] trait;
//! - telemetry: `telemetry`, with per-MIG-instance activity from GPM
//!   (`gpm`, over the [`gpm::GpmDriver`] trait);
//! - MPS: one `nvidia-cuda-mps-control` daemon per GPU (`mps`);
//! - time-slicing: the NVIDIA device plugin's sharing config, written to the
//!   file given with `--device-plugin-config` (`time_slicing`).
//!
//! Calls block; the agent runs them off the async runtime.

pub mod gpm;
pub mod health;
pub mod mig;
pub mod mps;
pub mod profiles;
mod raw;
mod sharing;
pub mod stop;
mod telemetry;
pub mod time_slicing;

#[cfg(test)]
mod tests;

pub use sharing::{GpuFacts, Sharing};

use super::{BackendError, GpuBackend, Inventory};
use mps::{SystemRunner, MPS_LOG_ROOT};
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use raw::NvmlGpu;
use std::path::PathBuf;
use tessera_core::catalogue;
use tessera_core::plan::{GpuObserved, MpsClient, Op};
use tessera_core::slice::MPS_PIPE_ROOT;
use tessera_protocol::agent::{GpuReport, ProcessesStopped};

/// How the NVML backend shares GPUs beyond MIG.
#[derive(Debug, Clone)]
pub struct NvmlOptions {
    /// The NVIDIA device plugin's config file, where time-slicing replicas
    /// are written (`--device-plugin-config`); without it, time-slicing
    /// cannot be set.
    pub device_plugin_config: Option<PathBuf>,
    /// The device plugin's process name, told (SIGHUP) to read the config
    /// again after the agent changed it.
    pub device_plugin_process: String,
    /// Time a released slice's processes get between SIGTERM and SIGKILL.
    pub stop_grace: std::time::Duration,
    /// The NVML library to load instead of the system's `libnvidia-ml.so.1`
    /// (the fake library in tests).
    pub library: Option<PathBuf>,
    /// The MPS control program (`nvidia-cuda-mps-control`, or a fake).
    pub mps_control: String,
    /// Where the MPS daemons' pipe directories live, one per GPU UUID; it
    /// must be what slices tell their clients (`CUDA_MPS_PIPE_DIRECTORY`).
    pub mps_pipe_root: PathBuf,
}

impl Default for NvmlOptions {
    fn default() -> Self {
        Self {
            device_plugin_config: None,
            device_plugin_process: time_slicing::DEVICE_PLUGIN_PROCESS.to_owned(),
            stop_grace: std::time::Duration::from_secs(30),
            library: None,
            mps_control: mps::MPS_CONTROL.to_owned(),
            mps_pipe_root: PathBuf::from(MPS_PIPE_ROOT),
        }
    }
}

/// Loads and initialises NVML from `library`, or the system's.
pub fn load_nvml(library: Option<&std::path::Path>) -> Result<Nvml, NvmlError> {
    match library {
        Some(path) => Nvml::builder().lib_path(path.as_os_str()).init(),
        None => Nvml::init(),
    }
}

/// GPUs as NVML reports them.
pub struct NvmlBackend {
    /// GPM samples of the MIG devices from the last telemetry round. Before
    /// `nvml`: fields drop in order, and the samples are freed through the
    /// library, which must still be loaded then.
    gpm: gpm::GpmTracker<raw::GpmSample>,
    /// The newest per-process utilisation sample read, per GPU.
    process_seen: telemetry::ProcessSeen,
    nvml: Nvml,
    sharing: Sharing,
    xids: std::sync::Arc<health::XidLog>,
    /// Each GPU as last read, reported again (marked lost) when the GPU
    /// falls off the bus and can no longer be read.
    last_read: std::sync::Mutex<std::collections::BTreeMap<u32, GpuReport>>,
}

/// Why NVML could not start, in words an operator can act on.
fn unavailable(e: NvmlError) -> BackendError {
    let detail = match e {
        NvmlError::LibloadingError(e) => {
            format!("cannot load the NVML library (libnvidia-ml.so.1): {e}")
        }
        NvmlError::LibraryNotFound => {
            "the NVML library (libnvidia-ml.so.1) was not found".to_owned()
        }
        NvmlError::DriverNotLoaded => "the NVIDIA kernel driver is not loaded".to_owned(),
        NvmlError::NoPermission => {
            "no permission to use the NVIDIA driver (run the agent as root)".to_owned()
        }
        other => other.to_string(),
    };
    BackendError::NvmlUnavailable(detail)
}

impl NvmlBackend {
    /// Loads and initialises NVML.
    pub fn init(options: NvmlOptions) -> Result<Self, BackendError> {
        let nvml = load_nvml(options.library.as_deref()).map_err(unavailable)?;
        Ok(Self {
            gpm: gpm::GpmTracker::default(),
            process_seen: telemetry::ProcessSeen::default(),
            nvml,
            xids: health::XidLog::start(options.library.clone()),
            last_read: std::sync::Mutex::new(std::collections::BTreeMap::new()),
            sharing: Sharing::new(
                Box::new(SystemRunner::default()),
                options.mps_pipe_root,
                PathBuf::from(MPS_LOG_ROOT),
                options.device_plugin_config,
                time_slicing::DevicePlugin::new(
                    options.device_plugin_process,
                    Box::new(SystemRunner::default()),
                ),
                stop::ProcessStopper::new(Box::new(SystemRunner::default()), options.stop_grace),
            )
            .with_mps_program(options.mps_control),
        })
    }

    /// GPU `index` and the facts about it the sharing logic needs.
    fn gpu(&self, index: u32) -> Result<(NvmlGpu<'_>, GpuFacts), BackendError> {
        let dev = match self.nvml.device_by_index(index) {
            Ok(d) => d,
            Err(NvmlError::InvalidArg | NvmlError::NotFound) => {
                return Err(BackendError::NoSuchGpu(index))
            }
            Err(e) => return Err(call_err("nvmlDeviceGetHandleByIndex", e)),
        };
        let uuid = call("nvmlDeviceGetUUID", dev.uuid())?;
        let name = call("nvmlDeviceGetName", dev.name())?;
        let memory_mib = call("nvmlDeviceGetMemoryInfo", dev.memory_info())?.total / (1024 * 1024);
        let facts = GpuFacts {
            model: catalogue::lookup(&name, memory_mib),
            uuid,
            memory_mib,
        };
        Ok((NvmlGpu::new(dev), facts))
    }
}

fn call_err(name: &'static str, e: NvmlError) -> BackendError {
    BackendError::Nvml {
        call: name,
        detail: e.to_string(),
    }
}

fn call<T>(
    name: &'static str,
    r: Result<T, nvml_wrapper::error::NvmlError>,
) -> Result<T, BackendError> {
    r.map_err(|e| call_err(name, e))
}

impl GpuBackend for NvmlBackend {
    fn name(&self) -> &'static str {
        "nvml"
    }

    fn hostname(&self) -> String {
        host_facts::hostname()
    }

    fn inventory(&self) -> Result<Inventory, BackendError> {
        let count = call("nvmlDeviceGetCount", self.nvml.device_count())?;
        let mut gpus = Vec::new();
        for index in 0..count {
            let dev = match self.nvml.device_by_index(index) {
                Ok(d) => d,
                Err(NvmlError::GpuLost) => {
                    // Fallen off the bus: report it as it was, lost.
                    let last = self
                        .last_read
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .get(&index)
                        .cloned();
                    match last {
                        Some(mut g) => {
                            g.health.lost = true;
                            g.sharing = None;
                            g.mig_devices = Vec::new();
                            gpus.push(g);
                            continue;
                        }
                        // Lost before it was ever read: nothing to report it
                        // by (not even its UUID); the other GPUs still count.
                        None => {
                            tracing::warn!(gpu = index, "GPU is lost (NVML_ERROR_GPU_IS_LOST) and was never read; left out of the report");
                            continue;
                        }
                    }
                }
                Err(e) => return Err(call_err("nvmlDeviceGetHandleByIndex", e)),
            };
            let memory = call("nvmlDeviceGetMemoryInfo", dev.memory_info())?;
            // Not all GPUs support MIG; NotSupported means "not MIG-capable".
            let (mig_capable, mig_enabled) = match dev.mig_mode() {
                Ok(mode) => (true, mode.current == 1),
                Err(_) => (false, false),
            };
            let mut nvlink_peers = Vec::new();
            for link in 0..18u32 {
                let l = dev.link_wrapper_for(link);
                if l.is_active().unwrap_or(false) {
                    if let Ok(pci) = l.remote_pci_info() {
                        for peer in 0..count {
                            if peer == index {
                                continue;
                            }
                            let same = self
                                .nvml
                                .device_by_index(peer)
                                .and_then(|d| d.pci_info())
                                .map(|p| p.bus_id == pci.bus_id)
                                .unwrap_or(false);
                            if same && !nvlink_peers.contains(&peer) {
                                nvlink_peers.push(peer);
                            }
                        }
                    }
                }
            }
            // The sharing state is extra: a GPU whose state cannot be read is
            // still reported.
            let (sharing, mig_devices) = match self
                .gpu(index)
                .and_then(|(d, facts)| self.sharing.observe(&d, &facts))
            {
                Ok((observed, devices)) => (Some(observed), devices),
                Err(e) => {
                    tracing::warn!(gpu = index, "cannot read the sharing state: {e}");
                    (None, Vec::new())
                }
            };
            let uuid = call("nvmlDeviceGetUUID", dev.uuid())?;
            let remapped = NvmlGpu::new(
                self.nvml
                    .device_by_index(index)
                    .map_err(|e| call_err("nvmlDeviceGetHandleByIndex", e))?,
            )
            .remapped_rows()
            .unwrap_or_else(|e| {
                tracing::warn!(gpu = index, "cannot read remapped rows: {e}");
                None
            });
            let report = GpuReport {
                index,
                health: health::signals(&dev, self.xids.of(&uuid), remapped),
                uuid,
                name: call("nvmlDeviceGetName", dev.name())?,
                memory_mib: memory.total / (1024 * 1024),
                mig_capable,
                mig_enabled,
                nvlink_peers,
                sharing,
                mig_devices,
            };
            self.last_read
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(index, report.clone());
            gpus.push(report);
        }
        Ok(Inventory {
            cpu_milli: host_facts::cpu_milli(),
            memory_mib: host_facts::memory_mib(),
            driver_version: self.nvml.sys_driver_version().ok(),
            gpus,
        })
    }

    fn observe(&self, index: u32) -> Result<GpuObserved, BackendError> {
        let (d, facts) = self.gpu(index)?;
        Ok(self.sharing.observe(&d, &facts)?.0)
    }

    fn mps_clients(&self, index: u32) -> Result<Vec<MpsClient>, BackendError> {
        let (_, facts) = self.gpu(index)?;
        self.sharing.mps.clients(&facts.uuid)
    }

    fn stop_mps_client(&self, index: u32, client: &MpsClient) -> Result<(), BackendError> {
        let (_, facts) = self.gpu(index)?;
        self.sharing
            .mps
            .terminate_client(&facts.uuid, client.server, client.pid)?;
        let report =
            self.sharing
                .stopper
                .stop(&[client.pid])
                .map_err(|e| BackendError::Refused {
                    index,
                    op: "stop_mps_client",
                    detail: format!("could not stop MPS client {}: {e}", client.pid),
                })?;
        tracing::warn!(
            gpu = index,
            pid = client.pid,
            killed = report.killed,
            "stopped an MPS client that does not keep to its grant"
        );
        Ok(())
    }

    fn apply(&self, index: u32, op: &Op) -> Result<Option<ProcessesStopped>, BackendError> {
        let (d, facts) = self.gpu(index)?;
        self.sharing.apply(&d, &facts, index, op)
    }

    fn sample(
        &self,
        _at_ms: i64,
        _held: &std::collections::BTreeSet<u32>,
    ) -> Result<Vec<tessera_protocol::agent::GpuSample>, BackendError> {
        let count = call("nvmlDeviceGetCount", self.nvml.device_count())?;
        let mut out = Vec::new();
        for index in 0..count {
            match telemetry::sample_gpu(&self.nvml, &self.gpm, &self.process_seen, index) {
                Ok(s) => out.push(s),
                // A lost or failing GPU misses this round; the others count.
                Err(e) => tracing::debug!(gpu = index, "no telemetry: {e}"),
            }
        }
        Ok(out)
    }
}

/// Facts about the machine the agent runs on.
pub mod host_facts {
    /// The kernel's host name.
    pub fn hostname() -> String {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_owned())
            .ok()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "localhost".to_owned())
    }

    /// Logical CPUs in thousandths.
    pub fn cpu_milli() -> u64 {
        std::thread::available_parallelism()
            .map(|n| n.get() as u64)
            .unwrap_or(1)
            * 1000
    }

    /// Total memory in MiB, from /proc/meminfo.
    pub fn memory_mib() -> u64 {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("MemTotal:"))
                    .and_then(|l| l.split_whitespace().nth(1))
                    .and_then(|kb| kb.parse::<u64>().ok())
            })
            .map(|kb| kb / 1024)
            .unwrap_or(1)
    }
}
