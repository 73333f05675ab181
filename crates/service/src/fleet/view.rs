//! The fleet page: hosts with derived status, their GPUs, and who holds
//! each MIG instance or shared GPU.

use crate::entity::{gpu, host};
use crate::{pools, PlatformAdmin, Service, ServiceError};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use std::collections::{BTreeMap, BTreeSet};
use tessera_core::availability::OpsMode;
use tessera_core::health::{GpuHealth, HealthVerdict};
use tessera_core::ids::{AllocationId, HostId, TenantId};
use tessera_core::placement::{FragmentationReport, Policy};
use tessera_core::slice::label;
use tessera_protocol::views::{
    FleetFilter, FleetSummary, FleetView, GpuView, HostFilter, HostStatus, HostView,
    MigInstanceView, PoolView, HOSTS_PER_PAGE,
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

/// What the listing needs of every host (the page's are then read in full).
#[derive(Debug, sea_orm::FromQueryResult)]
struct HostFacts {
    id: HostId,
    hostname: tessera_core::checked::Hostname,
    last_seen_at: Option<chrono::DateTime<chrono::Utc>>,
    ops_mode: OpsMode,
}

/// What the listing needs of every GPU, counted in the database by host
/// and by what it needs (a host's GPUs are usually one group): the GPUs of
/// a 5,000-host fleet are 40,000 rows, their groups 5,000.
#[derive(Debug, sea_orm::FromQueryResult)]
struct GpuFacts {
    host_id: HostId,
    model: String,
    mig_enabled: bool,
    health: HealthVerdict,
    ops_mode: OpsMode,
    /// GPUs in the group.
    gpus: i64,
    /// Their memory together.
    memory_mib: i64,
}

impl Service {
    /// One page of the hosts that match `filter` (by name, with derived
    /// status and their GPUs), the whole fleet's numbers and the pools.
    /// Only the page's hosts are read in full; the pools' free capacity
    /// comes from their fleet indexes.
    pub async fn fleet_view(
        &self,
        _admin: &PlatformAdmin<'_>,
        filter: &FleetFilter,
    ) -> Result<FleetView, ServiceError> {
        self.fleet_listing(filter).await
    }

    /// The same without the proof (the insights' heat map lists hosts too).
    pub(crate) async fn fleet_listing(
        &self,
        filter: &FleetFilter,
    ) -> Result<FleetView, ServiceError> {
        if filter.page == Some(0) {
            return Err(ServiceError::invalid("page", "pages start at 1"));
        }
        if filter.q.as_ref().is_some_and(|q| q.chars().count() > 253) {
            return Err(ServiceError::invalid(
                "q",
                "must be at most 253 characters (a host name is no longer)",
            ));
        }
        let now = self.now();
        let specs = self.pools(&self.db).await?;
        if let Some(pool) = &filter.pool {
            Self::pool_named(&specs, "pool", pool)?;
        }
        let all_hosts = host::Entity::find()
            .select_only()
            .columns([
                host::Column::Id,
                host::Column::Hostname,
                host::Column::LastSeenAt,
                host::Column::OpsMode,
            ])
            .order_by_asc(host::Column::Hostname)
            .into_model::<HostFacts>()
            .all(&self.db)
            .await?;
        let facts = gpu::Entity::find()
            .select_only()
            .columns([
                gpu::Column::HostId,
                gpu::Column::Model,
                gpu::Column::MigEnabled,
                gpu::Column::Health,
                gpu::Column::OpsMode,
            ])
            .column_as(Expr::cust("COUNT(*)"), "gpus")
            // PostgreSQL's SUM of a bigint is a numeric.
            .column_as(Expr::cust("CAST(SUM(memory_mib) AS BIGINT)"), "memory_mib")
            .group_by(gpu::Column::HostId)
            .group_by(gpu::Column::Model)
            .group_by(gpu::Column::MigEnabled)
            .group_by(gpu::Column::Health)
            .group_by(gpu::Column::OpsMode)
            .into_model::<GpuFacts>()
            .all(&self.db)
            .await?;
        let mut facts_of: BTreeMap<HostId, Vec<&GpuFacts>> = BTreeMap::new();
        for g in &facts {
            facts_of.entry(g.host_id).or_default().push(g);
        }
        let offline_after = self.settings.host_offline_after;
        let online = |h: &HostFacts| {
            h.last_seen_at
                .is_some_and(|seen| now - seen <= offline_after)
        };
        let no_gpus = Vec::new();
        let gpus_of = |h: &HostFacts| facts_of.get(&h.id).unwrap_or(&no_gpus);
        let attention = |h: &HostFacts| {
            !online(h)
                || h.ops_mode != OpsMode::Available
                || gpus_of(h)
                    .iter()
                    .any(|g| g.health != HealthVerdict::Healthy || g.ops_mode != OpsMode::Available)
        };
        let pool_of = |h: &HostFacts, g: &GpuFacts| {
            pools::pool_of(&specs, &h.hostname, &g.model).map(|p| p.name.as_str())
        };

        let summary = FleetSummary {
            hosts: count(all_hosts.len()),
            hosts_online: count(all_hosts.iter().filter(|h| online(h)).count()),
            hosts_attention: count(all_hosts.iter().filter(|h| attention(h)).count()),
            gpus: count(facts.iter().map(|g| g.gpus).sum::<i64>()),
            gpus_mig: count(
                facts
                    .iter()
                    .filter(|g| g.mig_enabled)
                    .map(|g| g.gpus)
                    .sum::<i64>(),
            ),
            memory_mib: facts.iter().map(|g| g.memory_mib).sum(),
        };
        let mut pools = Vec::with_capacity(specs.len());
        for p in &specs {
            let (mut gpus, mut up, mut takes) = (0, 0, 0);
            for h in &all_hosts {
                for g in gpus_of(h)
                    .iter()
                    .filter(|g| pool_of(h, g) == Some(p.name.as_str()))
                {
                    gpus += g.gpus;
                    if online(h) {
                        up += g.gpus;
                        if super::gpu_takes_placements(h.ops_mode, g.health, g.ops_mode) {
                            takes += g.gpus;
                        }
                    }
                }
            }
            let (frag, unplaceable) = self.pool_shape(p, now).await?;
            pools.push(PoolView {
                name: p.name.to_string(),
                description: p.description.clone(),
                sharing: p.sharing,
                isolation: p.isolation,
                gpus: count(gpus),
                gpus_online: count(up),
                gpus_schedulable: count(takes),
                free_gpu_milli: frag.free_gpu_milli,
                fragmented_gpu_milli: frag.fragmented_gpu_milli.round().max(0.0) as u64,
                unplaceable,
            });
        }

        let needle = filter.q.as_deref().map(str::to_lowercase);
        let matching: Vec<&HostFacts> = all_hosts
            .iter()
            .filter(|h| {
                needle
                    .as_deref()
                    .is_none_or(|n| h.hostname.to_lowercase().contains(n))
                    && filter
                        .pool
                        .as_deref()
                        .is_none_or(|pool| gpus_of(h).iter().any(|g| pool_of(h, g) == Some(pool)))
                    && match filter.status {
                        None => true,
                        Some(HostFilter::Online) => online(h),
                        Some(HostFilter::Offline) => !online(h),
                        Some(HostFilter::Attention) => attention(h),
                    }
            })
            .collect();
        let per_page = HOSTS_PER_PAGE as usize;
        let pages = matching.len().div_ceil(per_page).max(1);
        let page = (filter.page.unwrap_or(1).max(1) as usize).min(pages);
        let ids: Vec<HostId> = matching
            .iter()
            .skip((page - 1) * per_page)
            .take(per_page)
            .map(|h| h.id)
            .collect();
        let mut shown = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(500) {
            shown.extend(
                host::Entity::find()
                    .filter(host::Column::Id.is_in(chunk.iter().copied()))
                    .all(&self.db)
                    .await?,
            );
        }
        // In the listing's order (the database's collation).
        let position: BTreeMap<HostId, usize> =
            ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        shown.sort_by_key(|h| position.get(&h.id).copied());
        let hosts = self.host_views(&specs, shown, now).await?;
        Ok(FleetView {
            pools,
            summary,
            hosts,
            matching: count(matching.len()),
            page: count(page),
            pages: count(pages),
            as_of: now,
        })
    }

    /// `hosts` with their GPUs and who holds what on them.
    async fn host_views(
        &self,
        specs: &[crate::pools::PoolSpec],
        hosts: Vec<host::Model>,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<Vec<HostView>, ServiceError> {
        let ids: Vec<HostId> = hosts.iter().map(|h| h.id).collect();
        let gpus = gpu::Entity::find()
            .filter(gpu::Column::HostId.is_in(ids.iter().copied()))
            .order_by_asc(gpu::Column::HostId)
            .order_by_asc(gpu::Column::Idx)
            .all(&self.db)
            .await?;
        let offline_after = self.settings.host_offline_after;
        let slugs: BTreeMap<TenantId, tessera_core::checked::TenantSlug> =
            crate::entity::tenant::Entity::find()
                .all(&self.db)
                .await?
                .into_iter()
                .map(|t| (t.id, t.slug))
                .collect();
        let mut holders: BTreeMap<String, Holders> = BTreeMap::new();
        let occupancy = crate::allocations::occupancy(&self.db, None, Some(&ids)).await?;
        for (uuid, list) in &occupancy {
            for (a, p) in list {
                let start = match &p.slice {
                    tessera_core::placement::Slice::Mig(m) => Some(m.start),
                    _ => None,
                };
                let slug = slugs
                    .get(&a.tenant_id)
                    .map(ToString::to_string)
                    .unwrap_or_default();
                holders
                    .entry(uuid.clone())
                    .or_default()
                    .push((start, slug, a.shape_label.clone()));
            }
        }
        let no_holders = Holders::new();
        // Live slices per host and per GPU UUID.
        let mut live_by_host: BTreeMap<HostId, BTreeSet<AllocationId>> = BTreeMap::new();
        let mut live_by_gpu: BTreeMap<String, u32> = BTreeMap::new();
        for (uuid, list) in &occupancy {
            for (a, _) in list {
                if let Some(h) = a.host_id {
                    live_by_host.entry(h).or_default().insert(a.id);
                }
            }
            live_by_gpu.insert(uuid.clone(), count(list.len()));
        }
        hosts
            .into_iter()
            .map(|h| {
                let host_gpus = gpus
                    .iter()
                    .filter(|g| g.host_id == h.id)
                    .map(|g| GpuView {
                        index: g.idx,
                        uuid: g.uuid.clone(),
                        model: g.model.clone(),
                        memory_mib: g.memory_mib,
                        mig_capable: g.mig_capable,
                        mig_enabled: g.mig_enabled,
                        health: GpuHealth {
                            verdict: g.health,
                            findings: g.health_findings.clone().map(|f| f.0).unwrap_or_default(),
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
                        mps_strays: g
                            .observed()
                            .map(|o| o.mps_strays.clone())
                            .unwrap_or_default(),
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
                        pool: pools::pool_of(specs, &h.hostname, &g.model)
                            .map(|p| p.name.to_string()),
                    })
                    .collect();
                Ok(HostView {
                    id: h.id,
                    ops: super::host_ops(&h),
                    live_slices: live_by_host.get(&h.id).map_or(0, |s| count(s.len())),
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
            .collect()
    }
}

/// A count as the views carry it.
fn count<N: TryInto<u32>>(n: N) -> u32 {
    n.try_into().unwrap_or(u32::MAX)
}

impl Service {
    /// A pool's free capacity and fragmentation against its current mix of
    /// requests, and the shapes it offers that fit nowhere right now.
    async fn pool_shape(
        &self,
        spec: &crate::pools::PoolSpec,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<(FragmentationReport, Vec<String>), ServiceError> {
        let indexed = self.indexed_pool(spec, now).await?;
        let snapshot = &indexed.snapshot;
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
        let shape = (snapshot.fleet.fragmentation(), unplaceable);
        self.keep_index(indexed);
        Ok(shape)
    }
}

impl Service {
    /// The names of every enrolled host, in order (for choosing one).
    pub async fn enrolled_host_names(
        &self,
        _admin: &PlatformAdmin<'_>,
    ) -> Result<Vec<String>, ServiceError> {
        Ok(host::Entity::find()
            .select_only()
            .column(host::Column::Hostname)
            .order_by_asc(host::Column::Hostname)
            .into_tuple::<String>()
            .all(&self.db)
            .await?)
    }
}
