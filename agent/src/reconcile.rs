//! Turning a GPU's desired state into driver operations: observe, plan with
//! `tessera_core::plan`, apply one operation at a time, observe again. Every
//! pass starts from what the driver reports, so a pass that died half-way is
//! repaired by the next one.

use crate::backend::{op_name, BackendError, GpuBackend};
use tessera_core::catalogue::GpuModel;
use tessera_core::plan::{plan, GpuDesired, GpuObserved, Op, PlanError};
use tessera_core::pool::MpsStrayPolicy;
use tessera_protocol::agent::ProcessesStopped;
use thiserror::Error;

/// What one pass did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// Operations applied, in order.
    pub applied: Vec<Op>,
    /// Processes stopped for released slices.
    pub stopped: Vec<ProcessesStopped>,
    /// The state after the pass.
    pub observed: GpuObserved,
}

/// Why a pass stopped.
#[derive(Debug, Error)]
pub enum ReconcileError {
    /// The backend could not read the GPU.
    #[error(transparent)]
    Observe(BackendError),
    /// The desired state cannot be reached (invalid, or would destroy work in use).
    #[error("GPU {index}: cannot plan: {source}")]
    Plan {
        /// GPU index.
        index: u32,
        /// Why.
        source: PlanError,
    },
    /// An operation failed after `applied` succeeded; the next pass resumes.
    #[error("GPU {index}: {op} failed after {applied} operation(s): {source}")]
    Apply {
        /// GPU index.
        index: u32,
        /// The failed operation's name.
        op: &'static str,
        /// How many operations went through first.
        applied: usize,
        /// The driver's error.
        source: BackendError,
    },
}

/// One reconcile pass for GPU `index` of `model`.
pub fn reconcile_gpu(
    backend: &dyn GpuBackend,
    index: u32,
    model: &GpuModel,
    desired: &GpuDesired,
) -> Result<Outcome, ReconcileError> {
    let observed = backend.observe(index).map_err(ReconcileError::Observe)?;
    let ops =
        plan(model, &observed, desired).map_err(|source| ReconcileError::Plan { index, source })?;
    let mut applied = Vec::with_capacity(ops.len());
    let mut stopped = Vec::new();
    for op in ops {
        let outcome = backend
            .apply(index, &op)
            .map_err(|source| ReconcileError::Apply {
                index,
                op: op_name(&op),
                applied: applied.len(),
                source,
            })?;
        tracing::info!(gpu = index, op = op_name(&op), "applied");
        stopped.extend(outcome);
        applied.push(op);
    }
    let mut observed = backend.observe(index).map_err(ReconcileError::Observe)?;
    if observed.mps.is_some() {
        // Clients that do not keep to their slice, for the report; by the
        // pool's policy also stopped.
        for client in backend
            .mps_clients(index)
            .map_err(ReconcileError::Observe)?
        {
            let Some(mut stray) = client.stray(&desired.mps_clients) else {
                continue;
            };
            tracing::warn!(
                gpu = index,
                pid = stray.pid,
                "MPS client: {}",
                stray.problem
            );
            if desired.mps_strays == MpsStrayPolicy::Stop {
                match backend.stop_mps_client(index, &client) {
                    Ok(()) => stray.stopped = true,
                    Err(e) => {
                        tracing::warn!(gpu = index, pid = stray.pid, "MPS client not stopped: {e}");
                        stray.problem = format!("{}; could not stop it: {e}", stray.problem);
                    }
                }
            }
            observed.mps_strays.push(stray);
        }
    }
    Ok(Outcome {
        applied,
        stopped,
        observed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sim::{Fault, FaultAction, SimBackend, SimHost};
    use tessera_core::catalogue;
    use tessera_core::mig::MigPlacement;
    use tessera_core::plan::{ComputeInstance, DesiredInstance, Released};
    use tessera_sim_host::SimGpus;

    fn h100_host(faults: Vec<Fault>) -> SimBackend {
        SimBackend::new(SimHost {
            hostname: "h".into(),
            cpu_cores: 16,
            memory_gib: 128,
            driver_version: "test".into(),
            faults,
            health_file: None,
            workload: Default::default(),
            gpus: vec![SimGpus {
                model: "H100-80GB".into(),
                count: 2,
                memory_gib: None,
                mig_enabled: false,
                nvlink_groups: vec![],
                instances: vec![],
            }],
        })
        .unwrap()
    }

    fn model() -> GpuModel {
        catalogue::lookup("H100-80GB", 0)
    }

    fn instance(profile: &str, start: u8, compute: u8) -> DesiredInstance {
        DesiredInstance {
            placement: MigPlacement::new(profile, start),
            compute_instances: vec![ComputeInstance::whole(compute)],
        }
    }

    fn mig_layout() -> GpuDesired {
        GpuDesired {
            mig_enabled: true,
            instances: vec![
                instance("3g.40gb", 0, 3),
                instance("2g.20gb", 4, 2),
                instance("1g.10gb", 6, 1),
            ],
            ..GpuDesired::default()
        }
    }

    #[test]
    fn converges_and_a_second_pass_does_nothing() {
        let b = h100_host(vec![]);
        let first = reconcile_gpu(&b, 0, &model(), &mig_layout()).unwrap();
        assert_eq!(first.applied.first(), Some(&Op::EnableMig));
        assert!(first.observed.mig_enabled);
        assert_eq!(first.observed.instances.len(), 3);
        let second = reconcile_gpu(&b, 0, &model(), &mig_layout()).unwrap();
        assert!(second.applied.is_empty(), "{:?}", second.applied);
        // The other GPU is untouched, and the inventory reports MIG mode as the driver has it.
        assert!(!b.observe(1).unwrap().mig_enabled);
        let inv = b.inventory().unwrap();
        assert!(inv.gpus[0].mig_enabled && !inv.gpus[1].mig_enabled);
    }

    #[test]
    fn an_invalid_desired_layout_changes_nothing() {
        let b = h100_host(vec![]);
        let overlapping = GpuDesired {
            mig_enabled: true,
            instances: vec![instance("4g.40gb", 0, 4), instance("3g.40gb", 0, 3)],
            ..GpuDesired::default()
        };
        let err = reconcile_gpu(&b, 0, &model(), &overlapping).unwrap_err();
        assert!(matches!(err, ReconcileError::Plan { .. }), "{err}");
        assert_eq!(b.observe(0).unwrap(), GpuObserved::default());
    }

    #[test]
    fn a_failed_operation_is_repaired_by_the_next_pass() {
        let b = h100_host(vec![Fault {
            op: "create_gpu_instance".into(),
            gpu: Some(0),
            action: FaultAction::Fail,
            hang_ms: 0,
            times: Some(1),
        }]);
        let err = reconcile_gpu(&b, 0, &model(), &mig_layout()).unwrap_err();
        match err {
            ReconcileError::Apply { op, applied, .. } => {
                assert_eq!(op, "create_gpu_instance");
                assert_eq!(applied, 1, "MIG mode went on before the fault");
            }
            other => panic!("unexpected {other}"),
        }
        assert!(b.observe(0).unwrap().mig_enabled);
        let again = reconcile_gpu(&b, 0, &model(), &mig_layout()).unwrap();
        assert!(
            !again.applied.contains(&Op::EnableMig),
            "resumes where it stopped"
        );
        assert_eq!(again.observed.instances.len(), 3);
    }

    #[test]
    fn a_hanging_operation_completes_late() {
        let b = h100_host(vec![Fault {
            op: "enable_mig".into(),
            gpu: None,
            action: FaultAction::Hang,
            hang_ms: 20,
            times: None,
        }]);
        let out = reconcile_gpu(&b, 1, &model(), &mig_layout()).unwrap();
        assert_eq!(out.observed.instances.len(), 3);
    }

    #[test]
    fn work_in_use_is_only_destroyed_when_released() {
        let b = h100_host(vec![]);
        reconcile_gpu(&b, 0, &model(), &mig_layout()).unwrap();
        b.start_process(0, Some(0)).unwrap();
        let mut smaller = mig_layout();
        smaller.instances.remove(0);
        let err = reconcile_gpu(&b, 0, &model(), &smaller).unwrap_err();
        assert!(matches!(err, ReconcileError::Plan { .. }), "{err}");
        assert_eq!(
            b.observe(0).unwrap().instances.len(),
            3,
            "nothing destroyed"
        );

        smaller.released = Released {
            instances: vec![0],
            ..Released::default()
        };
        let out = reconcile_gpu(&b, 0, &model(), &smaller).unwrap();
        assert_eq!(
            out.applied.first(),
            Some(&Op::StopProcesses { gi_start: Some(0) })
        );
        assert_eq!(
            out.stopped,
            vec![tessera_protocol::agent::ProcessesStopped {
                index: 0,
                scope: tessera_protocol::agent::StopScope::Instance { gi_start: 0 },
                terminated: 1,
                killed: 0,
            }],
            "what was stopped is told"
        );
        assert_eq!(out.observed.instances.len(), 2);
    }

    #[test]
    fn unknown_gpus_are_reported() {
        let b = h100_host(vec![]);
        assert!(matches!(
            reconcile_gpu(&b, 9, &model(), &GpuDesired::default()),
            Err(ReconcileError::Observe(BackendError::NoSuchGpu(9)))
        ));
    }
}
