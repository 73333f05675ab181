//! The claim of one allocation: a `ResourceClaim` that selects exactly the
//! placed device(s) by UUID, with the sharing configuration of the slice,
//! and a check pod on the placed node that uses it.
//!
//! One `ResourceClaim`, not a `ResourceClaimTemplate`: a template gives
//! every pod a claim of its own, and a slice is one device, so the pods of
//! a Deployment reference this claim by name (`resourceClaimName`) and
//! share the slice, as the check pod does.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, EnvVar, NodeAffinity, NodeSelector, NodeSelectorRequirement,
    NodeSelectorTerm, Pod, PodResourceClaim, PodSpec, ResourceClaim as ContainerClaim,
    ResourceRequirements,
};
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceClaim, DeviceClaimConfiguration, DeviceRequest, DeviceSelector,
    ExactDeviceRequest, OpaqueDeviceConfiguration, ResourceClaim, ResourceClaimSpec,
};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use tessera_core::ids::AllocationId;
use tessera_core::sharing::ENV_ALLOCATION;
use tessera_core::slice::ConnectionTarget;

use crate::nvidia;
use crate::{metadata, Documents, RenderError, LABEL_ALLOCATION, LABEL_TENANT};

/// The request's name inside the claim (and the pod's claim reference).
pub const REQUEST: &str = "gpu";
/// The image of the check pod: NVIDIA's container toolkit mounts
/// `nvidia-smi` into it, as in the driver's own demo specs.
pub const CHECK_IMAGE: &str = "ubuntu:24.04";

/// What the claim of an allocation is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimInput<'a> {
    /// The allocation.
    pub allocation: AllocationId,
    /// Its tenant's slug.
    pub tenant: &'a str,
    /// The namespace the claim and pod go in.
    pub namespace: &'a str,
    /// The node (host name) it is placed on.
    pub host: &'a str,
    /// The device(s), as the connection details name them.
    pub target: &'a ConnectionTarget,
    /// The Kubernetes `PriorityClass` of the pod (see
    /// [`crate::tenant::priority_class_name`]).
    pub priority_class: Option<String>,
}

/// The claim's name: the allocation's id in it, so people and the agent
/// can tell whose it is.
pub fn claim_name(id: AllocationId) -> String {
    format!("tessera-alloc-{id}")
}

/// The claim, the check pod, and what to know about them.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocationClaim {
    /// The claim.
    pub claim: ResourceClaim,
    /// A pod on the placed node that uses the claim and lists its devices.
    pub pod: Pod,
    /// The device class the claim asks from.
    pub device_class: &'static str,
    /// The CEL selector (exactly the placed devices).
    pub selector: String,
    /// Things to know, for the page (what the driver needs, what happens
    /// at release, the limits of the path).
    pub notes: Vec<String>,
}

impl AllocationClaim {
    /// The claim then the pod.
    pub fn documents(&self) -> Result<Documents, RenderError> {
        let mut docs = Documents::default();
        docs.push(&self.claim)?;
        docs.push(&self.pod)?;
        Ok(docs)
    }
}

/// The claim and check pod of an allocation.
pub fn allocation_claim(input: &ClaimInput<'_>) -> AllocationClaim {
    let name = claim_name(input.allocation);
    let (device_class, uuids, sharing, count) = match input.target {
        ConnectionTarget::Mig { device_uuid, .. } => {
            (nvidia::CLASS_MIG, vec![device_uuid.clone()], None, 1)
        }
        ConnectionTarget::Mps { gpu_uuid, share } => (
            nvidia::CLASS_GPU,
            vec![gpu_uuid.clone()],
            Some(nvidia::mps_sharing(share.compute_percent, share.memory.0)),
            1,
        ),
        ConnectionTarget::TimeSlice { gpu_uuid } => (
            nvidia::CLASS_GPU,
            vec![gpu_uuid.clone()],
            Some(nvidia::time_slicing_sharing()),
            1,
        ),
        ConnectionTarget::Whole { gpu_uuids } => (
            nvidia::CLASS_GPU,
            gpu_uuids.clone(),
            None,
            i64::try_from(gpu_uuids.len()).unwrap_or(i64::MAX),
        ),
    };
    let selector = nvidia::uuid_selector(&uuids);
    let labels = [
        (LABEL_ALLOCATION, input.allocation.to_string()),
        (LABEL_TENANT, input.tenant.to_owned()),
    ];
    let claim = ResourceClaim {
        metadata: metadata(&name, Some(input.namespace), &labels),
        spec: ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(vec![DeviceRequest {
                    name: REQUEST.to_owned(),
                    exactly: Some(ExactDeviceRequest {
                        device_class_name: device_class.to_owned(),
                        allocation_mode: Some("ExactCount".to_owned()),
                        count: Some(count),
                        selectors: Some(vec![DeviceSelector {
                            cel: Some(CELDeviceSelector {
                                expression: selector.clone(),
                            }),
                        }]),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                config: sharing.clone().map(|s| {
                    vec![DeviceClaimConfiguration {
                        requests: Some(vec![REQUEST.to_owned()]),
                        opaque: Some(OpaqueDeviceConfiguration {
                            driver: nvidia::DRIVER.to_owned(),
                            parameters: RawExtension(nvidia::gpu_config(s)),
                        }),
                    }]
                }),
                ..Default::default()
            }),
        },
        status: None,
    };
    let pod = check_pod(input, &name, &labels);
    AllocationClaim {
        claim,
        pod,
        device_class,
        notes: notes(input, &name),
        selector,
    }
}

fn check_pod(input: &ClaimInput<'_>, claim: &str, labels: &[(&str, String)]) -> Pod {
    Pod {
        metadata: metadata(&format!("{claim}-check"), Some(input.namespace), labels),
        spec: Some(PodSpec {
            priority_class_name: input.priority_class.clone(),
            // A second guard: the claim's device is on this node anyway.
            affinity: Some(Affinity {
                node_affinity: Some(NodeAffinity {
                    required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                        node_selector_terms: vec![NodeSelectorTerm {
                            match_expressions: Some(vec![NodeSelectorRequirement {
                                key: "kubernetes.io/hostname".to_owned(),
                                operator: "In".to_owned(),
                                values: Some(vec![input.host.to_owned()]),
                            }]),
                            ..Default::default()
                        }],
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            resource_claims: Some(vec![PodResourceClaim {
                name: REQUEST.to_owned(),
                resource_claim_name: Some(claim.to_owned()),
                ..Default::default()
            }]),
            containers: vec![Container {
                name: "main".to_owned(),
                image: Some(CHECK_IMAGE.to_owned()),
                command: Some(vec![
                    "bash".to_owned(),
                    "-c".to_owned(),
                    "nvidia-smi -L; trap 'exit 0' TERM; sleep 9999 & wait".to_owned(),
                ]),
                env: Some(vec![EnvVar {
                    name: ENV_ALLOCATION.to_owned(),
                    value: Some(input.allocation.to_string()),
                    ..Default::default()
                }]),
                resources: Some(ResourceRequirements {
                    claims: Some(vec![ContainerClaim {
                        name: REQUEST.to_owned(),
                        ..Default::default()
                    }]),
                    limits: None::<BTreeMap<_, _>>,
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    }
}

fn notes(input: &ClaimInput<'_>, claim: &str) -> Vec<String> {
    let mut notes = vec![format!(
        "Needs Kubernetes 1.34 or later (resource.k8s.io/v1) and NVIDIA's DRA driver for GPUs ({} or later) on {}.",
        nvidia::DRIVER_VERSION,
        input.host
    )];
    match input.target {
        ConnectionTarget::Mig { .. } | ConnectionTarget::Whole { .. } => {}
        ConnectionTarget::Mps { .. } => notes.push(format!(
            "MPS limits are applied by the driver, behind its alpha feature gate {}; a GPU is given to one ResourceClaim at a time, so while another slice's claim holds this GPU the pod stays Pending: use the device-plugin snippet below on GPUs shared by several slices.",
            nvidia::GATE_MPS
        )),
        ConnectionTarget::TimeSlice { .. } => notes.push(format!(
            "Time-slicing is set by the driver, behind its alpha feature gate {}; a GPU is given to one ResourceClaim at a time, so while another slice's claim holds this GPU the pod stays Pending: use the device-plugin snippet below on GPUs shared by several slices.",
            nvidia::GATE_TIME_SLICING
        )),
    }
    if let Some(pc) = &input.priority_class {
        notes.push(format!(
            "The pod runs at PriorityClass {pc}, from your tenant's Kubernetes bundle: Kubernetes refuses it until a platform admin has applied the bundle."
        ));
    }
    notes.push(format!(
        "Set {ENV_ALLOCATION}={} in your containers, as the check pod does: when the slice ends, Tessera's agent stops that allocation's processes and the device goes back to the pool, so the pod loses its GPU. Delete the claim {claim} and its pods then.",
        input.allocation
    ));
    notes
}

#[cfg(test)]
mod tests;
