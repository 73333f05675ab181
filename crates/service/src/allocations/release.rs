//! A tenant's changes to its slice: release and extend.

use super::stored::{set_state, update_if_state, AllocationRow};
use crate::entity::allocation;
use crate::events::{AllocationRef, DomainEvent};
use crate::TenantActor;
use crate::{Service, ServiceError};
use chrono::{DateTime, Duration, Utc};
use sea_orm::{ActiveModelTrait, EntityTrait, Set};
use tessera_core::ids::AllocationId;

use tessera_core::lifecycle::{transition, AllocationEvent, AllocationState};
use tessera_protocol::views::AllocationView;

impl Service {
    /// Gives a slice back. Before it reaches a GPU it ends at once; after,
    /// the agent tears it down and the capacity returns when it reports so.
    pub async fn release_allocation(
        &self,
        actor: &TenantActor,
        id: AllocationId,
    ) -> Result<AllocationView, ServiceError> {
        actor.require_release()?;
        self.own_row(actor, id).await?;
        let now = self.now();
        // Another writer (the queue, the agent's long poll) may move the row
        // between our read and our write; then read it again.
        let mut attempts = 0;
        let (w, before, row) = loop {
            attempts += 1;
            let w = self.begin_write().await?;
            let txn = w.db();
            let row = allocation::Entity::find_by_id(id)
                .one(txn)
                .await?
                .ok_or_else(|| ServiceError::not_found(format!("allocation {id}")))?;
            let state = row.lifecycle().clone();
            let before = state.phase();
            let next = transition(&state, &AllocationEvent::Release).map_err(|_| {
                ServiceError::Conflict(format!(
                    "allocation {id} is {before}; only an open allocation can be released"
                ))
            })?;
            let host_id = row.host_id;
            let mut a: allocation::ActiveModel = row.into();
            set_state(&mut a, &next, now);
            if let Some(h) = host_id {
                a.generation = Set(Some(w.bump_generation(h).await?));
            }
            if update_if_state(txn, id, before, a).await? {
                let row = allocation::Entity::find_by_id(id)
                    .one(txn)
                    .await?
                    .ok_or_else(|| ServiceError::not_found(format!("allocation {id}")))?;
                break (w, before, row);
            }
            drop(w);
            if attempts >= 5 {
                return Err(ServiceError::Conflict(format!(
                    "allocation {id} is changing right now; try again"
                )));
            }
        };
        let mut w = w;
        w.emit(DomainEvent::AllocationReleased {
            alloc: AllocationRef::of(&row),
            before,
            after: row.lifecycle().phase(),
        });
        w.commit(self, &actor.audit()).await?;
        self.allocation_view_of(row, &actor.tenant_slug).await
    }

    /// Moves an active lease's end `hours` later, up to the pool's longest
    /// lease counted from now.
    pub async fn extend_allocation(
        &self,
        actor: &TenantActor,
        id: AllocationId,
        hours: u32,
    ) -> Result<AllocationView, ServiceError> {
        actor.require_request("extend its leases")?;
        self.own_row(actor, id).await?;
        if hours == 0 {
            return Err(ServiceError::invalid("hours", "must be at least 1"));
        }
        let now = self.now();
        let mut w = self.begin_write().await?;
        let row = allocation::Entity::find_by_id(id)
            .one(w.db())
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("allocation {id}")))?;
        let state = row.lifecycle().clone();
        let (Some(end), AllocationState::Active) = (row.lease_ends_at, &state) else {
            return Err(ServiceError::Conflict(format!(
                "allocation {id} is {state}; only an active lease can be extended"
            )));
        };
        let max = self
            .pool_spec(w.db(), "pool", &row.pool)
            .await?
            .max_lease_hours;
        let later = |at: DateTime<Utc>, hours: u32| {
            Duration::try_hours(i64::from(hours)).and_then(|d| at.checked_add_signed(d))
        };
        // A sum past the last representable time is past the limit too.
        let (new_end, limit) = (later(end, hours), later(now, max));
        let Some(new_end) = new_end.filter(|e| limit.is_some_and(|l| *e <= l)) else {
            let left = limit.map_or(0, |l| (l - end).num_hours().max(0));
            return Err(ServiceError::invalid(
                "hours",
                format!(
                    "pool '{}' allows leases of at most {max} hours from now; extend by at most {left} hours",
                    row.pool
                ),
            ));
        };
        let mut a: allocation::ActiveModel = row.into();
        a.lease_ends_at = Set(Some(new_end));
        a.lease_warned_at = Set(None);
        a.updated_at = Set(now);
        let row = a.update(w.db()).await?;
        w.emit(DomainEvent::AllocationExtended {
            alloc: AllocationRef::of(&row),
            before_end: end,
            after_end: new_end,
        });
        w.commit(self, &actor.audit()).await?;
        self.allocation_view_of(row, &actor.tenant_slug).await
    }
}
