//! The Kubernetes documents of a host (mig-parted and device plugin
//! configs) and of a tenant (its namespace's `ResourceQuota`), built from
//! what the database holds by the rules in [`tessera_core::k8s`].

use crate::allocations::AllocationRow;
use crate::entity::{allocation, gpu, host};
use crate::pools::pool_of;
use crate::TenantActor;
use crate::{PlatformAdmin, Service, ServiceError};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use std::collections::BTreeMap;
use tessera_core::ids::HostId;
use tessera_core::k8s::{
    device_plugin_config, extended_resource, mig_parted, resource_quota, DevicePluginConfig,
    GpuMigState, MigPartedConfig, ResourceQuota,
};
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::sharing::SharingMode;

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

    /// The `ResourceQuota` of the tenant's namespace (named like the
    /// tenant) for the slices it holds: placed, provisioning or active, and
    /// not lost.
    pub async fn tenant_resource_quota(
        &self,
        actor: &TenantActor,
    ) -> Result<ResourceQuota, ServiceError> {
        let rows = allocation::Entity::find()
            .filter(allocation::Column::TenantId.eq(actor.tenant_id()))
            .filter(allocation::Column::State.is_in([
                AllocationPhase::Placed,
                AllocationPhase::Provisioning,
                AllocationPhase::Active,
            ]))
            .filter(allocation::Column::CapacityLostAt.is_null())
            .all(&self.db)
            .await?;
        let held = rows
            .iter()
            .map(|a| Ok(extended_resource(a.slice_shape())))
            .collect::<Result<Vec<_>, ServiceError>>()?;
        Ok(resource_quota(actor.tenant_slug(), &held))
    }
}
