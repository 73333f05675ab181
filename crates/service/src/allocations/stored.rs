//! How an allocation's placement and state are stored (JSON columns).

use crate::entity::allocation;
use crate::ServiceError;
use chrono::{DateTime, Utc};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use serde::{Deserialize, Serialize};
use tessera_core::ids::AllocationId;
use tessera_core::lifecycle::{AllocationPhase, AllocationState};
use tessera_core::placement::Slice;
use tessera_core::quota::Demand;
use tessera_core::sharing::SliceShape;
use tessera_core::units::{ComputeMilli, MemMiB};
use tessera_protocol::views::{AllocatedGpu, PlacementWhy};

/// Where an allocation was placed, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, sea_orm::FromJsonQueryResult)]
pub struct StoredPlacement {
    /// Host name at placement time.
    pub hostname: String,
    /// GPUs used.
    pub gpus: Vec<AllocatedGpu>,
    /// What it takes on them.
    pub slice: Slice,
    /// Why the placer chose it (absent in rows placed before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<PlacementWhy>,
}

impl StoredPlacement {
    /// The UUIDs of the GPUs used, in placement order.
    pub fn gpu_uuids(&self) -> Vec<String> {
        self.gpus.iter().map(|g| g.uuid.clone()).collect()
    }
}

/// Typed accessors over the row (its JSON columns read back when the row
/// is read, or the read fails: see [`allocation::StoredState`]).
pub trait AllocationRow {
    /// The lifecycle state.
    fn lifecycle(&self) -> &AllocationState;
    /// The shape.
    fn slice_shape(&self) -> &SliceShape;
    /// The placement, once placed.
    fn stored_placement(&self) -> Option<&StoredPlacement>;
    /// The quota demand.
    fn demand(&self) -> Demand;
}

impl AllocationRow for allocation::Model {
    fn lifecycle(&self) -> &AllocationState {
        &self.state_data.0
    }

    fn slice_shape(&self) -> &SliceShape {
        &self.shape.0
    }

    fn stored_placement(&self) -> Option<&StoredPlacement> {
        self.placement.as_ref()
    }

    fn demand(&self) -> Demand {
        Demand {
            compute: ComputeMilli(u32::try_from(self.demand_compute_milli).unwrap_or(u32::MAX)),
            memory: MemMiB(u64::try_from(self.demand_memory_mib).unwrap_or(0)),
            slices: u32::try_from(self.demand_slices).unwrap_or(u32::MAX),
        }
    }
}

/// Moves the row to `next`: its phase and whole state, `updated_at`, and
/// `ended_at` when `next` is terminal.
pub fn set_state(a: &mut allocation::ActiveModel, next: &AllocationState, now: DateTime<Utc>) {
    a.state = sea_orm::Set(next.phase());
    a.state_data = sea_orm::Set(allocation::StoredState(next.clone()));
    a.updated_at = sea_orm::Set(now);
    if next.is_terminal() {
        a.ended_at = sea_orm::Set(Some(now));
    }
}

/// Writes the set columns of `a` to allocation `id` only while it is still
/// in state `before`; returns whether it did. On PostgreSQL a row read in a
/// transaction is not locked, so another writer may have moved it since (a
/// release racing the queue, or the agent's long poll): writing anyway would
/// undo that change.
pub async fn update_if_state<C: ConnectionTrait>(
    conn: &C,
    id: AllocationId,
    before: AllocationPhase,
    a: allocation::ActiveModel,
) -> Result<bool, ServiceError> {
    let res = allocation::Entity::update_many()
        .set(a)
        .filter(allocation::Column::Id.eq(id))
        .filter(allocation::Column::State.eq(before))
        .exec(conn)
        .await?;
    Ok(res.rows_affected == 1)
}
