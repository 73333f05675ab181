//! The model of one simulated host: its GPUs as the driver lists them, and
//! each GPU's MIG / MPS / time-slicing state as core's faithful [`SimGpu`]
//! keeps it, with the UUIDs the driver gives MIG devices.

use crate::description::{starting_layout, Fault, SimHost};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use tessera_core::catalogue::{self, GpuModel};
use tessera_core::health::HealthSignals;
use tessera_core::plan::{plan, GpuObserved, Op, SimError, SimGpu};
use tessera_protocol::agent::{GpuReport, MigDevice};

/// Why the simulated driver refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// No GPU with this index.
    #[error("there is no GPU {0} on this host")]
    NoSuchGpu(u32),
    /// The driver refused the operation.
    #[error(transparent)]
    Refused(#[from] SimError),
}

/// A simulated host's GPUs and their state.
#[derive(Debug, Clone)]
pub struct HostState {
    hostname: String,
    /// The GPUs as first read (identity, model, memory, NVLink peers).
    reports: Vec<GpuReport>,
    gpus: Vec<SimGpu>,
    faults: Vec<Fault>,
    /// Per GPU: the UUID of each GPU instance, by start memory slice.
    mig_uuids: Vec<BTreeMap<u8, String>>,
    /// GPU instances created so far on this host: part of each new UUID, so a
    /// re-created instance gets a new one, as with the real driver.
    created: u64,
}

/// What a [`HostState`] keeps between processes (the fake NVML library
/// saves it, as a GPU keeps its MIG layout when the agent restarts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedState {
    /// Each GPU's sharing state, in index order.
    pub gpus: Vec<GpuObserved>,
    /// Each GPU's MIG device UUIDs by start slice.
    pub mig_uuids: Vec<BTreeMap<u8, String>>,
    /// GPU instances created so far.
    pub created: u64,
}

impl HostState {
    /// Builds the GPUs of `host`, rejecting what no real host could have.
    pub fn new(host: &SimHost) -> Result<Self, String> {
        if host.cpu_cores == 0 || host.memory_gib == 0 {
            return Err("cpu_cores and memory_gib must be greater than 0".to_owned());
        }
        let mut reports = Vec::new();
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
            for island in &group.nvlink_groups {
                if let Some(bad) = island.iter().find(|p| **p >= group.count) {
                    return Err(format!(
                        "gpus[{g}].nvlink_groups: GPU {bad} does not exist in a group of {}",
                        group.count
                    ));
                }
            }
            let base = reports.len() as u32;
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
                reports.push(GpuReport {
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
        }
        let mut layouts = Vec::with_capacity(reports.len());
        for (g, group) in host.gpus.iter().enumerate() {
            if !group.instances.is_empty() && !group.mig_enabled {
                return Err(format!("gpus[{g}].instances needs mig_enabled = true"));
            }
            for _ in 0..group.count {
                layouts.push((g, group.instances.as_slice()));
            }
        }
        let mut gpus = Vec::with_capacity(reports.len());
        for (report, (g, entries)) in reports.iter().zip(layouts) {
            let model = catalogue::lookup(&report.name, report.memory_mib);
            let mut sim = SimGpu::new(model);
            if report.mig_enabled {
                let err = |e: String| format!("gpus[{g}].instances: {e}");
                let desired = starting_layout(&model, entries).map_err(err)?;
                let ops = plan(&model, sim.observed(), &desired).map_err(|e| err(e.to_string()))?;
                sim.apply_all(&ops).map_err(|(_, e)| err(e.to_string()))?;
            }
            gpus.push(sim);
        }
        let mut state = Self {
            hostname: host.hostname.clone(),
            mig_uuids: vec![BTreeMap::new(); gpus.len()],
            reports,
            gpus,
            faults: host.faults.clone(),
            created: 0,
        };
        for index in 0..state.gpus.len() {
            state.sync_mig_uuids(index);
        }
        Ok(state)
    }

    /// The GPUs as first read, in index order (their sharing state and MIG
    /// devices are read with [`HostState::gpu`] and
    /// [`HostState::mig_devices`]).
    pub fn reports(&self) -> &[GpuReport] {
        &self.reports
    }

    /// GPU `index`'s state.
    pub fn gpu(&self, index: u32) -> Option<&SimGpu> {
        self.gpus.get(index as usize)
    }

    /// GPU `index`'s catalogue model.
    pub fn model(&self, index: u32) -> Option<GpuModel> {
        self.gpu(index).map(|g| *g.model())
    }

    /// Applies `op` to GPU `index` as the driver would, or refuses it and
    /// changes nothing.
    pub fn apply(&mut self, index: u32, op: &Op) -> Result<(), HostError> {
        let gpu = self
            .gpus
            .get_mut(index as usize)
            .ok_or(HostError::NoSuchGpu(index))?;
        gpu.apply(op)?;
        self.sync_mig_uuids(index as usize);
        Ok(())
    }

    /// A process starts on GPU `index` (in the GPU instance at `gi_start`,
    /// or on the whole GPU), as the driver would let it.
    pub fn start_process(&mut self, index: u32, gi_start: Option<u8>) -> Result<(), HostError> {
        self.gpus
            .get_mut(index as usize)
            .ok_or(HostError::NoSuchGpu(index))?
            .start_process(gi_start)?;
        Ok(())
    }

    /// Replaces GPU `index`'s state (the fake NVML library marks instances
    /// busy from its process list this way); checked against every rule.
    pub fn set_observed(&mut self, index: u32, observed: GpuObserved) -> Result<(), HostError> {
        let gpu = self
            .gpus
            .get_mut(index as usize)
            .ok_or(HostError::NoSuchGpu(index))?;
        *gpu = SimGpu::from_observed(*gpu.model(), observed)?;
        self.sync_mig_uuids(index as usize);
        Ok(())
    }

    /// The first injected driver fault matching `op` on GPU `index`, used
    /// up by one firing.
    pub fn fire(&mut self, index: u32, op: &str) -> Option<Fault> {
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
    /// instance (CUDA cannot run in a GPU instance without one), by start.
    pub fn mig_devices(&self, index: u32) -> Vec<MigDevice> {
        let index = index as usize;
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

    /// What to keep between processes.
    pub fn save(&self) -> SavedState {
        SavedState {
            gpus: self.gpus.iter().map(|g| g.observed().clone()).collect(),
            mig_uuids: self.mig_uuids.clone(),
            created: self.created,
        }
    }

    /// Takes up a saved state of the same host (same GPUs); each GPU's state
    /// is checked against every rule.
    pub fn restore(&mut self, saved: SavedState) -> Result<(), String> {
        if saved.gpus.len() != self.gpus.len() || saved.mig_uuids.len() != self.gpus.len() {
            return Err(format!(
                "the saved state has {} GPUs, the host {}",
                saved.gpus.len(),
                self.gpus.len()
            ));
        }
        for (gpu, observed) in self.gpus.iter_mut().zip(saved.gpus) {
            *gpu = SimGpu::from_observed(*gpu.model(), observed).map_err(|e| e.to_string())?;
        }
        self.mig_uuids = saved.mig_uuids;
        self.created = saved.created;
        for index in 0..self.gpus.len() {
            self.sync_mig_uuids(index);
        }
        Ok(())
    }
}

/// A simulated MIG device UUID, unique per host, GPU, start and creation.
fn mig_uuid(hostname: &str, index: u32, gi_start: u8, creation: u64) -> String {
    uuid_from(
        "MIG",
        &format!("{hostname}/{index}/mig/{gi_start}/{creation}"),
    )
}

/// A stable UUID for a simulated GPU (same host and index, same UUID).
pub fn sim_uuid(hostname: &str, index: u32) -> String {
    uuid_from("GPU", &format!("{hostname}/{index}"))
}

fn uuid_from(prefix: &str, seed: &str) -> String {
    let h = hex::encode(Sha256::digest(seed.as_bytes()));
    format!(
        "{prefix}-{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}
