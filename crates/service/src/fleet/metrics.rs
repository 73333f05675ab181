//! Fleet figures for the Prometheus endpoint, read from the database at
//! scrape time so every replica answers the same.

use crate::entity::{allocation, gpu, host, webhook_delivery};
use crate::{Service, ServiceError};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QuerySelect};
use std::collections::BTreeMap;
use tessera_core::lifecycle::AllocationPhase;

/// Counts for the Prometheus endpoint.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetCounts {
    /// Hosts reporting within the grace period.
    pub hosts_online: u64,
    /// Hosts silent for longer.
    pub hosts_offline: u64,
    /// GPUs by (catalogue model, MIG state `enabled`/`disabled`/`n/a`).
    pub gpus: BTreeMap<(String, &'static str), u64>,
    /// Slices not yet ended, by (pool, phase); the queue depth is the
    /// `queued` ones.
    pub allocations: BTreeMap<(String, AllocationPhase), u64>,
    /// Per host that ever sent telemetry: seconds since its newest round.
    pub telemetry_lag_s: BTreeMap<String, f64>,
    /// Webhook calls waiting for their first or next try.
    pub webhooks_pending: u64,
}

impl Service {
    /// Host, GPU, slice and outbox counts (for `/metrics`; no principal:
    /// operators scrape it).
    pub async fn fleet_counts(&self) -> Result<FleetCounts, ServiceError> {
        let now = self.now();
        let offline_after = self.settings.host_offline_after;
        let mut counts = FleetCounts::default();
        for h in host::Entity::find().all(&self.db).await? {
            match h.last_seen_at {
                Some(seen) if now - seen <= offline_after => counts.hosts_online += 1,
                _ => counts.hosts_offline += 1,
            }
            if let Some(at) = h.telemetry_last_at_ms {
                let lag = (now.timestamp_millis() - at).max(0) as f64 / 1000.0;
                counts.telemetry_lag_s.insert(h.hostname.into(), lag);
            }
        }
        for g in gpu::Entity::find().all(&self.db).await? {
            let mig = match (g.mig_capable, g.mig_enabled) {
                (true, true) => "enabled",
                (true, false) => "disabled",
                _ => "n/a",
            };
            *counts.gpus.entry((g.model, mig)).or_default() += 1;
        }
        let open: Vec<(String, AllocationPhase)> = allocation::Entity::find()
            .select_only()
            .column(allocation::Column::Pool)
            .column(allocation::Column::State)
            .filter(allocation::Column::State.is_in(AllocationPhase::OPEN))
            .into_tuple()
            .all(&self.db)
            .await?;
        for key in open {
            *counts.allocations.entry(key).or_default() += 1;
        }
        counts.webhooks_pending = webhook_delivery::Entity::find()
            .filter(webhook_delivery::Column::NextAttemptAt.is_not_null())
            .count(&self.db)
            .await?;
        Ok(counts)
    }
}
