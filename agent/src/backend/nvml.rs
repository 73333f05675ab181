//! The real thing: NVML through `nvml-wrapper`. The library is loaded at run
//! time, so the agent starts (and says clearly what is missing) on a machine
//! without the NVIDIA driver.

use super::{BackendError, GpuBackend, Inventory};
use nvml_wrapper::Nvml;
use tessera_core::plan::{GpuObserved, Op};
use tessera_protocol::agent::GpuReport;

/// GPUs as NVML reports them.
pub struct NvmlBackend {
    nvml: Nvml,
}

impl NvmlBackend {
    /// Loads and initialises NVML.
    pub fn init() -> Result<Self, BackendError> {
        let nvml = Nvml::init().map_err(|e| BackendError::NvmlUnavailable(e.to_string()))?;
        Ok(Self { nvml })
    }
}

fn call<T>(
    name: &'static str,
    r: Result<T, nvml_wrapper::error::NvmlError>,
) -> Result<T, BackendError> {
    r.map_err(|e| BackendError::Nvml {
        call: name,
        detail: e.to_string(),
    })
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
            let dev = call(
                "nvmlDeviceGetHandleByIndex",
                self.nvml.device_by_index(index),
            )?;
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
            gpus.push(GpuReport {
                index,
                uuid: call("nvmlDeviceGetUUID", dev.uuid())?,
                name: call("nvmlDeviceGetName", dev.name())?,
                memory_mib: memory.total / (1024 * 1024),
                mig_capable,
                mig_enabled,
                nvlink_peers,
                health: "healthy".to_owned(),
                sharing: None,
                // MIG device enumeration comes with MIG support in this backend.
                mig_devices: Vec::new(),
            });
        }
        Ok(Inventory {
            cpu_milli: host_facts::cpu_milli(),
            memory_mib: host_facts::memory_mib(),
            driver_version: self.nvml.sys_driver_version().ok(),
            gpus,
        })
    }

    fn observe(&self, _index: u32) -> Result<GpuObserved, BackendError> {
        Err(BackendError::Unsupported {
            backend: "nvml",
            what: "read GPU instances",
        })
    }

    fn apply(&self, _index: u32, _op: &Op) -> Result<(), BackendError> {
        Err(BackendError::Unsupported {
            backend: "nvml",
            what: "change MIG, MPS or time-slicing settings",
        })
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
