//! Simulated GPU hosts, described in a small TOML file:
//!
//! ```toml
//! hostname = "gpu-h100-01"
//! cpu_cores = 96
//! memory_gib = 1024
//!
//! [[gpus]]
//! model = "H100-80GB"
//! count = 8
//! mig_enabled = true
//! nvlink_groups = [[0, 1, 2, 3], [4, 5, 6, 7]]
//! ```
//!
//! Models come from `tessera_core::catalogue`; an unknown model is a generic GPU
//! with `memory_gib` of memory.
//!
//! Hardware faults are injected at run time through `health_file` (a path,
//! relative to the host file), read at every report; a missing file means a
//! healthy host:
//!
//! ```toml
//! [[gpu]]
//! index = 3
//! lost = true                      # fallen off the bus: every call fails
//! xids = [{ xid = 79, count = 1 }]
//! ecc_uncorrected = 2
//! retired_pages_pending = true
//! remapped_rows_pending = true
//! remap_failure = false
//! throttle = ["hw_thermal_slowdown"]
//! ```
//!
//! A lost GPU fails the way the hardware does: it is still listed (with the
//! facts read before it was lost), but reading or changing its state fails
//! with `NVML_ERROR_GPU_IS_LOST`, and it has no telemetry.
//!
//! Telemetry follows `workload` (see `tessera_core::telemetry::WorkloadProfile`):
//! each MIG device, and each GPU a slice holds whole or shared, runs that
//! profile seeded by its UUID; a GPU with MIG on is as busy as its
//! instances, weighted by their compute slices; a free GPU idles.

use super::{op_name, BackendError, GpuBackend, Inventory};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use tessera_core::catalogue;
use tessera_core::health::HealthSignals;
use tessera_core::mig::MigPlacement;
use tessera_core::plan::{
    plan, ComputeInstance, DesiredInstance, GpuDesired, GpuObserved, Op, SimGpu,
};
use tessera_core::telemetry::seed_of;
use tessera_protocol::agent::{GpuReport, GpuSample, InstanceSample, MigDevice};

/// One simulated host file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimHost {
    /// Host name.
    pub hostname: String,
    /// CPU cores.
    pub cpu_cores: u64,
    /// Host memory in GiB.
    pub memory_gib: u64,
    /// Driver version to report.
    #[serde(default = "default_driver")]
    pub driver_version: String,
    /// GPU groups.
    pub gpus: Vec<SimGpus>,
    /// Driver misbehaviour to simulate, for testing failure paths.
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// A file of GPU hardware faults, read at every report (see the module
    /// documentation); relative to the host file.
    #[serde(default)]
    pub health_file: Option<std::path::PathBuf>,
    /// The load slices on this host run (`idle`, `notebook`, `training`,
    /// `inference`; default `notebook`): what telemetry reports for each MIG
    /// device and each GPU a slice holds, reproducibly per device.
    #[serde(default)]
    pub workload: tessera_core::telemetry::WorkloadProfile,
}

/// The `health_file`: what is wrong with which GPU.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HealthFile {
    #[serde(default)]
    gpu: Vec<GpuFault>,
}

/// One GPU's hardware faults.
#[derive(Debug, Clone, Deserialize)]
struct GpuFault {
    index: u32,
    #[serde(flatten)]
    signals: HealthSignals,
}

/// The error NVML gives for every call on a GPU that fell off the bus.
const GPU_IS_LOST: &str = "GPU is lost (NVML_ERROR_GPU_IS_LOST)";

/// A simulated driver fault: an operation that fails or hangs.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// Operation name, e.g. `create_gpu_instance` (see `op_name`).
    pub op: String,
    /// Only on this GPU (all GPUs when absent).
    #[serde(default)]
    pub gpu: Option<u32>,
    /// `fail` or `hang`.
    pub action: FaultAction,
    /// For `hang`: how long, in milliseconds, before the operation goes on.
    #[serde(default)]
    pub hang_ms: u64,
    /// How many times the fault fires (forever when absent).
    #[serde(default)]
    pub times: Option<u32>,
}

/// What a fault does.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FaultAction {
    /// The driver refuses the operation.
    Fail,
    /// The driver takes `hang_ms` before doing it.
    Hang,
}

fn default_driver() -> String {
    "550.90.07 (simulated)".to_owned()
}

/// A group of identical GPUs.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimGpus {
    /// Catalogue model name.
    pub model: String,
    /// How many.
    pub count: u32,
    /// Memory for models the catalogue does not know.
    #[serde(default)]
    pub memory_gib: Option<u64>,
    /// Start with MIG mode on (MIG-capable models only).
    #[serde(default)]
    pub mig_enabled: bool,
    /// NVLink islands, as GPU indices within this group.
    #[serde(default)]
    pub nvlink_groups: Vec<Vec<u32>>,
    /// MIG instances each GPU of the group starts with, as `profile@start`
    /// (e.g. `"3g.40gb@0"`); needs `mig_enabled`.
    #[serde(default)]
    pub instances: Vec<String>,
}

/// The desired state for a starting layout of `profile@start` entries.
fn starting_layout(model: &catalogue::GpuModel, entries: &[String]) -> Result<GpuDesired, String> {
    let spec = model
        .mig
        .ok_or_else(|| format!("{} does not support MIG", model.name))?;
    let mut instances = Vec::new();
    for e in entries {
        let (profile, start) = e
            .split_once('@')
            .and_then(|(p, s)| s.parse::<u8>().ok().map(|s| (p, s)))
            .ok_or_else(|| format!("'{e}' is not profile@start, e.g. 3g.40gb@0"))?;
        let p = spec
            .profile(profile)
            .ok_or_else(|| format!("{} has no MIG profile '{profile}'", model.name))?;
        instances.push(DesiredInstance {
            placement: MigPlacement::new(p.name, start),
            compute_instances: vec![ComputeInstance::whole(p.compute_slices)],
        });
    }
    Ok(GpuDesired {
        mig_enabled: true,
        instances,
        ..GpuDesired::default()
    })
}

/// A simulated host: inventory plus a faithful driver model per GPU.
#[derive(Debug)]
pub struct SimBackend {
    host: SimHost,
    gpus: Vec<GpuReport>,
    driver: Mutex<Driver>,
    /// Where `health_file` is, resolved.
    health_path: Option<std::path::PathBuf>,
}

#[derive(Debug)]
struct Driver {
    hostname: String,
    gpus: Vec<SimGpu>,
    faults: Vec<Fault>,
    /// Per GPU: the UUID of each GPU instance, by start memory slice.
    mig_uuids: Vec<BTreeMap<u8, String>>,
    /// GPU instances created so far on this host: part of each new UUID, so a
    /// re-created instance gets a new one, as with the real driver.
    created: u64,
}

impl SimBackend {
    /// Reads and checks a host file.
    pub fn from_file(path: &Path) -> Result<Self, BackendError> {
        let err = |message: String| BackendError::SimConfig {
            path: path.display().to_string(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let host: SimHost = toml::from_str(&text).map_err(|e| err(e.to_string()))?;
        let mut sim = Self::new(host).map_err(err)?;
        sim.health_path = sim
            .host
            .health_file
            .as_ref()
            .map(|f| path.parent().map_or_else(|| f.clone(), |dir| dir.join(f)));
        Ok(sim)
    }

    /// Builds the simulated GPUs, rejecting what no real host could have.
    pub fn new(host: SimHost) -> Result<Self, String> {
        if host.cpu_cores == 0 || host.memory_gib == 0 {
            return Err("cpu_cores and memory_gib must be greater than 0".to_owned());
        }
        let mut gpus = Vec::new();
        for (g, group) in host.gpus.iter().enumerate() {
            let reported = group.memory_gib.unwrap_or(0) * 1024;
            let model = catalogue::lookup(&group.model, reported);
            if model.generic && group.memory_gib.is_none() {
                return Err(format!(
                    "gpus[{g}].model '{}' is not in the catalogue; add memory_gib for it",
                    group.model
                ));
            }
            if group.mig_enabled && model.mig.is_none() {
                return Err(format!("gpus[{g}]: {} does not support MIG", group.model));
            }
            let base = gpus.len() as u32;
            for i in 0..group.count {
                let peers = group
                    .nvlink_groups
                    .iter()
                    .find(|island| island.contains(&i))
                    .map(|island| {
                        island
                            .iter()
                            .filter(|p| **p != i)
                            .map(|p| base + p)
                            .collect()
                    })
                    .unwrap_or_default();
                gpus.push(GpuReport {
                    index: base + i,
                    uuid: sim_uuid(&host.hostname, base + i),
                    name: if model.generic {
                        group.model.clone()
                    } else {
                        model.name.to_owned()
                    },
                    memory_mib: if model.generic {
                        reported
                    } else {
                        model.memory_mib
                    },
                    mig_capable: model.mig.is_some(),
                    mig_enabled: group.mig_enabled,
                    nvlink_peers: peers,
                    health: HealthSignals::default(),
                    sharing: None,
                    mig_devices: Vec::new(),
                });
            }
            for island in &group.nvlink_groups {
                if let Some(bad) = island.iter().find(|p| **p >= group.count) {
                    return Err(format!(
                        "gpus[{g}].nvlink_groups: GPU {bad} does not exist in a group of {}",
                        group.count
                    ));
                }
            }
        }
        let mut layouts = Vec::with_capacity(gpus.len());
        for (g, group) in host.gpus.iter().enumerate() {
            if !group.instances.is_empty() && !group.mig_enabled {
                return Err(format!("gpus[{g}].instances needs mig_enabled = true"));
            }
            for _ in 0..group.count {
                layouts.push((g, group.instances.as_slice()));
            }
        }
        let mut sims = Vec::with_capacity(gpus.len());
        for (gpu, (g, entries)) in gpus.iter().zip(layouts) {
            let model = catalogue::lookup(&gpu.name, gpu.memory_mib);
            let mut sim = SimGpu::new(model);
            if gpu.mig_enabled {
                let err = |e: String| format!("gpus[{g}].instances: {e}");
                let desired = starting_layout(&model, entries).map_err(err)?;
                let ops = plan(&model, sim.observed(), &desired).map_err(|e| err(e.to_string()))?;
                sim.apply_all(&ops).map_err(|(_, e)| err(e.to_string()))?;
            }
            sims.push(sim);
        }
        let mut driver = Driver {
            hostname: host.hostname.clone(),
            mig_uuids: vec![BTreeMap::new(); sims.len()],
            gpus: sims,
            faults: host.faults.clone(),
            created: 0,
        };
        for index in 0..driver.gpus.len() {
            driver.sync_mig_uuids(index);
        }
        Ok(Self {
            host,
            gpus,
            driver: Mutex::new(driver),
            health_path: None,
        })
    }

    /// The injected hardware faults by GPU index (none when there is no
    /// file; a file that does not parse is reported, not guessed at).
    fn faults_now(&self) -> Result<BTreeMap<u32, HealthSignals>, BackendError> {
        let Some(path) = &self.health_path else {
            return Ok(BTreeMap::new());
        };
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
            Err(e) => {
                return Err(BackendError::SimConfig {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })
            }
        };
        let file: HealthFile = toml::from_str(&text).map_err(|e| BackendError::SimConfig {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        Ok(file.gpu.into_iter().map(|g| (g.index, g.signals)).collect())
    }

    /// Fails like NVML when GPU `index` has fallen off the bus.
    fn check_not_lost(&self, index: u32, call: &'static str) -> Result<(), BackendError> {
        if self.faults_now()?.get(&index).is_some_and(|s| s.lost) {
            return Err(BackendError::Nvml {
                call,
                detail: GPU_IS_LOST.to_owned(),
            });
        }
        Ok(())
    }

    fn driver(&self) -> MutexGuard<'_, Driver> {
        // A panic while holding the lock cannot leave a SimGpu half-changed
        // (its operations are all-or-nothing), so a poisoned lock is usable.
        self.driver
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Simulates a workload starting on GPU `index` (in a GPU instance, or on
    /// the whole GPU), so tests can see what the driver does with busy GPUs.
    #[cfg(test)]
    pub fn start_process(&self, index: u32, gi_start: Option<u8>) -> Result<(), BackendError> {
        let mut driver = self.driver();
        let gpu = driver
            .gpus
            .get_mut(index as usize)
            .ok_or(BackendError::NoSuchGpu(index))?;
        gpu.start_process(gi_start)
            .map_err(|e| BackendError::Refused {
                index,
                op: "start_process",
                detail: e.to_string(),
            })
    }
}

impl Driver {
    /// The first matching fault, used up by one firing.
    fn fire(&mut self, index: u32, op: &str) -> Option<Fault> {
        let pos = self
            .faults
            .iter()
            .position(|f| f.op == op && f.gpu.is_none_or(|g| g == index) && f.times != Some(0))?;
        let fault = self.faults[pos].clone();
        if let Some(n) = self.faults[pos].times.as_mut() {
            *n -= 1;
        }
        Some(fault)
    }

    /// Gives each new GPU instance of GPU `index` a UUID and forgets those of
    /// destroyed ones. Called after every operation, each of which creates or
    /// destroys at most one GPU instance, so a destroy followed by a create at
    /// the same start yields a new UUID.
    fn sync_mig_uuids(&mut self, index: usize) {
        let (Some(gpu), Some(uuids)) = (self.gpus.get(index), self.mig_uuids.get_mut(index)) else {
            return;
        };
        let starts: Vec<u8> = gpu
            .observed()
            .instances
            .iter()
            .map(|i| i.placement.start)
            .collect();
        uuids.retain(|start, _| starts.contains(start));
        for start in starts {
            if let std::collections::btree_map::Entry::Vacant(e) = uuids.entry(start) {
                self.created += 1;
                e.insert(mig_uuid(&self.hostname, index as u32, start, self.created));
            }
        }
    }

    /// The usable MIG devices of GPU `index`: GPU instances with a compute
    /// instance (CUDA cannot run in a GPU instance without one).
    fn mig_devices(&self, index: usize) -> Vec<MigDevice> {
        let (Some(gpu), Some(uuids)) = (self.gpus.get(index), self.mig_uuids.get(index)) else {
            return Vec::new();
        };
        let mut devices: Vec<MigDevice> = gpu
            .observed()
            .instances
            .iter()
            .filter(|i| !i.compute_instances.is_empty())
            .filter_map(|i| {
                uuids.get(&i.placement.start).map(|uuid| MigDevice {
                    gi_start: i.placement.start,
                    profile: i.placement.profile.clone(),
                    uuid: uuid.clone(),
                })
            })
            .collect();
        devices.sort_by_key(|d| d.gi_start);
        devices
    }
}

/// A simulated MIG device UUID, unique per host, GPU, start and creation.
fn mig_uuid(hostname: &str, index: u32, gi_start: u8, creation: u64) -> String {
    let h = hex::encode(Sha256::digest(
        format!("{hostname}/{index}/mig/{gi_start}/{creation}").as_bytes(),
    ));
    format!(
        "MIG-{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

/// A stable UUID for a simulated GPU (same host and index, same UUID).
pub fn sim_uuid(hostname: &str, index: u32) -> String {
    let h = hex::encode(Sha256::digest(format!("{hostname}/{index}").as_bytes()));
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

impl GpuBackend for SimBackend {
    fn name(&self) -> &'static str {
        "simulated"
    }

    fn hostname(&self) -> String {
        self.host.hostname.clone()
    }

    fn inventory(&self) -> Result<Inventory, BackendError> {
        let faults = self.faults_now()?;
        let driver = self.driver();
        let gpus = self
            .gpus
            .iter()
            .zip(&driver.gpus)
            .enumerate()
            .map(|(i, (g, sim))| {
                let health = faults.get(&g.index).cloned().unwrap_or_default();
                if health.lost {
                    // Only what was read before the GPU was lost.
                    return GpuReport {
                        health,
                        ..g.clone()
                    };
                }
                GpuReport {
                    mig_enabled: sim.observed().mig_enabled,
                    sharing: Some(sim.observed().clone()),
                    mig_devices: driver.mig_devices(i),
                    health,
                    ..g.clone()
                }
            })
            .collect();
        Ok(Inventory {
            cpu_milli: self.host.cpu_cores * 1000,
            memory_mib: self.host.memory_gib * 1024,
            driver_version: Some(self.host.driver_version.clone()),
            gpus,
        })
    }

    fn observe(&self, index: u32) -> Result<GpuObserved, BackendError> {
        self.check_not_lost(index, "nvmlDeviceGetHandleByIndex")?;
        let driver = self.driver();
        let gpu = driver
            .gpus
            .get(index as usize)
            .ok_or(BackendError::NoSuchGpu(index))?;
        Ok(gpu.observed().clone())
    }

    fn apply(&self, index: u32, op: &Op) -> Result<(), BackendError> {
        let name = op_name(op);
        self.check_not_lost(index, "nvmlDeviceGetHandleByIndex")?;
        let fault = self.driver().fire(index, name);
        match fault {
            Some(Fault {
                action: FaultAction::Fail,
                ..
            }) => {
                return Err(BackendError::Refused {
                    index,
                    op: name,
                    detail: "injected fault".to_owned(),
                })
            }
            // Sleep without holding the lock, like a driver call that blocks.
            Some(Fault {
                action: FaultAction::Hang,
                hang_ms,
                ..
            }) => {
                std::thread::sleep(std::time::Duration::from_millis(hang_ms));
            }
            None => {}
        }
        let mut driver = self.driver();
        let gpu = driver
            .gpus
            .get_mut(index as usize)
            .ok_or(BackendError::NoSuchGpu(index))?;
        gpu.apply(op).map_err(|e| BackendError::Refused {
            index,
            op: name,
            detail: e.to_string(),
        })?;
        driver.sync_mig_uuids(index as usize);
        Ok(())
    }

    fn sample(
        &self,
        at_ms: i64,
        held: &std::collections::BTreeSet<u32>,
    ) -> Result<Vec<GpuSample>, BackendError> {
        let faults = self.faults_now()?;
        let driver = self.driver();
        let profile = self.host.workload;
        let mut out = Vec::with_capacity(self.gpus.len());
        for (i, (g, sim)) in self.gpus.iter().zip(&driver.gpus).enumerate() {
            if faults.get(&g.index).is_some_and(|f| f.lost) {
                continue;
            }
            let model = catalogue::lookup(&g.name, g.memory_mib);
            let mut instances = Vec::new();
            let (util_pct, mem_used_mib) = if sim.observed().mig_enabled {
                // A MIG GPU is as busy as its instances, by compute slices.
                let mut weighted = 0u64;
                let mut mem = 0u64;
                for d in driver.mig_devices(i) {
                    let Some(p) = model.mig.and_then(|spec| spec.profile(&d.profile)) else {
                        continue;
                    };
                    let seed = seed_of(&d.uuid);
                    let util = profile.utilisation_pct(seed, at_ms);
                    let used = profile.memory_used_mib(seed, at_ms, p.memory_mib);
                    weighted += u64::from(util) * u64::from(p.compute_slices);
                    mem += used;
                    instances.push(InstanceSample {
                        uuid: d.uuid,
                        util_pct: Some(util),
                        mem_used_mib: used,
                    });
                }
                (u8::try_from(weighted / 7).unwrap_or(100), mem)
            } else if held.contains(&g.index) {
                let seed = seed_of(&g.uuid);
                (
                    profile.utilisation_pct(seed, at_ms),
                    profile.memory_used_mib(seed, at_ms, g.memory_mib),
                )
            } else {
                (0, 0)
            };
            // An H100 SXM idles near 70 W and peaks near 700 W; other models
            // scale with their memory, roughly.
            let (idle_w, max_w) = if g.memory_mib >= 80_000 {
                (70, 700)
            } else {
                (30, 300)
            };
            out.push(GpuSample {
                uuid: g.uuid.clone(),
                util_pct,
                mem_used_mib,
                power_mw: Some((idle_w + (max_w - idle_w) * u32::from(util_pct) / 100) * 1000),
                temp_c: Some(30 + u32::from(util_pct) / 2),
                sm_clock_mhz: Some(if util_pct > 0 { 1980 } else { 345 }),
                instances,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn host(model: &str, count: u32, mig: bool, islands: Vec<Vec<u32>>) -> SimHost {
        SimHost {
            hostname: "h1".into(),
            cpu_cores: 32,
            memory_gib: 256,
            driver_version: default_driver(),
            faults: vec![],
            health_file: None,
            workload: Default::default(),
            gpus: vec![SimGpus {
                model: model.into(),
                count,
                memory_gib: None,
                mig_enabled: mig,
                nvlink_groups: islands,
                instances: vec![],
            }],
        }
    }

    #[test]
    fn builds_catalogue_gpus_with_nvlink_peers() {
        let b = SimBackend::new(host("H100-80GB", 4, true, vec![vec![0, 1], vec![2, 3]])).unwrap();
        let inv = b.inventory().unwrap();
        assert_eq!(inv.gpus.len(), 4);
        assert!(inv.gpus.iter().all(|g| g.mig_capable && g.mig_enabled));
        assert_eq!(inv.gpus[0].nvlink_peers, vec![1]);
        assert_eq!(inv.gpus[3].nvlink_peers, vec![2]);
        assert_eq!(inv.memory_mib, 256 * 1024);
        assert!(inv.gpus[0].memory_mib > 79_000);
        assert_ne!(inv.gpus[0].uuid, inv.gpus[1].uuid);
        assert_eq!(inv.gpus[0].uuid, sim_uuid("h1", 0));
    }

    #[test]
    fn starts_with_the_configured_mig_layout() {
        let mut h = host("A100-SXM4-40GB", 2, true, vec![]);
        h.gpus[0].instances = vec!["3g.20gb@4".into(), "MIG 2g.10gb@0".into()];
        let b = SimBackend::new(h).unwrap();
        let observed = b.observe(1).unwrap();
        let mut layout: Vec<(String, u8)> = observed
            .instances
            .iter()
            .map(|i| (i.placement.profile.clone(), i.placement.start))
            .collect();
        layout.sort();
        assert_eq!(
            layout,
            vec![("2g.10gb".to_owned(), 0), ("3g.20gb".to_owned(), 4)]
        );

        let mut bad = host("A100-SXM4-40GB", 1, true, vec![]);
        bad.gpus[0].instances = vec!["3g.20gb@2".into()];
        let err = SimBackend::new(bad).unwrap_err();
        assert!(err.contains("cannot start at memory slice 2"), "{err}");
        let mut off = host("A100-SXM4-40GB", 1, false, vec![]);
        off.gpus[0].instances = vec!["1g.5gb@0".into()];
        assert!(SimBackend::new(off).unwrap_err().contains("mig_enabled"));
    }

    fn devices(b: &SimBackend, index: usize) -> Vec<MigDevice> {
        b.inventory().unwrap().gpus[index].mig_devices.clone()
    }

    fn is_mig_uuid(uuid: &str) -> bool {
        let parts: Vec<&str> = uuid.split('-').collect();
        parts.len() == 6
            && parts[0] == "MIG"
            && parts[1..].iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
            && parts[1..]
                .iter()
                .all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
    }

    fn create(b: &SimBackend, index: u32, profile: &str, start: u8, compute: u8) {
        b.apply(
            index,
            &Op::CreateGpuInstance {
                profile: profile.into(),
                start,
            },
        )
        .unwrap();
        b.apply(
            index,
            &Op::CreateComputeInstance {
                gi_start: start,
                ci: ComputeInstance::whole(compute),
            },
        )
        .unwrap();
    }

    #[test]
    fn a_created_instance_is_a_mig_device_with_a_uuid() {
        let b = SimBackend::new(host("H100-80GB", 2, false, vec![])).unwrap();
        assert!(devices(&b, 0).is_empty());
        b.apply(0, &Op::EnableMig).unwrap();
        create(&b, 0, "1g.10gb", 0, 1);
        let d = devices(&b, 0);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!((d[0].gi_start, d[0].profile.as_str()), (0, "1g.10gb"));
        assert!(is_mig_uuid(&d[0].uuid), "{}", d[0].uuid);
        assert!(devices(&b, 1).is_empty(), "the other GPU has none");
        // Stable while the instance lives.
        assert_eq!(devices(&b, 0), d);
    }

    #[test]
    fn a_gpu_instance_without_a_compute_instance_is_no_device() {
        let b = SimBackend::new(host("H100-80GB", 1, true, vec![])).unwrap();
        b.apply(
            0,
            &Op::CreateGpuInstance {
                profile: "3g.40gb".into(),
                start: 0,
            },
        )
        .unwrap();
        assert_eq!(b.observe(0).unwrap().instances.len(), 1);
        assert!(devices(&b, 0).is_empty());
        b.apply(
            0,
            &Op::CreateComputeInstance {
                gi_start: 0,
                ci: ComputeInstance::whole(3),
            },
        )
        .unwrap();
        assert_eq!(devices(&b, 0).len(), 1);
    }

    #[test]
    fn a_recreated_instance_gets_a_new_uuid() {
        let b = SimBackend::new(host("H100-80GB", 1, true, vec![])).unwrap();
        create(&b, 0, "2g.20gb", 4, 2);
        let before = devices(&b, 0);
        assert_eq!(before.len(), 1);
        b.apply(
            0,
            &Op::DestroyComputeInstance {
                gi_start: 4,
                ci: ComputeInstance::whole(2),
            },
        )
        .unwrap();
        b.apply(0, &Op::DestroyGpuInstance { start: 4 }).unwrap();
        assert!(devices(&b, 0).is_empty());
        create(&b, 0, "2g.20gb", 4, 2);
        let after = devices(&b, 0);
        assert_eq!(after.len(), 1);
        assert_eq!(after[0].gi_start, 4);
        assert!(is_mig_uuid(&after[0].uuid));
        assert_ne!(before[0].uuid, after[0].uuid);

        // Forgotten when MIG goes off, new again when it comes back.
        b.apply(
            0,
            &Op::DestroyComputeInstance {
                gi_start: 4,
                ci: ComputeInstance::whole(2),
            },
        )
        .unwrap();
        b.apply(0, &Op::DestroyGpuInstance { start: 4 }).unwrap();
        b.apply(0, &Op::DisableMig).unwrap();
        b.apply(0, &Op::EnableMig).unwrap();
        create(&b, 0, "2g.20gb", 4, 2);
        let again = devices(&b, 0);
        assert!(again[0].uuid != before[0].uuid && again[0].uuid != after[0].uuid);
    }

    #[test]
    fn starting_layout_instances_have_uuids() {
        let mut h = host("A100-SXM4-40GB", 2, true, vec![]);
        h.gpus[0].instances = vec!["3g.20gb@4".into(), "2g.10gb@0".into()];
        let b = SimBackend::new(h).unwrap();
        let mut all = Vec::new();
        for index in 0..2 {
            let d = devices(&b, index);
            assert_eq!(
                d.iter()
                    .map(|d| (d.gi_start, d.profile.as_str()))
                    .collect::<Vec<_>>(),
                vec![(0, "2g.10gb"), (4, "3g.20gb")]
            );
            assert!(d.iter().all(|d| is_mig_uuid(&d.uuid)));
            all.extend(d.into_iter().map(|d| d.uuid));
        }
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 4, "every device has its own UUID");
        // Another host with the same layout has other UUIDs.
        let mut other = host("A100-SXM4-40GB", 1, true, vec![]);
        other.hostname = "h2".into();
        other.gpus[0].instances = vec!["2g.10gb@0".into()];
        let o = SimBackend::new(other).unwrap();
        assert!(!all.contains(&devices(&o, 0)[0].uuid));
    }

    #[test]
    fn rejects_what_no_real_host_has() {
        assert!(SimBackend::new(host("L4", 2, true, vec![]))
            .unwrap_err()
            .contains("does not support MIG"));
        assert!(
            SimBackend::new(host("H100-80GB", 2, false, vec![vec![0, 5]]))
                .unwrap_err()
                .contains("does not exist")
        );
        assert!(SimBackend::new(host("Mystery-GPU", 1, false, vec![]))
            .unwrap_err()
            .contains("memory_gib"));
    }

    #[test]
    fn injected_hardware_faults_are_reported_and_a_lost_gpu_fails_every_call() {
        let dir = std::env::temp_dir().join(format!("tessera-sim-health-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let host_file = dir.join("h.toml");
        std::fs::write(
            &host_file,
            "hostname = \"h1\"\ncpu_cores = 8\nmemory_gib = 64\nhealth_file = \"faults.toml\"\n\
             [[gpus]]\nmodel = \"H100-80GB\"\ncount = 2\nmig_enabled = true\n",
        )
        .unwrap();
        let sim = SimBackend::from_file(&host_file).unwrap();
        // No file yet: healthy.
        let inv = sim.inventory().unwrap();
        assert!(inv
            .gpus
            .iter()
            .all(|g| g.health == HealthSignals::default()));
        std::fs::write(
            dir.join("faults.toml"),
            "[[gpu]]\nindex = 0\necc_uncorrected = 2\nthrottle = [\"hw_thermal_slowdown\"]\n\
             [[gpu]]\nindex = 1\nlost = true\nxids = [{ xid = 79, count = 1 }]\n",
        )
        .unwrap();
        let inv = sim.inventory().unwrap();
        assert_eq!(inv.gpus[0].health.ecc_uncorrected, 2);
        assert_eq!(
            inv.gpus[0].health.throttle,
            vec![tessera_core::health::ThrottleReason::HwThermalSlowdown]
        );
        assert!(inv.gpus[0].sharing.is_some());
        assert!(inv.gpus[1].health.lost);
        assert_eq!(
            inv.gpus[1].sharing, None,
            "a lost GPU's state cannot be read"
        );
        assert_eq!(
            inv.gpus[1].uuid,
            sim_uuid("h1", 1),
            "still listed, as NVML does"
        );
        let err = sim.observe(1).unwrap_err().to_string();
        assert!(err.contains("NVML_ERROR_GPU_IS_LOST"), "{err}");
        let err = sim.apply(1, &Op::DisableMig).unwrap_err().to_string();
        assert!(err.contains("NVML_ERROR_GPU_IS_LOST"), "{err}");
        assert!(sim.observe(0).is_ok(), "the other GPU still answers");
        // A file that does not parse is an error, not a healthy host.
        std::fs::write(dir.join("faults.toml"), "[[gpu]]\nindex = \"x\"\n").unwrap();
        assert!(sim.inventory().is_err());
        // Repaired: the file is gone.
        std::fs::remove_file(dir.join("faults.toml")).unwrap();
        assert!(!sim.inventory().unwrap().gpus[1].health.lost);
        assert!(sim.observe(1).is_ok());
        std::fs::remove_dir_all(&dir).ok();
    }
}
