//! Right-sizing advice for running slices: the totals, then each slice
//! with what it used and what would do (biggest savings first).

use crate::format;
use leptos::prelude::*;
use tessera_core::rightsize::Advice;
use tessera_protocol::views::Recommendations;

/// The advice list; `fleet` adds a tenant column (platform admins).
#[component]
pub fn RightSizing(r: Recommendations, fleet: bool) -> impl IntoView {
    let total = r.slices.len();
    let money = (r.saves_micros_month > 0).then(|| {
        format!(
            " and {} a month",
            format::money(&tessera_core::metering::format_micros(
                u128::try_from(r.saves_micros_month).unwrap_or(0)
            ))
        )
    });
    let summary = if r.smaller == 0 {
        format!("None of the {total} running slice(s) could be smaller on what they used so far.")
    } else {
        format!(
            "{} of {total} running slice(s) could be smaller: {:.0} GPU-hours a month{}.",
            r.smaller,
            r.saves_gpu_hours_month,
            money.unwrap_or_default()
        )
    };
    view! {
        <section data-test="right-sizing">
            <h2 class="section-title">"Right-sizing"</h2>
            <p class="muted small">"From each running slice's telemetry: the smallest shape that covers its peak memory (+10 %) and the 95th percentile of its activity (+10 %). A month is 730 hours of holding it."</p>
            <p data-test="right-sizing-summary">{summary}</p>
            {(total > 0).then(|| view! {
                <section class="card table-card">
                    <table data-test="right-sizing-rows">
                        <thead><tr>
                            <th scope="col">"Slice"</th>
                            {fleet.then(|| view! { <th scope="col">"Tenant"</th> })}
                            <th scope="col">"Advice"</th>
                            <th scope="col">"Confidence"</th>
                            <th scope="col" class="num">"Saves GPU-h / month"</th>
                        </tr></thead>
                        <tbody>
                            {r.slices.into_iter().map(|s| {
                                let confidence = match &s.advice {
                                    Advice::TooLittleData { .. } => "—",
                                    Advice::Keep { confidence, .. } | Advice::Smaller { confidence, .. } => confidence.label(),
                                };
                                let saves = s.advice.saves_gpu_hours_month();
                                view! {
                                    <tr data-test="right-sizing-row">
                                        <td><a href=format!("/t/{}/a/{}", s.tenant, s.allocation)>{format!("#{} ", s.allocation)}{s.shape.clone()}</a><span class="muted small">{format!(" · {}", s.pool)}</span></td>
                                        {fleet.then(|| view! { <td>{s.tenant.clone()}</td> })}
                                        <td class="small">{s.sentence.clone()}</td>
                                        <td>{confidence}</td>
                                        <td class="num">{if saves > 0.0 { format!("{saves:.0}") } else { "—".to_owned() }}</td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                </section>
            })}
        </section>
    }
}
