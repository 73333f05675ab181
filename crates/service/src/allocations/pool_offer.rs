//! A pool as the placer sees it: its spec, what it offers, the workload
//! fragmentation is judged against, and what a stored request asks for.

use super::stored::AllocationRow;
use crate::entity::allocation;
use crate::pools::PoolSpec;
use crate::{Service, ServiceError};
use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter};
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::placement::PlacementRequest;
use tessera_core::slice::PoolOffer;

impl Service {
    /// The pool called `name` as `conn` sees it, or a 400 that lists the pools.
    pub(crate) async fn pool_spec<C: ConnectionTrait>(
        &self,
        conn: &C,
        field: &str,
        name: &str,
    ) -> Result<PoolSpec, ServiceError> {
        let pools = self.pools(conn).await?;
        Self::pool_named(&pools, field, name).cloned()
    }

    /// What a pool offers, in core's terms.
    pub fn pool_offer(spec: &PoolSpec) -> PoolOffer {
        PoolOffer {
            pool: spec.name.to_string(),
            policy: spec.policy(),
            models: spec
                .models
                .iter()
                .map(|m| tessera_core::catalogue::lookup(m, 0).name.to_string())
                .collect(),
            max_lease_hours: spec.max_lease_hours,
        }
    }

    /// Placement requests of the pool's open allocations: the workload mix
    /// fragmentation is judged against.
    pub(crate) async fn pool_workload<C: ConnectionTrait>(
        &self,
        conn: &C,
        spec: &PoolSpec,
    ) -> Result<Vec<PlacementRequest>, ServiceError> {
        let offer = Self::pool_offer(spec);
        let rows = allocation::Entity::find()
            .filter(allocation::Column::Pool.eq(&spec.name))
            .filter(allocation::Column::State.is_in(AllocationPhase::OPEN))
            .all(conn)
            .await?;
        let mut workload = Vec::with_capacity(rows.len());
        for a in &rows {
            // A shape the pool no longer offers (its policy changed) is not
            // part of the mix; a shape that does not read back is an error.
            if let Ok(request) = offer.placement_request(a.slice_shape()) {
                workload.push(request);
            }
        }
        Ok(workload)
    }

    /// What the placer is asked for `row`: its shape in `spec`, for its
    /// tenant; production pools keep tenants on separate GPUs.
    /// What a stored request asks the placer for in its pool, or `None`
    /// when the pool no longer offers its shape (it cannot be placed, and
    /// its page says so). A stored shape that does not read back is an error.
    pub(crate) fn placement_request_of(
        spec: &PoolSpec,
        row: &allocation::Model,
    ) -> Result<Option<PlacementRequest>, ServiceError> {
        let shape = row.slice_shape().clone();
        Ok(Self::pool_offer(spec)
            .placement_request(&shape)
            .ok()
            .map(|request| request.for_tenant(row.tenant_id, spec.isolation.separates_tenants())))
    }
}
