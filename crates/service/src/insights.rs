//! The fleet's insights for platform admins: the utilisation heat map
//! (latest telemetry per GPU), each pool's daily allocation against its
//! capacity with a least-squares trend and the day it would fill
//! ([`tessera_core::capacity`]), and the queue per day (requests, how many
//! waited, the wait's median and 95th percentile, refusals for want of
//! quota).

use crate::entity::{admission_refusal, allocation};
use crate::telemetry::DeviceGauges;
use crate::usage::{held_of, GpuModels};
use crate::{PlatformAdmin, Service, ServiceError};
use chrono::{DateTime, TimeZone, Utc};
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter};
use std::collections::BTreeMap;
use tessera_core::capacity::{day_starts, project_full, Projection, Trend, DAY_MS};
use tessera_core::metering::meter;
use tessera_core::telemetry::{percentile, weighted_busy_pct};
use tessera_protocol::views::{
    CapacityDay, FleetFilter, FleetInsights, FleetView, FullProjection, HeatCell, HeatHost,
    PoolCapacity, QueueDay, INSIGHT_DAYS,
};

/// How far ahead a pool's filling is projected.
const HORIZON_DAYS: i64 = 365;

fn at(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

fn pct(part: u64, whole: u64) -> Option<u8> {
    (part * 100)
        .checked_div(whole)
        .map(|p| u8::try_from(p.min(100)).unwrap_or(100))
}

/// The listed hosts × their GPUs, with each GPU's latest utilisation and
/// memory use.
pub fn heat_map(fleet: &FleetView, devices: &[DeviceGauges]) -> Vec<HeatHost> {
    let mut by_gpu: BTreeMap<(&str, i32), Vec<&DeviceGauges>> = BTreeMap::new();
    for d in devices {
        by_gpu
            .entry((d.hostname.as_str(), d.gpu_index))
            .or_default()
            .push(d);
    }
    fleet
        .hosts
        .iter()
        .map(|h| HeatHost {
            hostname: h.hostname.clone(),
            gpus: h
                .gpus
                .iter()
                .map(|g| {
                    let devs = by_gpu
                        .get(&(h.hostname.as_str(), g.index))
                        .map(Vec::as_slice)
                        .unwrap_or_default();
                    let whole: Vec<&&DeviceGauges> =
                        devs.iter().filter(|d| d.mig.is_none()).collect();
                    let instances: Vec<&&DeviceGauges> =
                        devs.iter().filter(|d| d.mig.is_some()).collect();
                    let memory = u64::try_from(g.memory_mib).unwrap_or(0);
                    let model = tessera_core::catalogue::lookup(&g.model, memory);
                    let util_pct = if instances.is_empty() {
                        whole.iter().filter_map(|d| d.util_pct).max()
                    } else {
                        let weighted: Vec<(u8, Option<u8>)> = instances
                            .iter()
                            .map(|d| {
                                let profile = d.mig.as_ref().map_or("", |(p, _)| p.as_str());
                                let slices = model
                                    .mig
                                    .and_then(|m| m.profile(profile))
                                    .map_or(1, |p| p.compute_slices);
                                (slices, d.util_pct)
                            })
                            .collect();
                        weighted_busy_pct(&weighted)
                    };
                    let mem_used = match whole.iter().map(|d| d.mem_used_mib).max() {
                        Some(m) => Some(m),
                        None if !instances.is_empty() => {
                            Some(instances.iter().map(|d| d.mem_used_mib).sum())
                        }
                        None => None,
                    };
                    HeatCell {
                        index: g.index,
                        model: g.model.clone(),
                        pool: g.pool.clone(),
                        util_pct,
                        mem_pct: mem_used.and_then(|m| pct(m, memory)),
                        holders: g.holders.clone(),
                    }
                })
                .collect(),
        })
        .collect()
}

/// The wire form of a projection.
fn projection(p: Projection) -> FullProjection {
    match p {
        Projection::Unknown => FullProjection::Unknown,
        Projection::FullNow => FullProjection::FullNow,
        Projection::Never => FullProjection::Never,
        Projection::FullOn(day) => FullProjection::FullOn { day: at(day) },
        Projection::BeyondHorizon => FullProjection::BeyondYear,
    }
}

/// Each pool's GPUs allocated per day (metered as chargeback meters them,
/// cut at midnight), its trend from the first day anything was allocated,
/// and when that trend reaches the pool's GPUs.
fn pool_capacity(
    fleet: &FleetView,
    models: &GpuModels,
    rows: &[allocation::Model],
    from_ms: i64,
    now_ms: i64,
) -> Vec<PoolCapacity> {
    let days = day_starts(from_ms, now_ms);
    let held: Vec<_> = rows.iter().filter_map(|a| held_of(a, models)).collect();
    let mut allocated: BTreeMap<(&str, i64), u128> = BTreeMap::new();
    for line in meter(&held, &[], from_ms, now_ms, now_ms, &days) {
        let day = line.start.div_euclid(DAY_MS) * DAY_MS;
        if let Some(pool) = fleet.pools.iter().find(|p| p.name == line.pool) {
            *allocated.entry((pool.name.as_str(), day)).or_default() += line.gpu_part_ms;
        }
    }
    fleet
        .pools
        .iter()
        .map(|p| {
            let series: Vec<(i64, f64)> = days
                .iter()
                .map(|d| {
                    let length = (now_ms - d).clamp(1, DAY_MS);
                    let sum = allocated.get(&(p.name.as_str(), *d)).copied().unwrap_or(0);
                    (
                        *d,
                        sum as f64 / (tessera_core::ledger::PARTS_PER_GPU as f64 * length as f64),
                    )
                })
                .collect();
            let first_used = series
                .iter()
                .position(|(_, v)| *v > 0.0)
                .unwrap_or(series.len());
            let trend = Trend::fit(&series[first_used..]);
            let capacity = f64::from(p.gpus);
            PoolCapacity {
                pool: p.name.clone(),
                capacity_gpus: p.gpus,
                trend_gpus_per_day: trend.map(|t| t.slope_per_day),
                trend_ends: trend.and_then(|t| {
                    let (first, last) = (series.get(first_used)?, series.last()?);
                    Some((t.at(first.0), t.at(last.0)))
                }),
                full: projection(project_full(trend.as_ref(), capacity, now_ms, HORIZON_DAYS)),
                days: series
                    .into_iter()
                    .map(|(d, v)| CapacityDay {
                        day: at(d),
                        allocated_gpus: v,
                    })
                    .collect(),
            }
        })
        .collect()
}

/// Requests per day of their creation: how many waited, the waits of
/// those placed (ms), and refusals.
fn queue_days(
    created: &[allocation::Model],
    refusals: &[admission_refusal::Model],
    from_ms: i64,
    now_ms: i64,
) -> Vec<QueueDay> {
    let mut by_day: BTreeMap<i64, (u32, u32, Vec<i64>, u32)> = day_starts(from_ms, now_ms)
        .into_iter()
        .map(|d| (d, Default::default()))
        .collect();
    for a in created {
        let created_ms = a.created_at.timestamp_millis();
        let Some(day) = by_day.get_mut(&(created_ms.div_euclid(DAY_MS) * DAY_MS)) else {
            continue;
        };
        day.0 += 1;
        match a.placed_at {
            Some(placed) => {
                let wait = (placed.timestamp_millis() - created_ms).max(0);
                if wait > 0 {
                    day.1 += 1;
                }
                day.2.push(wait);
            }
            // Never placed: it waited (and may still), or ended waiting.
            None => day.1 += 1,
        }
    }
    for r in refusals {
        if let Some(day) = by_day.get_mut(&r.day_ms) {
            day.3 += u32::try_from(r.count).unwrap_or(u32::MAX);
        }
    }
    by_day
        .into_iter()
        .map(|(d, (requests, queued, mut waits, refused))| QueueDay {
            day: at(d),
            requests,
            queued,
            refused,
            wait_p50_s: percentile(&mut waits, 50).map(|w| w as f64 / 1000.0),
            wait_p95_s: percentile(&mut waits, 95).map(|w| w as f64 / 1000.0),
        })
        .collect()
}

impl Service {
    /// The fleet's insights over the last `days` days (7, 30 or 90),
    /// today included; the heat map shows one page of the hosts `heat`
    /// matches (the fleet listing's filters), and only their telemetry is
    /// read.
    pub async fn fleet_insights(
        &self,
        _admin: &PlatformAdmin<'_>,
        days: u32,
        heat: &FleetFilter,
    ) -> Result<FleetInsights, ServiceError> {
        if !INSIGHT_DAYS.contains(&days) {
            return Err(ServiceError::invalid(
                "days",
                format!("must be one of {INSIGHT_DAYS:?}"),
            ));
        }
        let now = self.now();
        let now_ms = now.timestamp_millis();
        let from_ms = (now_ms.div_euclid(DAY_MS) - i64::from(days) + 1) * DAY_MS;
        let from = at(from_ms);
        let fleet = self.fleet_listing(heat).await?;
        let shown: Vec<String> = fleet.hosts.iter().map(|h| h.hostname.to_string()).collect();
        let devices = self.latest_telemetry_of(Some(&shown)).await?;
        let held = allocation::Entity::find()
            .filter(allocation::Column::ActiveAt.is_not_null())
            .filter(allocation::Column::ActiveAt.lt(now))
            .filter(
                Condition::any()
                    .add(allocation::Column::EndedAt.is_null())
                    .add(allocation::Column::EndedAt.gt(from)),
            )
            .all(&self.db)
            .await?;
        let created = allocation::Entity::find()
            .filter(allocation::Column::CreatedAt.gte(from))
            .all(&self.db)
            .await?;
        let refusals = admission_refusal::Entity::find()
            .filter(admission_refusal::Column::DayMs.gte(from_ms))
            .all(&self.db)
            .await?;
        Ok(FleetInsights {
            from,
            as_of: now,
            days,
            heat: heat_map(&fleet, &devices),
            heat_matching: fleet.matching,
            heat_page: fleet.page,
            heat_pages: fleet.pages,
            pools: pool_capacity(
                &fleet,
                &GpuModels::load(&self.db).await?,
                &held,
                from_ms,
                now_ms,
            ),
            queue: queue_days(&created, &refusals, from_ms, now_ms),
        })
    }
}
