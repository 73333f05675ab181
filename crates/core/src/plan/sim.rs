//! `SimGpu`: a pure, faithful model of one GPU's MIG / MPS / time-slicing
//! state. It applies [`Op`]s and rejects what the driver would reject:
//! overlapping placements, profiles the model lacks, more than a profile's
//! instance count, destroying an instance with running processes or with
//! compute instances left, MIG mode changes with instances or processes
//! present, MPS together with MIG.

use crate::ids::AllocationId;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::catalogue::GpuModel;
use crate::mig::{self, LayoutError, MigPlacement};
use crate::sharing::MAX_TIME_SLICE_REPLICAS;

use super::compute::{validate_compute_instances, ComputeInstanceError};
use super::state::{
    ComputeInstance, GpuDesired, GpuObserved, MpsServer, MpsSettings, ObservedInstance, Op,
};

/// What the simulated driver refused.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SimError {
    /// A MIG operation on a GPU without MIG support.
    #[error("{model} does not support MIG")]
    NotMigCapable {
        /// Model name.
        model: String,
    },
    /// A GPU-instance operation with MIG mode off.
    #[error("MIG mode is off")]
    MigDisabled,
    /// MIG mode change while GPU instances exist.
    #[error("MIG mode cannot change while GPU instances exist")]
    InstancesPresent,
    /// Processes would be killed.
    #[error("processes are running ({where_})")]
    ProcessesRunning {
        /// `"GPU"` or the instance.
        where_: String,
    },
    /// MPS and MIG together.
    #[error("MPS cannot run with MIG mode on")]
    MpsWithMig,
    /// A GPU instance that breaks a placement rule.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// No GPU instance starts there.
    #[error("no GPU instance starts at memory slice {start}")]
    NoSuchInstance {
        /// Start.
        start: u8,
    },
    /// Compute instances remain in the GPU instance.
    #[error("the GPU instance at slice {start} still has compute instances")]
    ComputeInstancesPresent {
        /// Start.
        start: u8,
    },
    /// No such compute instance.
    #[error("no compute instance {ci:?} in the GPU instance at slice {gi_start}")]
    NoSuchComputeInstance {
        /// GPU instance start.
        gi_start: u8,
        /// The compute instance.
        ci: ComputeInstance,
    },
    /// A compute instance that breaks a placement rule.
    #[error(transparent)]
    ComputeInstance(#[from] ComputeInstanceError),
    /// Bad MPS defaults.
    #[error("MPS default active thread percentage must be 1..=100")]
    InvalidMps,
    /// Bad replica count.
    #[error("time-slicing replicas must be between 1 and {MAX_TIME_SLICE_REPLICAS}")]
    ReplicasOutOfRange,
    /// An MPS command with no control daemon running ("Cannot find MPS
    /// control daemon process").
    #[error("the MPS control daemon is not running")]
    NoMpsDaemon,
}

/// A simulated GPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SimGpu {
    model: GpuModel,
    state: GpuObserved,
}

impl SimGpu {
    /// A fresh GPU: MIG off, no MPS, one replica, idle.
    pub fn new(model: GpuModel) -> Self {
        Self {
            model,
            state: GpuObserved::default(),
        }
    }

    /// A GPU in `observed` state, checked against every rule.
    pub fn from_observed(model: GpuModel, observed: GpuObserved) -> Result<Self, SimError> {
        let mut sim = Self::new(model);
        if observed.mig_enabled {
            sim.apply(&Op::EnableMig)?;
            for instance in &observed.instances {
                let start = instance.placement.start;
                sim.apply(&Op::CreateGpuInstance {
                    profile: instance.placement.profile.clone(),
                    start,
                })?;
                for ci in &instance.compute_instances {
                    sim.apply(&Op::CreateComputeInstance {
                        gi_start: start,
                        ci: *ci,
                    })?;
                }
                if instance.in_use {
                    sim.start_process(Some(start))?;
                }
            }
        } else if !observed.instances.is_empty() {
            return Err(SimError::MigDisabled);
        }
        if observed.mps.is_some() {
            sim.apply(&Op::SetMps {
                settings: observed.mps,
            })?;
        }
        sim.apply(&Op::SetReplicas {
            replicas: observed.time_slice_replicas,
        })?;
        if observed.processes_running {
            sim.start_process(None)?;
        }
        for &allocation in &observed.allocations_running {
            sim.start_tagged_process(allocation)?;
        }
        sim.state.mps_servers = observed.mps_servers.clone();
        sim.state.mps_strays = observed.mps_strays.clone();
        Ok(sim)
    }

    /// The model.
    pub fn model(&self) -> &GpuModel {
        &self.model
    }

    /// The current state, as an agent would observe it.
    pub fn observed(&self) -> &GpuObserved {
        &self.state
    }

    /// The current MIG layout.
    pub fn layout(&self) -> Vec<MigPlacement> {
        self.state
            .instances
            .iter()
            .map(|i| i.placement.clone())
            .collect()
    }

    /// A process starts: inside the GPU instance at `gi_start`, or on the GPU
    /// (MIG off) when `None`.
    pub fn start_process(&mut self, gi_start: Option<u8>) -> Result<(), SimError> {
        match gi_start {
            Some(start) => {
                let instance = self.instance_mut(start)?;
                if instance.compute_instances.is_empty() {
                    // CUDA needs a compute instance to run in.
                    return Err(SimError::NoSuchComputeInstance {
                        gi_start: start,
                        ci: ComputeInstance { start: 0, size: 0 },
                    });
                }
                instance.in_use = true;
            }
            None => {
                if self.state.mig_enabled {
                    return Err(SimError::MigDisabled);
                }
                self.state.processes_running = true;
            }
        }
        Ok(())
    }

    /// A process of shared slice `allocation` starts on the GPU (MIG off).
    pub fn start_tagged_process(&mut self, allocation: AllocationId) -> Result<(), SimError> {
        self.start_process(None)?;
        if !self.state.allocations_running.contains(&allocation) {
            self.state.allocations_running.push(allocation);
            self.state.allocations_running.sort_unstable();
        }
        Ok(())
    }

    /// True when the GPU is in the `desired` configuration (processes aside;
    /// profile names compared as the catalogue spells them).
    pub fn satisfies(&self, desired: &GpuDesired) -> bool {
        let norm = |mut v: Vec<(MigPlacement, Vec<ComputeInstance>)>| {
            for (_, cis) in &mut v {
                cis.sort_unstable();
            }
            v.sort();
            v
        };
        let have = norm(
            self.state
                .instances
                .iter()
                .map(|i| (i.placement.clone(), i.compute_instances.clone()))
                .collect(),
        );
        let canonical = |p: &MigPlacement| {
            let name = self
                .model
                .mig
                .and_then(|spec| spec.profile(&p.profile))
                .map_or(p.profile.as_str(), |profile| profile.name);
            MigPlacement::new(name, p.start)
        };
        let want = norm(
            desired
                .instances
                .iter()
                .map(|i| (canonical(&i.placement), i.compute_instances.clone()))
                .collect(),
        );
        self.state.mig_enabled == desired.mig_enabled
            && have == want
            && self.state.mps == desired.mps
            && self.state.time_slice_replicas == desired.time_slice_replicas
    }

    /// Applies every op in order; on the first refusal returns its index and
    /// the error (the GPU keeps the changes made before it).
    pub fn apply_all(&mut self, ops: &[Op]) -> Result<(), (usize, SimError)> {
        for (i, op) in ops.iter().enumerate() {
            self.apply(op).map_err(|e| (i, e))?;
        }
        Ok(())
    }

    /// Applies one op as the driver would, or refuses it and changes nothing.
    pub fn apply(&mut self, op: &Op) -> Result<(), SimError> {
        match op {
            Op::EnableMig => {
                if self.model.mig.is_none() {
                    return Err(SimError::NotMigCapable {
                        model: self.model.name.to_string(),
                    });
                }
                self.require_idle_gpu()?;
                if self.state.mps.is_some() {
                    return Err(SimError::MpsWithMig);
                }
                self.state.mig_enabled = true;
            }
            Op::DisableMig => {
                if !self.state.instances.is_empty() {
                    return Err(SimError::InstancesPresent);
                }
                self.require_idle_gpu()?;
                self.state.mig_enabled = false;
            }
            Op::CreateGpuInstance { profile, start } => {
                if !self.state.mig_enabled {
                    return Err(SimError::MigDisabled);
                }
                let mut layout = self.layout();
                layout.push(MigPlacement::new(profile.clone(), *start));
                mig::validate(&self.model, &layout)?;
                let spec = mig::spec_of(&self.model)?;
                let canonical = mig::profile_of(&self.model, spec, profile)?.name;
                self.state.instances.push(ObservedInstance {
                    placement: MigPlacement::new(canonical, *start),
                    compute_instances: Vec::new(),
                    in_use: false,
                });
            }
            Op::DestroyGpuInstance { start } => {
                let instance = self.instance_mut(*start)?;
                if instance.in_use {
                    return Err(SimError::ProcessesRunning {
                        where_: instance.placement.to_string(),
                    });
                }
                if !instance.compute_instances.is_empty() {
                    return Err(SimError::ComputeInstancesPresent { start: *start });
                }
                self.state.instances.retain(|i| i.placement.start != *start);
            }
            Op::CreateComputeInstance { gi_start, ci } => {
                let gi_compute = self.gi_compute(*gi_start)?;
                let instance = self.instance_mut(*gi_start)?;
                let mut cis = instance.compute_instances.clone();
                cis.push(*ci);
                validate_compute_instances(gi_compute, &cis)?;
                instance.compute_instances = cis;
            }
            Op::DestroyComputeInstance { gi_start, ci } => {
                let instance = self.instance_mut(*gi_start)?;
                if instance.in_use {
                    return Err(SimError::ProcessesRunning {
                        where_: instance.placement.to_string(),
                    });
                }
                let before = instance.compute_instances.len();
                instance.compute_instances.retain(|c| c != ci);
                if instance.compute_instances.len() == before {
                    return Err(SimError::NoSuchComputeInstance {
                        gi_start: *gi_start,
                        ci: *ci,
                    });
                }
            }
            Op::StopProcesses { gi_start: None } => {
                self.state.processes_running = false;
                self.state.allocations_running.clear();
                for instance in &mut self.state.instances {
                    instance.in_use = false;
                }
            }
            Op::StopProcesses {
                gi_start: Some(start),
            } => {
                self.instance_mut(*start)?.in_use = false;
            }
            // The others on the GPU keep running.
            Op::StopAllocation { allocation } => {
                self.state.allocations_running.retain(|a| a != allocation);
            }
            Op::SetMps { settings } => self.set_mps(*settings)?,
            Op::SetMpsServerLimits {
                active_thread_percentage,
                pinned_mem_limit,
            } => {
                if self.state.mps.is_none() {
                    return Err(SimError::NoMpsDaemon);
                }
                if !(1..=100).contains(active_thread_percentage) {
                    return Err(SimError::InvalidMps);
                }
                for server in &mut self.state.mps_servers {
                    server.active_thread_percentage = *active_thread_percentage;
                    server.pinned_mem_limit = Some(*pinned_mem_limit);
                }
            }
            Op::SetReplicas { replicas } => {
                if !(1..=MAX_TIME_SLICE_REPLICAS).contains(replicas) {
                    return Err(SimError::ReplicasOutOfRange);
                }
                self.state.time_slice_replicas = *replicas;
            }
        }
        Ok(())
    }

    fn set_mps(&mut self, settings: Option<MpsSettings>) -> Result<(), SimError> {
        if let Some(s) = settings {
            if self.state.mig_enabled {
                return Err(SimError::MpsWithMig);
            }
            if !(1..=100).contains(&s.default_active_thread_percentage) {
                return Err(SimError::InvalidMps);
            }
        }
        if settings.is_some() != self.state.mps.is_some() {
            // Starting or stopping the daemon disconnects running clients.
            self.require_idle_gpu()?;
        }
        if settings.is_none() {
            // `quit` ends the servers with the daemon.
            self.state.mps_servers.clear();
            self.state.mps_strays.clear();
        }
        self.state.mps = settings;
        Ok(())
    }

    /// A client of Linux user `pid`'s server connects: the daemon starts a
    /// server (as process `pid`) at its defaults if none runs.
    pub fn start_mps_server(&mut self, pid: u32) -> Result<(), SimError> {
        let Some(defaults) = self.state.mps else {
            return Err(SimError::NoMpsDaemon);
        };
        if !self.state.mps_servers.iter().any(|s| s.pid == pid) {
            self.state.mps_servers.push(MpsServer {
                pid,
                active_thread_percentage: defaults.default_active_thread_percentage,
                pinned_mem_limit: None,
            });
        }
        Ok(())
    }

    fn require_idle_gpu(&self) -> Result<(), SimError> {
        if self.state.processes_running {
            return Err(SimError::ProcessesRunning {
                where_: "GPU".into(),
            });
        }
        if let Some(busy) = self.state.instances.iter().find(|i| i.in_use) {
            return Err(SimError::ProcessesRunning {
                where_: busy.placement.to_string(),
            });
        }
        Ok(())
    }

    fn gi_compute(&self, start: u8) -> Result<u8, SimError> {
        let placement = &self
            .state
            .instances
            .iter()
            .find(|i| i.placement.start == start)
            .ok_or(SimError::NoSuchInstance { start })?
            .placement;
        let spec = mig::spec_of(&self.model)?;
        Ok(mig::profile_of(&self.model, spec, &placement.profile)?.compute_slices)
    }

    fn instance_mut(&mut self, start: u8) -> Result<&mut ObservedInstance, SimError> {
        self.state
            .instances
            .iter_mut()
            .find(|i| i.placement.start == start)
            .ok_or(SimError::NoSuchInstance { start })
    }
}
