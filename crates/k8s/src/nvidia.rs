//! What NVIDIA's DRA driver for GPUs (`k8s-dra-driver-gpu`) defines, read
//! from its source at release v25.12.0 and again at v0.4.0 (commit
//! 6910a2b, the project's new `sigs.k8s.io/dra-driver-nvidia-gpu` line),
//! which agree on every name here:
//!
//! - device classes: `deployments/helm/*/templates/deviceclass-gpu.yaml`
//!   and `deviceclass-mig.yaml` (`gpu.nvidia.com` selects
//!   `device.attributes['gpu.nvidia.com'].type == 'gpu'`, `mig.nvidia.com`
//!   `... == 'mig'`);
//! - device attributes: `cmd/gpu-kubelet-plugin/deviceinfo.go`
//!   (`GpuInfo.Attributes`: `type`, `uuid`, `productName`, `brand`,
//!   `architecture`, versions) and `mig.go` (`CommonAttributesMig` plus
//!   `uuid`: `parentUUID`, `profile`). `index` and `minor` were published
//!   up to v25.3.x and are gone from v25.8.0, so selectors here use `uuid`
//!   only;
//! - opaque configuration: `api/nvidia.com/resource/v1beta1/gpuconfig.go`,
//!   `migconfig.go`, `sharing.go` (`GpuConfig`/`MigDeviceConfig`,
//!   `sharing.strategy` `TimeSlicing` or `MPS`, `timeSlicingConfig.interval`
//!   `Default|Short|Medium|Long`, `mpsConfig.defaultActiveThreadPercentage`
//!   (0-100) and `defaultPinnedDeviceMemoryLimit` (a quantity)), decoded
//!   strictly (unknown fields refused). Both strategies sit behind the
//!   driver's alpha feature gates `TimeSlicingSettings` and `MPSSupport`.

/// The DRA driver's name, and the domain of its device attributes.
pub const DRIVER: &str = "gpu.nvidia.com";
/// The driver version these names were read from.
pub const DRIVER_VERSION: &str = "v25.12.0";
/// Device class of whole GPUs.
pub const CLASS_GPU: &str = "gpu.nvidia.com";
/// Device class of MIG devices.
pub const CLASS_MIG: &str = "mig.nvidia.com";
/// API version of the driver's opaque configuration.
pub const CONFIG_API_VERSION: &str = "resource.nvidia.com/v1beta1";
/// Configuration kind for whole GPUs.
pub const KIND_GPU_CONFIG: &str = "GpuConfig";
/// The driver's feature gate for MPS sharing.
pub const GATE_MPS: &str = "MPSSupport";
/// The driver's feature gate for time-slicing settings.
pub const GATE_TIME_SLICING: &str = "TimeSlicingSettings";

/// A CEL string literal (single-quoted, `\` and `'` escaped).
pub fn cel_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if c == '\\' || c == '\'' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// The CEL expression that selects the devices with these UUIDs.
pub fn uuid_selector(uuids: &[String]) -> String {
    let attr = format!("device.attributes[{}].uuid", cel_string(DRIVER));
    match uuids {
        [one] => format!("{attr} == {}", cel_string(one)),
        many => format!(
            "{attr} in [{}]",
            many.iter()
                .map(|u| cel_string(u))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `sharing:` of a `GpuConfig` for an MPS client with these limits.
pub fn mps_sharing(thread_percent: u8, pinned_memory_mib: u64) -> serde_json::Value {
    serde_json::json!({
        "strategy": "MPS",
        "mpsConfig": {
            "defaultActiveThreadPercentage": thread_percent,
            "defaultPinnedDeviceMemoryLimit": format!("{pinned_memory_mib}Mi"),
        },
    })
}

/// `sharing:` of a `GpuConfig` for time-slicing at the driver's default
/// interval.
pub fn time_slicing_sharing() -> serde_json::Value {
    serde_json::json!({
        "strategy": "TimeSlicing",
        "timeSlicingConfig": { "interval": "Default" },
    })
}

/// The opaque parameters of a `GpuConfig` with `sharing`.
pub fn gpu_config(sharing: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": CONFIG_API_VERSION,
        "kind": KIND_GPU_CONFIG,
        "sharing": sharing,
    })
}
