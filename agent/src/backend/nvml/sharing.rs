//! MIG, MPS and time-slicing on one host's GPUs: the NVML backend's
//! sharing logic over a [`MigDriver`] per GPU, testable without a GPU.

use super::super::BackendError;
use super::mig::{self, MigDriver};
use super::mps::{CommandRunner, MpsControl};
use super::stop;
use super::time_slicing::{self, TimeSlicingFile};
use std::path::PathBuf;
use tessera_core::catalogue::GpuModel;
use tessera_core::plan::{GpuObserved, Op};
use tessera_core::sharing::MAX_TIME_SLICE_REPLICAS;
use tessera_protocol::agent::{MigDevice, ProcessesStopped, StopScope};

/// What the sharing logic needs to know about one GPU.
#[derive(Debug, Clone)]
pub struct GpuFacts {
    /// `GPU-...`.
    pub uuid: String,
    /// Its catalogue model (MIG geometry).
    pub model: GpuModel,
    /// Total memory in MiB.
    pub memory_mib: u64,
}

/// MIG, MPS and time-slicing for the GPUs of a host, over a [`MigDriver`]
/// per GPU: the NVML backend's logic, testable without a GPU.
#[derive(Debug)]
pub struct Sharing {
    pub(super) mps: MpsControl,
    time_slicing: Option<TimeSlicingFile>,
    plugin: time_slicing::DevicePlugin,
    /// Replicas per GPU UUID on a host without a device plugin config:
    /// there processes share a GPU by the driver's own time-slicing, and
    /// the count is the agent's bookkeeping (set again after a restart).
    replicas: std::sync::Mutex<std::collections::BTreeMap<String, u32>>,
    pub(super) stopper: stop::ProcessStopper,
}

impl Sharing {
    /// MPS daemons under `mps_pipe_root` / `mps_log_root`, time-slicing in
    /// `device_plugin_config` (if given).
    pub fn new(
        runner: Box<dyn CommandRunner>,
        mps_pipe_root: PathBuf,
        mps_log_root: PathBuf,
        device_plugin_config: Option<PathBuf>,
        plugin: time_slicing::DevicePlugin,
        stopper: stop::ProcessStopper,
    ) -> Self {
        Self {
            mps: MpsControl::new(runner, mps_pipe_root, mps_log_root),
            time_slicing: device_plugin_config.map(TimeSlicingFile::new),
            plugin,
            replicas: std::sync::Mutex::new(std::collections::BTreeMap::new()),
            stopper,
        }
    }

    /// Runs `program` as the MPS control program.
    pub fn with_mps_program(mut self, program: String) -> Self {
        self.mps = self.mps.with_program(program);
        self
    }

    fn replicas_without_plugin(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::BTreeMap<String, u32>> {
        self.replicas
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The GPU's sharing state and its MIG devices.
    pub fn observe(
        &self,
        d: &dyn MigDriver,
        gpu: &GpuFacts,
    ) -> Result<(GpuObserved, Vec<MigDevice>), BackendError> {
        let mig = mig::observe(d, &gpu.model)?;
        let mps = self.mps.observe(&gpu.uuid)?;
        let time_slice_replicas = match &self.time_slicing {
            Some(file) => file.replicas(&gpu.uuid)?,
            None => self
                .replicas_without_plugin()
                .get(&gpu.uuid)
                .copied()
                .unwrap_or(1),
        };
        // Whose processes run on a GPU that is not partitioned (MPS and
        // time-sliced slices share it).
        let mut allocations_running: Vec<_> = if !mig.mig_enabled && mig.processes_running {
            d.processes(None)?
                .into_iter()
                .filter_map(stop::allocation_of)
                .collect()
        } else {
            Vec::new()
        };
        allocations_running.sort_unstable();
        allocations_running.dedup();
        Ok((
            GpuObserved {
                mig_enabled: mig.mig_enabled,
                instances: mig.instances,
                processes_running: mig.processes_running,
                allocations_running,
                mps_servers: match mps {
                    Some(_) => self.mps.servers(&gpu.uuid)?,
                    None => Vec::new(),
                },
                mps,
                // Which clients stray needs the grants: the reconcile pass
                // knows them (`GpuBackend::mps_clients`).
                mps_strays: Vec::new(),
                time_slice_replicas,
            },
            mig.devices,
        ))
    }

    /// Applies one planned operation to GPU `index`; what it stopped, for
    /// the operations that stop processes.
    pub fn apply(
        &self,
        d: &dyn MigDriver,
        gpu: &GpuFacts,
        index: u32,
        op: &Op,
    ) -> Result<Option<ProcessesStopped>, BackendError> {
        let refused =
            |op: &'static str, detail: String| BackendError::Refused { index, op, detail };
        match op {
            Op::StopProcesses { gi_start } => {
                // The planner asks only for what the server released.
                let gi_id = match gi_start {
                    Some(start) => {
                        let found = d
                            .gpu_instances()?
                            .into_iter()
                            .find(|g| g.start == u32::from(*start));
                        match found {
                            Some(g) => Some(g.id),
                            // Already gone: nothing runs in it.
                            None => return Ok(None),
                        }
                    }
                    None => None,
                };
                let pids = d.processes(gi_id)?;
                let scope = match gi_start {
                    Some(start) => StopScope::Instance { gi_start: *start },
                    None => StopScope::Gpu,
                };
                self.stop(index, scope, &pids).map(Some)
            }
            Op::StopAllocation { allocation } => {
                let pids: Vec<u32> = d
                    .processes(None)?
                    .into_iter()
                    .filter(|pid| stop::allocation_of(*pid) == Some(*allocation))
                    .collect();
                let scope = StopScope::Allocation {
                    allocation: *allocation,
                };
                self.stop(index, scope, &pids).map(Some)
            }
            Op::SetMps { settings } => {
                if settings.is_some() && d.mig_enabled()? {
                    return Err(refused(
                        "set_mps",
                        "MPS cannot run with MIG mode on".to_owned(),
                    ));
                }
                let running = self.mps.observe(&gpu.uuid)?.is_some();
                if settings.is_some() != running {
                    let busy = d.busy()?;
                    if busy.whole_gpu || !busy.gpu_instances.is_empty() {
                        return Err(refused(
                            "set_mps",
                            "processes are running on the GPU; starting or stopping the MPS daemon would disconnect them"
                                .to_owned(),
                        ));
                    }
                }
                self.mps
                    .apply(&gpu.uuid, gpu.memory_mib, *settings)
                    .map(|()| None)
            }
            Op::SetMpsServerLimits {
                active_thread_percentage,
                pinned_mem_limit,
            } => self
                .mps
                .set_server_limits(&gpu.uuid, *active_thread_percentage, *pinned_mem_limit)
                .map(|()| None),
            Op::EnableMig => {
                if gpu.model.mig.is_none() {
                    return Err(refused(
                        "enable_mig",
                        format!("{} does not support MIG", gpu.model.name),
                    ));
                }
                if self.mps.observe(&gpu.uuid)?.is_some() {
                    return Err(refused(
                        "enable_mig",
                        "MPS cannot run with MIG mode on; stop the MPS daemon first".to_owned(),
                    ));
                }
                mig::set_mig(d, index, true).map(|()| None)
            }
            Op::DisableMig => mig::set_mig(d, index, false).map(|()| None),
            Op::CreateGpuInstance { profile, start } => {
                mig::create_gpu_instance(d, index, &gpu.model, profile, *start).map(|()| None)
            }
            Op::DestroyGpuInstance { start } => {
                mig::destroy_gpu_instance(d, index, *start).map(|()| None)
            }
            Op::CreateComputeInstance { gi_start, ci } => {
                mig::create_compute_instance(d, index, *gi_start, *ci).map(|()| None)
            }
            Op::DestroyComputeInstance { gi_start, ci } => {
                mig::destroy_compute_instance(d, index, *gi_start, *ci).map(|()| None)
            }
            Op::SetReplicas { replicas } => {
                if !(1..=MAX_TIME_SLICE_REPLICAS).contains(replicas) {
                    return Err(refused(
                        "set_replicas",
                        format!(
                            "time-slicing replicas must be between 1 and \
                             {MAX_TIME_SLICE_REPLICAS}, not {replicas}"
                        ),
                    ));
                }
                match &self.time_slicing {
                    Some(file) => {
                        if file.set(&gpu.uuid, *replicas)? {
                            self.plugin.reload()?;
                        }
                    }
                    None => {
                        let before = self
                            .replicas_without_plugin()
                            .insert(gpu.uuid.clone(), *replicas);
                        if before.is_none() && *replicas > 1 {
                            tracing::info!(
                                gpu = index,
                                replicas,
                                "no --device-plugin-config: the GPU is time-sliced by the driver \
                                 (processes share it as they start); Kubernetes is not told"
                            );
                        }
                    }
                }
                Ok(None)
            }
        }
    }

    /// Stops `pids` of GPU `index` (SIGTERM, grace, SIGKILL) for `scope`.
    fn stop(
        &self,
        index: u32,
        scope: StopScope,
        pids: &[u32],
    ) -> Result<ProcessesStopped, BackendError> {
        let report = self.stopper.stop(pids).map_err(|e| BackendError::Refused {
            index,
            op: "stop_processes",
            detail: format!("could not stop processes {pids:?}: {e}"),
        })?;
        tracing::info!(
            gpu = index,
            ?scope,
            terminated = report.terminated,
            killed = report.killed,
            "stopped the processes of a released slice"
        );
        Ok(ProcessesStopped {
            index,
            scope,
            terminated: u32::try_from(report.terminated).unwrap_or(u32::MAX),
            killed: u32::try_from(report.killed).unwrap_or(u32::MAX),
        })
    }
}
