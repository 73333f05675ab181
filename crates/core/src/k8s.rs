//! What Kubernetes needs to run Tessera's slices, as typed documents:
//!
//! - per host, NVIDIA `mig-parted`'s `v1` config (`mig-configs`) for the
//!   MIG layout it has now, and the NVIDIA device plugin's `v1` config
//!   (`sharing.timeSlicing` / `sharing.mps`) for the GPUs it shares.
//!
//! The objects of tenants' namespaces (DRA claims, quotas, limits,
//! priority classes) are built by the `tessera-k8s` crate, typed by
//! `k8s-openapi`.
//!
//! The resource names are the device plugin's: `nvidia.com/gpu` for whole
//! GPUs, `nvidia.com/mig-<profile>` (mixed MIG strategy) for MIG devices,
//! and `nvidia.com/gpu.shared` for time-sliced and MPS replicas (the
//! plugin's `renameByDefault`). Serialised as YAML by the caller.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::sharing::SliceShape;

/// Whole GPUs.
pub const RESOURCE_GPU: &str = "nvidia.com/gpu";
/// Time-sliced and MPS replicas (`renameByDefault: true`).
pub const RESOURCE_SHARED: &str = "nvidia.com/gpu.shared";

/// The extended resource of a MIG profile (mixed strategy).
pub fn mig_resource(profile: &str) -> String {
    format!("nvidia.com/mig-{profile}")
}

/// The extended resource a slice of `shape` is requested as, and how many.
pub fn extended_resource(shape: &SliceShape) -> (String, u32) {
    match shape {
        SliceShape::Mig { profile } => (mig_resource(profile), 1),
        SliceShape::Mps { .. } | SliceShape::TimeSlice {} => (RESOURCE_SHARED.to_owned(), 1),
        SliceShape::Whole { count, .. } => (RESOURCE_GPU.to_owned(), *count),
    }
}

/// The device plugin's config file (`--config-file`), the parts Tessera writes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DevicePluginConfig {
    /// Always `v1`.
    pub version: String,
    /// Which GPUs are shared, and how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sharing: Option<DevicePluginSharing>,
}

/// `sharing:`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DevicePluginSharing {
    /// `timeSlicing:`.
    #[serde(
        rename = "timeSlicing",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub time_slicing: Option<ReplicatedResources>,
    /// `mps:` (device plugin 0.15 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mps: Option<ReplicatedResources>,
}

/// Replicas per GPU for one sharing method.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReplicatedResources {
    /// Advertise replicas as `<name>.shared`.
    #[serde(default)]
    pub rename_by_default: bool,
    /// Refuse requests for more than one replica.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fail_requests_greater_than_one: bool,
    /// One entry per replica count.
    #[serde(default)]
    pub resources: Vec<ReplicatedResource>,
}

/// GPUs advertised with `replicas` replicas each.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ReplicatedResource {
    /// Always `nvidia.com/gpu`.
    pub name: String,
    /// Replicas per GPU.
    pub replicas: u32,
    /// The GPUs, by UUID.
    pub devices: Vec<String>,
}

/// The config format version the plugin and mig-parted read.
pub const CONFIG_VERSION: &str = "v1";

/// Replicas per GPU UUID as the plugin's entries: one per distinct count,
/// GPUs with fewer than 2 replicas (not shared) left out; `None` when no
/// GPU is shared.
pub fn replicated(replicas: &BTreeMap<String, u32>) -> Option<ReplicatedResources> {
    let mut by_count: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (uuid, n) in replicas {
        if *n > 1 {
            by_count.entry(*n).or_default().push(uuid.clone());
        }
    }
    (!by_count.is_empty()).then(|| ReplicatedResources {
        rename_by_default: true,
        fail_requests_greater_than_one: false,
        resources: by_count
            .into_iter()
            .map(|(replicas, devices)| ReplicatedResource {
                name: RESOURCE_GPU.to_owned(),
                replicas,
                devices,
            })
            .collect(),
    })
}

/// The plugin config for the shared GPUs: replicas per GPU UUID, for
/// time-sliced GPUs and for MPS GPUs alike, all under `timeSlicing`.
///
/// Never under the plugin's own `mps:` section: with it the plugin starts
/// an MPS control daemon of its own and splits the GPU equally among the
/// replicas ("Shared Access to GPUs with MPS" in its README), which would
/// contradict Tessera's daemon and its per-slice grants. Advertised as
/// replicas, pods land on the GPU and connect to Tessera's daemon through
/// the pipe directory and limits in their environment.
pub fn device_plugin_config(shared: &BTreeMap<String, u32>) -> DevicePluginConfig {
    let sharing = DevicePluginSharing {
        time_slicing: replicated(shared),
        mps: None,
    };
    DevicePluginConfig {
        version: CONFIG_VERSION.to_owned(),
        sharing: (sharing != DevicePluginSharing::default()).then_some(sharing),
    }
}

/// mig-parted's config file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MigPartedConfig {
    /// Always `v1`.
    pub version: String,
    /// Named configurations (`nvidia-mig-parted apply -c <name>`).
    #[serde(rename = "mig-configs")]
    pub mig_configs: BTreeMap<String, Vec<MigPartedEntry>>,
}

/// One group of GPUs in a configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MigPartedEntry {
    /// GPU indices.
    pub devices: Vec<u32>,
    /// MIG mode.
    #[serde(rename = "mig-enabled")]
    pub mig_enabled: bool,
    /// Instances per profile (MIG on only).
    #[serde(
        rename = "mig-devices",
        default,
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub mig_devices: BTreeMap<String, u32>,
}

/// One GPU's MIG state: index, MIG on, and its instances' profiles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuMigState {
    /// Index on the host.
    pub index: u32,
    /// MIG mode on.
    pub mig_enabled: bool,
    /// Profiles of its GPU instances (one entry per instance).
    pub profiles: Vec<String>,
}

/// The mig-parted config `name` that reproduces `gpus` (GPUs with the same
/// state share an entry). mig-parted places instances itself: counts per
/// profile are what it takes, not start slices.
pub fn mig_parted(name: &str, gpus: &[GpuMigState]) -> MigPartedConfig {
    let mut entries: Vec<MigPartedEntry> = Vec::new();
    let mut sorted = gpus.to_vec();
    sorted.sort_by_key(|g| g.index);
    for g in sorted {
        let mut mig_devices = BTreeMap::new();
        if g.mig_enabled {
            for p in &g.profiles {
                *mig_devices.entry(p.clone()).or_insert(0) += 1;
            }
        }
        match entries
            .iter_mut()
            .find(|e| e.mig_enabled == g.mig_enabled && e.mig_devices == mig_devices)
        {
            Some(e) => e.devices.push(g.index),
            None => entries.push(MigPartedEntry {
                devices: vec![g.index],
                mig_enabled: g.mig_enabled,
                mig_devices,
            }),
        }
    }
    MigPartedConfig {
        version: CONFIG_VERSION.to_owned(),
        mig_configs: BTreeMap::from([(name.to_owned(), entries)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::MemMiB;

    #[test]
    fn each_shape_asks_for_the_device_plugins_resource() {
        let mig = SliceShape::Mig {
            profile: "1g.10gb".into(),
        };
        assert_eq!(
            extended_resource(&mig),
            ("nvidia.com/mig-1g.10gb".into(), 1)
        );
        assert_eq!(
            extended_resource(&SliceShape::TimeSlice {}),
            ("nvidia.com/gpu.shared".into(), 1)
        );
        let mps = SliceShape::Mps {
            compute_percent: 25,
            memory_mib: MemMiB(4096),
        };
        assert_eq!(extended_resource(&mps).0, RESOURCE_SHARED);
        let whole = SliceShape::Whole {
            count: 4,
            nvlink_local: true,
        };
        assert_eq!(extended_resource(&whole), ("nvidia.com/gpu".into(), 4));
    }

    #[test]
    fn mig_parted_groups_identical_gpus_like_the_published_examples() {
        let gpu = |index, on, profiles: &[&str]| GpuMigState {
            index,
            mig_enabled: on,
            profiles: profiles.iter().map(|p| p.to_string()).collect(),
        };
        let config = mig_parted(
            "tessera",
            &[
                gpu(2, false, &[]),
                gpu(0, true, &["1g.10gb", "1g.10gb", "3g.40gb"]),
                gpu(1, true, &["3g.40gb", "1g.10gb", "1g.10gb"]),
            ],
        );
        // The shape of mig-parted's examples/config.yaml.
        let expected: MigPartedConfig = serde_json::from_value(serde_json::json!({
            "version": "v1",
            "mig-configs": {"tessera": [
                {"devices": [0, 1], "mig-enabled": true, "mig-devices": {"1g.10gb": 2, "3g.40gb": 1}},
                {"devices": [2], "mig-enabled": false}
            ]}
        }))
        .unwrap();
        assert_eq!(config, expected);
    }

    #[test]
    fn the_plugin_config_lists_shared_gpus_by_replica_count() {
        let ts = BTreeMap::from([
            ("GPU-a".to_owned(), 4),
            ("GPU-b".to_owned(), 4),
            ("GPU-c".to_owned(), 1),
        ]);
        let mut shared = ts.clone();
        // An MPS GPU (48 clients) is advertised as replicas too.
        shared.insert("GPU-d".to_owned(), 48);
        let config = device_plugin_config(&shared);
        // The shape of the plugin README's time-slicing example; no `mps:`
        // section, whose own daemon would split the GPU equally.
        let expected: DevicePluginConfig = serde_json::from_value(serde_json::json!({
            "version": "v1",
            "sharing": {
                "timeSlicing": {"renameByDefault": true, "resources": [
                    {"name": "nvidia.com/gpu", "replicas": 4, "devices": ["GPU-a", "GPU-b"]},
                    {"name": "nvidia.com/gpu", "replicas": 48, "devices": ["GPU-d"]}
                ]}
            }
        }))
        .unwrap();
        assert_eq!(config, expected);
        let none = device_plugin_config(&BTreeMap::new());
        assert_eq!(none.sharing, None);
    }
}
