//! The fleet page: hosts with derived status, their GPUs, and who holds
//! each MIG instance or shared GPU.

use crate::allocations::View;
use crate::entity::{gpu, host};
use crate::{pools, PlatformAdmin, Service, ServiceError};
use sea_orm::{EntityTrait, QueryOrder};
use std::collections::{BTreeMap, BTreeSet};
use tessera_core::health::GpuHealth;
use tessera_core::placement::{FragmentationReport, Policy};
use tessera_core::slice::label;
use tessera_protocol::views::{
    FleetView, GpuView, HostStatus, HostView, MigInstanceView, PoolView,
};

/// Tenants holding capacity on a GPU: (MIG start or none, tenant slug, shape label).
type Holders = Vec<(Option<u8>, String, String)>;

/// The MIG instances in a stored sharing report, by start slice, with their tenants.
fn mig_instances(
    observed: Option<tessera_core::plan::GpuObserved>,
    holders: &Holders,
) -> Vec<MigInstanceView> {
    let Some(observed) = observed else {
        return Vec::new();
    };
    let mut list: Vec<MigInstanceView> = observed
        .instances
        .into_iter()
        .map(|i| MigInstanceView {
            tenant: holders
                .iter()
                .find(|(start, _, _)| *start == Some(i.placement.start))
                .map(|(_, t, _)| t.clone()),
            profile: i.placement.profile,
            start: i.placement.start,
            in_use: i.in_use,
        })
        .collect();
    list.sort_by_key(|i| i.start);
    list
}

impl Service {
    /// Hosts with derived status and their GPUs.
    pub async fn fleet_view(&self, _admin: &PlatformAdmin<'_>) -> Result<FleetView, ServiceError> {
        let now = self.now();
        let hosts = host::Entity::find()
            .order_by_asc(host::Column::Hostname)
            .all(&self.db)
            .await?;
        let gpus = gpu::Entity::find()
            .order_by_asc(gpu::Column::HostId)
            .order_by_asc(gpu::Column::Idx)
            .all(&self.db)
            .await?;
        let offline_after = self.settings.host_offline_after;
        let specs = self.pools(&self.db).await?;
        let slugs: BTreeMap<i64, String> = crate::entity::tenant::Entity::find()
            .all(&self.db)
            .await?
            .into_iter()
            .map(|t| (t.id, t.slug))
            .collect();
        let mut holders: BTreeMap<String, Holders> = BTreeMap::new();
        let occupancy = crate::allocations::occupancy(&self.db, None, None).await?;
        for (uuid, list) in &occupancy {
            for (a, p) in list {
                let start = match &p.slice {
                    tessera_core::placement::Slice::Mig(m) => Some(m.start),
                    _ => None,
                };
                let slug = slugs.get(&a.tenant_id).cloned().unwrap_or_default();
                holders
                    .entry(uuid.clone())
                    .or_default()
                    .push((start, slug, a.shape_label.clone()));
            }
        }
        let no_holders = Holders::new();
        // Live slices per host and per GPU UUID.
        let mut live_by_host: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
        let mut live_by_gpu: BTreeMap<String, u32> = BTreeMap::new();
        for (uuid, list) in &occupancy {
            for (a, _) in list {
                if let Some(h) = a.host_id {
                    live_by_host.entry(h).or_default().insert(a.id);
                }
            }
            live_by_gpu.insert(uuid.clone(), u32::try_from(list.len()).unwrap_or(u32::MAX));
        }
        let schedulable: BTreeSet<String> = gpus
            .iter()
            .filter(|g| {
                hosts.iter().any(|h| {
                    h.id == g.host_id
                        && h.last_seen_at
                            .is_some_and(|seen| now - seen <= offline_after)
                        && super::takes_placements(h, g)
                })
            })
            .map(|g| g.uuid.clone())
            .collect();
        let hosts = hosts
            .into_iter()
            .map(|h| {
                let host_gpus = gpus
                    .iter()
                    .filter(|g| g.host_id == h.id)
                    .map(|g| {
                        Ok(GpuView {
                            index: g.idx,
                            uuid: g.uuid.clone(),
                            model: g.model.clone(),
                            memory_mib: g.memory_mib,
                            mig_capable: g.mig_capable,
                            mig_enabled: g.mig_enabled,
                            health: GpuHealth {
                                verdict: g.health,
                                findings: g
                                    .health_findings
                                    .clone()
                                    .map(|f| f.0)
                                    .unwrap_or_default(),
                            },
                            ops: super::gpu_ops(g),
                            live_slices: live_by_gpu.get(&g.uuid).copied().unwrap_or(0),
                            mig_map: g.observed().filter(|o| o.mig_enabled).and_then(|o| {
                                let layout: Vec<_> =
                                    o.instances.iter().map(|i| i.placement.clone()).collect();
                                tessera_core::mig::mig_map(
                                    &tessera_core::catalogue::lookup(
                                        &g.model,
                                        u64::try_from(g.memory_mib).unwrap_or(0),
                                    ),
                                    &layout,
                                )
                            }),
                            mps: g.observed().and_then(|o| o.mps),
                            mig_instances: mig_instances(
                                g.observed().cloned(),
                                holders.get(&g.uuid).unwrap_or(&no_holders),
                            ),
                            holders: holders
                                .get(&g.uuid)
                                .unwrap_or(&no_holders)
                                .iter()
                                .filter(|(start, _, _)| start.is_none())
                                .map(|(_, t, label)| format!("{t}: {label}"))
                                .collect(),
                            pool: pools::pool_of(&specs, &h.hostname, &g.model)
                                .map(|p| p.name.clone()),
                        })
                    })
                    .collect::<Result<Vec<_>, ServiceError>>()?;
                Ok(HostView {
                    id: h.id,
                    ops: super::host_ops(&h),
                    live_slices: live_by_host
                        .get(&h.id)
                        .map_or(0, |s| u32::try_from(s.len()).unwrap_or(u32::MAX)),
                    status: match h.last_seen_at {
                        Some(seen) if now - seen <= offline_after => HostStatus::Online,
                        _ => HostStatus::Offline,
                    },
                    hostname: h.hostname,
                    last_seen_at: h.last_seen_at,
                    cpu_milli: h.cpu_milli,
                    memory_mib: h.memory_mib,
                    agent_version: h.agent_version,
                    backend: h.backend,
                    driver_version: h.driver_version,
                    gpus: host_gpus,
                })
            })
            .collect::<Result<Vec<HostView>, ServiceError>>()?;
        let mut shape_of_pools = Vec::new();
        for p in &specs {
            shape_of_pools.push(self.pool_shape(p, now).await?);
        }
        let pools = specs
            .iter()
            .zip(shape_of_pools)
            .map(|(p, (frag, unplaceable))| {
                let members = || {
                    hosts
                        .iter()
                        .flat_map(|h| h.gpus.iter().map(move |g| (h, g)))
                };
                let mine = |g: &GpuView| g.pool.as_deref() == Some(p.name.as_str());
                let gpus = members().filter(|(_, g)| mine(g)).count();
                let online = members()
                    .filter(|(h, g)| mine(g) && h.status == HostStatus::Online)
                    .count();
                let takes = members()
                    .filter(|(_, g)| mine(g) && schedulable.contains(&g.uuid))
                    .count();
                PoolView {
                    name: p.name.clone(),
                    description: p.description.clone(),
                    sharing: p.sharing,
                    isolation: p.isolation,
                    gpus: u32::try_from(gpus).unwrap_or(u32::MAX),
                    gpus_online: u32::try_from(online).unwrap_or(u32::MAX),
                    gpus_schedulable: u32::try_from(takes).unwrap_or(u32::MAX),
                    free_gpu_milli: frag.free_gpu_milli,
                    fragmented_gpu_milli: frag.fragmented_gpu_milli.round().max(0.0) as u64,
                    unplaceable,
                }
            })
            .collect();
        Ok(FleetView {
            pools,
            hosts,
            as_of: now,
        })
    }
}

impl Service {
    /// A pool's free capacity and fragmentation against its current mix of
    /// requests, and the shapes it offers that fit nowhere right now.
    async fn pool_shape(
        &self,
        spec: &crate::pools::PoolSpec,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<(FragmentationReport, Vec<String>), ServiceError> {
        let workload = self.pool_workload(&self.db, spec).await?;
        let snapshot = self
            .pool_snapshot(&self.db, spec, now, View::Live, &workload)
            .await?;
        let offer = Self::pool_offer(spec);
        let unplaceable = offer
            .probe_shapes()
            .iter()
            .filter(|shape| {
                offer
                    .placement_request(shape)
                    .is_ok_and(|r| snapshot.fleet.place(&r, Policy::Pack).is_err())
            })
            .map(label)
            .collect();
        Ok((snapshot.fleet.fragmentation(), unplaceable))
    }
}
