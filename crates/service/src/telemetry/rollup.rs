//! Rollups and retention. Each scheduler round takes the raw samples not
//! yet counted whose minute has ended, recomputes from the raw samples the
//! minute rollups of every (device, minute) they touch and the hour rollups
//! of every (device, hour) from its minutes, and marks them counted. A
//! sample arriving late (an agent replaying after an outage) is simply not
//! counted yet, so its minute and hour are recomputed when it comes.
//! Then samples and rollups past their windows are deleted.

use crate::audit::Actor;
use crate::entity::{gpu_rollup, gpu_sample};
use crate::write::ROLLUP_LOCK;
use crate::{Service, ServiceError};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use tessera_core::metering::HOUR_MS;
use tessera_core::telemetry::{combine, roll_up, Rollup, Sample, MINUTE_MS};

/// Most raw samples one round counts (the rest wait for the next round).
const SAMPLES_PER_ROUND: u64 = 20_000;
const DAY_MS: i64 = 24 * HOUR_MS;

/// What a rollup round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RollupReport {
    /// Raw samples counted.
    pub samples: u64,
    /// Minute rollups written.
    pub minutes: u64,
    /// Hour rollups written.
    pub hours: u64,
    /// Raw samples and rollups deleted by retention.
    pub expired: u64,
}

fn sample_of(s: &gpu_sample::Model) -> Option<Sample> {
    Some(Sample {
        at_ms: s.at_ms,
        util_pct: u8::try_from(s.util_pct?).ok()?,
        mem_used_mib: u64::try_from(s.mem_used_mib).unwrap_or(0),
        covered_ms: u32::try_from(s.covered_ms).unwrap_or(0),
        weight_milli: u32::try_from(s.weight_milli).unwrap_or(0),
    })
}

pub(crate) fn rollup_of(r: &gpu_rollup::Model) -> Rollup {
    let pct = |v: i16| u8::try_from(v).unwrap_or(0);
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    Rollup {
        start_ms: r.start_ms,
        samples: u32::try_from(r.samples).unwrap_or(0),
        util_min: pct(r.util_min),
        util_avg: pct(r.util_avg),
        util_max: pct(r.util_max),
        util_p95: pct(r.util_p95),
        busy_ms: n(r.busy_ms),
        covered_ms: n(r.covered_ms),
        used_milli_ms: n(r.used_milli_ms),
        mem_max_mib: n(r.mem_max_mib),
    }
}

fn row_of(
    period_ms: i64,
    host_id: i64,
    device: &str,
    allocation_id: Option<i64>,
    r: &Rollup,
) -> gpu_rollup::ActiveModel {
    let big = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    gpu_rollup::ActiveModel {
        period_ms: Set(period_ms),
        start_ms: Set(r.start_ms),
        host_id: Set(host_id),
        device_uuid: Set(device.to_owned()),
        allocation_id: Set(allocation_id),
        samples: Set(i32::try_from(r.samples).unwrap_or(i32::MAX)),
        util_min: Set(i16::from(r.util_min)),
        util_avg: Set(i16::from(r.util_avg)),
        util_max: Set(i16::from(r.util_max)),
        util_p95: Set(i16::from(r.util_p95)),
        busy_ms: Set(big(r.busy_ms)),
        covered_ms: Set(big(r.covered_ms)),
        used_milli_ms: Set(big(r.used_milli_ms)),
        mem_max_mib: Set(big(r.mem_max_mib)),
        ..Default::default()
    }
}

/// Replaces the rollups of `device` for the period starting at `start_ms`.
async fn replace<C: ConnectionTrait>(
    conn: &C,
    period_ms: i64,
    start_ms: i64,
    device: &str,
    rows: Vec<gpu_rollup::ActiveModel>,
) -> Result<u64, ServiceError> {
    gpu_rollup::Entity::delete_many()
        .filter(gpu_rollup::Column::DeviceUuid.eq(device))
        .filter(gpu_rollup::Column::PeriodMs.eq(period_ms))
        .filter(gpu_rollup::Column::StartMs.eq(start_ms))
        .exec(conn)
        .await?;
    let n = rows.len() as u64;
    if !rows.is_empty() {
        gpu_rollup::Entity::insert_many(rows)
            .exec_without_returning(conn)
            .await?;
    }
    Ok(n)
}

impl Service {
    /// One rollup and retention round (the scheduler runs it every round).
    pub async fn roll_up_telemetry(&self) -> Result<RollupReport, ServiceError> {
        let now_ms = self.now().timestamp_millis();
        let minute_now = now_ms.div_euclid(MINUTE_MS) * MINUTE_MS;
        let mut report = RollupReport::default();
        // Most rounds find nothing to do: find that out without a write.
        // Retention runs once a minute.
        let retention_due = self.telemetry_minute.swap(minute_now, Ordering::Relaxed) != minute_now;
        let any_pending = gpu_sample::Entity::find()
            .filter(gpu_sample::Column::Rolled.eq(false))
            .filter(gpu_sample::Column::AtMs.lt(minute_now))
            .one(&self.db)
            .await?
            .is_some();
        if !any_pending && !retention_due {
            return Ok(report);
        }
        // One replica at a time: two rolling up the same minute would both
        // replace its rows and leave them twice.
        let w = self.begin_locked(ROLLUP_LOCK).await?;
        let pending = gpu_sample::Entity::find()
            .filter(gpu_sample::Column::Rolled.eq(false))
            .filter(gpu_sample::Column::AtMs.lt(minute_now))
            .order_by_asc(gpu_sample::Column::Id)
            .limit(SAMPLES_PER_ROUND)
            .all(w.db())
            .await?;
        // (device, minute) → host.
        let mut minutes: BTreeMap<(String, i64), i64> = BTreeMap::new();
        for s in &pending {
            minutes.insert(
                (
                    s.device_uuid.clone(),
                    s.at_ms.div_euclid(MINUTE_MS) * MINUTE_MS,
                ),
                s.host_id,
            );
        }
        let mut hours: BTreeMap<(String, i64), i64> = BTreeMap::new();
        for ((device, minute), host_id) in &minutes {
            let raw = gpu_sample::Entity::find()
                .filter(gpu_sample::Column::DeviceUuid.eq(device.as_str()))
                .filter(gpu_sample::Column::AtMs.gte(*minute))
                .filter(gpu_sample::Column::AtMs.lt(minute + MINUTE_MS))
                .all(w.db())
                .await?;
            let mut by_slice: BTreeMap<Option<i64>, Vec<Sample>> = BTreeMap::new();
            for s in &raw {
                if let Some(sample) = sample_of(s) {
                    by_slice.entry(s.allocation_id).or_default().push(sample);
                }
            }
            let rows = by_slice
                .iter()
                .flat_map(|(alloc, samples)| {
                    roll_up(samples, MINUTE_MS)
                        .into_iter()
                        .map(move |r| row_of(MINUTE_MS, *host_id, device, *alloc, &r))
                })
                .collect();
            report.minutes += replace(w.db(), MINUTE_MS, *minute, device, rows).await?;
            hours.insert(
                (device.clone(), minute.div_euclid(HOUR_MS) * HOUR_MS),
                *host_id,
            );
        }
        for ((device, hour), host_id) in &hours {
            let parts = gpu_rollup::Entity::find()
                .filter(gpu_rollup::Column::DeviceUuid.eq(device.as_str()))
                .filter(gpu_rollup::Column::PeriodMs.eq(MINUTE_MS))
                .filter(gpu_rollup::Column::StartMs.gte(*hour))
                .filter(gpu_rollup::Column::StartMs.lt(hour + HOUR_MS))
                .all(w.db())
                .await?;
            let mut by_slice: BTreeMap<Option<i64>, Vec<Rollup>> = BTreeMap::new();
            for p in &parts {
                by_slice
                    .entry(p.allocation_id)
                    .or_default()
                    .push(rollup_of(p));
            }
            let rows = by_slice
                .iter()
                .filter_map(|(alloc, parts)| {
                    combine(parts, *hour).map(|r| row_of(HOUR_MS, *host_id, device, *alloc, &r))
                })
                .collect();
            report.hours += replace(w.db(), HOUR_MS, *hour, device, rows).await?;
        }
        let ids: Vec<i64> = pending.iter().map(|s| s.id).collect();
        for chunk in ids.chunks(1000) {
            gpu_sample::Entity::update_many()
                .col_expr(gpu_sample::Column::Rolled, Expr::value(true))
                .filter(gpu_sample::Column::Id.is_in(chunk.iter().copied()))
                .exec(w.db())
                .await?;
        }
        report.samples = ids.len() as u64;

        // Retention. Raw samples not yet counted are kept until they are.
        let policy = self.settings.telemetry;
        let raw_before = now_ms - i64::from(policy.raw_hours) * HOUR_MS;
        report.expired += gpu_sample::Entity::delete_many()
            .filter(gpu_sample::Column::AtMs.lt(raw_before))
            .filter(gpu_sample::Column::Rolled.eq(true))
            .exec(w.db())
            .await?
            .rows_affected;
        for (period, days) in [(MINUTE_MS, policy.minute_days), (HOUR_MS, policy.hour_days)] {
            report.expired += gpu_rollup::Entity::delete_many()
                .filter(gpu_rollup::Column::PeriodMs.eq(period))
                .filter(gpu_rollup::Column::StartMs.lt(now_ms - i64::from(days) * DAY_MS))
                .exec(w.db())
                .await?
                .rows_affected;
        }
        w.commit(self, &Actor::System).await?;
        Ok(report)
    }
}
