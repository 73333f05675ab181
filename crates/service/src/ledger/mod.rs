//! The fleet ledger: every GPU-hour of a period, billed to a tenant by its
//! slices' shares or shown as unallocated, stranded, draining,
//! maintenance, unhealthy or silent ([`tessera_core::ledger`]), from the
//! GPUs' condition history ([`record`]) and the slices' lifecycles.

mod charges;
mod record;

pub(crate) use charges::TenantCharges;

use crate::allocations::AllocationRow;
use crate::entity::{allocation, gpu_condition, tenant};
use crate::usage::{at, ms, period, GpuModels};
use crate::{PlatformAdmin, Service, ServiceError};
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter};
use std::collections::BTreeMap;
use tessera_core::catalogue::lookup;
use tessera_core::ids::TenantId;
use tessera_core::ledger::{
    account, free_is_stranded, gpu_hours, share_of_placed, Buckets, ConditionSpan, HeldFit,
    Holding, PARTS_PER_GPU,
};
use tessera_core::metering::{format_micros, month_starts, HOUR_MS};
use tessera_core::placement::Slice;
use tessera_core::sharing::SliceShape;
use tessera_protocol::views::{
    LedgerBuckets, LedgerCharge, LedgerCharges, LedgerGrouping, LedgerQuery, LedgerReport,
    LedgerRow, LedgerStep, LedgerTenant, PoolRecovery, UsageQuery,
};

/// Longest period an hourly ledger covers, in days.
const MAX_HOURLY_DAYS: i64 = 7;

/// One GPU's history within a period.
struct GpuHistory {
    spans: Vec<ConditionSpan>,
    holdings: Vec<Holding>,
    /// From its latest span.
    pool: Option<String>,
    model: String,
    hostname: String,
}

/// The exact ledger of a period: buckets per (step start, group), in
/// GPU-part-milliseconds, and the GPUs' recorded time the buckets must
/// add up to.
pub struct ExactLedger {
    /// Period start and end (ms; the end is cut at now).
    pub from: i64,
    /// End.
    pub to: i64,
    /// Buckets per step start and group.
    pub rows: BTreeMap<(i64, String), Buckets>,
    /// Σ over GPUs of their recorded time in the period × one GPU.
    pub recorded_part_ms: u128,
    /// GPUs with history in the period.
    pub gpus: u32,
    /// Where the period was cut into rows (the period's start first, its
    /// end last).
    pub cuts: Vec<i64>,
}

impl ExactLedger {
    /// All rows together.
    pub fn totals(&self) -> Buckets {
        let mut t = Buckets::default();
        for b in self.rows.values() {
            t.add(b);
        }
        t
    }
}

/// The fit a placed slice occupies on its GPU.
fn fit_of(shape: &SliceShape, slice: &Slice) -> HeldFit {
    match (shape, slice) {
        (_, Slice::Mig(p)) => HeldFit::Mig(p.clone()),
        (SliceShape::TimeSlice {}, _) => HeldFit::TimeSlice,
        (_, Slice::Shared { compute, memory }) => HeldFit::Mps {
            compute_percent: u8::try_from(compute.0 / 10).unwrap_or(100),
            memory: *memory,
        },
        _ => HeldFit::Whole,
    }
}

/// Where a period is cut into steps, and at `extra` moments inside it.
fn step_cuts(step: LedgerStep, from: i64, to: i64, extra: &[i64]) -> Vec<i64> {
    let inner: Vec<i64> = match step {
        LedgerStep::Hour => {
            let first = from.div_euclid(HOUR_MS) * HOUR_MS + HOUR_MS;
            (0..)
                .map(|i| first + i * HOUR_MS)
                .take_while(|t| *t < to)
                .collect()
        }
        LedgerStep::Day => tessera_core::capacity::day_starts(from, to)
            .into_iter()
            .filter(|t| *t > from)
            .collect(),
        LedgerStep::Month => month_starts(from, to),
    };
    let mut cuts: Vec<i64> = std::iter::once(from)
        .chain(inner)
        .chain(extra.iter().copied().filter(|t| *t > from && *t < to))
        .chain(std::iter::once(to))
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

impl Service {
    /// The exact ledger of `[from, to)` (cut at now), by `step` and `group`.
    pub async fn ledger_exact(
        &self,
        from: i64,
        to: i64,
        step: LedgerStep,
        group: LedgerGrouping,
    ) -> Result<ExactLedger, ServiceError> {
        self.ledger_cut(from, to, step, &[], group).await
    }

    /// The exact ledger, its steps also cut at `extra` moments (price
    /// changes, for charging).
    pub(crate) async fn ledger_cut(
        &self,
        from: i64,
        to: i64,
        step: LedgerStep,
        extra: &[i64],
        group: LedgerGrouping,
    ) -> Result<ExactLedger, ServiceError> {
        let now = ms(self.now());
        let end = to.min(now);
        let spans = gpu_condition::Entity::find()
            .filter(gpu_condition::Column::FromMs.lt(end))
            .filter(
                Condition::any()
                    .add(gpu_condition::Column::UntilMs.is_null())
                    .add(gpu_condition::Column::UntilMs.gt(from)),
            )
            .all(&self.db)
            .await?;
        let mut gpus: BTreeMap<String, GpuHistory> = BTreeMap::new();
        let mut latest: BTreeMap<String, i64> = BTreeMap::new();
        for s in &spans {
            let g = gpus
                .entry(s.gpu_uuid.clone())
                .or_insert_with(|| GpuHistory {
                    spans: Vec::new(),
                    holdings: Vec::new(),
                    pool: None,
                    model: s.model.clone(),
                    hostname: s.hostname.clone(),
                });
            g.spans.push(ConditionSpan {
                from: s.from_ms,
                until: s.until_ms,
                condition: s.condition,
            });
            if latest.get(&s.gpu_uuid).is_none_or(|t| *t < s.from_ms) {
                latest.insert(s.gpu_uuid.clone(), s.from_ms);
                g.pool = s.pool.clone();
                g.model = s.model.clone();
                g.hostname = s.hostname.clone();
            }
        }
        let rows = allocation::Entity::find()
            .filter(allocation::Column::ActiveAt.is_not_null())
            .filter(allocation::Column::ActiveAt.lt(at(end)))
            .filter(
                Condition::any()
                    .add(allocation::Column::EndedAt.is_null())
                    .add(allocation::Column::EndedAt.gt(at(from))),
            )
            .all(&self.db)
            .await?;
        let models = GpuModels::load(&self.db).await?;
        for a in &rows {
            let (Some(placement), Some(active)) = (&a.placement, a.active_at) else {
                continue;
            };
            for g in &placement.gpus {
                // A GPU without history in the period still shows its
                // slices' time, as unrecorded.
                let history = gpus.entry(g.uuid.clone()).or_insert_with(|| GpuHistory {
                    spans: Vec::new(),
                    holdings: Vec::new(),
                    pool: Some(a.pool.to_string()),
                    model: g.model.clone(),
                    hostname: placement.hostname.clone(),
                });
                let model = models.of(g);
                history.holdings.push(Holding {
                    allocation: a.id,
                    tenant: a.tenant_id,
                    share: share_of_placed(a.slice_shape(), &placement.slice, &model),
                    start: ms(active),
                    end: a.ended_at.map(ms),
                    fit: fit_of(a.slice_shape(), &placement.slice),
                });
            }
        }
        let pools = self.pools(&self.db).await?;
        let cuts = step_cuts(step, from, end.max(from), extra);
        let mut out = BTreeMap::new();
        let mut recorded = 0u128;
        let with_spans = gpus.values().filter(|h| !h.spans.is_empty()).count();
        for (uuid, h) in &gpus {
            for s in &h.spans {
                let a = s.from.max(from);
                let b = s.until.unwrap_or(now).min(end);
                recorded += u128::try_from((b - a).max(0)).unwrap_or(0) * u128::from(PARTS_PER_GPU);
            }
            let model = models.by_uuid(uuid).unwrap_or_else(|| lookup(&h.model, 0));
            let policy = h
                .pool
                .as_deref()
                .and_then(|p| pools.iter().find(|s| s.name.as_str() == p))
                .map(|s| s.policy());
            let stranded = |held: &[&Holding]| {
                policy
                    .as_ref()
                    .is_some_and(|p| free_is_stranded(&model, p, held))
            };
            let key = match group {
                LedgerGrouping::Fleet => "fleet".to_owned(),
                LedgerGrouping::Pool => h.pool.clone().unwrap_or_else(|| "(no pool)".to_owned()),
                LedgerGrouping::Model => h.model.clone(),
                LedgerGrouping::Host => h.hostname.clone(),
            };
            for w in cuts.windows(2) {
                // Only what overlaps the step: a month of hourly steps does
                // not rescan the month's slices each hour.
                let (a, z) = (w[0], w[1]);
                let spans: Vec<ConditionSpan> = h
                    .spans
                    .iter()
                    .filter(|s| s.from < z && s.until.unwrap_or(now) > a)
                    .copied()
                    .collect();
                let holdings: Vec<Holding> = h
                    .holdings
                    .iter()
                    .filter(|x| x.start < z && x.end.unwrap_or(now) > a)
                    .cloned()
                    .collect();
                if spans.is_empty() && holdings.is_empty() {
                    continue;
                }
                let b = account(&spans, &holdings, a, z, now, stranded);
                out.entry((w[0], key.clone()))
                    .or_insert_with(Buckets::default)
                    .add(&b);
            }
        }
        Ok(ExactLedger {
            from,
            to: end,
            rows: out,
            recorded_part_ms: recorded,
            gpus: u32::try_from(with_spans).unwrap_or(u32::MAX),
            cuts,
        })
    }

    /// The fleet ledger (platform admins).
    pub async fn ledger(
        &self,
        _admin: &PlatformAdmin<'_>,
        q: &LedgerQuery,
    ) -> Result<LedgerReport, ServiceError> {
        let usage = UsageQuery {
            month: q.month.clone(),
            from: q.from,
            to: q.to,
            ..UsageQuery::default()
        };
        let (from, to) = period(&usage, self.now())?;
        let days = (to - from).num_days();
        let step = q.step.unwrap_or(if days <= 92 {
            LedgerStep::Day
        } else {
            LedgerStep::Month
        });
        if step == LedgerStep::Hour && days > MAX_HOURLY_DAYS {
            return Err(ServiceError::invalid(
                "step",
                format!("hourly steps cover at most {MAX_HOURLY_DAYS} days; choose day or month"),
            ));
        }
        let group_by = q.group_by.unwrap_or_default();
        let exact = self.ledger_exact(ms(from), ms(to), step, group_by).await?;
        let tenants: BTreeMap<TenantId, tenant::Model> = tenant::Entity::find()
            .all(&self.db)
            .await?
            .into_iter()
            .map(|t| (t.id, t))
            .collect();
        let names: BTreeMap<TenantId, (String, String)> = tenants
            .iter()
            .map(|(id, t)| (*id, (t.slug.to_string(), t.name.clone())))
            .collect();
        let (charged, _) = self.charges(ms(from), ms(to)).await?;
        let view = |b: &Buckets| buckets_view(b, &names);
        let totals = exact.totals();
        let mut steps: BTreeMap<i64, Buckets> = BTreeMap::new();
        let mut groups: BTreeMap<&str, Buckets> = BTreeMap::new();
        for ((start, group), b) in &exact.rows {
            steps.entry(*start).or_default().add(b);
            groups.entry(group.as_str()).or_default().add(b);
        }
        Ok(LedgerReport {
            from,
            to: at(exact.to),
            step,
            group_by,
            rows: exact
                .rows
                .iter()
                .map(|((start, group), b)| LedgerRow {
                    start: at(*start),
                    group: group.clone(),
                    buckets: view(b),
                })
                .collect(),
            steps: steps
                .iter()
                .map(|(start, b)| LedgerRow {
                    start: at(*start),
                    group: "fleet".to_owned(),
                    buckets: view(b),
                })
                .collect(),
            groups: groups
                .iter()
                .map(|(group, b)| LedgerRow {
                    start: from,
                    group: (*group).to_owned(),
                    buckets: view(b),
                })
                .collect(),
            totals: view(&totals),
            gpus: exact.gpus,
            balanced: totals.total() == exact.recorded_part_ms,
            unrecorded_gpu_hours: gpu_hours(totals.unrecorded),
            overbooked_gpu_hours: gpu_hours(totals.overbooked),
            unpriced_gpu_hours: gpu_hours(charged.unpriced_part_ms),
            idle_gpu_hours: gpu_hours(charged.idle_part_ms),
            charges: charged
                .currencies
                .iter()
                .map(|(currency, c)| charges_view(currency, c, &tenants))
                .collect(),
        })
    }
}

fn charges_view(
    currency: &str,
    c: &charges::CurrencyCharges,
    tenants: &BTreeMap<TenantId, tenant::Model>,
) -> LedgerCharges {
    let mut rows: Vec<(u128, LedgerCharge)> = c
        .tenants
        .iter()
        .map(|(id, ch)| {
            let t = tenants.get(id);
            (
                ch.total(),
                LedgerCharge {
                    tenant: t.map_or_else(|| id.to_string(), |t| t.slug.to_string()),
                    name: t.map_or_else(|| id.to_string(), |t| t.name.clone()),
                    cost_centre: t.and_then(|t| t.cost_centre.clone()),
                    direct: format_micros(ch.direct),
                    overhead: format_micros(ch.overhead),
                    total: format_micros(ch.total()),
                },
            )
        })
        .collect();
    rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.tenant.cmp(&b.1.tenant)));
    let billed: u128 = c.tenants.values().map(|ch| ch.total()).sum();
    LedgerCharges {
        currency: currency.to_owned(),
        cost: format_micros(c.cost),
        tenants: rows.into_iter().map(|(_, r)| r).collect(),
        platform: format_micros(c.platform),
        pools: c
            .terms
            .iter()
            .map(|(pool, from, policy, price)| PoolRecovery {
                pool: pool.clone(),
                from: at(*from),
                policy: *policy,
                gpu_hour: format_micros(u128::from(*price)),
            })
            .collect(),
        balanced: billed + c.platform == c.cost,
    }
}

fn buckets_view(b: &Buckets, names: &BTreeMap<TenantId, (String, String)>) -> LedgerBuckets {
    let mut tenants: Vec<LedgerTenant> = b
        .tenants
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(id, v)| {
            let (slug, name) = names
                .get(id)
                .cloned()
                .unwrap_or_else(|| (id.to_string(), id.to_string()));
            LedgerTenant {
                tenant: slug,
                name,
                gpu_hours: gpu_hours(*v),
            }
        })
        .collect();
    tenants.sort_by(|a, b| {
        b.gpu_hours
            .total_cmp(&a.gpu_hours)
            .then(a.tenant.cmp(&b.tenant))
    });
    LedgerBuckets {
        tenants,
        allocated: gpu_hours(b.allocated()),
        unallocated: gpu_hours(b.unallocated),
        stranded: gpu_hours(b.stranded),
        draining: gpu_hours(b.draining),
        maintenance: gpu_hours(b.maintenance),
        unhealthy: gpu_hours(b.unhealthy),
        silent: gpu_hours(b.silent),
        physical: gpu_hours(b.total()),
    }
}
