//! A slice's activity since it started, for its page and the REST API.

use super::rollup::{rollup_of, sample_of};
use crate::entity::{gpu_rollup, gpu_sample};
use crate::TenantActor;
use crate::{Service, ServiceError};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use std::collections::BTreeMap;
use tessera_core::ids::AllocationId;
use tessera_core::metering::HOUR_MS;
use tessera_core::telemetry::{roll_up, Rollup, Sample, MINUTE_MS};
use tessera_protocol::views::{ActivityPoint, AllocationActivity};

/// Slices older than this are charted per hour.
const MINUTES_FOR_MS: i64 = 24 * HOUR_MS;
/// Slices younger than this are charted sample by sample.
const RAW_FOR_MS: i64 = 30 * MINUTE_MS;

/// Several devices of one slice (a multi-GPU slice) in one period: the mean
/// of their means, the highest maximum, the memory added up.
fn merge(parts: &[Rollup]) -> (u8, u8, u64) {
    let n = parts.len().max(1) as u64;
    let avg = parts.iter().map(|r| u64::from(r.util_avg)).sum::<u64>() / n;
    (
        u8::try_from(avg).unwrap_or(100),
        parts.iter().map(|r| r.util_max).max().unwrap_or(0),
        parts.iter().map(|r| r.mem_max_mib).sum(),
    )
}

/// One point per period, the devices of each merged.
fn points(by_start: BTreeMap<i64, Vec<Rollup>>) -> Vec<ActivityPoint> {
    by_start
        .into_iter()
        .filter_map(|(start, parts)| {
            let (util_avg, util_max, mem_used_mib) = merge(&parts);
            Some(ActivityPoint {
                at: chrono::DateTime::from_timestamp_millis(start)?,
                util_avg,
                util_max,
                mem_used_mib,
            })
        })
        .collect()
}

impl Service {
    /// Utilisation and memory of allocation `id` since it became active:
    /// per-minute rollups (per-hour once it is older than a day) and, for
    /// the minutes not rolled up yet, its raw samples.
    pub async fn allocation_activity(
        &self,
        actor: &TenantActor,
        id: AllocationId,
    ) -> Result<AllocationActivity, ServiceError> {
        let row = self.own_row(actor, id).await?;
        let memory_mib = u64::try_from(row.demand_memory_mib).unwrap_or(0);
        let Some(active_at) = row.active_at else {
            return Ok(AllocationActivity {
                allocation: id,
                memory_mib,
                period_s: 60,
                points: Vec::new(),
            });
        };
        let from = active_at.timestamp_millis();
        let until = row
            .ended_at
            .unwrap_or_else(|| self.now())
            .timestamp_millis();
        if until - from <= RAW_FOR_MS {
            return self.raw_activity(id, memory_mib, from).await;
        }
        let period = if until - from > MINUTES_FOR_MS {
            HOUR_MS
        } else {
            MINUTE_MS
        };
        let first = from.div_euclid(period) * period;
        let rolled = gpu_rollup::Entity::find()
            .filter(gpu_rollup::Column::AllocationId.eq(id))
            .filter(gpu_rollup::Column::PeriodMs.eq(period))
            .filter(gpu_rollup::Column::StartMs.gte(first))
            .order_by_asc(gpu_rollup::Column::StartMs)
            .all(&self.db)
            .await?;
        let mut by_start: BTreeMap<i64, Vec<Rollup>> = BTreeMap::new();
        for r in &rolled {
            by_start.entry(r.start_ms).or_default().push(rollup_of(r)?);
        }
        // What the rollups do not have yet: the samples of the periods after
        // the last one rolled up, rolled up here the same way.
        let after = by_start.keys().next_back().map_or(first, |s| s + period);
        let raw = gpu_sample::Entity::find()
            .filter(gpu_sample::Column::AllocationId.eq(id))
            .filter(gpu_sample::Column::AtMs.gte(after))
            .all(&self.db)
            .await?;
        let mut by_device: BTreeMap<&str, Vec<Sample>> = BTreeMap::new();
        for s in &raw {
            let Some(sample) = sample_of(s)? else {
                continue;
            };
            by_device
                .entry(s.device_uuid.as_str())
                .or_default()
                .push(Sample {
                    weight_milli: 0,
                    ..sample
                });
        }
        for samples in by_device.values() {
            for r in roll_up(samples, period) {
                by_start.entry(r.start_ms).or_default().push(r);
            }
        }
        let points = points(by_start);
        Ok(AllocationActivity {
            allocation: id,
            memory_mib,
            period_s: u32::try_from(period / 1000).unwrap_or(60),
            points,
        })
    }

    /// A young slice's activity sample by sample (its devices merged).
    async fn raw_activity(
        &self,
        id: AllocationId,
        memory_mib: u64,
        from: i64,
    ) -> Result<AllocationActivity, ServiceError> {
        let raw = gpu_sample::Entity::find()
            .filter(gpu_sample::Column::AllocationId.eq(id))
            .filter(gpu_sample::Column::AtMs.gte(from - MINUTE_MS))
            .order_by_asc(gpu_sample::Column::AtMs)
            .all(&self.db)
            .await?;
        let mut period_s = 10;
        let mut by_at: BTreeMap<i64, Vec<Rollup>> = BTreeMap::new();
        for s in &raw {
            let Some(sample) = sample_of(s)? else {
                continue;
            };
            period_s = u32::try_from(s.covered_ms / 1000).unwrap_or(10).max(1);
            let sample = Sample {
                weight_milli: 0,
                ..sample
            };
            if let Some(mut r) = roll_up(&[sample], 1).pop() {
                r.start_ms = s.at_ms;
                by_at.entry(s.at_ms).or_default().push(r);
            }
        }
        Ok(AllocationActivity {
            allocation: id,
            memory_mib,
            period_s,
            points: points(by_at),
        })
    }
}
