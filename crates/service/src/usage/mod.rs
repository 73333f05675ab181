//! Usage and cost: the allocated GPU-hours of slices, priced per pool with
//! the price in force at each moment ([`tessera_core::metering`]); reports
//! grouped by tenant, cost centre, pool or slice; the FinOps FOCUS CSV; and
//! prices, which platform admins set with the date they take effect.

use crate::audit::Actor;
use crate::audit_log::csv_field;
use crate::entity::{allocation, price, tenant};
use crate::events::DomainEvent;
use crate::{PlatformAdmin, Principal, Service, ServiceError};
use chrono::{DateTime, Datelike, TimeZone, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder, Set,
};
use std::collections::BTreeMap;
use tessera_core::capacity::day_starts;
use tessera_core::idle::reclaimed_gpu_time;
use tessera_core::ids::{AllocationId, TenantId};
use tessera_core::ledger::{share_of_placed, GpuShare};
use tessera_core::metering::{
    attribute_used, format_micros, meter, month_starts, parse_micros, validate_price, Held,
    Measured, Metered, Price, HOUR_MS,
};
use tessera_protocol::views::{
    NewPrice, PriceView, ReclaimSummary, TimelineStep, UsageGrouping, UsagePoint, UsageQuery,
    UsageReport, UsageRow, UsageTotal,
};

/// Longest period one report covers.
const MAX_PERIOD_DAYS: i64 = 400;

mod focus;
mod prices;
#[cfg(test)]
mod tests;

/// What the report needs to know about each metered slice.
struct Slice {
    tenant: String,
    tenant_name: String,
    cost_centre: Option<String>,
    shape: String,
    /// MIG, MPS, time-slice or whole (FOCUS `x_SharingMode`).
    mode: tessera_core::sharing::ShapeKind,
    /// Its share of each of its GPUs, summed (FOCUS `x_GpuShare`).
    share: GpuShare,
}

/// The metered lines of a period, and who they belong to.
struct Metering {
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    now: DateTime<Utc>,
    reclaimed: ReclaimSummary,
    lines: Vec<Metered>,
    held: Vec<Held>,
    measured: Vec<Measured>,
    slices: BTreeMap<AllocationId, Slice>,
    prices: Vec<Price>,
}

/// A group's figures, added line by line.
#[derive(Default)]
struct Sums {
    gpu: u128,
    compute: u128,
    mib: u128,
    cost: u128,
    used: u128,
    measured: u128,
}

impl Sums {
    fn add(&mut self, l: &Metered) {
        self.gpu += l.gpu_part_ms;
        self.compute += l.compute_milli_ms;
        self.mib += l.mib_ms;
        self.cost += l.cost_micros;
        self.used += l.used_milli_ms;
        self.measured += l.measured_ms;
    }

    fn gpu_hours(&self) -> f64 {
        tessera_core::ledger::gpu_hours(self.gpu)
    }

    fn gib_hours(&self) -> f64 {
        self.mib as f64 / (1024.0 * HOUR_MS as f64)
    }

    fn used_gpu_hours(&self) -> Option<f64> {
        (self.measured > 0).then(|| self.used as f64 / (1000.0 * HOUR_MS as f64))
    }

    /// Used / allocated compute (the quota's count, which telemetry
    /// measures busy time against: a memory-heavy MIG instance billed for
    /// the memory it blocks can still be 100 % busy); time without
    /// telemetry counts as idle.
    fn efficiency_pct(&self) -> Option<f64> {
        (self.measured > 0 && self.compute > 0)
            .then(|| self.used as f64 * 100.0 / self.compute as f64)
    }
}

/// What a slice held and while when, for metering (`None`: never usable):
/// its share of each of its GPUs by the share model, as the ledger bills
/// it (a slice stored without a placement pays its quota demand).
pub(crate) fn held_of(a: &allocation::Model, models: &GpuModels) -> Option<Held> {
    use crate::allocations::AllocationRow;
    let share = a.placement.as_ref().map_or_else(
        || GpuShare::from_milli(u64::try_from(a.demand_compute_milli).unwrap_or(0)),
        |p| {
            GpuShare(
                p.gpus
                    .iter()
                    .map(|g| share_of_placed(a.slice_shape(), &p.slice, &models.of(g)).0)
                    .sum(),
            )
        },
    );
    Some(Held {
        allocation: a.id,
        pool: a.pool.clone(),
        share,
        compute_milli: u64::try_from(a.demand_compute_milli).unwrap_or(0),
        memory_mib: u64::try_from(a.demand_memory_mib).unwrap_or(0),
        start: ms(a.active_at?),
        end: a.ended_at.map(ms),
    })
}

/// The catalogue model of each GPU by UUID, with its reported memory (what
/// shares of GPUs outside the catalogue are worked out from).
pub(crate) struct GpuModels(BTreeMap<String, tessera_core::catalogue::GpuModel>);

impl GpuModels {
    /// Every GPU's.
    pub(crate) async fn load(db: &sea_orm::DatabaseConnection) -> Result<Self, ServiceError> {
        Ok(Self(
            crate::entity::gpu::Entity::find()
                .all(db)
                .await?
                .into_iter()
                .map(|g| {
                    let memory = u64::try_from(g.memory_mib).unwrap_or(0);
                    (g.uuid, tessera_core::catalogue::lookup(&g.model, memory))
                })
                .collect(),
        ))
    }

    /// The model of GPU `uuid`, if it is still there.
    pub(crate) fn by_uuid(&self, uuid: &str) -> Option<tessera_core::catalogue::GpuModel> {
        self.0.get(uuid).copied()
    }

    /// The model of a placed GPU (by name alone for a GPU that is gone).
    pub(crate) fn of(
        &self,
        g: &tessera_protocol::views::AllocatedGpu,
    ) -> tessera_core::catalogue::GpuModel {
        self.0
            .get(&g.uuid)
            .copied()
            .unwrap_or_else(|| tessera_core::catalogue::lookup(&g.model, 0))
    }
}

pub(crate) fn ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

pub(crate) fn at(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// The first moment of the month `t` is in.
pub(crate) fn month_of(t: DateTime<Utc>) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(t.year(), t.month(), 1, 0, 0, 0)
        .single()
        .unwrap_or(t)
}

pub(crate) fn next_month(t: DateTime<Utc>) -> DateTime<Utc> {
    let (y, m) = if t.month() == 12 {
        (t.year() + 1, 1)
    } else {
        (t.year(), t.month() + 1)
    };
    Utc.with_ymd_and_hms(y, m, 1, 0, 0, 0).single().unwrap_or(t)
}

/// The period a query asks for.
pub(crate) fn period(
    q: &UsageQuery,
    now: DateTime<Utc>,
) -> Result<(DateTime<Utc>, DateTime<Utc>), ServiceError> {
    let (from, to) = match (&q.month, q.from, q.to) {
        (Some(m), None, None) => {
            let bad =
                || ServiceError::invalid("month", format!("'{m}' is not a month like 2026-11"));
            let (y, mo) = m.split_once('-').ok_or_else(bad)?;
            let (y, mo): (i32, u32) = (
                y.parse().map_err(|_| bad())?,
                mo.parse().map_err(|_| bad())?,
            );
            let start = Utc
                .with_ymd_and_hms(y, mo, 1, 0, 0, 0)
                .single()
                .ok_or_else(bad)?;
            (start, next_month(start))
        }
        (Some(_), _, _) => {
            return Err(ServiceError::invalid(
                "month",
                "give a month or from/to, not both",
            ))
        }
        (None, from, to) => {
            let from = from.unwrap_or_else(|| month_of(now));
            (from, to.unwrap_or_else(|| next_month(from).max(from)))
        }
    };
    if to <= from {
        return Err(ServiceError::invalid("to", "must be after from"));
    }
    if (to - from).num_days() > MAX_PERIOD_DAYS {
        return Err(ServiceError::invalid(
            "to",
            format!("a report covers at most {MAX_PERIOD_DAYS} days"),
        ));
    }
    Ok((from, to))
}

fn price_of(p: &price::Model) -> Price {
    Price {
        pool: p.pool.clone(),
        currency: p.currency.clone(),
        gpu_hour_micros: u64::try_from(p.gpu_hour_micros).unwrap_or(0),
        gib_hour_micros: u64::try_from(p.gib_hour_micros).unwrap_or(0),
        effective_from: ms(p.effective_from),
        recovery: p.recovery,
    }
}

fn price_view(p: &price::Model) -> PriceView {
    PriceView {
        pool: p.pool.to_string(),
        currency: p.currency.clone(),
        gpu_hour: format_micros(u128::try_from(p.gpu_hour_micros).unwrap_or(0)),
        gib_hour: format_micros(u128::try_from(p.gib_hour_micros).unwrap_or(0)),
        effective_from: p.effective_from,
        recovery: p.recovery,
        created_by: p.created_by.clone(),
    }
}

/// Allocated and used GPU-hours per pool and day (periods up to 92 days)
/// or month, metered like the report but cut at each step.
fn timeline(m: &Metering) -> (Vec<UsagePoint>, TimelineStep) {
    let (from, to) = (ms(m.from), ms(m.to));
    let (step, cuts) = if (m.to - m.from).num_days() <= 92 {
        (TimelineStep::Day, day_starts(from, to))
    } else {
        (TimelineStep::Month, month_starts(from, to))
    };
    let mut lines = meter(&m.held, &[], from, to, ms(m.now), &cuts);
    attribute_used(&mut lines, &m.measured);
    let mut sums: BTreeMap<(i64, tessera_core::checked::PoolName), Sums> = BTreeMap::new();
    for l in &lines {
        // The step the line starts in: the last cut at or before it.
        let start = cuts
            .partition_point(|c| *c <= l.start)
            .checked_sub(1)
            .map_or(from, |i| cuts[i]);
        sums.entry((start, l.pool.clone())).or_default().add(l);
    }
    let points = sums
        .into_iter()
        .map(|((start, pool), sum)| UsagePoint {
            start: at(start),
            pool: pool.into(),
            gpu_hours: sum.gpu_hours(),
            used_gpu_hours: sum.used_gpu_hours(),
        })
        .collect();
    (points, step)
}

impl Service {
    /// The tenant a usage query may see: its own (members and tenant
    /// admins), any or all (platform admins).
    async fn usage_scope(
        &self,
        who: &Principal,
        q: &UsageQuery,
    ) -> Result<Option<tenant::Model>, ServiceError> {
        match &q.tenant {
            Some(slug) => {
                let t = Self::tenant_by_slug(&self.db, slug).await?;
                if who.role_in(t.id).is_none() && !who.platform_admin {
                    return Err(ServiceError::not_found(format!("tenant '{slug}'")));
                }
                Ok(Some(t))
            }
            None if who.platform_admin => Ok(None),
            None => Err(ServiceError::invalid(
                "tenant",
                "name your tenant (only platform admins see every tenant's usage)",
            )),
        }
    }

    async fn metering(&self, who: &Principal, q: &UsageQuery) -> Result<Metering, ServiceError> {
        let now = self.now();
        let (from, to) = period(q, now)?;
        let scope = self.usage_scope(who, q).await?;
        let mut rows = allocation::Entity::find()
            .filter(allocation::Column::ActiveAt.is_not_null())
            .filter(allocation::Column::ActiveAt.lt(to))
            .filter(
                Condition::any()
                    .add(allocation::Column::EndedAt.is_null())
                    .add(allocation::Column::EndedAt.gt(from)),
            );
        if let Some(t) = &scope {
            rows = rows.filter(allocation::Column::TenantId.eq(t.id));
        }
        if let Some(p) = &q.pool {
            rows = rows.filter(allocation::Column::Pool.eq(p));
        }
        let rows = rows
            .order_by_asc(allocation::Column::Id)
            .all(&self.db)
            .await?;
        let tenants: BTreeMap<TenantId, tenant::Model> = tenant::Entity::find()
            .all(&self.db)
            .await?
            .into_iter()
            .map(|t| (t.id, t))
            .collect();
        let mut held = Vec::with_capacity(rows.len());
        let mut slices = BTreeMap::new();
        let mut reclaimed = ReclaimSummary::default();
        let mut reclaimed_part_ms = 0u128;
        let models = GpuModels::load(&self.db).await?;
        for a in rows
            .iter()
            .filter(|a| a.reclaimed_at.is_some_and(|r| r >= from && r < to))
        {
            reclaimed.slices += 1;
            reclaimed_part_ms += reclaimed_gpu_time(
                held_of(a, &models).map_or(0, |h| h.share.0),
                a.reclaimed_at.map_or(0, ms),
                a.lease_ends_at.map(ms),
            );
        }
        reclaimed.gpu_hours = tessera_core::ledger::gpu_hours(reclaimed_part_ms);
        for a in &rows {
            let Some(h) = held_of(a, &models) else {
                continue;
            };
            let share = h.share;
            held.push(h);
            let t = tenants.get(&a.tenant_id);
            slices.insert(
                a.id,
                Slice {
                    tenant: t.map(|t| t.slug.to_string()).unwrap_or_default(),
                    tenant_name: t.map(|t| t.name.clone()).unwrap_or_default(),
                    cost_centre: t.and_then(|t| t.cost_centre.clone()),
                    shape: a.shape_label.clone(),
                    mode: {
                        use crate::allocations::AllocationRow;
                        a.slice_shape().kind()
                    },
                    share,
                },
            );
        }
        let prices = self.price_list().await?;
        let mut lines = meter(
            &held,
            &prices,
            ms(from),
            ms(to),
            ms(now),
            &month_starts(ms(from), ms(to)),
        );
        let ids: Vec<AllocationId> = held.iter().map(|h| h.allocation).collect();
        let measured = self.measured(&ids, from, to).await?;
        attribute_used(&mut lines, &measured);
        Ok(Metering {
            from,
            to,
            now,
            reclaimed,
            lines,
            held,
            measured,
            slices,
            prices,
        })
    }

    /// The slices' measured use in `[from, to)`: per-minute rollups while
    /// they are kept, per-hour ones for older periods.
    pub(crate) async fn measured(
        &self,
        ids: &[AllocationId],
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Result<Vec<Measured>, ServiceError> {
        use crate::entity::gpu_rollup;
        use tessera_core::telemetry::MINUTE_MS;
        let minutes_kept_from =
            self.now() - chrono::Duration::days(i64::from(self.settings.telemetry.minute_days));
        let period = if from >= minutes_kept_from {
            MINUTE_MS
        } else {
            HOUR_MS
        };
        let first = ms(from).div_euclid(period) * period;
        let mut out = Vec::new();
        for chunk in ids.chunks(500) {
            let rows = gpu_rollup::Entity::find()
                .filter(gpu_rollup::Column::PeriodMs.eq(period))
                .filter(gpu_rollup::Column::AllocationId.is_in(chunk.iter().copied()))
                .filter(gpu_rollup::Column::StartMs.gte(first))
                .filter(gpu_rollup::Column::StartMs.lt(ms(to)))
                .all(&self.db)
                .await?;
            out.extend(rows.into_iter().filter_map(|r| {
                Some(Measured {
                    allocation: r.allocation_id?,
                    start: r.start_ms,
                    used_milli_ms: u64::try_from(r.used_milli_ms).unwrap_or(0),
                    covered_ms: u64::try_from(r.covered_ms).unwrap_or(0),
                })
            }));
        }
        Ok(out)
    }

    /// Allocated GPU-hours, GiB-hours and cost per month and group.
    pub async fn usage_report(
        &self,
        who: &Principal,
        q: &UsageQuery,
    ) -> Result<UsageReport, ServiceError> {
        let m = self.metering(who, q).await?;
        let group_by = q.group_by.unwrap_or_default();
        // (month, key parts, currency) → sums; BTreeMap keeps the order.
        type Key = (i64, String, String, Option<AllocationId>, Option<String>);
        let mut sums: BTreeMap<Key, Sums> = BTreeMap::new();
        let mut totals: BTreeMap<Option<String>, Sums> = BTreeMap::new();
        let none = Slice {
            tenant: String::new(),
            tenant_name: String::new(),
            cost_centre: None,
            shape: String::new(),
            mode: tessera_core::sharing::ShapeKind::Whole,
            share: GpuShare::default(),
        };
        for l in &m.lines {
            let s = m.slices.get(&l.allocation).unwrap_or(&none);
            let month = ms(month_of(at(l.start)));
            let key: Key = match group_by {
                UsageGrouping::Tenant => (
                    month,
                    s.tenant.clone(),
                    l.pool.to_string(),
                    None,
                    l.currency.clone(),
                ),
                UsageGrouping::CostCentre => (
                    month,
                    s.cost_centre.clone().unwrap_or_default(),
                    String::new(),
                    None,
                    l.currency.clone(),
                ),
                UsageGrouping::Pool => (
                    month,
                    String::new(),
                    l.pool.to_string(),
                    None,
                    l.currency.clone(),
                ),
                UsageGrouping::Allocation => (
                    month,
                    s.tenant.clone(),
                    l.pool.to_string(),
                    Some(l.allocation),
                    l.currency.clone(),
                ),
            };
            for acc in [
                sums.entry(key).or_default(),
                totals.entry(l.currency.clone()).or_default(),
            ] {
                acc.add(l);
            }
        }
        let by_slug: BTreeMap<&str, &Slice> =
            m.slices.values().map(|s| (s.tenant.as_str(), s)).collect();
        let rows = sums
            .into_iter()
            .map(|((month, a, pool, alloc, currency), sum)| {
                let slice = alloc.and_then(|alloc| m.slices.get(&alloc));
                let tenant = matches!(group_by, UsageGrouping::Tenant | UsageGrouping::Allocation)
                    .then(|| a.clone());
                let t = tenant.as_deref().and_then(|s| by_slug.get(s));
                UsageRow {
                    month: at(month),
                    tenant_name: t.map(|t| t.tenant_name.clone()),
                    cost_centre: match group_by {
                        UsageGrouping::CostCentre => Some(a.clone()).filter(|c| !c.is_empty()),
                        _ => t.and_then(|t| t.cost_centre.clone()),
                    },
                    tenant,
                    pool: (group_by != UsageGrouping::CostCentre).then_some(pool),
                    allocation: alloc,
                    shape: slice.map(|s| s.shape.clone()),
                    gpu_hours: sum.gpu_hours(),
                    gib_hours: sum.gib_hours(),
                    used_gpu_hours: sum.used_gpu_hours(),
                    efficiency_pct: sum.efficiency_pct(),
                    cost: format_micros(sum.cost),
                    currency,
                }
            })
            .collect();
        let totals = totals
            .into_iter()
            .map(|(currency, sum)| UsageTotal {
                currency,
                gpu_hours: sum.gpu_hours(),
                gib_hours: sum.gib_hours(),
                used_gpu_hours: sum.used_gpu_hours(),
                efficiency_pct: sum.efficiency_pct(),
                cost: format_micros(sum.cost),
            })
            .collect();
        let (timeline, timeline_step) = timeline(&m);
        Ok(UsageReport {
            from: m.from,
            to: m.to,
            group_by,
            rows,
            totals,
            timeline,
            timeline_step,
            reclaimed: m.reclaimed.clone(),
        })
    }
}
