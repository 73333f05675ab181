//! The pool as the placer sees it: online hosts, their healthy GPUs in the
//! pool, and what the open allocations (and MIG instances Tessera did not
//! create) occupy on them.

use super::stored::{AllocationRow, StoredPlacement};
use crate::entity::{allocation, gpu, host};
use crate::pools::{pool_of, PoolSpec};
use crate::{Service, ServiceError};
use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder};
use std::collections::{BTreeMap, BTreeSet};
use tessera_core::catalogue;
use tessera_core::ids::{AllocationId, HostId};
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::mig::MigPlacement;
use tessera_core::placement::{
    Decision, Fleet, GpuMode, GpuState, HostState, PlacementRequest, Slice, Workload,
    DEFAULT_MAX_CLASSES,
};
use tessera_core::plan::GpuObserved;
use tessera_core::schedule::Holding;
use tessera_core::sharing::SharingMode;
use tessera_core::units::{ComputeMilli, CpuMilli, MemMiB};
use tessera_protocol::views::{AllocatedGpu, PlacementWhy, RankedPlaceView};

/// Which fleet to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Online hosts with what is taken now.
    Live,
    /// Every known host, empty: could the request ever fit?
    Empty,
}

/// A host of a snapshot: what a decision on it is stored as, and the
/// desired generation it had when read (see [`PoolSnapshot::generation`]).
#[derive(Debug)]
struct SnapshotHost {
    name: String,
    generation: i64,
    gpus: BTreeMap<u32, AllocatedGpu>,
}

/// A pool's fleet and the facts needed to turn a decision into a placement.
pub struct PoolSnapshot {
    /// The placer's fleet.
    pub fleet: Fleet,
    /// The hosts, by id.
    hosts: BTreeMap<HostId, SnapshotHost>,
    /// What the pool's open allocations hold in `fleet`, and until when
    /// (live view only).
    pub holdings: Vec<Holding>,
    /// The allocation of each of `holdings`, in the same order.
    pub holders: Vec<AllocationId>,
}

impl PoolSnapshot {
    /// The stored placement of a decision.
    pub fn placement(&self, d: &Decision) -> Option<(HostId, StoredPlacement)> {
        let host_id = d.host;
        let host = self.hosts.get(&host_id)?;
        let gpus = d
            .gpus
            .iter()
            .map(|i| host.gpus.get(i).cloned())
            .collect::<Option<Vec<_>>>()?;
        Some((
            host_id,
            StoredPlacement {
                hostname: host.name.clone(),
                gpus,
                slice: d.slice.clone(),
                why: Some(self.why(d)),
            },
        ))
    }

    /// The decision's explanation, hosts by name.
    fn why(&self, d: &Decision) -> PlacementWhy {
        let s = &d.score;
        PlacementWhy {
            policy: s.policy.clone(),
            ranking: s.ranking.clone(),
            ranked: s
                .ranked
                .iter()
                .map(|r| RankedPlaceView {
                    host: self
                        .hosts
                        .get(&r.host)
                        .map_or_else(|| r.host.to_string(), |h| h.name.clone()),
                    gpus: r.gpus.clone(),
                    mig_start: r.mig_start,
                    scores: r.scores.clone(),
                })
                .collect(),
            candidates: s.candidates,
            hosts_scanned: s.hosts_scanned,
            hosts_short: s.hosts_short,
            gpus_kept_apart: s.gpus_kept_apart,
            fragmentation_delta: s.fragmentation_delta,
        }
    }

    /// GPUs in the snapshot.
    pub fn gpu_count(&self) -> usize {
        self.hosts.values().map(|h| h.gpus.len()).sum()
    }

    /// Host `host_id`'s desired generation as this snapshot knows it: as
    /// read, or as moved by the placements stored from it since (see
    /// [`Self::generation_moved`]). Every change to what a host holds moves
    /// its generation (`Write::bump_generation`), so a host whose stored
    /// generation is still this one holds what the snapshot says.
    pub fn generation(&self, host_id: HostId) -> Option<i64> {
        self.hosts.get(&host_id).map(|h| h.generation)
    }

    /// Records that a placement stored from this snapshot moved host
    /// `host_id`'s desired generation to `generation`.
    pub fn generation_moved(&mut self, host_id: HostId, generation: i64) {
        if let Some(h) = self.hosts.get_mut(&host_id) {
            h.generation = generation;
        }
    }

    /// Every host's desired generation as this snapshot knows it.
    pub fn generations(&self) -> Vec<(HostId, i64)> {
        self.hosts
            .iter()
            .map(|(id, h)| (*id, h.generation))
            .collect()
    }
}

/// NVLink group of a GPU: the smallest index among it and its peers.
fn nvlink_group(idx: u32, peers: &[u32]) -> Option<u32> {
    if peers.is_empty() {
        None
    } else {
        peers.iter().copied().chain([idx]).min()
    }
}

/// When an open allocation is expected to give its capacity back: at its
/// lease end once active, a full lease from now before that, now when it
/// is being released.
pub(crate) fn holds_until(
    state: AllocationPhase,
    lease_ends_at: Option<DateTime<Utc>>,
    lease_hours: i32,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    let full_lease = now + chrono::Duration::hours(i64::from(lease_hours));
    match state {
        AllocationPhase::Releasing => now,
        AllocationPhase::Active => lease_ends_at.unwrap_or(full_lease),
        _ => full_lease,
    }
}

/// What allocation `a`, placed by `decision`, holds in the fleet and until when.
pub(crate) fn holding_of(a: &allocation::Model, decision: Decision, now: DateTime<Utc>) -> Holding {
    Holding {
        decision,
        until: holds_until(a.state, a.lease_ends_at, a.lease_hours, now).timestamp_millis(),
    }
}

/// Open allocations that occupy capacity, by GPU UUID.
pub type Occupancy = BTreeMap<String, Vec<(allocation::Model, StoredPlacement)>>;

/// Loads the open allocations that hold capacity, of `pool` (all pools when
/// `None`) on `hosts` (all hosts when `None`).
pub async fn occupancy<C: ConnectionTrait>(
    conn: &C,
    pool: Option<&str>,
    hosts: Option<&[HostId]>,
) -> Result<Occupancy, ServiceError> {
    let mut q = allocation::Entity::find()
        .filter(allocation::Column::State.is_in(AllocationPhase::CAPACITY));
    if let Some(p) = pool {
        q = q.filter(allocation::Column::Pool.eq(p));
    }
    if let Some(ids) = hosts {
        q = q.filter(allocation::Column::HostId.is_in(ids.iter().copied()));
    }
    let mut by_gpu: Occupancy = BTreeMap::new();
    for a in q.order_by_asc(allocation::Column::Id).all(conn).await? {
        if let Some(p) = a.stored_placement() {
            for g in &p.gpus {
                by_gpu
                    .entry(g.uuid.clone())
                    .or_default()
                    .push((a.clone(), p.clone()));
            }
        }
    }
    Ok(by_gpu)
}

/// MIG instances on a GPU that no open allocation owns (made by hand, or left
/// from before Tessera): left alone, and counted as taken.
pub fn unmanaged_instances(
    observed: Option<&GpuObserved>,
    owned: &[(allocation::Model, StoredPlacement)],
) -> Vec<MigPlacement> {
    let owned_starts: BTreeSet<u8> = owned
        .iter()
        .filter_map(|(_, p)| match &p.slice {
            Slice::Mig(m) => Some(m.start),
            _ => None,
        })
        .collect();
    observed
        .map(|o| {
            o.instances
                .iter()
                .filter(|i| !owned_starts.contains(&i.placement.start))
                .map(|i| i.placement.clone())
                .collect()
        })
        .unwrap_or_default()
}

impl Service {
    /// Builds the placer's view of `pool`.
    pub(crate) async fn pool_snapshot<C: ConnectionTrait>(
        &self,
        conn: &C,
        pool: &PoolSpec,
        now: DateTime<Utc>,
        view: View,
        workload_from: &[PlacementRequest],
    ) -> Result<PoolSnapshot, ServiceError> {
        let pools = self.pools(conn).await?;
        self.snapshot_of(conn, &pools, pool, now, view, workload_from)
            .await
    }

    /// Re-reads when the slices held in `snapshot` give their capacity back
    /// (activations and extensions move lease ends without touching the
    /// pool's index). `false` when one of them no longer holds capacity:
    /// the index is stale.
    pub(crate) async fn refresh_holdings<C: ConnectionTrait>(
        conn: &C,
        pool: &str,
        snapshot: &mut PoolSnapshot,
        now: DateTime<Utc>,
    ) -> Result<bool, ServiceError> {
        use sea_orm::QuerySelect;
        let rows: BTreeMap<AllocationId, (AllocationPhase, Option<DateTime<Utc>>, i32)> =
            allocation::Entity::find()
                .select_only()
                .columns([
                    allocation::Column::Id,
                    allocation::Column::State,
                    allocation::Column::LeaseEndsAt,
                    allocation::Column::LeaseHours,
                ])
                .filter(allocation::Column::Pool.eq(pool))
                .filter(allocation::Column::State.is_in(AllocationPhase::CAPACITY))
                .into_tuple::<(AllocationId, AllocationPhase, Option<DateTime<Utc>>, i32)>()
                .all(conn)
                .await?
                .into_iter()
                .map(|(id, state, ends, hours)| (id, (state, ends, hours)))
                .collect();
        for (id, holding) in snapshot.holders.iter().zip(snapshot.holdings.iter_mut()) {
            let Some(&(state, ends, hours)) = rows.get(id) else {
                return Ok(false);
            };
            holding.until = holds_until(state, ends, hours, now).timestamp_millis();
        }
        Ok(true)
    }

    async fn snapshot_of<C: ConnectionTrait>(
        &self,
        conn: &C,
        pools: &[PoolSpec],
        pool: &PoolSpec,
        now: DateTime<Utc>,
        view: View,
        workload_from: &[PlacementRequest],
    ) -> Result<PoolSnapshot, ServiceError> {
        let hosts = host::Entity::find()
            .order_by_asc(host::Column::Hostname)
            .all(conn)
            .await?;
        let online: Vec<&host::Model> = hosts
            .iter()
            .filter(|h| {
                view == View::Empty
                    || h.last_seen_at
                        .is_some_and(|seen| now - seen <= self.settings.host_offline_after)
            })
            .collect();
        let host_ids: Vec<HostId> = online.iter().map(|h| h.id).collect();
        // Only the pool's models (the first pool listing a model owns it; checked below).
        let models: Vec<String> = pool
            .models
            .iter()
            .map(|m| catalogue::lookup(m, 0).name.to_string())
            .chain(pool.models.iter().cloned())
            .collect();
        let gpus = gpu::Entity::find()
            .filter(gpu::Column::HostId.is_in(host_ids))
            .filter(gpu::Column::Model.is_in(models))
            .order_by_asc(gpu::Column::HostId)
            .order_by_asc(gpu::Column::Idx)
            .all(conn)
            .await?;
        let taken = match view {
            View::Live => occupancy(conn, Some(&pool.name), None).await?,
            View::Empty => Occupancy::new(),
        };
        let policy = pool.policy();
        let mut states = Vec::new();
        let mut lookup = BTreeMap::new();
        // allocation id → (its GPUs in the snapshot, what it holds, until when).
        let mut held: BTreeMap<AllocationId, (Vec<u32>, &allocation::Model, &StoredPlacement)> =
            BTreeMap::new();
        for h in online {
            let mut host_gpus = Vec::new();
            let mut by_index = BTreeMap::new();
            for g in gpus.iter().filter(|g| g.host_id == h.id) {
                if pool_of(pools, &h.hostname, &g.model).map(|p| p.name.as_str())
                    != Some(pool.name.as_str())
                    || (view == View::Live && !crate::fleet::takes_placements(h, g))
                {
                    continue;
                }
                let index = g.index()?;
                let memory = MemMiB(u64::try_from(g.memory_mib).unwrap_or(0));
                let model = catalogue::lookup(&g.model, memory.0);
                let owned: &[(allocation::Model, StoredPlacement)] =
                    taken.get(&g.uuid).map(Vec::as_slice).unwrap_or(&[]);
                let observed = g.observed().cloned();
                for (a, p) in owned {
                    held.entry(a.id).or_insert((Vec::new(), a, p)).0.push(index);
                }
                let mode = match policy.mode {
                    SharingMode::Mig => {
                        let mut layout: Vec<MigPlacement> = owned
                            .iter()
                            .filter_map(|(_, p)| match &p.slice {
                                Slice::Mig(m) => Some(m.clone()),
                                _ => None,
                            })
                            .collect();
                        if view == View::Live {
                            layout.extend(unmanaged_instances(observed.as_ref(), owned));
                        }
                        GpuMode::Mig { layout }
                    }
                    SharingMode::Exclusive => GpuMode::Exclusive,
                    SharingMode::Mps | SharingMode::TimeSlicing => {
                        let (mut compute, mut mem, mut clients) = (0u32, 0u64, 0u32);
                        for (_, p) in owned {
                            if let Slice::Shared {
                                compute: c,
                                memory: m,
                            } = &p.slice
                            {
                                compute += c.0;
                                mem += m.0;
                                clients += 1;
                            }
                        }
                        GpuMode::Shared {
                            compute_free: ComputeMilli(1000u32.saturating_sub(compute)),
                            memory_free: MemMiB(memory.0.saturating_sub(mem)),
                            clients,
                            max_clients: if policy.mode == SharingMode::Mps {
                                model.mps_max_clients
                            } else {
                                policy.time_slice_replicas
                            },
                        }
                    }
                };
                let allocated = policy.mode == SharingMode::Exclusive && !owned.is_empty();
                host_gpus.push(GpuState {
                    index,
                    uuid: g.uuid.clone(),
                    model: if model.generic {
                        g.model.clone()
                    } else {
                        model.name.to_string()
                    },
                    memory,
                    pool: pool.name.to_string(),
                    nvlink_group: nvlink_group(index, &g.nvlink_peers.0),
                    mode,
                    allocated,
                    tenants: owned.iter().map(|(a, _)| a.tenant_id).collect(),
                });
                by_index.insert(
                    index,
                    AllocatedGpu {
                        index,
                        uuid: g.uuid.clone(),
                        model: g.model.clone(),
                    },
                );
            }
            if host_gpus.is_empty() {
                continue;
            }
            states.push(HostState {
                id: h.id,
                cpu_free: CpuMilli(u32::try_from(h.cpu_milli).unwrap_or(u32::MAX)),
                memory_free: MemMiB(u64::try_from(h.memory_mib).unwrap_or(0)),
                gpus: host_gpus,
            });
            lookup.insert(
                h.id,
                SnapshotHost {
                    name: h.hostname.to_string(),
                    generation: h.desired_generation,
                    gpus: by_index,
                },
            );
        }
        let (holders, holdings): (Vec<AllocationId>, Vec<Holding>) = held
            .into_iter()
            .filter_map(|(id, (gpus, a, p))| {
                let host = a.host_id?;
                let decision = Decision::held(host, gpus, p.slice.clone(), Some(a.tenant_id));
                Some((id, holding_of(a, decision, now)))
            })
            .unzip();
        let workload = Workload::from_requests(workload_from, DEFAULT_MAX_CLASSES);
        let fleet = match Fleet::new(states.clone(), workload.clone()) {
            Ok(f) => f,
            Err(e) => {
                // One GPU with an impossible reported layout must not stop the
                // pool: drop GPUs until the fleet builds, and say which.
                tracing::warn!(pool = %pool.name, "fleet snapshot: {e}; skipping GPUs that do not index");
                let mut kept = Vec::new();
                for mut h in states {
                    h.gpus.retain(|g| {
                        Fleet::new(
                            vec![HostState {
                                id: h.id,
                                cpu_free: h.cpu_free,
                                memory_free: h.memory_free,
                                gpus: vec![g.clone()],
                            }],
                            Workload::default(),
                        )
                        .is_ok()
                    });
                    if !h.gpus.is_empty() {
                        kept.push(h);
                    }
                }
                Fleet::new(kept, workload)
                    .map_err(|e| ServiceError::internal(format!("fleet snapshot: {e}")))?
            }
        };
        Ok(PoolSnapshot {
            fleet,
            hosts: lookup,
            holdings,
            holders,
        })
    }
}
