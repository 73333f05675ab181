//! The desired state of a host, derived from its open allocations and the
//! pools' policies, and delivered to the agent by long poll.

use super::snapshot::{occupancy, unmanaged_instances};
use super::stored::{set_state, AllocationRow};
use crate::audit::Actor;
use crate::entity::{allocation, gpu, host};
use crate::events::{AllocationRef, DomainEvent};
use crate::fleet::AuthenticatedHost;
use crate::pools::pool_of;
use crate::{Service, ServiceError};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect,
};
use std::time::Duration;
use tessera_core::catalogue;
use tessera_core::ids::HostId;
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::lifecycle::{transition, AllocationEvent};
use tessera_core::placement::Slice;
use tessera_core::plan::{
    ComputeInstance, DesiredInstance, GpuDesired, MpsGrant, MpsSettings, Released,
};
use tessera_core::sharing::SharingMode;
use tessera_core::units::MemMiB;
use tessera_protocol::agent::{DesiredState, GpuDesiredEntry, DESIRED_MAX_WAIT_S};

/// How often a waiting long poll re-reads the generation by default, so a
/// change made by another server replica is seen even when its notice is
/// lost.
pub(crate) const DESIRED_RECHECK: Duration = Duration::from_secs(1);

/// While this replica hears the others' notices (always, on SQLite), a
/// notice can only be lost with the listener's connection, and a new
/// subscription wakes every poll: the re-check is this many times rarer
/// (10 s by default; at 5,000 hosts each re-check reads 5,000 rows).
const RECHECK_RARER_WHILE_HEARD: u32 = 10;

impl Service {
    /// Wakes long polls after a commit that changed some host's desired state.
    /// Only that host's long poll wakes (`None`: every host's). Returns the
    /// notice that wakes the other replicas' long polls.
    pub(crate) fn desired_changed(
        &self,
        host_id: Option<HostId>,
    ) -> crate::runtime::replicas::PeerNotice {
        self.wake_local(host_id);
        crate::runtime::replicas::PeerNotice::Desired(host_id)
    }

    /// Wakes this process's long polls for `host_id` (`None`: every host's).
    /// Its next report is processed in full here (see `fleet::heartbeat`).
    pub(crate) fn wake_local(&self, host_id: Option<HostId>) {
        self.host_checks.forget_report(host_id);
        self.generations.wake(host_id);
    }

    async fn generation_of<C: ConnectionTrait>(
        conn: &C,
        host_id: HostId,
    ) -> Result<i64, ServiceError> {
        Ok(host::Entity::find_by_id(host_id)
            .one(conn)
            .await?
            .ok_or(ServiceError::InvalidCredential)?
            .desired_generation)
    }

    /// The desired state of `host` now.
    pub async fn desired_state<C: ConnectionTrait>(
        &self,
        conn: &C,
        host_id: HostId,
    ) -> Result<DesiredState, ServiceError> {
        Ok(self.desired_state_read(conn, host_id).await?.0)
    }

    /// The desired state of `host` now, and whether it carries a slice
    /// still `placed` (not yet taken by the agent).
    async fn desired_state_read<C: ConnectionTrait>(
        &self,
        conn: &C,
        host_id: HostId,
    ) -> Result<(DesiredState, bool), ServiceError> {
        let generation = Self::generation_of(conn, host_id).await?;
        let gpus = gpu::Entity::find()
            .filter(gpu::Column::HostId.eq(host_id))
            .all(conn)
            .await?;
        let taken = occupancy(conn, None, Some(&[host_id])).await?;
        let carries_placed = taken
            .values()
            .flatten()
            .any(|(a, _)| a.state == AllocationPhase::Placed);
        let pools = self.pools(conn).await?;
        let hostname = host::Entity::find_by_id(host_id)
            .one(conn)
            .await?
            .map(|h| h.hostname.to_string())
            .unwrap_or_default();
        let mut entries = Vec::new();
        for g in &gpus {
            let Some(pool) = pool_of(&pools, &hostname, &g.model) else {
                continue;
            };
            let index = g.index()?;
            let owned = taken.get(&g.uuid).map(Vec::as_slice).unwrap_or(&[]);
            let mut releasing = Vec::new();
            let mut live = Vec::new();
            for (a, p) in owned {
                if a.state == AllocationPhase::Releasing {
                    releasing.push((a.id, p));
                } else {
                    live.push((a.id, p));
                }
            }
            let policy = pool.policy();
            let mut desired = GpuDesired::default();
            match policy.mode {
                SharingMode::Mig => {
                    let model =
                        catalogue::lookup(&g.model, u64::try_from(g.memory_mib).unwrap_or(0));
                    let Some(spec) = model.mig else {
                        continue;
                    };
                    desired.mig_enabled = true;
                    for (_, p) in &live {
                        if let Slice::Mig(m) = &p.slice {
                            let Some(profile) = spec.profile(&m.profile) else {
                                continue;
                            };
                            desired.instances.push(DesiredInstance {
                                placement: m.clone(),
                                compute_instances: vec![ComputeInstance::whole(
                                    profile.compute_slices,
                                )],
                            });
                        }
                    }
                    // Instances Tessera did not create stay as they are.
                    let observed = g.observed().cloned();
                    for m in unmanaged_instances(observed.as_ref(), owned) {
                        if let Some(o) = observed
                            .as_ref()
                            .and_then(|o| o.instances.iter().find(|i| i.placement == m))
                        {
                            desired.instances.push(DesiredInstance {
                                placement: m,
                                compute_instances: o.compute_instances.clone(),
                            });
                        }
                    }
                    desired.instances.sort_by_key(|i| i.placement.start);
                    desired.released.instances = releasing
                        .iter()
                        .filter_map(|(_, p)| match &p.slice {
                            Slice::Mig(m) => Some(m.start),
                            _ => None,
                        })
                        .collect();
                }
                SharingMode::Exclusive => {
                    desired.released.whole_gpu = !releasing.is_empty();
                }
                SharingMode::TimeSlicing => {
                    desired.time_slice_replicas = policy.time_slice_replicas;
                    desired.released.allocations = releasing.iter().map(|(id, _)| *id).collect();
                }
                SharingMode::Mps => {
                    // The daemon's defaults are the smallest grant; running
                    // servers get the largest, and each client's own
                    // environment its share.
                    desired.mps_clients = live
                        .iter()
                        .filter_map(|(id, p)| match &p.slice {
                            Slice::Shared { compute, memory } => Some(MpsGrant {
                                allocation: *id,
                                active_thread_percentage: u8::try_from(
                                    compute.0.div_ceil(10).clamp(1, 100),
                                )
                                .unwrap_or(100),
                                pinned_mem_limit: *memory,
                            }),
                            _ => None,
                        })
                        .collect();
                    let shares: Vec<(u8, MemMiB)> = desired
                        .mps_clients
                        .iter()
                        .map(|c| (c.active_thread_percentage, c.pinned_mem_limit))
                        .collect();
                    desired.mps = Some(MpsSettings::for_clients(&shares));
                    desired.mps_strays = pool.mps_strays;
                    desired.released.allocations = releasing.iter().map(|(id, _)| *id).collect();
                }
            }
            if pool.on_release == crate::pools::ReleasePolicy::Refuse {
                // Nothing may be interrupted: the agent refuses to tear down
                // a slice still in use, and says so.
                desired.released = Released::default();
            }
            let slices = if policy.mode == SharingMode::Mig {
                0
            } else {
                u32::try_from(live.len()).unwrap_or(u32::MAX)
            };
            entries.push(GpuDesiredEntry {
                index,
                uuid: g.uuid.clone(),
                desired,
                slices,
            });
        }
        entries.sort_by_key(|e| e.index);
        Ok((
            DesiredState {
                generation,
                gpus: entries,
            },
            carries_placed,
        ))
    }

    /// The agent's long poll: answers at once when the host's generation is
    /// not `after`, otherwise when it changes or `wait` passes. Allocations
    /// the answer carries move from `placed` to `provisioning`.
    pub async fn wait_desired(
        &self,
        who: &AuthenticatedHost,
        after: Option<i64>,
        wait: Duration,
    ) -> Result<DesiredState, ServiceError> {
        match self.wait_desired_change(who, after, wait).await? {
            Some(state) => Ok(state),
            None => self.take_desired(who.id).await,
        }
    }

    /// [`Service::wait_desired`], answering `None` when the generation is
    /// still `after` at the end: the agent has that state already, and an
    /// idle fleet's polls then read nothing more. (Nothing placed for the
    /// host waits to be taken: placing bumps the generation, and the answer
    /// that carried generation `after` took what was placed up to it.)
    pub async fn wait_desired_change(
        &self,
        who: &AuthenticatedHost,
        after: Option<i64>,
        wait: Duration,
    ) -> Result<Option<DesiredState>, ServiceError> {
        let wait = wait.min(Duration::from_secs(DESIRED_MAX_WAIT_S));
        let recheck = if self.peers_heard() {
            self.desired_recheck * RECHECK_RARER_WHILE_HEARD
        } else {
            self.desired_recheck
        };
        // An idle host's poll ends at its beat (its heartbeat's phase),
        // spread over the fleet.
        // Real time, not the service's clock: the poll waits on the runtime's timers.
        #[allow(clippy::disallowed_methods)]
        let wait = match after {
            Some(_) => crate::fleet::beat_hold(
                who.id,
                u64::try_from(chrono::Utc::now().timestamp_millis()).unwrap_or(0),
                wait,
            ),
            None => wait,
        };
        let deadline = tokio::time::Instant::now() + wait;
        let waiting = self.generations.wait(who.id);
        // Armed before the generation is read, and again before each read
        // after a wake: a change committed meanwhile still wakes it.
        let mut woken = std::pin::pin!(waiting.wake().notified());
        woken.as_mut().enable();
        // A periodic re-check shares one read of every waiting host's
        // generation (see `generations`); so does the first look when that
        // read says the agent is up to date (an idle fleet's polls, back to
        // back: a change since wakes it with its notice, or the re-check).
        // Any other first look, and every one after a notice, reads this
        // host's own.
        let shared = match after {
            Some(_) => Some(self.generations.current(&self.db, who.id, recheck).await?),
            None => None,
        };
        let mut current = match shared {
            Some(g) if Some(g) == after => g,
            _ => Self::generation_of(&self.db, who.id).await?,
        };
        loop {
            let now = tokio::time::Instant::now();
            if Some(current) != after || now >= deadline {
                break;
            }
            // Sleep until this host's change is announced, or the re-check is due.
            let nap_until = (now + recheck).min(deadline);
            // Woken (this host's change, or every host's), or the
            // re-check is due (or the deadline).
            let noticed = tokio::time::timeout_at(nap_until, woken.as_mut())
                .await
                .is_ok();
            if noticed {
                woken.set(waiting.wake().notified());
                woken.as_mut().enable();
            }
            current = if noticed {
                Self::generation_of(&self.db, who.id).await?
            } else {
                self.generations.current(&self.db, who.id, recheck).await?
            };
        }
        if Some(current) == after {
            return Ok(None);
        }
        self.take_desired(who.id).await.map(Some)
    }

    /// The desired state, with the allocations it carries moved from
    /// `placed` to `provisioning` in the same transaction. Read apart, a
    /// release could end a slice in between as never sent (`placed` →
    /// `released`) while the agent creates it, leaving an instance nobody owns.
    async fn take_desired(&self, host_id: HostId) -> Result<DesiredState, ServiceError> {
        // Most answers carry no slice waiting to be taken: then nothing
        // moves, and the state is read without a write. (A slice placed
        // after the generation was read either shows here as `placed`,
        // which takes the write path, or arrives with the next generation.)
        let (state, carries_placed) = self.desired_state_read(&self.db, host_id).await?;
        if !carries_placed {
            return Ok(state);
        }
        let now = self.now();
        let mut w = self.begin_write().await?;
        // Placing or releasing on this host bumps its generation, so they
        // wait for this lock (PostgreSQL; on SQLite writers take turns).
        let host = host::Entity::find_by_id(host_id)
            .lock_exclusive()
            .one(w.db())
            .await?
            .ok_or(ServiceError::InvalidCredential)?;
        let generation = host.desired_generation;
        let placed = allocation::Entity::find()
            .filter(allocation::Column::HostId.eq(host_id))
            .filter(allocation::Column::State.eq(AllocationPhase::Placed))
            .filter(allocation::Column::Generation.lte(generation))
            .all(w.db())
            .await?;
        for a in placed {
            let Ok(next) = transition(a.lifecycle(), &AllocationEvent::StartProvisioning) else {
                continue;
            };
            let alloc = AllocationRef::of(&a);
            let mut m: allocation::ActiveModel = a.into();
            set_state(&mut m, &next, now);
            m.update(w.db()).await?;
            w.emit(DomainEvent::AllocationProvisioning { alloc, state: next });
        }
        let state = self.desired_state(w.db(), host_id).await?;
        w.commit(
            self,
            &Actor::Host {
                host_id,
                hostname: host.hostname.clone(),
            },
        )
        .await?;
        Ok(state)
    }
}
