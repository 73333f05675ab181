//! A slice's utilisation and memory since it started, drawn as SVG on the
//! server (see `tessera_core::chart`).

use crate::format;
use leptos::prelude::*;
use tessera_core::chart::{area, polyline};
use tessera_core::units::MemMiB;
use tessera_protocol::views::AllocationActivity;

const W: f64 = 600.0;
const H: f64 = 120.0;

/// Two small charts: utilisation (mean as an area, maximum as a line) and
/// memory used against what the slice may use.
#[component]
pub fn ActivityChart(activity: AllocationActivity) -> impl IntoView {
    let points = activity.points;
    if points.is_empty() {
        return view! {
            <p class="muted small" data-test="activity-empty">
                "No telemetry yet: the host's agent sends it every few seconds once the slice runs."
            </p>
        }
        .into_any();
    }
    let ms = |p: &tessera_protocol::views::ActivityPoint| p.at.timestamp_millis();
    let x0 = points.first().map(ms).unwrap_or_default();
    let period_ms = i64::from(activity.period_s) * 1000;
    let x1 = points.last().map(ms).unwrap_or_default() + period_ms;
    // Each point at the middle of its period.
    let at = |p: &tessera_protocol::views::ActivityPoint| ms(p) + period_ms / 2;
    let avg: Vec<(i64, f64)> = points
        .iter()
        .map(|p| (at(p), f64::from(p.util_avg)))
        .collect();
    let max: Vec<(i64, f64)> = points
        .iter()
        .map(|p| (at(p), f64::from(p.util_max)))
        .collect();
    let mem: Vec<(i64, f64)> = points
        .iter()
        .map(|p| (at(p), p.mem_used_mib as f64))
        .collect();
    // A single period is drawn across the whole chart, not as a dot.
    let spread = |v: Vec<(i64, f64)>| match v.as_slice() {
        [(_, y)] => vec![(x0, *y), (x1, *y)],
        _ => v,
    };
    let (avg, max, mem) = (spread(avg), spread(max), spread(mem));
    let mem_scale = (activity.memory_mib as f64).max(mem.iter().map(|m| m.1).fold(1.0, f64::max));
    let mean = points.iter().map(|p| u64::from(p.util_avg)).sum::<u64>() / points.len() as u64;
    let peak_mem = points.iter().map(|p| p.mem_used_mib).max().unwrap_or(0);
    let first = points
        .first()
        .map(|p| format::when(p.at))
        .unwrap_or_default();
    let last = points
        .last()
        .map(|p| format::when(p.at))
        .unwrap_or_default();
    let label = format!(
        "Utilisation since {first}: {mean} % on average, per {}",
        if activity.period_s >= 3600 {
            "hour"
        } else {
            "minute"
        }
    );
    view! {
        <div class="activity" data-test="activity-chart">
            <figure>
                <figcaption>
                    <span>"GPU utilisation"</span>
                    <span class="muted small" data-test="activity-mean">{format!("{mean} % mean")}</span>
                </figcaption>
                <svg viewBox=format!("0 0 {W} {H}") preserveAspectRatio="none" role="img" aria-label=label>
                    <line class="chart-grid" x1="0" x2=W.to_string() y1=(H / 2.0).to_string() y2=(H / 2.0).to_string()></line>
                    <polygon class="chart-area" points=area(&avg, x0, x1, 100.0, W, H)></polygon>
                    <polyline class="chart-line" points=polyline(&avg, x0, x1, 100.0, W, H)></polyline>
                    <polyline class="chart-line-max" points=polyline(&max, x0, x1, 100.0, W, H)></polyline>
                </svg>
                <div class="chart-axis small muted"><span>{first.clone()}</span><span>"mean, and peak (dashed); 50 % line"</span><span>{last.clone()}</span></div>
            </figure>
            <figure>
                <figcaption>
                    <span>"GPU memory used"</span>
                    <span class="muted small">{format!("peak {} of {}", format::mem(MemMiB(peak_mem)), format::mem(MemMiB(activity.memory_mib)))}</span>
                </figcaption>
                <svg viewBox=format!("0 0 {W} {H}") preserveAspectRatio="none" role="img"
                    aria-label=format!("Memory used since {first}: at most {} of {}", format::mem(MemMiB(peak_mem)), format::mem(MemMiB(activity.memory_mib)))>
                    <polygon class="chart-area mem" points=area(&mem, x0, x1, mem_scale, W, H)></polygon>
                    <polyline class="chart-line mem" points=polyline(&mem, x0, x1, mem_scale, W, H)></polyline>
                </svg>
                <div class="chart-axis small muted"><span>{first}</span><span>{last}</span></div>
            </figure>
        </div>
    }
    .into_any()
}
