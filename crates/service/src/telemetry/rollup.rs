//! Rollups and retention. Storing samples marks their (device, minute)
//! pairs due (`gpu_rollup_pending`). Each scheduler round takes the due
//! minutes that have settled (ended [`ROLLUP_SETTLE_MS`] ago, so that the
//! agents' batches that close them are in) and recomputes their rollups
//! from the raw samples, which marks their hours due; then takes the due
//! hours that have settled and recomputes them from their minutes. A sample arriving late (an
//! agent replaying after an outage) marks its minute due again, so its
//! minute and hour are recomputed when it comes. Then samples and rollups
//! past their windows are deleted. (The hour still running has minutes
//! only; readers of recent periods use minutes.)
//!
//! A round deletes the due marks it takes before it reads the samples: a
//! batch stored concurrently either committed before that read (and is
//! read), or marks its minute again after the delete (and is read next
//! round); storing marking a pair that is due already updates its row, so
//! it waits for a delete in flight rather than slipping under it. (The
//! rollup marks hours under its own lock, so it needs no such update.)

use super::pairs::pairs_condition;
use crate::audit::Actor;
use crate::entity::{gpu_rollup, gpu_rollup_pending, gpu_sample};
use crate::write::ROLLUP_LOCK;
use crate::{Service, ServiceError};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{
    ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use tessera_core::ids::{AllocationId, HostId};
use tessera_core::metering::HOUR_MS;
use tessera_core::telemetry::{combine, roll_up, Rollup, Sample, MINUTE_MS, ROLLUP_SETTLE_MS};

/// Most (device, period) pairs one round rolls up per period (the rest
/// wait for the next round).
const PAIRS_PER_ROUND: u64 = 20_000;
const DAY_MS: i64 = 24 * HOUR_MS;

/// What a rollup round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RollupReport {
    /// Raw samples read to recompute the minutes that were due.
    pub samples: u64,
    /// Minute rollups written.
    pub minutes: u64,
    /// Hour rollups written.
    pub hours: u64,
    /// Raw samples and rollups deleted by retention.
    pub expired: u64,
    /// Whether the round refreshed the planner's statistics of the
    /// telemetry tables first (see [`refresh_statistics`]).
    pub analyzed: bool,
}

/// A stored percentage (0–100); anything else does not read back.
fn stored_pct(what: &str, v: i16) -> Result<u8, ServiceError> {
    match u8::try_from(v) {
        Ok(p) if p <= 100 => Ok(p),
        _ => Err(ServiceError::internal(format!(
            "stored {what} {v} is not a percentage"
        ))),
    }
}

/// A stored sample's utilisation (`None` where the driver did not tell).
pub(crate) fn util_of(s: &gpu_sample::Model) -> Result<Option<u8>, ServiceError> {
    s.util_pct
        .map(|u| stored_pct("gpu_samples.util_pct", u))
        .transpose()
}

/// A stored sample in core's terms (`None` where its utilisation is
/// unknown: such a sample says nothing about activity).
pub(crate) fn sample_of(s: &gpu_sample::Model) -> Result<Option<Sample>, ServiceError> {
    Ok(util_of(s)?.map(|util_pct| Sample {
        at_ms: s.at_ms,
        util_pct,
        mem_used_mib: u64::try_from(s.mem_used_mib).unwrap_or(0),
        covered_ms: u32::try_from(s.covered_ms).unwrap_or(0),
        weight_milli: u32::try_from(s.weight_milli).unwrap_or(0),
    }))
}

pub(crate) fn rollup_of(r: &gpu_rollup::Model) -> Result<Rollup, ServiceError> {
    let pct = |v: i16| stored_pct("gpu_rollups.util", v);
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    Ok(Rollup {
        start_ms: r.start_ms,
        samples: u32::try_from(r.samples).unwrap_or(0),
        util_min: pct(r.util_min)?,
        util_avg: pct(r.util_avg)?,
        util_max: pct(r.util_max)?,
        util_p95: pct(r.util_p95)?,
        busy_ms: n(r.busy_ms),
        covered_ms: n(r.covered_ms),
        used_milli_ms: n(r.used_milli_ms),
        mem_max_mib: n(r.mem_max_mib),
    })
}

fn row_of(
    period_ms: i64,
    host_id: HostId,
    device: &str,
    allocation_id: Option<AllocationId>,
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

/// Rows per statement when deleting by (device, start) pairs, inserting
/// rollups or marking samples.
const CHUNK: usize = 500;

/// Replaces the rollups of `period_ms` for the (device, start) `pairs` with
/// `rows`, a few statements for the lot.
async fn replace<C: ConnectionTrait>(
    conn: &C,
    period_ms: i64,
    pairs: &[(String, i64)],
    rows: Vec<gpu_rollup::ActiveModel>,
) -> Result<u64, ServiceError> {
    for chunk in pairs.chunks(CHUNK) {
        gpu_rollup::Entity::delete_many()
            .filter(gpu_rollup::Column::PeriodMs.eq(period_ms))
            .filter(pairs_condition(
                chunk.iter().map(|(d, s)| (*s, d.as_str())),
                gpu_rollup::Column::StartMs,
                gpu_rollup::Column::DeviceUuid,
            ))
            .exec(conn)
            .await?;
    }
    let n = rows.len() as u64;
    let mut rows = rows.into_iter().peekable();
    while rows.peek().is_some() {
        let chunk: Vec<_> = rows.by_ref().take(CHUNK).collect();
        gpu_rollup::Entity::insert_many(chunk)
            .exec_without_returning(conn)
            .await?;
    }
    Ok(n)
}

/// Who marks pairs due, which decides what marking a pair already due does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Marker {
    /// Storing samples, concurrently with rollups: a pair already due is
    /// updated (its `marks` counted up), which takes the row's lock, so a
    /// rollup deleting it concurrently waits for this transaction and then
    /// reads its samples.
    Ingest,
    /// The rollup marking the hours of the minutes it rolled up: it holds
    /// the rollup lock, so no other transaction takes those marks meanwhile,
    /// and a pair already due is left as it is (no write).
    Rollup,
}

/// Marks the (device, period start) `pairs` of `period_ms` due to be rolled
/// up, a few statements for the lot.
pub(crate) async fn mark_due<C: ConnectionTrait>(
    conn: &C,
    by: Marker,
    period_ms: i64,
    pairs: &BTreeSet<(String, i64)>,
) -> Result<(), ServiceError> {
    let rows: Vec<gpu_rollup_pending::ActiveModel> = pairs
        .iter()
        .map(|(device, start)| gpu_rollup_pending::ActiveModel {
            period_ms: Set(period_ms),
            device_uuid: Set(device.clone()),
            start_ms: Set(*start),
            marks: Set(1),
        })
        .collect();
    let mut on_conflict = OnConflict::columns([
        gpu_rollup_pending::Column::PeriodMs,
        gpu_rollup_pending::Column::DeviceUuid,
        gpu_rollup_pending::Column::StartMs,
    ]);
    match by {
        Marker::Ingest => on_conflict.value(
            gpu_rollup_pending::Column::Marks,
            Expr::col((
                gpu_rollup_pending::Entity,
                gpu_rollup_pending::Column::Marks,
            ))
            .add(1),
        ),
        Marker::Rollup => on_conflict.do_nothing(),
    };
    for chunk in rows.chunks(CHUNK) {
        let insert = gpu_rollup_pending::Entity::insert_many(chunk.to_vec())
            .on_conflict(on_conflict.clone());
        match by {
            Marker::Ingest => insert.exec_without_returning(conn).await.map(drop)?,
            // Every row may conflict: nothing inserted is no error here.
            Marker::Rollup => insert
                .do_nothing()
                .exec_without_returning(conn)
                .await
                .map(drop)?,
        }
    }
    Ok(())
}

/// Takes up to [`PAIRS_PER_ROUND`] due (device, start) pairs of `period_ms`
/// whose period had ended by `ended_by`: reads them and deletes them, before
/// the caller reads what they roll up (see [`mark_due`] for why this order).
async fn take_due<C: ConnectionTrait>(
    conn: &C,
    period_ms: i64,
    ended_by: i64,
) -> Result<Vec<(String, i64)>, ServiceError> {
    let pairs: Vec<(String, i64)> = gpu_rollup_pending::Entity::find()
        .filter(gpu_rollup_pending::Column::PeriodMs.eq(period_ms))
        .filter(gpu_rollup_pending::Column::StartMs.lte(ended_by - period_ms))
        .order_by_asc(gpu_rollup_pending::Column::StartMs)
        .limit(PAIRS_PER_ROUND)
        .all(conn)
        .await?
        .into_iter()
        .map(|p| (p.device_uuid, p.start_ms))
        .collect();
    for chunk in pairs.chunks(CHUNK) {
        gpu_rollup_pending::Entity::delete_many()
            .filter(gpu_rollup_pending::Column::PeriodMs.eq(period_ms))
            .filter(pairs_condition(
                chunk.iter().map(|(d, s)| (*s, d.as_str())),
                gpu_rollup_pending::Column::StartMs,
                gpu_rollup_pending::Column::DeviceUuid,
            ))
            .exec(conn)
            .await?;
    }
    Ok(pairs)
}

/// Refreshes PostgreSQL's statistics of the devices and times of samples
/// and rollups (under half a second, whatever the fleet's size). A round
/// reads the samples of the minutes that just ended, 500 devices at a
/// time. With statistics taken before those minutes, the planner believes
/// they hold a handful of rows; with none of the devices (a young table),
/// that 500 devices are most of them. Either way it scans every device's
/// samples of the minute by time and filters out all but the batch's
/// (5,000 hosts: 240,000 rows, 170–270 ms, for each of 80 batches a
/// minute), instead of reading the batch's devices by (device, time)
/// (6–30 ms). So the first round of each minute refreshes them before it
/// reads. (Autovacuum analyses by the amount of change, not by the clock,
/// so its statistics lag the newest minute.) SQLite plans these reads by
/// its indexes alone.
async fn refresh_statistics<C: ConnectionTrait>(conn: &C) -> Result<bool, ServiceError> {
    if conn.get_database_backend() != sea_orm::DbBackend::Postgres {
        return Ok(false);
    }
    conn.execute_unprepared(
        "ANALYZE gpu_samples (device_uuid, at_ms), gpu_rollups (device_uuid, start_ms)",
    )
    .await?;
    Ok(true)
}

/// Makes PostgreSQL plan every statement of the rollup's transaction for
/// its own values. The round sends the same statements a few dozen times
/// (a batch of 500 devices each); from the sixth on, PostgreSQL would run a
/// generic plan, made without knowing which devices and times they name,
/// and that plan scans by time (5,000 hosts: reading a batch's samples
/// took 1.1 to 1.7 s instead of 13 to 25 ms, and deleting a batch's due
/// marks about 450 ms, 30 s a round in all, while ingest waited on the
/// marks it held). A custom plan costs about a millisecond of planning.
async fn custom_plans<C: ConnectionTrait>(conn: &C) -> Result<(), ServiceError> {
    if conn.get_database_backend() == sea_orm::DbBackend::Postgres {
        conn.execute_unprepared("SET LOCAL plan_cache_mode = force_custom_plan")
            .await?;
    }
    Ok(())
}

/// The devices of `pairs` and the range of periods they span.
fn span(pairs: &BTreeSet<(String, i64)>, period_ms: i64) -> (Vec<String>, i64, i64) {
    let devices: BTreeSet<&String> = pairs.iter().map(|(d, _)| d).collect();
    let lo = pairs.iter().map(|(_, t)| *t).min().unwrap_or(0);
    let hi = pairs.iter().map(|(_, t)| *t).max().unwrap_or(0) + period_ms;
    (devices.into_iter().cloned().collect(), lo, hi)
}

/// Retention: deletes raw samples and rollups past their windows (raw
/// samples of minutes still due are kept until they are rolled up).
/// Returns how many rows went.
async fn expire<C: ConnectionTrait>(
    conn: &C,
    policy: super::TelemetryPolicy,
    now_ms: i64,
) -> Result<u64, ServiceError> {
    let mut expired = 0;
    let mut raw_before = now_ms - i64::from(policy.raw_hours) * HOUR_MS;
    if let Some(oldest_due) = gpu_rollup_pending::Entity::find()
        .filter(gpu_rollup_pending::Column::PeriodMs.eq(MINUTE_MS))
        .order_by_asc(gpu_rollup_pending::Column::StartMs)
        .one(conn)
        .await?
    {
        raw_before = raw_before.min(oldest_due.start_ms);
    }
    expired += gpu_sample::Entity::delete_many()
        .filter(gpu_sample::Column::AtMs.lt(raw_before))
        .exec(conn)
        .await?
        .rows_affected;
    for (period, days) in [(MINUTE_MS, policy.minute_days), (HOUR_MS, policy.hour_days)] {
        expired += gpu_rollup::Entity::delete_many()
            .filter(gpu_rollup::Column::PeriodMs.eq(period))
            .filter(gpu_rollup::Column::StartMs.lt(now_ms - i64::from(days) * DAY_MS))
            .exec(conn)
            .await?
            .rows_affected;
    }
    Ok(expired)
}

impl Service {
    /// One rollup and retention round (the scheduler runs it every round):
    /// the minutes that have settled and are due (new samples came for
    /// them) are recomputed from their raw samples, which makes their hours
    /// due; the hours that have settled and are due, from their minutes.
    /// Reads and writes go by batches of devices, not device by device.
    pub async fn roll_up_telemetry(&self) -> Result<RollupReport, ServiceError> {
        let now_ms = self.now().timestamp_millis();
        // Periods that ended by then are complete (an hour, once its last
        // minute is: both settle alike).
        let settled = now_ms - ROLLUP_SETTLE_MS;
        let mut report = RollupReport::default();
        // Most rounds find nothing to do: find that out without a write.
        // Once a minute, with the first round that finds the fleet's
        // previous minute settled, retention runs and the statistics are
        // refreshed.
        let settled_minute = settled.div_euclid(MINUTE_MS) * MINUTE_MS;
        let first_of_minute = self
            .telemetry_minute
            .swap(settled_minute, Ordering::Relaxed)
            != settled_minute;
        let due = |period_ms: i64| {
            gpu_rollup_pending::Entity::find()
                .filter(gpu_rollup_pending::Column::PeriodMs.eq(period_ms))
                .filter(gpu_rollup_pending::Column::StartMs.lte(settled - period_ms))
        };
        let any = due(MINUTE_MS).one(&self.db).await?.is_some()
            || due(HOUR_MS).one(&self.db).await?.is_some();
        if !any && !first_of_minute {
            return Ok(report);
        }
        // One replica at a time: two rolling up the same minute would both
        // replace its rows and leave them twice.
        let w = self.begin_locked(ROLLUP_LOCK).await?;
        custom_plans(w.db()).await?;

        let minutes: BTreeSet<(String, i64)> = take_due(w.db(), MINUTE_MS, settled)
            .await?
            .into_iter()
            .collect();
        // (Under the lock, and only with something to read: another
        // replica that took this minute's marks first leaves none.)
        if first_of_minute && !minutes.is_empty() {
            report.analyzed = refresh_statistics(w.db()).await?;
        }
        let (devices, lo, hi) = span(&minutes, MINUTE_MS);
        let mut raw: BTreeMap<(String, i64), Vec<gpu_sample::Model>> = BTreeMap::new();
        if !minutes.is_empty() {
            for chunk in devices.chunks(CHUNK) {
                for s in gpu_sample::Entity::find()
                    .filter(gpu_sample::Column::DeviceUuid.is_in(chunk.iter().map(String::as_str)))
                    .filter(gpu_sample::Column::AtMs.gte(lo))
                    .filter(gpu_sample::Column::AtMs.lt(hi))
                    .all(w.db())
                    .await?
                {
                    let key = (
                        s.device_uuid.clone(),
                        s.at_ms.div_euclid(MINUTE_MS) * MINUTE_MS,
                    );
                    if minutes.contains(&key) {
                        report.samples += 1;
                        raw.entry(key).or_default().push(s);
                    }
                }
            }
        }
        let mut rows = Vec::new();
        for ((device, _), samples) in &raw {
            let Some(host_id) = samples.first().map(|s| s.host_id) else {
                continue;
            };
            let mut by_slice: BTreeMap<Option<AllocationId>, Vec<Sample>> = BTreeMap::new();
            for s in samples {
                if let Some(sample) = sample_of(s)? {
                    by_slice.entry(s.allocation_id).or_default().push(sample);
                }
            }
            for (alloc, samples) in &by_slice {
                for r in roll_up(samples, MINUTE_MS) {
                    rows.push(row_of(MINUTE_MS, host_id, device, *alloc, &r));
                }
            }
        }
        let pairs: Vec<(String, i64)> = minutes.iter().cloned().collect();
        report.minutes += replace(w.db(), MINUTE_MS, &pairs, rows).await?;
        let hours_due: BTreeSet<(String, i64)> = minutes
            .iter()
            .map(|(d, m)| (d.clone(), m.div_euclid(HOUR_MS) * HOUR_MS))
            .collect();
        mark_due(w.db(), Marker::Rollup, HOUR_MS, &hours_due).await?;

        // Hours that have ended, from their minutes (just written above
        // when they were the last ones).
        let hours: BTreeSet<(String, i64)> = take_due(w.db(), HOUR_MS, settled)
            .await?
            .into_iter()
            .collect();
        let (devices, lo, hi) = span(&hours, HOUR_MS);
        let mut parts: BTreeMap<(String, i64), Vec<gpu_rollup::Model>> = BTreeMap::new();
        if !hours.is_empty() {
            for chunk in devices.chunks(CHUNK) {
                for r in gpu_rollup::Entity::find()
                    .filter(gpu_rollup::Column::DeviceUuid.is_in(chunk.iter().map(String::as_str)))
                    .filter(gpu_rollup::Column::PeriodMs.eq(MINUTE_MS))
                    .filter(gpu_rollup::Column::StartMs.gte(lo))
                    .filter(gpu_rollup::Column::StartMs.lt(hi))
                    .all(w.db())
                    .await?
                {
                    let key = (
                        r.device_uuid.clone(),
                        r.start_ms.div_euclid(HOUR_MS) * HOUR_MS,
                    );
                    if hours.contains(&key) {
                        parts.entry(key).or_default().push(r);
                    }
                }
            }
        }
        let mut rows = Vec::new();
        for ((device, hour), minutes) in &parts {
            let Some(host_id) = minutes.first().map(|m| m.host_id) else {
                continue;
            };
            let mut by_slice: BTreeMap<Option<AllocationId>, Vec<Rollup>> = BTreeMap::new();
            for m in minutes {
                by_slice
                    .entry(m.allocation_id)
                    .or_default()
                    .push(rollup_of(m)?);
            }
            for (alloc, minutes) in &by_slice {
                if let Some(r) = combine(minutes, *hour) {
                    rows.push(row_of(HOUR_MS, host_id, device, *alloc, &r));
                }
            }
        }
        let pairs: Vec<(String, i64)> = hours.iter().cloned().collect();
        report.hours += replace(w.db(), HOUR_MS, &pairs, rows).await?;

        if first_of_minute {
            report.expired += expire(w.db(), self.settings.telemetry, now_ms).await?;
        }
        w.commit(self, &Actor::System).await?;
        Ok(report)
    }
}
