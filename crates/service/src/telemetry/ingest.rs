//! Storing a host's telemetry batch: checked, deduplicated by the time of
//! the last round stored for the host, attributed to the slices that held
//! each device at each moment, and written in one transaction.

use super::rollup::{mark_due, Marker};
use crate::allocations::AllocationRow;
use crate::audit::Actor;
use crate::entity::{allocation, gpu, gpu_sample, host};
use crate::fleet::AuthenticatedHost;
use crate::{Service, ServiceError};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter, QuerySelect, Set};
use std::collections::BTreeSet;
use tessera_core::ids::{AllocationId, HostId};
use tessera_core::telemetry::MINUTE_MS;
use tessera_protocol::agent::{GpuSample, TelemetryAck, TelemetryBatch, MAX_TELEMETRY_ROUNDS};

/// Rows per INSERT statement (SQLite allows 32,766 bound values).
const INSERT_CHUNK: usize = 1000;
/// How far ahead of the server's clock a round may be (clock skew), ms.
const MAX_CLOCK_AHEAD_MS: i64 = 5 * 60_000;

/// `GPU-<uuid>`, or `MIG-<uuid>` (also the older `MIG-GPU-<uuid>/<gi>/<ci>`).
fn is_uuid(s: &str, prefix: &str) -> bool {
    s.len() > prefix.len()
        && s.len() <= 96
        && s.starts_with(prefix)
        && s[prefix.len()..]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '/')
}

/// Checks a batch for internal consistency; names the first offending field.
pub fn validate_batch(batch: &TelemetryBatch) -> Result<(), ServiceError> {
    if !(1000..=600_000).contains(&batch.interval_ms) || !batch.interval_ms.is_multiple_of(100) {
        return Err(ServiceError::invalid(
            "interval_ms",
            "must be a multiple of 100 between 1,000 and 600,000",
        ));
    }
    if batch.rounds.len() > MAX_TELEMETRY_ROUNDS {
        return Err(ServiceError::invalid(
            "rounds",
            format!("at most {MAX_TELEMETRY_ROUNDS} rounds per batch; send the rest in another"),
        ));
    }
    let mut last = i64::MIN;
    for (r, round) in batch.rounds.iter().enumerate() {
        if round.at_ms <= last {
            return Err(ServiceError::invalid(
                format!("rounds[{r}].at_ms"),
                "rounds must be in strictly increasing time order",
            ));
        }
        last = round.at_ms;
        if round.gpus.len() > 64 {
            return Err(ServiceError::invalid(
                format!("rounds[{r}].gpus"),
                "a host has at most 64 GPUs",
            ));
        }
        let mut seen = BTreeSet::new();
        for (g, s) in round.gpus.iter().enumerate() {
            let field = |f: &str| format!("rounds[{r}].gpus[{g}].{f}");
            if !is_uuid(&s.uuid, "GPU-") || !seen.insert(s.uuid.as_str()) {
                return Err(ServiceError::invalid(
                    field("uuid"),
                    format!("'{}' is not a GPU UUID, or appears twice", s.uuid),
                ));
            }
            check_figures(s.util_pct, s.mem_used_mib, &field)?;
            if s.power_mw.is_some_and(|p| p > 10_000_000) {
                return Err(ServiceError::invalid(field("power_mw"), "is out of range"));
            }
            if s.temp_c.is_some_and(|t| t > 200) || s.sm_clock_mhz.is_some_and(|c| c > 100_000) {
                return Err(ServiceError::invalid(field("temp_c"), "is out of range"));
            }
            if s.instances.len() > 64 {
                return Err(ServiceError::invalid(field("instances"), "at most 64"));
            }
            for (i, inst) in s.instances.iter().enumerate() {
                let field = |f: &str| format!("rounds[{r}].gpus[{g}].instances[{i}].{f}");
                if !is_uuid(&inst.uuid, "MIG-") || !seen.insert(inst.uuid.as_str()) {
                    return Err(ServiceError::invalid(
                        field("uuid"),
                        format!("'{}' is not a MIG device UUID, or appears twice", inst.uuid),
                    ));
                }
                check_figures(inst.util_pct, inst.mem_used_mib, &field)?;
            }
            if s.clients.len() > 64 {
                return Err(ServiceError::invalid(field("clients"), "at most 64"));
            }
            let mut named = BTreeSet::new();
            for (i, c) in s.clients.iter().enumerate() {
                let field = |f: &str| format!("rounds[{r}].gpus[{g}].clients[{i}].{f}");
                if !named.insert(c.allocation) {
                    return Err(ServiceError::invalid(
                        field("allocation"),
                        format!("slice {} appears twice", c.allocation),
                    ));
                }
                check_figures(c.util_pct, c.mem_used_mib, &field)?;
            }
        }
    }
    Ok(())
}

/// A utilisation (0-100 %) and a memory figure that fit their columns.
fn check_figures(
    util_pct: Option<u8>,
    mem_used_mib: u64,
    field: &dyn Fn(&str) -> String,
) -> Result<(), ServiceError> {
    if util_pct.is_some_and(|u| u > 100) {
        return Err(ServiceError::invalid(field("util_pct"), "must be 0-100"));
    }
    if i64::try_from(mem_used_mib).is_err() {
        return Err(ServiceError::invalid(
            field("mem_used_mib"),
            "is out of range",
        ));
    }
    Ok(())
}

/// A shared slice's own figures where the agent measured its processes
/// (`clients`): its SM use as a percent of *its* share of the GPU (a
/// quarter-GPU slice using 20 % of the GPU used 80 % of itself), its
/// memory. Without per-client figures, the GPU's. A slice with none of its
/// processes listed used nothing when the GPU idled, and is unknown while
/// others keep it busy (its processes may be untagged).
fn slice_figures(s: &GpuSample, holder: &Holder) -> (Option<u8>, u64) {
    if s.clients.is_empty() || holder.weight_milli >= 1000 {
        return (s.util_pct, s.mem_used_mib);
    }
    match s.clients.iter().find(|c| c.allocation == holder.id) {
        Some(c) => {
            let share = u64::try_from(holder.weight_milli.max(1)).unwrap_or(1000);
            let of_slice = c
                .util_pct
                .map(|u| u8::try_from((u64::from(u) * 1000 / share).min(100)).unwrap_or(100));
            (of_slice, c.mem_used_mib)
        }
        None if s.util_pct == Some(0) => (Some(0), 0),
        None => (None, 0),
    }
}

/// A slice that held devices on the host during the batch.
struct Holder {
    id: AllocationId,
    from_ms: i64,
    until_ms: Option<i64>,
    mig_device: Option<String>,
    gpus: Vec<String>,
    /// Thousandths of a GPU it holds on each of its devices.
    weight_milli: i32,
}

impl Holder {
    fn holds_at(&self, at_ms: i64) -> bool {
        self.from_ms <= at_ms && self.until_ms.is_none_or(|u| at_ms < u)
    }
}

async fn holders<C: sea_orm::ConnectionTrait>(
    conn: &C,
    host_id: HostId,
    first_ms: i64,
    last_ms: i64,
) -> Result<Vec<Holder>, ServiceError> {
    let at = |ms: i64| chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default();
    let rows = allocation::Entity::find()
        .filter(allocation::Column::HostId.eq(host_id))
        .filter(allocation::Column::ActiveAt.lte(at(last_ms)))
        .filter(
            Condition::any()
                .add(allocation::Column::EndedAt.is_null())
                .add(allocation::Column::EndedAt.gt(at(first_ms))),
        )
        .all(conn)
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for a in rows {
        let Some(active_at) = a.active_at else {
            continue;
        };
        let gpus: Vec<String> = a
            .stored_placement()
            .map(crate::allocations::StoredPlacement::gpu_uuids)
            .unwrap_or_default();
        let per_device = match &a.mig_device_uuid {
            Some(_) => a.demand_compute_milli,
            None => a.demand_compute_milli / i64::try_from(gpus.len().max(1)).unwrap_or(1),
        };
        out.push(Holder {
            id: a.id,
            from_ms: active_at.timestamp_millis(),
            until_ms: a.ended_at.map(|t| t.timestamp_millis()),
            mig_device: a.mig_device_uuid.clone(),
            gpus,
            weight_milli: i32::try_from(per_device).unwrap_or(i32::MAX),
        });
    }
    Ok(out)
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl Service {
    /// Stores a host's telemetry batch (see [`TelemetryBatch`]): rounds at
    /// or before the last one stored are skipped as duplicates, rounds
    /// older than the raw window are dropped, GPUs must be the host's.
    pub async fn record_telemetry(
        &self,
        who: &AuthenticatedHost,
        batch: &TelemetryBatch,
    ) -> Result<TelemetryAck, ServiceError> {
        let ack = self.store_telemetry(who, batch).await?;
        self.metrics
            .telemetry(ack.stored, ack.duplicates, ack.expired);
        Ok(ack)
    }

    async fn store_telemetry(
        &self,
        who: &AuthenticatedHost,
        batch: &TelemetryBatch,
    ) -> Result<TelemetryAck, ServiceError> {
        validate_batch(batch)?;
        if batch.hostname != who.hostname {
            return Err(ServiceError::Forbidden(format!(
                "this credential belongs to host '{}', not '{}'; an agent may only send telemetry for its own host",
                who.hostname, batch.hostname
            )));
        }
        let now_ms = self.now().timestamp_millis();
        if let Some((r, _)) = batch
            .rounds
            .iter()
            .enumerate()
            .find(|(_, round)| round.at_ms > now_ms + MAX_CLOCK_AHEAD_MS)
        {
            return Err(ServiceError::invalid(
                format!("rounds[{r}].at_ms"),
                "is more than 5 minutes ahead of the server's clock; check the host's time (NTP)",
            ));
        }
        let oldest_kept =
            now_ms - i64::from(self.settings.telemetry.raw_hours) * tessera_core::metering::HOUR_MS;

        let w = self.begin_write().await?;
        let last: Option<i64> = host::Entity::find_by_id(who.id)
            .select_only()
            .column(host::Column::TelemetryLastAtMs)
            .into_tuple()
            .one(w.db())
            .await?
            .ok_or(ServiceError::InvalidCredential)?;
        let known: BTreeSet<String> = gpu::Entity::find()
            .select_only()
            .column(gpu::Column::Uuid)
            .filter(gpu::Column::HostId.eq(who.id))
            .into_tuple()
            .all(w.db())
            .await?
            .into_iter()
            .collect();
        for (r, round) in batch.rounds.iter().enumerate() {
            if let Some((g, s)) = round
                .gpus
                .iter()
                .enumerate()
                .find(|(_, s)| !known.contains(&s.uuid))
            {
                return Err(ServiceError::invalid(
                    format!("rounds[{r}].gpus[{g}].uuid"),
                    format!("GPU {} is not on this host; report it first", s.uuid),
                ));
            }
        }
        let duplicates = batch
            .rounds
            .iter()
            .filter(|r| last.is_some_and(|l| r.at_ms <= l))
            .count();
        let fresh: Vec<_> = batch
            .rounds
            .iter()
            .filter(|r| last.is_none_or(|l| r.at_ms > l) && r.at_ms >= oldest_kept)
            .collect();
        let expired = batch.rounds.len() - duplicates - fresh.len();
        let (Some(first), Some(newest)) = (fresh.first(), fresh.last()) else {
            return Ok(TelemetryAck {
                stored: 0,
                duplicates: u32::try_from(duplicates).unwrap_or(u32::MAX),
                expired: u32::try_from(expired).unwrap_or(u32::MAX),
                last_at_ms: last.unwrap_or_default(),
            });
        };
        // Claim the rounds first: a concurrent copy of this batch (on
        // another connection or replica) finds the time moved and stores
        // nothing twice.
        let claimed = host::Entity::update_many()
            .col_expr(host::Column::TelemetryLastAtMs, Expr::value(newest.at_ms))
            .filter(host::Column::Id.eq(who.id))
            .filter(match last {
                Some(l) => host::Column::TelemetryLastAtMs.eq(l),
                None => host::Column::TelemetryLastAtMs.is_null(),
            })
            .exec(w.db())
            .await?;
        if claimed.rows_affected != 1 {
            return Err(ServiceError::Conflict(
                "another copy of this telemetry is being stored; send it again".to_owned(),
            ));
        }

        let holders = holders(w.db(), who.id, first.at_ms, newest.at_ms).await?;
        let covered = i32::try_from(batch.interval_ms).unwrap_or(i32::MAX);
        let mut rows = Vec::new();
        for round in &fresh {
            for s in &round.gpus {
                let row =
                    |device: &str, allocation: Option<&Holder>, util: Option<u8>, mem: u64| {
                        gpu_sample::ActiveModel {
                            host_id: Set(who.id),
                            at_ms: Set(round.at_ms),
                            gpu_uuid: Set(s.uuid.clone()),
                            device_uuid: Set(device.to_owned()),
                            allocation_id: Set(allocation.map(|a| a.id)),
                            weight_milli: Set(allocation.map_or(0, |a| a.weight_milli)),
                            util_pct: Set(util.map(i16::from)),
                            mem_used_mib: Set(to_i64(mem)),
                            power_mw: Set(s.power_mw.map(|p| i32::try_from(p).unwrap_or(i32::MAX))),
                            temp_c: Set(s.temp_c.map(|t| i32::try_from(t).unwrap_or(i32::MAX))),
                            sm_clock_mhz: Set(s
                                .sm_clock_mhz
                                .map(|c| i32::try_from(c).unwrap_or(i32::MAX))),
                            covered_ms: Set(covered),
                            ..Default::default()
                        }
                    };
                // The whole GPU: once per slice that holds it whole or
                // shares it (MPS, time slices), or once for the fleet.
                let on_gpu: Vec<&Holder> = holders
                    .iter()
                    .filter(|a| {
                        a.mig_device.is_none()
                            && a.gpus.contains(&s.uuid)
                            && a.holds_at(round.at_ms)
                    })
                    .collect();
                if on_gpu.is_empty() {
                    rows.push(row(&s.uuid, None, s.util_pct, s.mem_used_mib));
                }
                for a in on_gpu {
                    let (util, mem) = slice_figures(s, a);
                    rows.push(row(&s.uuid, Some(a), util, mem));
                }
                for inst in &s.instances {
                    let holder = holders.iter().find(|a| {
                        a.mig_device.as_deref() == Some(inst.uuid.as_str())
                            && a.holds_at(round.at_ms)
                    });
                    rows.push(row(&inst.uuid, holder, inst.util_pct, inst.mem_used_mib));
                }
            }
        }
        // The minutes these samples fall in are due to be rolled up again.
        let due: BTreeSet<(String, i64)> = rows
            .iter()
            .filter_map(|r| match (&r.device_uuid, &r.at_ms) {
                (Set(device), Set(at)) => {
                    Some((device.clone(), at.div_euclid(MINUTE_MS) * MINUTE_MS))
                }
                _ => None,
            })
            .collect();
        for chunk in rows.chunks(INSERT_CHUNK) {
            gpu_sample::Entity::insert_many(chunk.to_vec())
                .exec_without_returning(w.db())
                .await?;
        }
        mark_due(w.db(), Marker::Ingest, MINUTE_MS, &due).await?;
        w.commit(self, &Actor::System).await?;
        Ok(TelemetryAck {
            stored: u32::try_from(fresh.len()).unwrap_or(u32::MAX),
            duplicates: u32::try_from(duplicates).unwrap_or(u32::MAX),
            expired: u32::try_from(expired).unwrap_or(u32::MAX),
            last_at_ms: newest.at_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_protocol::agent::ClientSample;

    fn holder(id: i64, weight_milli: i32) -> Holder {
        Holder {
            id: AllocationId::new(id),
            from_ms: 0,
            until_ms: None,
            mig_device: None,
            gpus: vec!["GPU-1".to_owned()],
            weight_milli,
        }
    }

    fn sample(util: Option<u8>, clients: Vec<ClientSample>) -> GpuSample {
        GpuSample {
            uuid: "GPU-1".to_owned(),
            util_pct: util,
            mem_used_mib: 20_000,
            power_mw: None,
            temp_c: None,
            sm_clock_mhz: None,
            instances: Vec::new(),
            clients,
        }
    }

    #[test]
    fn a_shared_slice_is_measured_by_its_own_processes() {
        let client = |id: i64, util: Option<u8>, mem: u64| ClientSample {
            allocation: AllocationId::new(id),
            util_pct: util,
            mem_used_mib: mem,
        };
        let busy = sample(
            Some(60),
            vec![client(1, Some(20), 4096), client(2, None, 512)],
        );
        // A quarter of the GPU using a fifth of it used 80 % of itself.
        assert_eq!(slice_figures(&busy, &holder(1, 250)), (Some(80), 4096));
        // Above its share (MPS without limits): capped at all of itself.
        assert_eq!(
            slice_figures(
                &sample(Some(90), vec![client(1, Some(60), 1)]),
                &holder(1, 250)
            ),
            (Some(100), 1)
        );
        // The driver gave no per-process figure: unknown, its memory known.
        assert_eq!(slice_figures(&busy, &holder(2, 250)), (None, 512));
        // None of its processes listed while others keep the GPU busy:
        // unknown (an untagged process may be its); on an idle GPU, idle.
        assert_eq!(slice_figures(&busy, &holder(3, 250)), (None, 0));
        let idle = sample(Some(0), vec![client(1, Some(0), 100)]);
        assert_eq!(slice_figures(&idle, &holder(3, 250)), (Some(0), 0));
        // Whole GPUs, and samples without per-client figures: the GPU's.
        assert_eq!(slice_figures(&busy, &holder(1, 1000)), (Some(60), 20_000));
        assert_eq!(
            slice_figures(&sample(Some(60), vec![]), &holder(1, 250)),
            (Some(60), 20_000)
        );
    }
}
