//! MIG through NVML, as logic over a small driver trait: [`MigDriver`] is what
//! the NVIDIA driver offers (implemented with raw NVML calls in `raw`), and
//! [`observe`] / [`apply`] turn it into Tessera's observed state and planned
//! operations. Tests drive the same logic with a fake driver.

use super::profiles::{ci_profile_constant, gi_profile_constant};
use crate::backend::BackendError;
use std::collections::BTreeSet;
use tessera_core::catalogue::{GpuModel, MigProfile, MigSpec};
use tessera_core::mig::MigPlacement;
use tessera_core::plan::{ComputeInstance, ObservedInstance};
use tessera_protocol::agent::MigDevice;

/// A GPU instance as the driver reports it (`nvmlGpuInstanceGetInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GiInfo {
    /// The driver's instance ID (`nvidia-smi mig -lgi`'s `GI ID`).
    pub id: u32,
    /// The profile ID on this GPU (the catalogue's `smi_id`).
    pub profile_id: u32,
    /// First memory slice.
    pub start: u32,
    /// Memory slices.
    pub size: u32,
}

/// A compute instance as the driver reports it (`nvmlComputeInstanceGetInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CiInfo {
    /// The driver's compute-instance ID inside its GPU instance.
    pub id: u32,
    /// First compute slice inside the GPU instance.
    pub start: u32,
    /// Compute slices.
    pub size: u32,
}

/// A MIG device (a compute instance CUDA can use) and whether it runs work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigDeviceInfo {
    /// The GPU instance it belongs to.
    pub gi_id: u32,
    /// `MIG-...`.
    pub uuid: String,
    /// Processes run on it.
    pub busy: bool,
}

/// Who runs on the GPU.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Busy {
    /// Processes outside any GPU instance (MIG off), or anywhere when the
    /// driver does not say which instance.
    pub whole_gpu: bool,
    /// GPU instances (by ID) with processes.
    pub gpu_instances: BTreeSet<u32>,
}

/// The MIG calls of one GPU. Errors are `BackendError::Nvml` naming the call.
pub trait MigDriver {
    /// MIG mode is on now (not merely pending).
    fn mig_enabled(&self) -> Result<bool, BackendError>;
    /// Asks for MIG mode on or off; the caller checks that it took effect.
    fn set_mig_enabled(&self, on: bool) -> Result<(), BackendError>;
    /// The profile ID this GPU gives the profile `constant`
    /// (`NVML_GPU_INSTANCE_PROFILE_*`), `None` when the GPU lacks it.
    fn gi_profile_id(&self, constant: u32) -> Result<Option<u32>, BackendError>;
    /// Every GPU instance.
    fn gpu_instances(&self) -> Result<Vec<GiInfo>, BackendError>;
    /// Creates a GPU instance of profile ID `profile_id` at memory slices
    /// `start..start + size`.
    fn create_gpu_instance(
        &self,
        profile_id: u32,
        start: u32,
        size: u32,
    ) -> Result<(), BackendError>;
    /// Destroys GPU instance `gi_id`.
    fn destroy_gpu_instance(&self, gi_id: u32) -> Result<(), BackendError>;
    /// The compute instances of GPU instance `gi_id`.
    fn compute_instances(&self, gi_id: u32) -> Result<Vec<CiInfo>, BackendError>;
    /// Creates a compute instance of profile `constant`
    /// (`NVML_COMPUTE_INSTANCE_PROFILE_*`) at compute slices
    /// `start..start + size` of GPU instance `gi_id`.
    fn create_compute_instance(
        &self,
        gi_id: u32,
        constant: u32,
        start: u32,
        size: u32,
    ) -> Result<(), BackendError>;
    /// Destroys compute instance `ci_id` of GPU instance `gi_id`.
    fn destroy_compute_instance(&self, gi_id: u32, ci_id: u32) -> Result<(), BackendError>;
    /// Who runs on the GPU.
    fn busy(&self) -> Result<Busy, BackendError>;
    /// The MIG devices (empty with MIG off).
    fn mig_devices(&self) -> Result<Vec<MigDeviceInfo>, BackendError>;
    /// The IDs of the processes running in GPU instance `gi_id`, or
    /// anywhere on the GPU (`None`; the agent's own MPS server excepted).
    fn processes(&self, gi_id: Option<u32>) -> Result<Vec<u32>, BackendError>;
}

/// MIG state of one GPU as Tessera sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MigObserved {
    /// MIG mode on.
    pub mig_enabled: bool,
    /// GPU instances, by start.
    pub instances: Vec<ObservedInstance>,
    /// Processes outside GPU instances.
    pub processes_running: bool,
    /// Usable MIG devices, one per GPU instance, by start.
    pub devices: Vec<MigDevice>,
}

/// The driver's profile IDs of the catalogue profiles of `spec`, found
/// through the NVML constants (what the driver says).
fn driver_profile_ids(
    d: &dyn MigDriver,
    spec: &MigSpec,
) -> Result<Vec<(u32, &'static str)>, BackendError> {
    let mut ids = Vec::new();
    for p in spec.profiles {
        let Some(constant) = gi_profile_constant(p) else {
            continue;
        };
        if let Some(id) = d.gi_profile_id(constant)? {
            ids.push((id, p.name));
        }
    }
    Ok(ids)
}

/// The catalogue name of the profile the driver calls `profile_id`: by the
/// driver's IDs, else by the catalogue's `smi_id`; an unknown profile keeps a
/// descriptive name (the planner then treats the instance as foreign and
/// may destroy it).
fn profile_name(spec: Option<&MigSpec>, ids: &[(u32, &'static str)], profile_id: u32) -> String {
    if let Some((_, name)) = ids.iter().find(|(id, _)| *id == profile_id) {
        return (*name).to_owned();
    }
    spec.and_then(|spec| {
        spec.profiles
            .iter()
            .find(|p| u32::from(p.smi_id) == profile_id)
    })
    .map_or_else(
        || format!("nvml-profile-{profile_id}"),
        |p| p.name.to_owned(),
    )
}

/// Reads MIG mode, GPU and compute instances, processes and MIG devices.
pub fn observe(d: &dyn MigDriver, model: &GpuModel) -> Result<MigObserved, BackendError> {
    // Reported as the driver has it, even for a model the catalogue lacks
    // (its instances then carry descriptive profile names).
    let mig_enabled = d.mig_enabled()?;
    let busy = d.busy()?;
    if !mig_enabled {
        return Ok(MigObserved {
            processes_running: busy.whole_gpu || !busy.gpu_instances.is_empty(),
            ..MigObserved::default()
        });
    }
    let devices = d.mig_devices()?;
    let mut gis = d.gpu_instances()?;
    gis.sort_by_key(|g| g.start);
    let ids = match model.mig {
        Some(spec) => driver_profile_ids(d, spec)?,
        None => Vec::new(),
    };
    let mut instances = Vec::with_capacity(gis.len());
    let mut mig_devices = Vec::new();
    for gi in &gis {
        let name = profile_name(model.mig, &ids, gi.profile_id);
        let mut cis: Vec<ComputeInstance> = d
            .compute_instances(gi.id)?
            .iter()
            .map(|c| ComputeInstance {
                start: clamp_u8(c.start),
                size: clamp_u8(c.size),
            })
            .collect();
        cis.sort_unstable();
        let in_device = devices.iter().filter(|m| m.gi_id == gi.id);
        let in_use = busy.gpu_instances.contains(&gi.id) || in_device.clone().any(|m| m.busy);
        let start = clamp_u8(gi.start);
        if !cis.is_empty() {
            if let Some(first) = in_device.clone().next() {
                mig_devices.push(MigDevice {
                    gi_start: start,
                    profile: name.clone(),
                    uuid: first.uuid.clone(),
                });
            }
        }
        instances.push(ObservedInstance {
            placement: MigPlacement::new(name, start),
            compute_instances: cis,
            in_use,
        });
    }
    Ok(MigObserved {
        mig_enabled,
        instances,
        // Processes the driver did not place in an instance.
        processes_running: false,
        devices: mig_devices,
    })
}

fn clamp_u8(v: u32) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

fn refused(index: u32, op: &'static str, detail: impl Into<String>) -> BackendError {
    BackendError::Refused {
        index,
        op,
        detail: detail.into(),
    }
}

fn spec_of(
    index: u32,
    op: &'static str,
    model: &GpuModel,
) -> Result<&'static MigSpec, BackendError> {
    model
        .mig
        .ok_or_else(|| refused(index, op, format!("{} does not support MIG", model.name)))
}

fn gi_at(
    d: &dyn MigDriver,
    index: u32,
    op: &'static str,
    start: u8,
) -> Result<GiInfo, BackendError> {
    d.gpu_instances()?
        .into_iter()
        .find(|g| g.start == u32::from(start))
        .ok_or_else(|| {
            refused(
                index,
                op,
                format!("no GPU instance starts at memory slice {start}"),
            )
        })
}

/// Turns MIG mode on or off and checks that it took effect: a GPU that needs
/// a reset first (or with a process holding it) keeps the change pending.
pub fn set_mig(d: &dyn MigDriver, index: u32, on: bool) -> Result<(), BackendError> {
    let op = if on { "enable_mig" } else { "disable_mig" };
    if !on && !d.gpu_instances()?.is_empty() {
        return Err(refused(
            index,
            op,
            "MIG mode cannot change while GPU instances exist",
        ));
    }
    let busy = d.busy()?;
    if busy.whole_gpu || !busy.gpu_instances.is_empty() {
        return Err(refused(
            index,
            op,
            "processes are running on the GPU; MIG mode can only change on an idle GPU",
        ));
    }
    d.set_mig_enabled(on)?;
    if d.mig_enabled()? != on {
        return Err(refused(
            index,
            op,
            format!(
                "the driver accepted MIG mode {} but it is still pending: the GPU needs a reset \
                 (stop every process holding it, e.g. monitoring agents, then `nvidia-smi -i {index} -r`) \
                 or a reboot",
                if on { "on" } else { "off" }
            ),
        ));
    }
    Ok(())
}

/// `nvidia-smi mig -cgi <profile>:<start>`.
pub fn create_gpu_instance(
    d: &dyn MigDriver,
    index: u32,
    model: &GpuModel,
    profile: &str,
    start: u8,
) -> Result<(), BackendError> {
    const OP: &str = "create_gpu_instance";
    let spec = spec_of(index, OP, model)?;
    let p: &MigProfile = spec.profile(profile).ok_or_else(|| {
        refused(
            index,
            OP,
            format!(
                "{} has no MIG profile '{profile}' (it has {})",
                model.name,
                spec.profile_names().join(", ")
            ),
        )
    })?;
    if !p.placements.contains(&start) {
        return Err(refused(
            index,
            OP,
            format!("{} cannot start at memory slice {start}", p.name),
        ));
    }
    let constant = gi_profile_constant(p).ok_or_else(|| {
        refused(
            index,
            OP,
            format!("NVML has no GPU instance profile for {}", p.name),
        )
    })?;
    let Some(profile_id) = d.gi_profile_id(constant)? else {
        return Err(refused(
            index,
            OP,
            format!("the driver does not offer {} on this GPU", p.name),
        ));
    };
    if profile_id != u32::from(p.smi_id) {
        tracing::warn!(
            gpu = index,
            profile = p.name,
            driver = profile_id,
            catalogue = p.smi_id,
            "the driver's profile ID differs from the catalogue's; using the driver's"
        );
    }
    d.create_gpu_instance(profile_id, u32::from(start), u32::from(p.memory_slices))
}

/// `nvidia-smi mig -dgi` for the instance at `start`.
pub fn destroy_gpu_instance(d: &dyn MigDriver, index: u32, start: u8) -> Result<(), BackendError> {
    const OP: &str = "destroy_gpu_instance";
    let gi = gi_at(d, index, OP, start)?;
    if !d.compute_instances(gi.id)?.is_empty() {
        return Err(refused(
            index,
            OP,
            format!("the GPU instance at slice {start} still has compute instances"),
        ));
    }
    if d.busy()?.gpu_instances.contains(&gi.id) {
        return Err(refused(
            index,
            OP,
            format!("processes are running in the GPU instance at slice {start}"),
        ));
    }
    d.destroy_gpu_instance(gi.id)
}

/// `nvidia-smi mig -cci` in the instance at `gi_start`.
pub fn create_compute_instance(
    d: &dyn MigDriver,
    index: u32,
    gi_start: u8,
    ci: ComputeInstance,
) -> Result<(), BackendError> {
    const OP: &str = "create_compute_instance";
    let gi = gi_at(d, index, OP, gi_start)?;
    let constant = ci_profile_constant(ci.size).ok_or_else(|| {
        refused(
            index,
            OP,
            format!("NVML has no {}-slice compute instance profile", ci.size),
        )
    })?;
    d.create_compute_instance(gi.id, constant, u32::from(ci.start), u32::from(ci.size))
}

/// `nvidia-smi mig -dci` in the instance at `gi_start`.
pub fn destroy_compute_instance(
    d: &dyn MigDriver,
    index: u32,
    gi_start: u8,
    ci: ComputeInstance,
) -> Result<(), BackendError> {
    const OP: &str = "destroy_compute_instance";
    let gi = gi_at(d, index, OP, gi_start)?;
    if d.busy()?.gpu_instances.contains(&gi.id) {
        return Err(refused(
            index,
            OP,
            format!("processes are running in the GPU instance at slice {gi_start}"),
        ));
    }
    let found = d
        .compute_instances(gi.id)?
        .into_iter()
        .find(|c| c.start == u32::from(ci.start) && c.size == u32::from(ci.size))
        .ok_or_else(|| {
            refused(
                index,
                OP,
                format!("no compute instance {ci:?} in the GPU instance at slice {gi_start}"),
            )
        })?;
    d.destroy_compute_instance(gi.id, found.id)
}
