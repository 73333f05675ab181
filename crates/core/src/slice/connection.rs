//! How a tenant reaches a slice: environment variables for a process on the
//! host, and the Kubernetes resource with a pod snippet.

use serde::{Deserialize, Serialize};

use crate::ids::AllocationId;
use crate::sharing::{
    MpsShare, ENV_ALLOCATION, ENV_MPS_ACTIVE_THREAD_PERCENTAGE, ENV_MPS_PINNED_DEVICE_MEM_LIMIT,
};
use crate::units::MemMiB;

/// Where the agent runs each GPU's MPS control daemon: one pipe directory per
/// GPU, `<root>/<gpu uuid>`.
pub const MPS_PIPE_ROOT: &str = "/var/run/tessera/mps";

/// What the slice is on the host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ConnectionTarget {
    /// A MIG device.
    Mig {
        /// Profile, e.g. `1g.10gb`.
        profile: String,
        /// The MIG device UUID (`MIG-...`).
        device_uuid: String,
    },
    /// An MPS client share of one GPU.
    Mps {
        /// The GPU's UUID.
        gpu_uuid: String,
        /// The client's limits.
        share: MpsShare,
    },
    /// A time-sliced replica of one GPU.
    TimeSlice {
        /// The GPU's UUID.
        gpu_uuid: String,
    },
    /// Whole GPUs.
    Whole {
        /// Their UUIDs.
        gpu_uuids: Vec<String>,
    },
}

/// Connection details shown with copy buttons.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    /// Host name.
    pub host: String,
    /// Environment for a process on the host, in order.
    pub env: Vec<(String, String)>,
    /// Kubernetes extended resource name.
    pub k8s_resource: String,
    /// How many of the resource to request.
    pub k8s_count: u32,
    /// A pod spec fragment requesting it (the device plugin's path: the
    /// plugin picks the device on the node).
    pub pod_snippet: String,
    /// The DRA `ResourceClaim` selecting exactly this slice's device(s),
    /// and a check pod using it, as YAML (empty where not built, e.g. in
    /// lists).
    #[serde(default)]
    pub kubernetes_yaml: String,
    /// What to know about the claim.
    #[serde(default)]
    pub kubernetes_notes: Vec<String>,
}

/// Connection details for allocation `id`'s `target` on `host`. The
/// environment names the allocation (`TESSERA_ALLOCATION`) in every mode,
/// and so does the pod snippet, with the MPS limits: the agent stops a
/// released shared slice's processes by it.
pub fn connection(host: &str, id: AllocationId, target: &ConnectionTarget) -> Connection {
    let mut env = Vec::new();
    let (resource, count) = match target {
        ConnectionTarget::Mig {
            profile,
            device_uuid,
        } => {
            env.push(("CUDA_VISIBLE_DEVICES".to_string(), device_uuid.clone()));
            (crate::k8s::mig_resource(profile), 1)
        }
        ConnectionTarget::Mps { gpu_uuid, share } => {
            env.push(("CUDA_VISIBLE_DEVICES".to_string(), gpu_uuid.clone()));
            env.push((
                "CUDA_MPS_PIPE_DIRECTORY".to_string(),
                format!("{MPS_PIPE_ROOT}/{gpu_uuid}"),
            ));
            // With CUDA_VISIBLE_DEVICES set to one GPU, that GPU is ordinal 0.
            for (k, v) in share.env(0) {
                env.push((k.to_string(), v));
            }
            debug_assert!(env
                .iter()
                .any(|(k, _)| k == ENV_MPS_ACTIVE_THREAD_PERCENTAGE));
            debug_assert!(env
                .iter()
                .any(|(k, _)| k == ENV_MPS_PINNED_DEVICE_MEM_LIMIT));
            (crate::k8s::RESOURCE_SHARED.to_string(), 1)
        }
        ConnectionTarget::TimeSlice { gpu_uuid } => {
            env.push(("CUDA_VISIBLE_DEVICES".to_string(), gpu_uuid.clone()));
            (crate::k8s::RESOURCE_SHARED.to_string(), 1)
        }
        ConnectionTarget::Whole { gpu_uuids } => {
            env.push(("CUDA_VISIBLE_DEVICES".to_string(), gpu_uuids.join(",")));
            (
                crate::k8s::RESOURCE_GPU.to_string(),
                u32::try_from(gpu_uuids.len()).unwrap_or(u32::MAX),
            )
        }
    };
    env.push((ENV_ALLOCATION.to_string(), id.to_string()));
    // The device plugin sets CUDA_VISIBLE_DEVICES in the container.
    let pod_env: String = env
        .iter()
        .filter(|(k, _)| k != "CUDA_VISIBLE_DEVICES")
        .map(|(k, v)| format!("        - name: {k}\n          value: \"{v}\"\n"))
        .collect();
    let pod_snippet = format!(
        "spec:\n  nodeSelector:\n    kubernetes.io/hostname: {host}\n  containers:\n    - name: main\n      env:\n{pod_env}      resources:\n        limits:\n          {resource}: {count}\n"
    );
    Connection {
        host: host.to_string(),
        env,
        k8s_resource: resource,
        k8s_count: count,
        pod_snippet,
        kubernetes_yaml: String::new(),
        kubernetes_notes: Vec::new(),
    }
}

/// The MPS share for memory in MiB and a percentage (a convenience for views).
pub fn mps_share(compute_percent: u8, memory: MemMiB) -> MpsShare {
    MpsShare {
        compute_percent,
        memory,
    }
}
