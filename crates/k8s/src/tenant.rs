//! A tenant's Kubernetes bundle: what keeps its namespaces in line with
//! its Tessera quota in force.
//!
//! Per namespace, a `Namespace` (labelled with the tenant) and a
//! `ResourceQuota`; once, the `PriorityClass`es of the Tessera priority
//! classes open to the tenant.
//!
//! No `LimitRange`: a `max` on a GPU resource makes Kubernetes' LimitRanger
//! refuse every container that sets no limit for it ("maximum ... usage per
//! Container is N. No limit is specified"), CPU-only pods and DRA pods
//! included, and a default would hand every container a GPU. The quota
//! bounds the namespace instead.
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

use k8s_openapi::api::core::v1::{Namespace, ResourceQuota, ResourceQuotaSpec};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use tessera_core::k8s::{mig_resource, RESOURCE_GPU, RESOURCE_SHARED};
use tessera_core::quota::Quota;
use tessera_core::sharing::SharingMode;

use crate::nvidia;
use crate::{metadata, Documents, RenderError, LABEL_TENANT};

/// Name of the generated `ResourceQuota`.
pub const OBJECT_NAME: &str = "tessera-gpus";
/// Quota key of the number of `ResourceClaim` objects.
pub const CLAIM_COUNT: &str = "count/resourceclaims.resource.k8s.io";

/// The quota key of DRA devices of `class`.
pub fn device_class_quota(class: &str) -> String {
    format!("{class}.deviceclass.resource.k8s.io/devices")
}

/// The Kubernetes `PriorityClass` of Tessera priority class `name`
/// (`None` where `tessera-<name>` is no DNS subdomain, e.g. a name ending
/// in a dash: such a class gets no `PriorityClass`).
pub fn priority_class_name(name: &str) -> Option<String> {
    let full = format!("tessera-{name}");
    let valid = full.len() <= 253
        && full.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        });
    valid.then_some(full)
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
    /// Cluster-wide, one per priority class.
    pub priority_classes: Vec<PriorityClass>,
}

impl TenantBundle {
    /// In apply order: namespaces, their quotas, then the priority
    /// classes.
    pub fn documents(&self) -> Result<Documents, RenderError> {
        let mut docs = Documents::default();
        for ns in &self.namespaces {
            docs.push(ns)?;
        }
        for q in &self.quotas {
            docs.push(q)?;
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

/// The tenant's bundle.
pub fn tenant_bundle(input: &TenantInput) -> TenantBundle {
    let labels = [(LABEL_TENANT, input.tenant.clone())];
    let hard: BTreeMap<String, Quantity> = hard_limits(&input.pools)
        .into_iter()
        .map(|(k, n)| (k, Quantity(n.to_string())))
        .collect();
    let mut bundle = TenantBundle {
        namespaces: Vec::new(),
        quotas: Vec::new(),
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
    }
    for p in &input.priorities {
        let Some(name) = priority_class_name(&p.name) else {
            continue;
        };
        bundle.priority_classes.push(PriorityClass {
            metadata: metadata(&name, None, &[]),
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
