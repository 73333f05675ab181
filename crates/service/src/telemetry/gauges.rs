//! The latest telemetry of every device, for `/metrics` in the DCGM
//! exporter's names and labels: the last round each host sent within the
//! last three minutes.

use super::pairs::pairs_condition;
use crate::entity::{allocation, gpu, gpu_sample, host, tenant};
use crate::{Service, ServiceError};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use std::collections::BTreeMap;
use tessera_core::ids::{AllocationId, HostId, TenantId};

/// Older rounds are stale: the host stopped sending.
const FRESH_MS: i64 = 3 * 60_000;

/// The latest figures of one device (a GPU, or one of its MIG devices), as
/// one slice holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceGauges {
    /// Host name.
    pub hostname: String,
    /// GPU index on the host.
    pub gpu_index: i32,
    /// The GPU's UUID.
    pub gpu_uuid: String,
    /// Product name.
    pub model_name: String,
    /// For a MIG device: its profile and GPU instance (start slice).
    pub mig: Option<(String, u8)>,
    /// Tenant slug of the slice holding it.
    pub tenant: Option<String>,
    /// Its pool.
    pub pool: Option<String>,
    /// The slice.
    pub allocation: Option<AllocationId>,
    /// Utilisation, percent (`None`: not measured: a GPU with MIG on, a
    /// MIG device without GPM or in its first round).
    pub util_pct: Option<u8>,
    /// Memory used, MiB.
    pub mem_used_mib: u64,
    /// Power, watts.
    pub power_w: Option<f64>,
    /// Temperature, °C.
    pub temp_c: Option<i32>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<i32>,
}

impl Service {
    /// The last round of every host that sent one in the last three minutes.
    pub async fn latest_telemetry(&self) -> Result<Vec<DeviceGauges>, ServiceError> {
        self.latest_telemetry_of(None).await
    }

    /// The same for the hosts named (all with `None`).
    pub async fn latest_telemetry_of(
        &self,
        hostnames: Option<&[String]>,
    ) -> Result<Vec<DeviceGauges>, ServiceError> {
        let now_ms = self.now().timestamp_millis();
        let mut fresh =
            host::Entity::find().filter(host::Column::TelemetryLastAtMs.gte(now_ms - FRESH_MS));
        if let Some(names) = hostnames {
            if names.is_empty() {
                return Ok(Vec::new());
            }
            fresh = fresh.filter(host::Column::Hostname.is_in(names.iter().cloned()));
        }
        let hosts = fresh.all(&self.db).await?;
        let tenants: BTreeMap<TenantId, tessera_core::checked::TenantSlug> = tenant::Entity::find()
            .all(&self.db)
            .await?
            .into_iter()
            .map(|t| (t.id, t.slug))
            .collect();
        let mut out = Vec::new();
        for chunk in hosts.chunks(200) {
            // Each host's latest round (rounds of many hosts share a time).
            let which = pairs_condition(
                chunk
                    .iter()
                    .filter_map(|h| h.telemetry_last_at_ms.map(|at| (at, h.id))),
                gpu_sample::Column::AtMs,
                gpu_sample::Column::HostId,
            );
            let samples = gpu_sample::Entity::find()
                .filter(which)
                .all(&self.db)
                .await?;
            let gpus: BTreeMap<String, gpu::Model> = gpu::Entity::find()
                .filter(gpu::Column::HostId.is_in(chunk.iter().map(|h| h.id)))
                .all(&self.db)
                .await?
                .into_iter()
                .map(|g| (g.uuid.clone(), g))
                .collect();
            let slices: BTreeMap<AllocationId, allocation::Model> = allocation::Entity::find()
                .filter(
                    allocation::Column::Id.is_in(samples.iter().filter_map(|s| s.allocation_id)),
                )
                .all(&self.db)
                .await?
                .into_iter()
                .map(|a| (a.id, a))
                .collect();
            let hostnames: BTreeMap<HostId, &str> =
                chunk.iter().map(|h| (h.id, h.hostname.as_str())).collect();
            for s in samples {
                let Some(g) = gpus.get(&s.gpu_uuid) else {
                    continue;
                };
                let mig = (s.device_uuid != s.gpu_uuid)
                    .then(|| {
                        g.mig_devices()
                            .iter()
                            .find(|d| d.uuid == s.device_uuid)
                            .map(|d| (d.profile.clone(), d.gi_start))
                    })
                    .flatten();
                let slice = s.allocation_id.and_then(|id| slices.get(&id));
                out.push(DeviceGauges {
                    hostname: hostnames
                        .get(&s.host_id)
                        .copied()
                        .unwrap_or_default()
                        .to_owned(),
                    gpu_index: g.idx,
                    gpu_uuid: s.gpu_uuid.clone(),
                    model_name: g.name.clone(),
                    mig,
                    tenant: slice.and_then(|a| tenants.get(&a.tenant_id).map(ToString::to_string)),
                    pool: slice.map(|a| a.pool.to_string()),
                    allocation: s.allocation_id,
                    util_pct: super::rollup::util_of(&s)?,
                    mem_used_mib: u64::try_from(s.mem_used_mib).unwrap_or(0),
                    power_w: s.power_mw.map(|p| f64::from(p) / 1000.0),
                    temp_c: s.temp_c,
                    sm_clock_mhz: s.sm_clock_mhz,
                });
            }
        }
        Ok(out)
    }
}
