//! What an agent's report means for the allocations on its host: slices the
//! agent created become `active` (with the MIG device UUID), slices it could
//! not create fail with the driver's reason, and slices it tore down end.

use super::stored::{set_state, AllocationRow};
use crate::entity::allocation;
use crate::events::{AllocationRef, DomainEvent};
use crate::fleet::AuthenticatedHost;
use crate::write::Write;
use crate::{Service, ServiceError};
use chrono::{DateTime, Duration, Utc};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};

use super::StoredPlacement;
use std::collections::BTreeMap;
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::lifecycle::{transition, AllocationEvent, AllocationState, ReleaseOutcome};
use tessera_core::placement::Slice;
use tessera_protocol::agent::{GpuReport, HostReport, StopScope};
use tessera_protocol::views::ProcessesStoppedView;

/// A state change to write.
struct Change {
    state: AllocationState,
    mig_device_uuid: Option<String>,
    activated: bool,
    teardown_error: Option<String>,
    /// What the host stopped for the slice, when it ends a release.
    stopped: Option<ProcessesStoppedView>,
}

impl Service {
    /// Advances the host's allocations from a report, inside the report's
    /// transaction.
    pub(crate) async fn apply_agent_report(
        &self,
        w: &mut Write,
        who: &AuthenticatedHost,
        report: &HostReport,
        now: DateTime<Utc>,
    ) -> Result<(), ServiceError> {
        // The host's row took `applied_generation` already.
        let Some(applied) = report.applied_generation else {
            return Ok(());
        };
        let by_uuid: BTreeMap<&str, &GpuReport> =
            report.gpus.iter().map(|g| (g.uuid.as_str(), g)).collect();
        let errors: BTreeMap<u32, &str> = report
            .errors
            .iter()
            .map(|e| (e.index, e.message.as_str()))
            .collect();
        let rows = allocation::Entity::find()
            .filter(allocation::Column::HostId.eq(who.id))
            .filter(allocation::Column::State.is_in([
                AllocationPhase::Placed,
                AllocationPhase::Provisioning,
                AllocationPhase::Releasing,
            ]))
            .filter(allocation::Column::Generation.lte(applied))
            .all(w.db())
            .await?;
        for row in rows {
            let Some(placement) = row.stored_placement() else {
                continue;
            };
            let error = placement
                .gpus
                .iter()
                .find_map(|g| errors.get(&g.index).copied())
                .map(str::to_owned);
            let gpu = placement
                .gpus
                .first()
                .and_then(|g| by_uuid.get(g.uuid.as_str()));
            let mig_start = match &placement.slice {
                Slice::Mig(m) => Some(m.start),
                _ => None,
            };
            let mut state = row.lifecycle().clone();
            if state == AllocationState::Placed {
                state = step(&state, AllocationEvent::StartProvisioning)?;
            }
            let change = match (&state, mig_start) {
                (AllocationState::Provisioning, Some(start)) => {
                    let device =
                        gpu.and_then(|g| g.mig_devices.iter().find(|d| d.gi_start == start));
                    match device {
                        Some(d) => Change {
                            state: step(&state, AllocationEvent::Provisioned)?,
                            mig_device_uuid: Some(d.uuid.clone()),
                            activated: true,
                            teardown_error: None,
                            stopped: None,
                        },
                        None => Change {
                            state: step(
                                &state,
                                AllocationEvent::Fail {
                                    reason: error.unwrap_or_else(|| format!(
                                        "host {} applied the change but reports no MIG device at slice {start}",
                                        who.hostname
                                    )),
                                },
                            )?,
                            mig_device_uuid: None,
                            activated: false,
                            teardown_error: None,
                            stopped: None,
                        },
                    }
                }
                (AllocationState::Provisioning, None) => match error {
                    Some(reason) => Change {
                        state: step(&state, AllocationEvent::Fail { reason })?,
                        mig_device_uuid: None,
                        activated: false,
                        teardown_error: None,
                        stopped: None,
                    },
                    None => Change {
                        state: step(&state, AllocationEvent::Provisioned)?,
                        mig_device_uuid: None,
                        activated: true,
                        teardown_error: None,
                        stopped: None,
                    },
                },
                (AllocationState::Releasing { .. }, _) => {
                    let still_there = mig_start.is_some_and(|start| {
                        gpu.and_then(|g| g.sharing.as_ref())
                            .is_some_and(|o| o.instances.iter().any(|i| i.placement.start == start))
                    });
                    match (error, still_there) {
                        (Some(reason), _) => Change {
                            state: state.clone(),
                            mig_device_uuid: None,
                            activated: false,
                            teardown_error: Some(reason),
                            stopped: None,
                        },
                        (None, true) => continue,
                        (None, false) => Change {
                            state: step(&state, AllocationEvent::Released)?,
                            mig_device_uuid: None,
                            activated: false,
                            teardown_error: None,
                            stopped: Some(stopped_for(report, row.id, placement)),
                        },
                    }
                }
                _ => continue,
            };
            Self::write_change(w, who, row, change, now).await?;
        }
        Ok(())
    }

    async fn write_change(
        w: &mut Write,
        who: &AuthenticatedHost,
        row: allocation::Model,
        change: Change,
        now: DateTime<Utc>,
    ) -> Result<(), ServiceError> {
        let mut state = change.state;
        if let (Some(reason), AllocationState::Releasing { teardown_error, .. }) =
            (&change.teardown_error, &mut state)
        {
            if teardown_error.as_deref() == Some(reason.as_str()) {
                return Ok(());
            }
            *teardown_error = Some(reason.clone());
        }
        let before = row.lifecycle().phase();
        let (host_id, lease_hours) = (row.host_id, row.lease_hours);
        let alloc = AllocationRef::of(&row);
        let mut a: allocation::ActiveModel = row.into();
        set_state(&mut a, &state, now);
        if let Some(stopped) = change.stopped {
            a.processes_terminated =
                Set(Some(i32::try_from(stopped.terminated).unwrap_or(i32::MAX)));
            a.processes_killed = Set(Some(i32::try_from(stopped.killed).unwrap_or(i32::MAX)));
        }
        if change.activated {
            a.active_at = Set(Some(now));
            a.lease_ends_at = Set(Some(now + Duration::hours(i64::from(lease_hours))));
            a.mig_device_uuid = Set(change.mig_device_uuid);
        }
        // Failing a slice removes it from the desired state: a new generation.
        if matches!(state, AllocationState::Releasing { .. })
            && before != AllocationPhase::Releasing
        {
            if let Some(h) = host_id {
                a.generation = Set(Some(w.bump_generation(h).await?));
            }
        }
        a.update(w.db()).await?;
        w.emit(match &state {
            AllocationState::Active => DomainEvent::AllocationActivated {
                alloc,
                before,
                state,
                hostname: who.hostname.clone(),
                lease_hours,
            },
            AllocationState::Releasing { .. } if before == AllocationPhase::Releasing => {
                DomainEvent::AllocationTeardownFailed { alloc, state }
            }
            AllocationState::Releasing { outcome, .. } => DomainEvent::AllocationFailed {
                alloc,
                before,
                reason: match outcome {
                    ReleaseOutcome::Failed { reason } => reason.clone(),
                    _ => "the host could not provide it".to_owned(),
                },
                state,
            },
            _ => DomainEvent::AllocationEnded {
                alloc,
                before,
                state,
                processes_stopped: change.stopped,
            },
        });
        Ok(())
    }
}

/// What the host says it stopped for allocation `id` at `placement` while
/// applying the generation that released it: its GPU instance (MIG), its
/// GPUs (whole GPUs) or its tagged processes (a shared slice). Nothing
/// said is nothing running: the agent stops only what runs, and says so.
fn stopped_for(
    report: &HostReport,
    id: tessera_core::ids::AllocationId,
    placement: &StoredPlacement,
) -> ProcessesStoppedView {
    let on = |index: u32| placement.gpus.iter().any(|g| g.index == index);
    let mine = |scope: &StopScope| match (&placement.slice, scope) {
        (Slice::Mig(m), StopScope::Instance { gi_start }) => m.start == *gi_start,
        (Slice::Whole, StopScope::Gpu) => true,
        (_, StopScope::Allocation { allocation }) => *allocation == id,
        _ => false,
    };
    report
        .stopped
        .iter()
        .filter(|s| on(s.index) && mine(&s.scope))
        .fold(ProcessesStoppedView::default(), |mut t, s| {
            t.terminated = t.terminated.saturating_add(s.terminated);
            t.killed = t.killed.saturating_add(s.killed);
            t
        })
}

fn step(state: &AllocationState, event: AllocationEvent) -> Result<AllocationState, ServiceError> {
    transition(state, &event).map_err(|e| ServiceError::Conflict(e.to_string()))
}
