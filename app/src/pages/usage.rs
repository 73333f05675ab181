//! Usage & cost: allocated GPU-hours, memory GiB-hours and cost per month,
//! by tenant, cost centre, pool or slice, with the FOCUS CSV; and the pools'
//! prices (platform admins set them). Tenants see their own tenants,
//! platform admins everyone.

use super::budget::{BudgetCard, BudgetForm, DecideRequest};
use crate::api::{get_usage, list_prices, DecideBudgetRequest, DeleteBudget, SetBudget, SetPrice};
use crate::components::error_panel::{ErrorPanel, FormError};
use crate::format;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use tessera_core::capacity::day_starts;
use tessera_core::chart::{nice_max, stacked_bars};
use tessera_core::ledger::recovery::RecoveryPolicy;
use tessera_core::metering::month_starts;
use tessera_protocol::query::encode_component;
use tessera_protocol::views::{
    BudgetView, LedgerBuckets, LedgerCharges, LedgerGrouping, LedgerReport, LedgerRow, LedgerStep,
    PriceView, TimelineStep, UsageGrouping, UsagePoint, UsageReport,
};

/// What the page's query string asks for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Filter {
    month: String,
    tenant: String,
    group_by: String,
    ledger_by: String,
}

impl Filter {
    fn query(&self) -> String {
        let mut parts = Vec::new();
        for (k, v) in [
            ("month", &self.month),
            ("tenant", &self.tenant),
            ("group_by", &self.group_by),
            ("ledger_by", &self.ledger_by),
        ] {
            if !v.is_empty() {
                parts.push(format!("{k}={}", encode_component(v)));
            }
        }
        parts.join("&")
    }
}

/// `/usage`
#[component]
pub fn UsagePage() -> impl IntoView {
    let query = use_query_map();
    let filter = move || {
        query.with(|q| Filter {
            month: q.get("month").unwrap_or_default(),
            tenant: q.get("tenant").unwrap_or_default(),
            group_by: q.get("group_by").unwrap_or_default(),
            ledger_by: q.get("ledger_by").unwrap_or_default(),
        })
    };
    // The price form posts without JS and comes back to the page, with an
    // error (if any) as the action's value.
    let set = ServerAction::<SetPrice>::new();
    let set_budget = ServerAction::<SetBudget>::new();
    let delete_budget = ServerAction::<DeleteBudget>::new();
    let decide = ServerAction::<DecideBudgetRequest>::new();
    let report = Resource::new(
        move || {
            (
                filter(),
                set_budget.version().get(),
                delete_budget.version().get(),
                decide.version().get(),
            )
        },
        |(f, ..)| get_usage(f.month, f.tenant, f.group_by, f.ledger_by),
    );
    let prices = Resource::new(|| (), |_| list_prices());
    view! {
        <Title text="Usage & cost"/>
        <section class="page-head">
            <p class="eyebrow">"Chargeback"</p>
            <h1>"Usage & cost"</h1>
            <p class="muted">"Allocated GPU-hours: each slice's share of a GPU (what it takes away from others: a MIG instance the larger of its compute and memory slices, so seven 1g.10gb are exactly one GPU; an MPS client the mean of its thread and memory shares; 1 / replicas for a time slice; 1 per whole GPU) for as long as it was usable, priced with its pool's price at the time. The same period always gives the same figures; slices running across a month are split at its end."</p>
        </section>
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || {
                let f = filter();
                Suspend::new(async move {
                    match report.await {
                        Ok(d) => {
                            let admin = d.admin;
                            let pools = d.pools.clone();
                            let f = Filter { tenant: d.tenant.clone(), ..f };
                            let prices_view = Suspend::new(async move {
                                match prices.await {
                                    Ok(list) => view! { <Prices list admin set pools/> }.into_any(),
                                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                                }
                            });
                            let ledger = d.ledger.clone().map(|l| view! { <Ledger l f=f.clone()/> });
                            let budgets = admin.then(|| view! { <Budgets list=d.budgets.clone() set=set_budget delete=delete_budget decide/> });
                            let advice = (!d.tenant.is_empty()).then(|| {
                                let slug = d.tenant.clone();
                                Suspend::new(async move {
                                    match crate::api::get_recommendations(slug).await {
                                        Ok(r) => view! { <crate::components::right_sizing::RightSizing r fleet=false/> }.into_any(),
                                        Err(err) => view! { <ErrorPanel err/> }.into_any(),
                                    }
                                })
                            });
                            view! { <Report r=d.report f=f.clone() admin=d.admin choices=d.tenants/> {advice} {ledger} {budgets} {prices_view} }.into_any()
                        }
                        Err(err) => view! { <ErrorPanel err/> }.into_any(),
                    }
                })
            }}
        </Suspense>
    }
}

#[component]
fn Report(r: UsageReport, f: Filter, admin: bool, choices: Vec<(String, String)>) -> impl IntoView {
    let csv = format!("/api/v1/usage.csv?{}", f.query());
    let month = if f.month.is_empty() {
        r.from.format("%Y-%m").to_string()
    } else {
        f.month.clone()
    };
    let group = r.group_by;
    let empty = r.rows.is_empty();
    view! {
        <form class="card form-row" method="get" action="/usage" data-test="usage-filters">
            <label class="field"><span>"Month"</span><input type="month" name="month" value=month data-test="usage-month"/></label>
            <label class="field">
                <span>"Tenant"</span>
                <select name="tenant" data-test="usage-tenant">
                    {admin.then(|| view! { <option value="">"All tenants"</option> })}
                    {choices.into_iter().map(|(slug, name)| {
                        let selected = slug == f.tenant;
                        view! { <option value=slug selected=selected>{name}</option> }
                    }).collect_view()}
                </select>
            </label>
            <label class="field">
                <span>"Group by"</span>
                <select name="group_by" data-test="usage-group-by">
                    {UsageGrouping::ALL.into_iter().map(|g| view! {
                        <option value=g.as_str() selected=g == group>{g.as_str().replace('_', " ")}</option>
                    }).collect_view()}
                </select>
            </label>
            <button class="button primary" type="submit" data-test="usage-apply">"Show"</button>
            <a class="button ghost" href=csv data-test="usage-csv">"FOCUS CSV"</a>
        </form>
        <section class="stats">
            {r.totals.iter().map(|t| view! {
                <div class="stat card" data-test="usage-total">
                    <span class="stat-value">{match &t.currency { Some(c) => format!("{} {c}", format::money(&t.cost)), None => "unpriced".to_owned() }}</span>
                    <span class="stat-label">{format!("{:.3} GPU-h · {:.1} GiB-h", t.gpu_hours, t.gib_hours)}</span>
                    {t.efficiency_pct.map(|e| view! {
                        <span class="stat-label" data-test="usage-total-efficiency">{format!("{:.3} GPU-h used · {e:.0} % efficient", t.used_gpu_hours.unwrap_or_default())}</span>
                    })}
                </div>
            }).collect_view()}
            {(r.reclaimed.slices > 0).then(|| view! {
                <div class="stat card" data-test="usage-reclaimed">
                    <span class="stat-value">{format!("{:.3} GPU-h", r.reclaimed.gpu_hours)}</span>
                    <span class="stat-label">{format!("given back by idle reclaim ({} slice{})", r.reclaimed.slices, if r.reclaimed.slices == 1 { "" } else { "s" })}</span>
                </div>
            })}
        </section>
        {(!empty).then(|| view! { <Timeline points=r.timeline.clone() step=r.timeline_step from=r.from to=r.to/> })}
        {if empty {
            view! { <div class="card empty" data-test="usage-empty"><p>"No slice was active in this period."</p></div> }.into_any()
        } else {
            view! {
                <section class="card table-card">
                    <table data-test="usage-rows">
                        <thead><tr>
                            <th>"Month"</th>
                            {(group != UsageGrouping::Pool && group != UsageGrouping::CostCentre).then(|| view! { <th>"Tenant"</th> })}
                            <th>"Cost centre"</th>
                            {(group != UsageGrouping::CostCentre).then(|| view! { <th>"Pool"</th> })}
                            {(group == UsageGrouping::Allocation).then(|| view! { <th>"Slice"</th> })}
                            <th class="num">"GPU-hours"</th><th class="num" title="Busy time from telemetry × the slice's share of a GPU">"Used"</th><th class="num" title="Allocated GPU-hours telemetry found idle">"Idle"</th><th>"Efficiency"</th><th class="num">"GiB-hours"</th><th class="num">"Cost"</th>
                        </tr></thead>
                        <tbody>
                            {r.rows.into_iter().map(|row| {
                                let slice_link = match (&row.tenant, row.allocation) {
                                    (Some(t), Some(id)) => Some((format!("/t/{t}/a/{id}"), format!("#{id} {}", row.shape.clone().unwrap_or_default()))),
                                    _ => None,
                                };
                                view! {
                                    <tr data-test="usage-row" data-tenant=row.tenant.clone().unwrap_or_default() data-pool=row.pool.clone().unwrap_or_default()>
                                        <td class="small">{row.month.format("%Y-%m").to_string()}</td>
                                        {(group != UsageGrouping::Pool && group != UsageGrouping::CostCentre).then(|| view! { <td>{row.tenant_name.clone().unwrap_or_default()}</td> })}
                                        <td class="mono small">{row.cost_centre.clone().unwrap_or_else(|| "—".into())}</td>
                                        {(group != UsageGrouping::CostCentre).then(|| view! { <td class="mono small">{row.pool.clone().unwrap_or_default()}</td> })}
                                        {slice_link.map(|(href, label)| view! { <td><a href=href>{label}</a></td> })}
                                        <td class="num" data-test="usage-gpu-hours">{format!("{:.3}", row.gpu_hours)}</td>
                                        <td class="num" data-test="usage-used-hours">{row.used_gpu_hours.map_or_else(|| "—".to_owned(), |u| format!("{u:.3}"))}</td>
                                        <td class="num" data-test="usage-idle-hours">{row.idle_gpu_hours().map_or_else(|| "—".to_owned(), |u| format!("{u:.3}"))}</td>
                                        <td data-test="usage-efficiency">{match row.efficiency_pct {
                                            Some(e) => view! {
                                                <span class="efficiency">
                                                    <span class="bar" role="img" aria-label=format!("{e:.0} percent of the allocated GPU time was used")>
                                                        <span class="bar-used" class:full={e < 15.0} style=format!("width: {:.1}%", e.clamp(0.0, 100.0))></span>
                                                    </span>
                                                    <span class="small">{format!("{e:.0} %")}</span>
                                                </span>
                                            }.into_any(),
                                            None => view! { <span class="muted small" title="No telemetry from this slice's host">"not measured"</span> }.into_any(),
                                        }}</td>
                                        <td class="num">{format!("{:.1}", row.gib_hours)}</td>
                                        <td class="num" data-test="usage-cost">{match &row.currency { Some(c) => format!("{} {c}", format::money(&row.cost)), None => "—".to_owned() }}</td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                </section>
            }.into_any()
        }}
    }
}

const W: f64 = 600.0;
const H: f64 = 140.0;

/// Allocated GPU-hours per step, stacked per pool, each pool's used part
/// solid and the rest light.
#[component]
fn Timeline(
    points: Vec<UsagePoint>,
    step: TimelineStep,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
) -> impl IntoView {
    let (from_ms, to_ms) = (from.timestamp_millis(), to.timestamp_millis());
    let steps: Vec<i64> = match step {
        TimelineStep::Day => day_starts(from_ms, to_ms),
        TimelineStep::Month => std::iter::once(from_ms)
            .chain(month_starts(from_ms, to_ms))
            .collect(),
    };
    let mut pools: Vec<String> = points.iter().map(|p| p.pool.clone()).collect();
    pools.sort();
    pools.dedup();
    let columns: Vec<Vec<f64>> = steps
        .iter()
        .map(|s| {
            pools
                .iter()
                .flat_map(|pool| {
                    let point = points
                        .iter()
                        .find(|p| p.start.timestamp_millis() == *s && &p.pool == pool);
                    let allocated = point.map_or(0.0, |p| p.gpu_hours);
                    let used = point
                        .and_then(|p| p.used_gpu_hours)
                        .unwrap_or(0.0)
                        .min(allocated);
                    [used, allocated - used]
                })
                .collect()
        })
        .collect();
    let peak = columns
        .iter()
        .map(|c| c.iter().sum::<f64>())
        .fold(0.0, f64::max);
    let y_max = nice_max(peak);
    let bars = stacked_bars(&columns, y_max, W, H);
    let unit = match step {
        TimelineStep::Day => "day",
        TimelineStep::Month => "month",
    };
    let allocated: f64 = points.iter().map(|p| p.gpu_hours).sum();
    let used: f64 = points.iter().filter_map(|p| p.used_gpu_hours).sum();
    let label = format!("GPU-hours per {unit} and pool: {allocated:.1} allocated, {used:.1} used");
    let fmt = |ms: Option<&i64>| {
        ms.and_then(|m| chrono::DateTime::from_timestamp_millis(*m))
            .map(|t| {
                t.format(if step == TimelineStep::Day {
                    "%b %d"
                } else {
                    "%Y-%m"
                })
                .to_string()
            })
            .unwrap_or_default()
    };
    view! {
        <figure class="card capacity" data-test="usage-timeline">
            <figcaption>
                <span>{format!("GPU-hours per {unit}")}</span>
                <span class="muted small">{format!("scale {y_max} GPU-h")}</span>
            </figcaption>
            <svg class="bars" viewBox=format!("0 0 {W} {H}") preserveAspectRatio="none" role="img" aria-label=label>
                {bars.into_iter().map(|stack| stack.into_iter().enumerate().filter(|(_, r)| r.h > 0.0).map(|(i, r)| {
                    let class = format!("{} series-{}", if i % 2 == 0 { "seg-used" } else { "seg-idle" }, (i / 2) % 6);
                    view! { <rect class=class data-pool=pools.get(i / 2).cloned().unwrap_or_default() x=format!("{:.1}", r.x) y=format!("{:.1}", r.y) width=format!("{:.1}", r.w) height=format!("{:.1}", r.h)></rect> }
                }).collect_view()).collect_view()}
            </svg>
            <div class="chart-axis small muted">
                <span>{fmt(steps.first())}</span>
                <span>
                    {pools.iter().enumerate().map(|(i, p)| view! {
                        <span class=format!("series-{}", i % 6) data-test="timeline-pool">
                            <span class="key seg-used"></span><span class="key seg-idle"></span>" "{p.clone()}" "
                        </span>
                    }).collect_view()}
                    "· solid: used, light: allocated but idle or not measured"
                </span>
                <span>{fmt(steps.last())}</span>
            </div>
        </figure>
    }
}

/// The free buckets of the ledger, after the tenants: (key, label, class,
/// the table's short heading).
const FREE_BUCKETS: [(&str, &str, &str, &str); 6] = [
    (
        "unallocated",
        "Unallocated",
        "lb-unallocated",
        "Unallocated",
    ),
    ("stranded", "Stranded", "lb-stranded", "Stranded"),
    (
        "draining",
        "Draining or cordoned",
        "lb-draining",
        "Draining",
    ),
    ("maintenance", "Maintenance", "lb-maintenance", "Maint."),
    ("unhealthy", "Unhealthy", "lb-unhealthy", "Unhealthy"),
    ("silent", "Host silent", "lb-silent", "Silent"),
];

fn free_hours(b: &LedgerBuckets) -> [f64; 6] {
    [
        b.unallocated,
        b.stranded,
        b.draining,
        b.maintenance,
        b.unhealthy,
        b.silent,
    ]
}

/// The fleet ledger (platform admins): every GPU-hour of the period, held
/// by a tenant or in one of the free buckets, per step, and per pool,
/// model or host.
#[component]
fn Ledger(l: LedgerReport, f: Filter) -> impl IntoView {
    // The tenants, largest first, get the chart's series colours.
    let tenants: Vec<String> = l.totals.tenants.iter().map(|t| t.tenant.clone()).collect();
    let columns: Vec<Vec<f64>> = l
        .steps
        .iter()
        .map(|s| {
            tenants
                .iter()
                .map(|t| {
                    s.buckets
                        .tenants
                        .iter()
                        .find(|x| &x.tenant == t)
                        .map_or(0.0, |x| x.gpu_hours)
                })
                .chain(free_hours(&s.buckets))
                .collect()
        })
        .collect();
    let peak = l
        .steps
        .iter()
        .map(|s| s.buckets.physical)
        .fold(0.0, f64::max);
    let y_max = nice_max(peak);
    let bars = stacked_bars(&columns, y_max, W, H);
    let class_of = |i: usize| -> String {
        if i < tenants.len() {
            format!("seg-used series-{}", i % 6)
        } else {
            FREE_BUCKETS[i - tenants.len()].2.to_owned()
        }
    };
    let by = l.group_by;
    let label = format!(
        "Fleet GPU-hours per {} by tenant and free bucket: {:.1} in all",
        if l.step == LedgerStep::Hour {
            "hour"
        } else if l.step == LedgerStep::Day {
            "day"
        } else {
            "month"
        },
        l.totals.physical
    );
    let fmt = |t: Option<&LedgerRow>| {
        t.map(|r| r.start.format("%b %d").to_string())
            .unwrap_or_default()
    };
    let (first, last) = (fmt(l.steps.first()), fmt(l.steps.last()));
    let t = &l.totals;
    view! {
        <section class="card" data-test="ledger">
            <div class="section-row">
                <h2 class="section-title">"Fleet ledger"</h2>
                <span class="muted small">{format!("{} GPU{}, {} to {}", l.gpus, format::plural(l.gpus), l.from.format("%Y-%m-%d %H:%M"), l.to.format("%Y-%m-%d %H:%M UTC"))}</span>
            </div>
            <p class="muted small">"Every GPU-hour of the period lands in exactly one place: a tenant's slices (by their share), or free: unallocated, stranded (too fragmented for any shape the pool offers), draining or cordoned, in maintenance, unhealthy, or on a silent host. Reconcile it with the hardware invoice: the fleet's hours are the GPUs' hours since they enrolled."</p>
            <div class="stats">
                <div class="stat card">
                    <span class="stat-value" data-test="ledger-physical">{format!("{:.3}", t.physical)}</span>
                    <span class="stat-label">"fleet GPU-hours"</span>
                </div>
                <div class="stat card">
                    <span class="stat-value" data-test="ledger-allocated">{format!("{:.3}", t.allocated)}</span>
                    <span class="stat-label">{format!("held by tenants ({:.0} %)", if t.physical > 0.0 { t.allocated * 100.0 / t.physical } else { 0.0 })}</span>
                </div>
                <div class="stat card">
                    <span class="stat-value" data-test="ledger-idle">{format!("{:.3}", l.idle_gpu_hours)}</span>
                    <span class="stat-label">"of those idle: held, but telemetry found them unused"</span>
                </div>
                <div class="stat card">
                    <span class="stat-value" data-test="ledger-balanced">{if l.balanced { "balanced" } else { "does not balance" }}</span>
                    <span class="stat-label">{if l.balanced { "buckets add up to the fleet's hours, to the millisecond".to_owned() } else { "the GPUs' recorded history overlaps: see the operations guide".to_owned() }}</span>
                </div>
            </div>
            <figure class="capacity" data-test="ledger-chart">
                <svg class="bars" viewBox=format!("0 0 {W} {H}") preserveAspectRatio="none" role="img" aria-label=label>
                    {bars.into_iter().map(|stack| stack.into_iter().enumerate().filter(|(_, r)| r.h > 0.0).map(|(i, r)| {
                        view! { <rect class=class_of(i) x=format!("{:.1}", r.x) y=format!("{:.1}", r.y) width=format!("{:.1}", r.w) height=format!("{:.1}", r.h)></rect> }
                    }).collect_view()).collect_view()}
                </svg>
                <div class="chart-axis small muted"><span>{first}</span><span>{format!("scale {y_max} GPU-h")}</span><span>{last}</span></div>
            </figure>
            <ul class="ledger-legend small" data-test="ledger-legend">
                {t.tenants.iter().enumerate().map(|(i, x)| view! {
                    <li data-test="ledger-bucket" data-bucket=format!("tenant:{}", x.tenant)>
                        <span class=format!("key seg-used series-{}", i % 6)></span>" "{x.name.clone()}" "
                        <span class="num" data-test="ledger-hours">{format!("{:.3}", x.gpu_hours)}</span>
                    </li>
                }).collect_view()}
                {FREE_BUCKETS.iter().zip(free_hours(t)).map(|((key, name, class, _), v)| view! {
                    <li data-test="ledger-bucket" data-bucket=*key>
                        <span class=format!("key {class}")></span>" "{*name}" "
                        <span class="num" data-test="ledger-hours">{format!("{v:.3}")}</span>
                    </li>
                }).collect_view()}
            </ul>
            <form class="form-row" method="get" action="/usage" data-test="ledger-filters">
                {(!f.month.is_empty()).then(|| view! { <input type="hidden" name="month" value=f.month.clone()/> })}
                <label class="field">
                    <span>"Ledger by"</span>
                    <select name="ledger_by" data-test="ledger-by">
                        {LedgerGrouping::ALL.into_iter().filter(|g| *g != LedgerGrouping::Fleet).map(|g| view! {
                            <option value=g.as_str() selected=g == by>{g.as_str()}</option>
                        }).collect_view()}
                    </select>
                </label>
                <button class="button" type="submit" data-test="ledger-apply">"Show"</button>
                <a class="button ghost" href=format!("/api/v1/ledger?group_by={}{}", by.as_str(), if f.month.is_empty() { String::new() } else { format!("&month={}", encode_component(&f.month)) }) data-test="ledger-json">"JSON"</a>
            </form>
            <div class="table-scroll" tabindex="0" role="region" aria-label=format!("Fleet ledger by {}", by.as_str())>
                <table class="small" data-test="ledger-groups">
                    <thead><tr>
                        <th>{match by { LedgerGrouping::Pool => "Pool", LedgerGrouping::Model => "GPU model", LedgerGrouping::Host => "Host", LedgerGrouping::Fleet => "Fleet" }}</th>
                        <th class="num">"Tenants"</th>
                        {FREE_BUCKETS.iter().map(|(_, name, _, short)| view! { <th class="num" title=*name>{*short}</th> }).collect_view()}
                        <th class="num">"GPU-hours"</th>
                    </tr></thead>
                    <tbody>{l.groups.iter().map(|g| view! {
                        <tr data-test="ledger-group" data-group=g.group.clone()>
                            <td class="mono nowrap">{g.group.clone()}</td>
                            <td class="num">{format!("{:.3}", g.buckets.allocated)}</td>
                            {free_hours(&g.buckets).into_iter().map(|v| view! { <td class="num">{format!("{v:.3}")}</td> }).collect_view()}
                            <td class="num" data-test="ledger-group-hours">{format!("{:.3}", g.buckets.physical)}</td>
                        </tr>
                    }).collect_view()}</tbody>
                </table>
            </div>
            {l.charges.iter().map(|c| view! { <Charges c=c.clone() month=l.from.format("%Y-%m").to_string()/> }).collect_view()}
            {(l.unpriced_gpu_hours > 0.0).then(|| view! {
                <p class="small muted" data-test="ledger-unpriced">{format!("{:.3} GPU-hours were in pools without a price and are not charged.", l.unpriced_gpu_hours)}</p>
            })}
        </section>
    }
}

/// The period's cost in one currency: each tenant's direct cost and
/// overhead share, and what stays with the platform.
#[component]
fn Charges(c: LedgerCharges, month: String) -> impl IntoView {
    view! {
        <h3 class="section-title" data-test="ledger-charges-title">{format!("Charges in {}", c.currency)}</h3>
        <p class="muted small">{format!("The priced GPU-hours cost {} {}: each pool's hours × its GPU-hour price, split by the pool's recovery policy in force at each moment. ", format::money(&c.cost), c.currency)}{if c.balanced { "Tenants and platform add up to it exactly." } else { "Tenants and platform do not add up: see the operations guide." }}</p>
        <div class="table-scroll" tabindex="0" role="region" aria-label=format!("Charges in {}", c.currency)>
            <table class="small" data-test="ledger-charges" data-currency=c.currency.clone()>
                <thead><tr><th>"Tenant"</th><th>"Cost centre"</th><th class="num">"Direct"</th><th class="num">"Overhead share"</th><th class="num">"Total"</th><th><span class="visually-hidden">"Statement"</span></th></tr></thead>
                <tbody>
                    {c.tenants.iter().map(|t| view! {
                        <tr data-test="ledger-charge" data-tenant=t.tenant.clone()>
                            <td>{t.name.clone()}</td>
                            <td class="mono">{t.cost_centre.clone().map(|cc| view! {
                                <a href=format!("/statement?cost_centre={}&month={month}", encode_component(&cc)) title="The cost centre's statement">{cc.clone()}</a>
                            })}</td>
                            <td class="num">{format::money(&t.direct)}</td>
                            <td class="num">{format::money(&t.overhead)}</td>
                            <td class="num" data-test="ledger-charge-total">{format::money(&t.total)}</td>
                            <td><a href=format!("/statement?tenant={}&month={month}", encode_component(&t.tenant))>"Statement"</a></td>
                        </tr>
                    }).collect_view()}
                    <tr data-test="ledger-platform">
                        <td>"Platform (not recovered)"</td><td></td><td></td><td></td>
                        <td class="num" data-test="ledger-platform-total">{format::money(&c.platform)}</td><td></td>
                    </tr>
                </tbody>
                <tfoot><tr><th>"Fleet cost"</th><th></th><th></th><th></th><th class="num" data-test="ledger-cost">{format::money(&c.cost)}</th><th></th></tr></tfoot>
            </table>
        </div>
        <ul class="small muted" data-test="ledger-terms">
            {c.pools.iter().map(|p| view! {
                <li>{format!("{}: {} per GPU-hour, {} from {}", p.pool, p.gpu_hour, p.policy.label(), p.from.format("%Y-%m-%d %H:%M UTC"))}</li>
            }).collect_view()}
        </ul>
    }
}

/// Every budget (platform admins), and the form to set one.
#[component]
fn Budgets(
    list: Vec<BudgetView>,
    set: ServerAction<SetBudget>,
    delete: ServerAction<DeleteBudget>,
    decide: ServerAction<DecideBudgetRequest>,
) -> impl IntoView {
    view! {
        <section class="card" id="budgets" data-test="budgets">
            <h2 class="section-title">"Budgets"</h2>
            <p class="muted small">"Monthly budgets per tenant or cost centre. Spend is what the ledger charges (direct plus overhead share); the forecast adds the running slices until the month ends. At 80 % and 100 %, spent or forecast, the tenant's admins (a cost centre's: the platform admins) are told once a month, and the tenant's webhook gets the event. A budget that blocks turns away burstable and best-effort requests once spent."</p>
            {if list.is_empty() {
                view! { <p class="muted" data-test="budgets-empty">"No budgets yet."</p> }.into_any()
            } else {
                view! {
                    <div class="grid budgets-grid">
                        {list.into_iter().map(|b| {
                            let id = b.id;
                            let pending = b.pending_request.as_ref().map(|r| r.id);
                            view! {
                                <div>
                                    <BudgetCard b/>
                                    {pending.map(|id| view! { <DecideRequest id decide/> })}
                                    <ActionForm action=delete attr:class="form-row">
                                        <input type="hidden" name="id" value=id.to_string()/>
                                        <button class="button ghost danger small" type="submit" data-test="budget-remove">"Remove"</button>
                                    </ActionForm>
                                </div>
                            }
                        }).collect_view()}
                    </div>
                }.into_any()
            }}
            <BudgetForm tenant=None current=None platform_admin=true set/>
        </section>
    }
}

#[component]
fn Prices(
    list: Vec<PriceView>,
    admin: bool,
    set: ServerAction<SetPrice>,
    pools: Vec<String>,
) -> impl IntoView {
    view! {
        <section class="card" data-test="prices">
            <h2 class="section-title">"Prices"</h2>
            {if list.is_empty() {
                view! { <p class="muted">"No pool has a price yet: usage is metered but not charged."</p> }.into_any()
            } else {
                view! {
                    <table class="small">
                        <thead><tr><th>"Pool"</th><th class="num">"per GPU-hour"</th><th class="num">"per GiB-hour"</th><th>"Recovery"</th><th>"From"</th><th>"Set by"</th></tr></thead>
                        <tbody>{list.into_iter().map(|p| view! {
                            <tr data-test="price-row" data-pool=p.pool.clone()>
                                <td class="mono">{p.pool.clone()}</td>
                                <td class="num">{format!("{} {}", p.gpu_hour, p.currency)}</td>
                                <td class="num">{format!("{} {}", p.gib_hour, p.currency)}</td>
                                <td class="small" data-test="price-recovery">{p.recovery.label()}</td>
                                <td class="small">{format::when(p.effective_from)}</td>
                                <td class="small muted">{p.created_by}</td>
                            </tr>
                        }).collect_view()}</tbody>
                    </table>
                }.into_any()
            }}
            {admin.then(|| view! {
                <ActionForm action=set attr:class="form-row" attr:data-test="price-form">
                    <label class="field">
                        <span>"Pool"</span>
                        <select name="pool" required data-test="price-pool">
                            {pools.into_iter().map(|p| view! { <option value=p.clone()>{p.clone()}</option> }).collect_view()}
                        </select>
                    </label>
                    <label class="field"><span>"Currency"</span><input type="text" name="currency" required maxlength="3" value="EUR" data-test="price-currency"/></label>
                    <label class="field"><span>"Per GPU-hour"</span><input type="text" name="gpu_hour" required inputmode="decimal" placeholder="2.10" data-test="price-gpu-hour"/></label>
                    <label class="field"><span>"Per GiB-hour"</span><input type="text" name="gib_hour" inputmode="decimal" placeholder="0.00" data-test="price-gib-hour"/></label>
                    <label class="field">
                        <span>"Overhead"</span>
                        <select name="recovery" data-test="price-recovery-choice">
                            <option value="">"Keep the pool's policy"</option>
                            {RecoveryPolicy::ALL.iter().map(|r| view! { <option value=r.as_str()>{r.label()}</option> }).collect_view()}
                        </select>
                    </label>
                    <button class="button primary" type="submit" data-test="price-save">"Set price from now"</button>
                </ActionForm>
                {move || set.value().get().and_then(Result::err).map(|err| view! { <FormError err/> })}
            })}
        </section>
    }
}
