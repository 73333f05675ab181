//! `pools`: GPU pools, in the order that decides which pool a GPU joins.
use sea_orm::entity::prelude::*;
use tessera_core::ids::{GpuId, PoolId};
use tessera_core::pool::PoolSpec;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "pools")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: PoolId,
    #[sea_orm(unique)]
    pub name: tessera_core::checked::PoolName,
    /// Lower first: the first pool that takes a GPU gets it.
    pub position: i32,
    /// The definition in force.
    pub spec: StoredPool,
    /// Bumped by every change; an edit names the revision it started from.
    pub revision: i64,
    /// A planned change, waiting for the GPUs it moves to empty.
    pub pending_spec: Option<StoredPool>,
    /// The GPUs (ids) drained for the planned change.
    pub pending_gpus: Option<GpuIds>,
    /// Why (the admin's words).
    pub pending_reason: Option<String>,
    /// Who planned it.
    pub pending_by: Option<String>,
    /// When.
    pub pending_at: Option<DateTimeUtc>,
    /// When the slices still on those GPUs end.
    pub drain_deadline: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    /// Who changed it last (`None`: seeded from the configuration).
    pub updated_by: Option<String>,
    /// A fresh random value at every commit that changes what the placer
    /// sees in the pool (see `allocations::fleet_index`).
    pub capacity_epoch: i64,
}

/// A pool's definition, as stored.
#[derive(
    Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, sea_orm::FromJsonQueryResult,
)]
pub struct StoredPool(pub PoolSpec);

/// GPU ids, as stored.
#[derive(
    Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, sea_orm::FromJsonQueryResult,
)]
pub struct GpuIds(pub Vec<GpuId>);

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
