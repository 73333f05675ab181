//! Simulated GPU hosts, described in a small TOML file (see
//! [`tessera_sim_host::description`] for the format, faults included) and
//! modelled by [`tessera_sim_host::HostState`], the same model the fake NVML
//! library answers from, so the simulation and the fake agree.
//!
//! A lost GPU fails the way the hardware does: it is still listed (with the
//! facts read before it was lost), but reading or changing its state fails
//! with `NVML_ERROR_GPU_IS_LOST`, and it has no telemetry.
//!
//! Telemetry reports what NVML would (see [`tessera_sim_host::telemetry`]):
//! no utilisation for a GPU with MIG on, per-MIG-device activity only on
//! GPUs with GPM (Hopper), and not in a device's first round.

use super::{op_name, BackendError, GpuBackend, Inventory};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use tessera_core::health::HealthSignals;
use tessera_core::plan::{GpuObserved, Op};
use tessera_protocol::agent::{GpuReport, GpuSample, ProcessesStopped, StopScope};
use tessera_sim_host::{telemetry, HostError, HostState, GPU_IS_LOST};
pub use tessera_sim_host::{Fault, FaultAction, HealthFile, SimHost};

/// A simulated host: inventory plus a faithful driver model per GPU.
#[derive(Debug)]
pub struct SimBackend {
    host: SimHost,
    driver: Mutex<Driver>,
    /// Where `health_file` is, resolved.
    health_path: Option<std::path::PathBuf>,
}

#[derive(Debug)]
struct Driver {
    state: HostState,
    /// MIG devices sampled in the previous telemetry round (GPM measures
    /// between two samples).
    gpm_seen: BTreeSet<String>,
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
        let state = HostState::new(&host)?;
        Ok(Self {
            host,
            driver: Mutex::new(Driver {
                state,
                gpm_seen: BTreeSet::new(),
            }),
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
        self.driver()
            .state
            .start_process(index, gi_start)
            .map_err(refused(index, "start_process"))
    }
}

fn refused(index: u32, op: &'static str) -> impl FnOnce(HostError) -> BackendError {
    move |e| match e {
        HostError::NoSuchGpu(i) => BackendError::NoSuchGpu(i),
        HostError::Refused(e) => BackendError::Refused {
            index,
            op,
            detail: e.to_string(),
        },
    }
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
        let gpus = driver
            .state
            .reports()
            .iter()
            .map(|g| {
                let health = faults.get(&g.index).cloned().unwrap_or_default();
                let sim = driver.state.gpu(g.index);
                match sim {
                    Some(sim) if !health.lost => GpuReport {
                        mig_enabled: sim.observed().mig_enabled,
                        sharing: Some(sim.observed().clone()),
                        mig_devices: driver.state.mig_devices(g.index),
                        health,
                        ..g.clone()
                    },
                    // Only what was read before the GPU was lost.
                    _ => GpuReport {
                        health,
                        ..g.clone()
                    },
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
            .state
            .gpu(index)
            .ok_or(BackendError::NoSuchGpu(index))?;
        Ok(gpu.observed().clone())
    }

    fn apply(&self, index: u32, op: &Op) -> Result<Option<ProcessesStopped>, BackendError> {
        let name = op_name(op);
        self.check_not_lost(index, "nvmlDeviceGetHandleByIndex")?;
        let fault = self.driver().state.fire(index, name);
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
        // The simulation knows busy, not how many: a busy scope is one process.
        let stopping = {
            let o = driver
                .state
                .gpu(index)
                .ok_or(BackendError::NoSuchGpu(index))?
                .observed();
            match op {
                Op::StopProcesses { gi_start: None } => Some((StopScope::Gpu, o.processes_running)),
                Op::StopProcesses {
                    gi_start: Some(start),
                } => Some((
                    StopScope::Instance { gi_start: *start },
                    o.instances
                        .iter()
                        .any(|i| i.placement.start == *start && i.in_use),
                )),
                Op::StopAllocation { allocation } => Some((
                    StopScope::Allocation {
                        allocation: *allocation,
                    },
                    o.allocations_running.contains(allocation),
                )),
                _ => None,
            }
        };
        driver
            .state
            .apply(index, op)
            .map_err(refused(index, name))?;
        Ok(stopping.map(|(scope, busy)| ProcessesStopped {
            index,
            scope,
            terminated: u32::from(busy),
            killed: 0,
        }))
    }

    fn sample(&self, at_ms: i64, held: &BTreeSet<u32>) -> Result<Vec<GpuSample>, BackendError> {
        let faults = self.faults_now()?;
        let mut driver = self.driver();
        let mut out = Vec::new();
        let mut seen_now = BTreeSet::new();
        let count = driver.state.reports().len() as u32;
        for index in 0..count {
            if faults.get(&index).is_some_and(|f| f.lost) {
                continue;
            }
            let seen = |uuid: &str| driver.gpm_seen.contains(uuid);
            if let Some(s) = telemetry::sample(
                &driver.state,
                index,
                at_ms,
                held.contains(&index),
                self.host.workload,
                &seen,
            ) {
                seen_now.extend(driver.state.mig_devices(index).into_iter().map(|d| d.uuid));
                out.push(s);
            }
        }
        driver.gpm_seen = seen_now;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tessera_core::plan::ComputeInstance;
    use tessera_protocol::agent::MigDevice;
    use tessera_sim_host::{description::default_driver, sim_uuid, SimGpus};

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
