//! `plan(model, observed, desired)`: ordered operations for one GPU.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::catalogue::GpuModel;
use crate::mig::{self, LayoutError, MigPlacement};
use crate::sharing::MAX_TIME_SLICE_REPLICAS;

use super::compute::{validate_compute_instances, ComputeInstanceError};
use super::state::{ComputeInstance, DesiredInstance, GpuDesired, GpuObserved, MpsGrant, Op};

/// Why no plan can take the GPU to the desired state (yet).
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PlanError {
    /// The desired MIG layout breaks a hardware rule.
    #[error("the desired MIG layout is invalid: {0}")]
    InvalidLayout(#[from] LayoutError),
    /// Desired GPU instances without MIG mode.
    #[error("GPU instances were requested with MIG mode off; enable MIG or drop the instances")]
    InstancesWithoutMig,
    /// Observed GPU instances without MIG mode (a confused report).
    #[error("the agent reported GPU instances while MIG mode is off; the report is inconsistent")]
    ObservedInconsistent,
    /// Desired MPS together with MIG.
    #[error("MPS inside MIG instances is not supported; turn MIG off or drop the MPS settings")]
    MpsWithMig,
    /// Desired MPS defaults out of range.
    #[error("MPS default active thread percentage must be 1..=100, not {percent}")]
    InvalidMps {
        /// The percentage.
        percent: u8,
    },
    /// Desired compute instances invalid.
    #[error("compute instances of the GPU instance at slice {gi_start}: {source}")]
    InvalidComputeInstances {
        /// The GPU instance.
        gi_start: u8,
        /// The rule broken.
        source: ComputeInstanceError,
    },
    /// A desired GPU instance without compute instances: CUDA could not run in it.
    #[error("the GPU instance at slice {gi_start} needs at least one compute instance; add one spanning the instance")]
    NoComputeInstances {
        /// The GPU instance.
        gi_start: u8,
    },
    /// Replicas out of range.
    #[error("time-slicing replicas must be between 1 and {max}, not {replicas}")]
    ReplicasOutOfRange {
        /// Desired replicas.
        replicas: u32,
        /// The maximum.
        max: u32,
    },
    /// An instance that must change still runs processes of a live allocation.
    #[error("the GPU instance {placement} still runs processes; release its allocation before repartitioning")]
    InUse {
        /// The instance.
        placement: MigPlacement,
    },
    /// The GPU runs processes and must change mode.
    #[error(
        "the GPU still runs processes; release its allocations before changing MIG or MPS mode"
    )]
    GpuInUse,
}

fn check_desired(model: &GpuModel, desired: &GpuDesired) -> Result<(), PlanError> {
    if !(1..=MAX_TIME_SLICE_REPLICAS).contains(&desired.time_slice_replicas) {
        return Err(PlanError::ReplicasOutOfRange {
            replicas: desired.time_slice_replicas,
            max: MAX_TIME_SLICE_REPLICAS,
        });
    }
    if let Some(mps) = desired.mps {
        if desired.mig_enabled {
            return Err(PlanError::MpsWithMig);
        }
        if !(1..=100).contains(&mps.default_active_thread_percentage) {
            return Err(PlanError::InvalidMps {
                percent: mps.default_active_thread_percentage,
            });
        }
    }
    if !desired.mig_enabled {
        if desired.instances.is_empty() {
            return Ok(());
        }
        return Err(PlanError::InstancesWithoutMig);
    }
    let layout: Vec<MigPlacement> = desired
        .instances
        .iter()
        .map(|i| i.placement.clone())
        .collect();
    mig::validate(model, &layout)?;
    let spec = mig::spec_of(model)?;
    for instance in &desired.instances {
        let profile = mig::profile_of(model, spec, &instance.placement.profile)?;
        if instance.compute_instances.is_empty() {
            return Err(PlanError::NoComputeInstances {
                gi_start: instance.placement.start,
            });
        }
        validate_compute_instances(profile.compute_slices, &instance.compute_instances).map_err(
            |source| PlanError::InvalidComputeInstances {
                gi_start: instance.placement.start,
                source,
            },
        )?;
    }
    Ok(())
}

/// The placement with the catalogue's spelling of its profile (`"MIG 1G.10GB"`
/// becomes `"1g.10gb"`); unknown names stay as they are.
fn canonical(model: &GpuModel, placement: &MigPlacement) -> MigPlacement {
    let name = model
        .mig
        .and_then(|spec| spec.profile(&placement.profile))
        .map_or(placement.profile.as_str(), |p| p.name);
    MigPlacement::new(name, placement.start)
}

fn sorted(cis: &[ComputeInstance]) -> Vec<ComputeInstance> {
    let mut v = cis.to_vec();
    v.sort_unstable();
    v
}

/// The operations that take one GPU of `model` from `observed` to `desired`,
/// in order:
///
/// 1. stop the GPU's processes when `desired.released.whole_gpu` (a mode
///    change with processes running needs it), else those of released
///    shared slices, and stop MPS if it must go;
/// 2. tear down GPU instances that are not wanted (stopping released
///    processes first, then compute instances, then the instance), and
///    compute instances that are not wanted in instances that stay;
/// 3. toggle MIG mode;
/// 4. create the missing GPU instances (ascending start) and compute instances;
/// 5. (re)configure MPS (the daemon's defaults, then running servers'
///    limits) and time-slicing replicas.
///
/// Instances that stay are never touched (except to stop processes the
/// desired state marks released); in-use instances are never destroyed unless
/// released. `plan(m, x, GpuDesired::keep(x))` is empty (unless `x` has a GPU
/// instance without compute instances, which is never a valid target). Every destroy comes
/// before every create, so each intermediate layout is a subset of either the
/// observed or the desired layout and therefore valid. Profile names are
/// compared as the catalogue spells them, so `"MIG 1g.10gb"` matches `"1g.10gb"`.
pub fn plan(
    model: &GpuModel,
    observed: &GpuObserved,
    desired: &GpuDesired,
) -> Result<Vec<Op>, PlanError> {
    check_desired(model, desired)?;
    if !observed.mig_enabled && !observed.instances.is_empty() {
        return Err(PlanError::ObservedInconsistent);
    }
    let released = &desired.released;
    let toggling_mig = observed.mig_enabled != desired.mig_enabled;
    let toggling_mps = observed.mps.is_some() != desired.mps.is_some();
    let mut ops = Vec::new();

    let mut stopped_all = false;
    if observed.processes_running && (toggling_mig || toggling_mps || released.whole_gpu) {
        if !released.whole_gpu {
            return Err(PlanError::GpuInUse);
        }
        ops.push(Op::StopProcesses { gi_start: None });
        stopped_all = true;
    }
    // A released shared slice's processes (found by their tag) go before
    // the daemon or the replicas change; with none running, nothing to do.
    if !stopped_all {
        for &allocation in &released.allocations {
            if observed.allocations_running.contains(&allocation) {
                ops.push(Op::StopAllocation { allocation });
            }
        }
    }
    if observed.mps.is_some() && desired.mps.is_none() {
        ops.push(Op::SetMps { settings: None });
    }

    let observed_placements: Vec<MigPlacement> = observed
        .instances
        .iter()
        .map(|i| canonical(model, &i.placement))
        .collect();
    let desired_placements: Vec<MigPlacement> = desired
        .instances
        .iter()
        .map(|d| canonical(model, &d.placement))
        .collect();

    // Tear down.
    let mut observed_instances: Vec<_> = observed.instances.iter().collect();
    observed_instances.sort_by_key(|i| i.placement.start);
    for instance in observed_instances {
        let start = instance.placement.start;
        let this = canonical(model, &instance.placement);
        let wanted = desired
            .instances
            .iter()
            .zip(&desired_placements)
            .filter(|_| !toggling_mig)
            .find(|(_, p)| **p == this)
            .map(|(d, _)| d);
        let must_stop = |ops: &mut Vec<Op>| -> Result<(), PlanError> {
            if instance.in_use && !stopped_all {
                if !released.covers(start) {
                    return Err(PlanError::InUse {
                        placement: instance.placement.clone(),
                    });
                }
                ops.push(Op::StopProcesses {
                    gi_start: Some(start),
                });
            }
            Ok(())
        };
        match wanted {
            None => {
                must_stop(&mut ops)?;
                for ci in sorted(&instance.compute_instances) {
                    ops.push(Op::DestroyComputeInstance {
                        gi_start: start,
                        ci,
                    });
                }
                ops.push(Op::DestroyGpuInstance { start });
            }
            Some(target) => {
                let doomed: Vec<ComputeInstance> = sorted(&instance.compute_instances)
                    .into_iter()
                    .filter(|ci| !target.compute_instances.contains(ci))
                    .collect();
                if !doomed.is_empty() || (instance.in_use && released.covers(start)) {
                    must_stop(&mut ops)?;
                }
                for ci in doomed {
                    ops.push(Op::DestroyComputeInstance {
                        gi_start: start,
                        ci,
                    });
                }
            }
        }
    }

    if toggling_mig {
        ops.push(if desired.mig_enabled {
            Op::EnableMig
        } else {
            Op::DisableMig
        });
    }

    // Build up.
    let mut wanted: Vec<(&DesiredInstance, &MigPlacement)> =
        desired.instances.iter().zip(&desired_placements).collect();
    wanted.sort_by_key(|(d, _)| d.placement.start);
    for (target, placement) in wanted {
        let start = target.placement.start;
        let existing = observed
            .instances
            .iter()
            .zip(&observed_placements)
            .filter(|_| !toggling_mig)
            .find(|(_, p)| *p == placement)
            .map(|(o, _)| o);
        match existing {
            None => {
                ops.push(Op::CreateGpuInstance {
                    profile: placement.profile.clone(),
                    start,
                });
                for ci in sorted(&target.compute_instances) {
                    ops.push(Op::CreateComputeInstance {
                        gi_start: start,
                        ci,
                    });
                }
            }
            Some(current) => {
                for ci in sorted(&target.compute_instances) {
                    if !current.compute_instances.contains(&ci) {
                        ops.push(Op::CreateComputeInstance {
                            gi_start: start,
                            ci,
                        });
                    }
                }
            }
        }
    }

    if let Some(settings) = desired.mps {
        if observed.mps != Some(settings) {
            ops.push(Op::SetMps {
                settings: Some(settings),
            });
        }
        // Servers started at the defaults (the smallest grant) are raised
        // to the largest, so every client can have its own share.
        if let Some((pct, mem)) = MpsGrant::ceiling(&desired.mps_clients) {
            let behind = observed.mps.is_some()
                && observed
                    .mps_servers
                    .iter()
                    .any(|s| s.active_thread_percentage != pct || s.pinned_mem_limit != Some(mem));
            if behind {
                ops.push(Op::SetMpsServerLimits {
                    active_thread_percentage: pct,
                    pinned_mem_limit: mem,
                });
            }
        }
    }
    if observed.time_slice_replicas != desired.time_slice_replicas {
        ops.push(Op::SetReplicas {
            replicas: desired.time_slice_replicas,
        });
    }
    Ok(ops)
}
