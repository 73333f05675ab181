//! The Kubernetes documents of a host (mig-parted and device plugin
//! configs), of an allocation (its DRA claim) and of a tenant (its
//! namespaces' bundle), built from what the database holds by the rules in
//! [`tessera_core::k8s`] and [`tessera_k8s`].

use crate::entity::{allocation, gpu, host, tenant};
use crate::pools::pool_of;
use crate::TenantActor;
use crate::{PlatformAdmin, Service, ServiceError};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use std::collections::BTreeMap;
use tessera_core::checked::Namespace;
use tessera_core::ids::{AllocationId, HostId};
use tessera_core::k8s::{
    device_plugin_config, mig_parted, DevicePluginConfig, GpuMigState, MigPartedConfig,
};
use tessera_core::sharing::SharingMode;
use tessera_k8s::claim::{allocation_claim, AllocationClaim, ClaimInput};
use tessera_k8s::tenant::{
    priority_class_name, tenant_bundle, PoolQuota, Priority, TenantBundle, TenantInput,
};

/// A host's Kubernetes configs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostK8s {
    /// The host's name (file names, the mig-parted config name).
    pub hostname: tessera_core::checked::Hostname,
    /// mig-parted's config for the MIG layout it has now.
    pub mig_parted: MigPartedConfig,
    /// The device plugin's sharing config for its time-sliced and MPS GPUs.
    pub device_plugin: DevicePluginConfig,
}

impl Service {
    /// The mig-parted and device plugin configs of host `host_id` as it is now.
    pub async fn host_k8s(
        &self,
        _admin: &PlatformAdmin<'_>,
        host_id: HostId,
    ) -> Result<HostK8s, ServiceError> {
        let h = host::Entity::find_by_id(host_id)
            .one(&self.db)
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("host {host_id}")))?;
        let gpus = gpu::Entity::find()
            .filter(gpu::Column::HostId.eq(host_id))
            .order_by_asc(gpu::Column::Idx)
            .all(&self.db)
            .await?;
        let pools = self.pools(&self.db).await?;
        let (mut mig, mut shared) = (Vec::new(), BTreeMap::new());
        for g in &gpus {
            let index = g.index()?;
            let observed = g.observed().cloned();
            mig.push(GpuMigState {
                index,
                mig_enabled: g.mig_enabled,
                profiles: observed
                    .map(|o| {
                        o.instances
                            .into_iter()
                            .map(|i| i.placement.profile)
                            .collect()
                    })
                    .unwrap_or_default(),
            });
            let Some(pool) = pool_of(&pools, &h.hostname, &g.model) else {
                continue;
            };
            let model =
                tessera_core::catalogue::lookup(&g.model, u64::try_from(g.memory_mib).unwrap_or(0));
            match pool.sharing {
                SharingMode::TimeSlicing => {
                    shared.insert(g.uuid.clone(), pool.time_slice_replicas);
                }
                // As many replicas as the daemon takes clients; the
                // clients connect to Tessera's daemon (see
                // `device_plugin_config`).
                SharingMode::Mps => {
                    shared.insert(g.uuid.clone(), model.mps_max_clients);
                }
                SharingMode::Mig | SharingMode::Exclusive => {}
            }
        }
        Ok(HostK8s {
            mig_parted: mig_parted(&format!("tessera-{}", h.hostname), &mig),
            device_plugin: device_plugin_config(&shared),
            hostname: h.hostname,
        })
    }

    /// The namespaces tenant `t`'s workloads run in (those set, else its
    /// slug); claims go in the first.
    pub(crate) fn tenant_namespaces(&self, t: &tenant::Model) -> Vec<Namespace> {
        crate::policy::namespaces_in_force(&t.slug, &self.tenant_fields(t).namespaces)
    }

    /// The claim of an active allocation of tenant `t`, or why there is
    /// none: not active, a MIG device not reported yet, or no namespace.
    pub(crate) fn claim_of(
        &self,
        row: &allocation::Model,
        t: &tenant::Model,
    ) -> Result<AllocationClaim, String> {
        let id = row.id;
        let (host, target) = crate::allocations::connection_target(row).ok_or_else(|| {
            if row.state == tessera_core::lifecycle::AllocationPhase::Active {
                format!("allocation {id} is active, but its host has not reported its MIG device yet; try again in a few seconds")
            } else {
                format!(
                    "allocation {id} is {}: it has a device to claim once it is active",
                    row.state
                )
            }
        })?;
        let namespace = self
            .tenant_namespaces(t)
            .into_iter()
            .next()
            .map(String::from)
            .ok_or_else(|| {
                format!(
                    "tenant '{}' has no Kubernetes namespace (its slug is not a namespace name): a platform admin sets one on the Tenants page",
                    t.slug
                )
            })?;
        Ok(allocation_claim(&ClaimInput {
            allocation: row.id,
            tenant: &t.slug,
            namespace: &namespace,
            host: &host,
            target: &target,
            priority_class: priority_class_name(&row.priority_class),
        }))
    }

    /// The DRA claim (and check pod) of one of the actor's allocations:
    /// 404 for another tenant's, 409 for one that is not active.
    pub async fn allocation_kubernetes(
        &self,
        actor: &TenantActor,
        id: AllocationId,
    ) -> Result<AllocationClaim, ServiceError> {
        let row = self.own_row(actor, id).await?;
        let t = tenant::Entity::find_by_id(row.tenant_id)
            .one(&self.db)
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("allocation {id}")))?;
        self.claim_of(&row, &t).map_err(ServiceError::Conflict)
    }

    /// The Kubernetes bundle of the actor's tenant: per namespace the
    /// quota its Tessera quota in force allows, limits, and the priority
    /// classes open to it. Follows the quota: a temporary grant adds while
    /// it lasts.
    pub async fn tenant_kubernetes(
        &self,
        actor: &TenantActor,
    ) -> Result<TenantBundle, ServiceError> {
        let t = tenant::Entity::find_by_id(actor.tenant_id())
            .one(&self.db)
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("tenant '{}'", actor.tenant_slug())))?;
        let now = self.now();
        let specs = self.pools(&self.db).await?;
        let mut pools = Vec::new();
        for spec in &specs {
            let Some(quota) = Self::quota_of(&self.db, t.id, &spec.name, now).await? else {
                continue;
            };
            let mig_profiles = if spec.sharing == SharingMode::Mig {
                if spec.allowed_mig_profiles.is_empty() {
                    self.mig_profiles_in_pool(&specs, &spec.name).await?
                } else {
                    spec.allowed_mig_profiles.clone()
                }
            } else {
                Vec::new()
            };
            pools.push(PoolQuota {
                pool: spec.name.to_string(),
                sharing: spec.sharing,
                quota,
                mig_profiles,
            });
        }
        let priorities = self
            .settings
            .priority_classes
            .all()
            .iter()
            .filter(|c| c.tenants.is_empty() || c.tenants.iter().any(|s| s == t.slug.as_str()))
            .map(|c| Priority {
                name: c.name.clone(),
                value: c.value,
                description: c.description.clone(),
            })
            .collect();
        Ok(tenant_bundle(&TenantInput {
            tenant: t.slug.to_string(),
            namespaces: self
                .tenant_namespaces(&t)
                .into_iter()
                .map(String::from)
                .collect(),
            pools,
            priorities,
        }))
    }

    /// The MIG profiles the catalogue offers on the GPUs of pool `name`
    /// (a MIG pool that allows every profile).
    async fn mig_profiles_in_pool(
        &self,
        pools: &[crate::pools::PoolSpec],
        name: &str,
    ) -> Result<Vec<String>, ServiceError> {
        let hosts: BTreeMap<HostId, tessera_core::checked::Hostname> = host::Entity::find()
            .all(&self.db)
            .await?
            .into_iter()
            .map(|h| (h.id, h.hostname))
            .collect();
        let mut out: Vec<String> = Vec::new();
        for g in gpu::Entity::find().all(&self.db).await? {
            let Some(hostname) = hosts.get(&g.host_id) else {
                continue;
            };
            if pool_of(pools, hostname, &g.model).is_none_or(|p| p.name != name) {
                continue;
            }
            let model =
                tessera_core::catalogue::lookup(&g.model, u64::try_from(g.memory_mib).unwrap_or(0));
            for p in model.mig.map(|m| m.profile_names()).unwrap_or_default() {
                if !out.iter().any(|x| x == p) {
                    out.push(p.to_owned());
                }
            }
        }
        out.sort();
        Ok(out)
    }
}
