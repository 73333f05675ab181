//! `/fleet/insights` (platform admins): how busy each GPU is now (a heat
//! map, hosts × GPUs, 50 hosts a page with the fleet's filters), each pool's daily allocation against its capacity
//! with the trend and the day it would fill (capacity planning), and the
//! queue per day (requests, how many waited and how long, refusals). The
//! charts are SVG drawn on the server (see `tessera_core::chart`).

use crate::api::get_fleet_insights;
use crate::components::error_panel::ErrorPanel;
use crate::components::host_filter::{filtered, host_query, shown_text, HostFilterForm, HostPager};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use tessera_core::chart::{area, nice_max, polyline, stacked_bars};
use tessera_protocol::views::{
    FleetInsights, FleetQuery, FullProjection, HeatHost, PoolCapacity, QueueDay, INSIGHT_DAYS,
};

const W: f64 = 600.0;
const H: f64 = 140.0;

/// `/fleet/insights?days=30`
#[component]
pub fn InsightsPage() -> impl IntoView {
    let query = use_query_map();
    let days = move || {
        query
            .with(|q| q.get("days"))
            .and_then(|d| d.parse::<u32>().ok())
            .unwrap_or(30)
    };
    let heat = move || query.with(host_query);
    let insights = Resource::new(
        move || (days(), heat()),
        |(days, heat)| get_fleet_insights(days, heat),
    );
    let advice = Resource::new(|| (), |_| crate::api::get_fleet_recommendations());
    view! {
        <Title text="Fleet insights"/>
        <section class="page-head">
            <p class="eyebrow">"Platform"</p>
            <h1>"Fleet insights"</h1>
            <p class="muted">"How busy the GPUs are now, how full each pool is getting, how long requests wait, and which slices could be smaller. "<a href="/fleet">"Back to the fleet"</a></p>
        </section>
        <nav class="segmented" aria-label="Period" data-test="insights-period">
            {INSIGHT_DAYS.into_iter().map(|d| view! {
                <a href=move || period_link(d, &heat()) class:current=move || days() == d
                    aria-current=move || (days() == d).then_some("page")>{format!("{d} days")}</a>
            }).collect_view()}
        </nav>
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match insights.await {
                    Ok(i) => view! { <Insights i heat=heat()/> }.into_any(),
                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                }
            })}
        </Suspense>
        <Suspense fallback=|| ()>
            {move || Suspend::new(async move {
                match advice.await {
                    Ok(r) => view! { <crate::components::right_sizing::RightSizing r fleet=true/> }.into_any(),
                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The page for period `days`, keeping the heat map's filters (from its
/// first page).
fn period_link(days: u32, heat: &FleetQuery) -> String {
    if filtered(heat) {
        format!("/fleet/insights?days={days}&{}", heat.to_query_string(1))
    } else {
        format!("/fleet/insights?days={days}")
    }
}

#[component]
fn Insights(i: FleetInsights, heat: FleetQuery) -> impl IntoView {
    let pools: Vec<String> = i.pools.iter().map(|p| p.pool.clone()).collect();
    let page_link = |page: u32| {
        format!(
            "/fleet/insights?days={}&{}",
            i.days,
            heat.to_query_string(page)
        )
    };
    let prev = (i.heat_page > 1).then(|| page_link(i.heat_page - 1));
    let next = (i.heat_page < i.heat_pages).then(|| page_link(i.heat_page + 1));
    let shown = shown_text(
        &heat,
        i.heat_matching,
        i.heat_page,
        i.heat_pages,
        i.heat.len(),
    );
    view! {
        <HeatMap hosts=i.heat shown filters=view! {
            <HostFilterForm action="/fleet/insights" q=heat.clone() pools test="heat-filters" keep=("days", i.days.to_string()) flat=true/>
        }.into_any() pager=view! { <HostPager prev next test="heat"/> }.into_any()/>
        <section data-test="capacity">
            <h2 class="section-title">"Capacity"</h2>
            <p class="muted small">"GPUs allocated per day on average (a slice counts as its share of a GPU), against the pool's GPUs now; the dashed line is the least-squares trend since the first day with use."</p>
            {if i.pools.is_empty() {
                view! { <div class="card empty"><p>"No pools yet."</p></div> }.into_any()
            } else {
                view! {
                    <div class="grid wide">
                        {i.pools.into_iter().map(|p| view! { <PoolChart p/> }).collect_view()}
                    </div>
                }.into_any()
            }}
        </section>
        <Queue days=i.queue/>
    }
}

/// The heat map's colour step for a utilisation (0-10, or none).
fn heat_step(util: Option<u8>) -> String {
    util.map_or_else(|| "none".to_owned(), |u| (u.min(100) / 10).to_string())
}

/// The heat map of one page of hosts, with the filters, what the page
/// shows and the pager.
#[component]
fn HeatMap(hosts: Vec<HeatHost>, shown: String, filters: AnyView, pager: AnyView) -> impl IntoView {
    let cells: usize = hosts.iter().map(|h| h.gpus.len()).sum();
    let measured: Vec<u64> = hosts
        .iter()
        .flat_map(|h| &h.gpus)
        .filter_map(|g| g.util_pct.map(u64::from))
        .collect();
    let mean = (!measured.is_empty()).then(|| measured.iter().sum::<u64>() / measured.len() as u64);
    view! {
        <section class="card" data-test="heatmap">
            <h2 class="section-title">"Utilisation now"</h2>
            <p class="muted small">{match mean {
                Some(m) => format!("On this page, {} of {cells} GPUs reporting, {m} % busy on average. A MIG GPU is as busy as its instances, weighted by their compute slices.", measured.len()),
                None => format!("No recent telemetry from the {cells} GPUs on this page: agents send it every few seconds."),
            }}</p>
            {filters}
            <p class="muted small" data-test="heat-total">{shown}</p>
            {if hosts.is_empty() {
                view! { <p class="muted" data-test="heat-none">"No hosts match."</p> }.into_any()
            } else {
                view! {
                    <div class="heatmap" role="table" aria-label="GPU utilisation by host">
                        {hosts.into_iter().map(|h| view! {
                            <div class="heat-row" role="row" data-test="heat-host" data-host=h.hostname.to_string()>
                                <span class="heat-host mono small" role="rowheader">{h.hostname.to_string()}</span>
                                <span class="heat-cells">
                                    {h.gpus.into_iter().map(|g| {
                                        let title = format!(
                                            "GPU {} · {} · {} · {}{}",
                                            g.index,
                                            g.model,
                                            g.util_pct.map_or_else(|| "no recent telemetry".to_owned(), |u| format!("{u} % busy")),
                                            g.mem_pct.map_or_else(String::new, |m| format!("{m} % memory")),
                                            if g.holders.is_empty() { String::new() } else { format!(" · {}", g.holders.join(", ")) },
                                        );
                                        view! {
                                            <span class="heat-cell" role="cell" data-heat=heat_step(g.util_pct) title=title.clone() aria-label=title
                                                data-test="heat-cell" data-util=g.util_pct.map(|u| u.to_string()).unwrap_or_default()>
                                                <span class="heat-value">{g.util_pct.map_or_else(|| "–".to_owned(), |u| u.to_string())}</span>
                                            </span>
                                        }
                                    }).collect_view()}
                                </span>
                            </div>
                        }).collect_view()}
                    </div>
                    <div class="heat-legend small muted" aria-hidden="true">
                        <span>"0 %"</span>
                        {(0..=10).map(|s| view! { <span class="heat-cell" data-heat=s.to_string()></span> }).collect_view()}
                        <span>"100 %"</span>
                        <span class="heat-cell" data-heat="none"></span><span>"no data"</span>
                    </div>
                }.into_any()
            }}
            {pager}
        </section>
    }
}

/// What the projection says, for people.
fn projection_text(p: &PoolCapacity) -> String {
    match &p.full {
        FullProjection::Unknown => "Not enough history for a trend yet.".to_owned(),
        FullProjection::FullNow => "At capacity on its trend: requests will queue.".to_owned(),
        FullProjection::Never => "Flat or falling: not filling up.".to_owned(),
        FullProjection::FullOn { day } => {
            format!("Full on {} at this trend.", day.format("%Y-%m-%d"))
        }
        FullProjection::BeyondYear => "Not full within a year at this trend.".to_owned(),
    }
}

#[component]
fn PoolChart(p: PoolCapacity) -> impl IntoView {
    let capacity = f64::from(p.capacity_gpus);
    let values: Vec<(i64, f64)> = p
        .days
        .iter()
        .map(|d| (d.day.timestamp_millis(), d.allocated_gpus))
        .collect();
    let (x0, x1) = match (values.first(), values.last()) {
        (Some(a), Some(b)) => (a.0, b.0.max(a.0 + 1)),
        _ => (0, 1),
    };
    let peak = values.iter().map(|v| v.1).fold(0.0, f64::max);
    let y_max = nice_max(capacity.max(peak) * 1.1);
    let today = values.last().map_or(0.0, |v| v.1);
    let first_used = values.iter().find(|v| v.1 > 0.0).map_or(x0, |v| v.0);
    let trend = p
        .trend_ends
        .map(|(a, b)| polyline(&[(first_used, a), (x1, b)], x0, x1, y_max, W, H));
    let cap_y = H - (capacity / y_max).clamp(0.0, 1.0) * H;
    let urgent = matches!(p.full, FullProjection::FullNow)
        || matches!(&p.full, FullProjection::FullOn { day } if day.timestamp_millis() - x1 < 30 * 86_400_000);
    let slope = p.trend_gpus_per_day.map(|s| format!("{s:+.2} GPU/day · "));
    let label = format!(
        "Pool {}: {today:.1} of {} GPUs allocated today. {}",
        p.pool,
        p.capacity_gpus,
        projection_text(&p)
    );
    view! {
        <figure class="card capacity" data-test="capacity-pool" data-pool=p.pool.clone()>
            <figcaption>
                <span class="mono">{p.pool.clone()}</span>
                <span class="muted small">{format!("{today:.1} of {} GPUs allocated today", p.capacity_gpus)}</span>
            </figcaption>
            <svg viewBox=format!("0 0 {W} {H}") preserveAspectRatio="none" role="img" aria-label=label>
                <polygon class="chart-area" points=area(&values, x0, x1, y_max, W, H)></polygon>
                <polyline class="chart-line" points=polyline(&values, x0, x1, y_max, W, H)></polyline>
                <line class="chart-capacity" x1="0" x2=W.to_string() y1=cap_y.to_string() y2=cap_y.to_string()></line>
                {trend.map(|t| view! { <polyline class="chart-trend" points=t data-test="capacity-trend"></polyline> })}
            </svg>
            <div class="chart-axis small muted">
                <span>{p.days.first().map(|d| d.day.format("%b %d").to_string()).unwrap_or_default()}</span>
                <span>"allocated · capacity (red) · trend (dashed)"</span>
                <span>"today"</span>
            </div>
            <p class="small" class:warn-text=urgent data-test="capacity-projection">
                {slope.unwrap_or_default()}{projection_text(&p)}
            </p>
        </figure>
    }
}

fn seconds(s: Option<f64>) -> String {
    match s {
        None => "—".to_owned(),
        Some(s) if s < 1.0 => "at once".to_owned(),
        Some(s) if s < 120.0 => format!("{s:.0} s"),
        Some(s) if s < 7200.0 => format!("{:.0} min", s / 60.0),
        Some(s) => format!("{:.1} h", s / 3600.0),
    }
}

#[component]
fn Queue(days: Vec<QueueDay>) -> impl IntoView {
    let requests: u32 = days.iter().map(|d| d.requests).sum();
    let queued: u32 = days.iter().map(|d| d.queued).sum();
    let refused: u32 = days.iter().map(|d| d.refused).sum();
    // Bars: placed at once, queued, refused — stacked per day.
    let columns: Vec<Vec<f64>> = days
        .iter()
        .map(|d| {
            vec![
                f64::from(d.requests - d.queued.min(d.requests)),
                f64::from(d.queued),
                f64::from(d.refused),
            ]
        })
        .collect();
    let peak = columns
        .iter()
        .map(|c| c.iter().sum::<f64>())
        .fold(0.0, f64::max);
    let y_max = nice_max(peak);
    let bars = stacked_bars(&columns, y_max, W, H);
    let classes = ["bar-placed", "bar-queued", "bar-refused"];
    let busy: Vec<QueueDay> = days
        .iter()
        .rev()
        .filter(|d| d.requests + d.refused > 0)
        .take(14)
        .cloned()
        .collect();
    let first = days
        .first()
        .map(|d| d.day.format("%b %d").to_string())
        .unwrap_or_default();
    view! {
        <section class="card" data-test="queue">
            <h2 class="section-title">"Queue"</h2>
            <p class="muted small" data-test="queue-summary">{format!(
                "{requests} requests admitted, {queued} of them waited for capacity; {refused} refused for want of quota."
            )}</p>
            <svg class="bars" viewBox=format!("0 0 {W} {H}") preserveAspectRatio="none" role="img"
                aria-label=format!("Requests per day: {requests} admitted, {queued} queued, {refused} refused")>
                {bars.into_iter().map(|stack| stack.into_iter().zip(classes).filter(|(r, _)| r.h > 0.0).map(|(r, class)| view! {
                    <rect class=class x=format!("{:.1}", r.x) y=format!("{:.1}", r.y) width=format!("{:.1}", r.w) height=format!("{:.1}", r.h)></rect>
                }).collect_view()).collect_view()}
            </svg>
            <div class="chart-axis small muted">
                <span>{first}</span>
                <span><span class="key bar-placed"></span>" placed at once "<span class="key bar-queued"></span>" queued "<span class="key bar-refused"></span>" refused · scale "{format!("{y_max}")}</span>
                <span>"today"</span>
            </div>
            {if busy.is_empty() {
                view! { <p class="muted">"No requests in this period."</p> }.into_any()
            } else {
                view! {
                    <div class="table-scroll" tabindex="0" role="region" aria-label="Requests per day">
                    <table class="small" data-test="queue-days">
                        <thead><tr><th>"Day"</th><th class="num">"Requests"</th><th class="num">"Queued"</th><th class="num">"Refused"</th><th class="num">"Median wait"</th><th class="num">"95th percentile"</th></tr></thead>
                        <tbody>{busy.into_iter().map(|d| view! {
                            <tr data-test="queue-day">
                                <td>{d.day.format("%a %b %d").to_string()}</td>
                                <td class="num" data-test="queue-requests">{d.requests}</td>
                                <td class="num" data-test="queue-queued">{d.queued}</td>
                                <td class="num" data-test="queue-refused">{d.refused}</td>
                                <td class="num">{seconds(d.wait_p50_s)}</td>
                                <td class="num" data-test="queue-p95">{seconds(d.wait_p95_s)}</td>
                            </tr>
                        }).collect_view()}</tbody>
                    </table>
                    </div>
                }.into_any()
            }}
        </section>
    }
}
