//! A tenant's Kubernetes bundle: what keeps its namespaces in line with
//! its Tessera quota in force.
//!
//! Per namespace, a `Namespace` (labelled with the tenant), a
//! `ResourceQuota` and a `LimitRange`; once, the `PriorityClass`es of the
//! Tessera priority classes open to the tenant.
//!
//! The quota counts what the tenant's quota allows in each pool:
//!
//! | pool sharing | DRA devices (`<class>.deviceclass.resource.k8s.io/devices`) | device plugin (`requests.<resource>`) |
//! |---|---|---|
//! | exclusive | `gpu.nvidia.com`: whole GPUs of the quota | `nvidia.com/gpu`: the same |
//! | MIG | `mig.nvidia.com`: the slice count | `nvidia.com/mig-<profile>`: the slice count, per allowed profile |
//! | MPS, time-slicing | `gpu.nvidia.com`: the slice count (one claim per slice) | `nvidia.com/gpu.shared`: the slice count |
//!
//! plus `count/resourceclaims.resource.k8s.io`: one claim per slice.
//! Kubernetes enforces these per namespace: a tenant with two namespaces
//! can hold up to twice its quota in Kubernetes objects (Tessera's own
//! quota still bounds what Tessera places).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    LimitRange, LimitRangeItem, LimitRangeSpec, Namespace, ResourceQuota, ResourceQuotaSpec,
};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use tessera_core::k8s::{mig_resource, RESOURCE_GPU, RESOURCE_SHARED};
use tessera_core::quota::Quota;
use tessera_core::sharing::SharingMode;

use crate::nvidia;
use crate::{metadata, Documents, RenderError, LABEL_TENANT};

/// Name of the generated `ResourceQuota` and `LimitRange`.
pub const OBJECT_NAME: &str = "tessera-gpus";
/// Quota key of the number of `ResourceClaim` objects.
pub const CLAIM_COUNT: &str = "count/resourceclaims.resource.k8s.io";

/// The quota key of DRA devices of `class`.
pub fn device_class_quota(class: &str) -> String {
    format!("{class}.deviceclass.resource.k8s.io/devices")
}

/// The Kubernetes `PriorityClass` of Tessera priority class `name`.
pub fn priority_class_name(name: &str) -> String {
    format!("tessera-{name}")
}

/// A tenant's quota in force in one pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolQuota {
    /// The pool's name.
    pub pool: String,
    /// How it shares GPUs.
    pub sharing: SharingMode,
    /// The quota in force.
    pub quota: Quota,
    /// MIG profiles tenants may ask for there (MIG pools).
    pub mig_profiles: Vec<String>,
}

/// A Tessera priority class open to the tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Priority {
    /// Its name.
    pub name: String,
    /// Its value (higher is served first).
    pub value: i32,
    /// What it is for.
    pub description: String,
}

/// What a tenant's bundle is made from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantInput {
    /// The tenant's slug.
    pub tenant: String,
    /// Its namespaces.
    pub namespaces: Vec<String>,
    /// Its quota in force, per pool.
    pub pools: Vec<PoolQuota>,
    /// The priority classes open to it.
    pub priorities: Vec<Priority>,
}

/// The bundle.
#[derive(Debug, Clone, PartialEq)]
pub struct TenantBundle {
    /// One per namespace.
    pub namespaces: Vec<Namespace>,
    /// One per namespace, the same limits in each.
    pub quotas: Vec<ResourceQuota>,
    /// One per namespace.
    pub limit_ranges: Vec<LimitRange>,
    /// Cluster-wide, one per priority class.
    pub priority_classes: Vec<PriorityClass>,
}

impl TenantBundle {
    /// In apply order: namespaces, their quotas and limits, then the
    /// priority classes.
    pub fn documents(&self) -> Result<Documents, RenderError> {
        let mut docs = Documents::default();
        for ns in &self.namespaces {
            docs.push(ns)?;
        }
        for (q, l) in self.quotas.iter().zip(&self.limit_ranges) {
            docs.push(q)?;
            docs.push(l)?;
        }
        for p in &self.priority_classes {
            docs.push(p)?;
        }
        Ok(docs)
    }
}

/// The hard limits of the tenant's quota in force (see the module's table).
pub fn hard_limits(pools: &[PoolQuota]) -> BTreeMap<String, u64> {
    let mut hard: BTreeMap<String, u64> = BTreeMap::new();
    for key in [
        device_class_quota(nvidia::CLASS_GPU),
        device_class_quota(nvidia::CLASS_MIG),
        format!("requests.{RESOURCE_GPU}"),
        format!("requests.{RESOURCE_SHARED}"),
        CLAIM_COUNT.to_owned(),
    ] {
        hard.insert(key, 0);
    }
    let mut add = |key: String, n: u64| *hard.entry(key).or_insert(0) += n;
    for p in pools {
        let slices = u64::from(p.quota.max_slices);
        add(CLAIM_COUNT.to_owned(), slices);
        match p.sharing {
            SharingMode::Exclusive => {
                let gpus = u64::from(p.quota.compute.0 / 1000);
                add(device_class_quota(nvidia::CLASS_GPU), gpus);
                add(format!("requests.{RESOURCE_GPU}"), gpus);
            }
            SharingMode::Mig => {
                add(device_class_quota(nvidia::CLASS_MIG), slices);
                for profile in &p.mig_profiles {
                    add(format!("requests.{}", mig_resource(profile)), slices);
                }
            }
            SharingMode::Mps | SharingMode::TimeSlicing => {
                add(device_class_quota(nvidia::CLASS_GPU), slices);
                add(format!("requests.{RESOURCE_SHARED}"), slices);
            }
        }
    }
    hard
}

/// Most of each device-plugin resource one container may take: the
/// largest whole-GPU quota of a pool, one shared replica, one MIG device.
fn container_max(pools: &[PoolQuota]) -> BTreeMap<String, Quantity> {
    let mut max: BTreeMap<String, u64> = BTreeMap::new();
    for p in pools.iter().filter(|p| p.quota.max_slices > 0) {
        match p.sharing {
            SharingMode::Exclusive => {
                let gpus = u64::from(p.quota.compute.0 / 1000);
                let e = max.entry(RESOURCE_GPU.to_owned()).or_insert(0);
                *e = (*e).max(gpus);
            }
            SharingMode::Mig => {
                for profile in &p.mig_profiles {
                    max.insert(mig_resource(profile), 1);
                }
            }
            SharingMode::Mps | SharingMode::TimeSlicing => {
                max.insert(RESOURCE_SHARED.to_owned(), 1);
            }
        }
    }
    max.into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| (k, Quantity(n.to_string())))
        .collect()
}

/// The tenant's bundle.
pub fn tenant_bundle(input: &TenantInput) -> TenantBundle {
    let labels = [(LABEL_TENANT, input.tenant.clone())];
    let hard: BTreeMap<String, Quantity> = hard_limits(&input.pools)
        .into_iter()
        .map(|(k, n)| (k, Quantity(n.to_string())))
        .collect();
    let max = container_max(&input.pools);
    let mut bundle = TenantBundle {
        namespaces: Vec::new(),
        quotas: Vec::new(),
        limit_ranges: Vec::new(),
        priority_classes: Vec::new(),
    };
    for ns in &input.namespaces {
        bundle.namespaces.push(Namespace {
            metadata: metadata(ns, None, &labels),
            ..Default::default()
        });
        bundle.quotas.push(ResourceQuota {
            metadata: metadata(OBJECT_NAME, Some(ns), &labels),
            spec: Some(ResourceQuotaSpec {
                hard: Some(hard.clone()),
                ..Default::default()
            }),
            status: None,
        });
        bundle.limit_ranges.push(LimitRange {
            metadata: metadata(OBJECT_NAME, Some(ns), &labels),
            spec: Some(LimitRangeSpec {
                limits: vec![LimitRangeItem {
                    type_: "Container".to_owned(),
                    max: (!max.is_empty()).then(|| max.clone()),
                    ..Default::default()
                }],
            }),
        });
    }
    for p in &input.priorities {
        bundle.priority_classes.push(PriorityClass {
            metadata: metadata(&priority_class_name(&p.name), None, &[]),
            value: p.value,
            description: (!p.description.is_empty()).then(|| p.description.clone()),
            global_default: Some(false),
            // Tessera preempts, with notice; Kubernetes only orders its
            // queue of pending pods by the value.
            preemption_policy: Some("Never".to_owned()),
        });
    }
    bundle
}

#[cfg(test)]
mod tests;
