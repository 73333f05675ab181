//! Fleet counts for the Prometheus endpoint.

use crate::entity::{gpu, host};
use crate::{Service, ServiceError};
use sea_orm::EntityTrait;
use std::collections::BTreeMap;

/// Counts for the Prometheus endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetCounts {
    /// Hosts reporting within the grace period.
    pub hosts_online: u64,
    /// Hosts silent for longer.
    pub hosts_offline: u64,
    /// GPUs by (catalogue model, MIG state `enabled`/`disabled`/`n/a`).
    pub gpus: BTreeMap<(String, &'static str), u64>,
}

impl Service {
    /// Host and GPU counts (for `/metrics`; no principal: operators scrape it).
    pub async fn fleet_counts(&self) -> Result<FleetCounts, ServiceError> {
        let now = self.now();
        let offline_after = self.settings.host_offline_after;
        let mut counts = FleetCounts::default();
        for h in host::Entity::find().all(&self.db).await? {
            match h.last_seen_at {
                Some(seen) if now - seen <= offline_after => counts.hosts_online += 1,
                _ => counts.hosts_offline += 1,
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
        Ok(counts)
    }
}
