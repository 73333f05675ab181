//! Why the placer chose a slice's place, for platform admins: the policy,
//! what it ranks by, the chosen place and the next best with their scores,
//! and what it passed over.

use crate::format::plural;
use leptos::prelude::*;
use tessera_protocol::views::PlacementWhy;

/// A score as the table shows it: whole numbers plainly, others to three
/// decimals.
fn score(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// The explanation of one placement.
#[component]
pub fn PlacementWhySection(why: PlacementWhy) -> impl IntoView {
    let summary = format!(
        "Policy {}: {} place{} on {} host{} evaluated; {} host{} without the CPU or memory asked for; {} GPU{} with room kept apart for tenant isolation. Fragmentation of the chosen host: {:+.3} GPUs.",
        why.policy,
        why.candidates,
        plural(why.candidates),
        why.hosts_scanned,
        plural(why.hosts_scanned),
        why.hosts_short,
        plural(why.hosts_short),
        why.gpus_kept_apart,
        plural(why.gpus_kept_apart),
        why.fragmentation_delta,
    );
    let terms = why.ranking.len();
    view! {
        <section class="card why-card" data-test="placement-why">
            <details>
                <summary><h2 class="section-title inline">"Why this place"</h2>" "<span class="badge">"platform admins"</span></summary>
                <p class="muted small" data-test="placement-why-summary">{summary}</p>
                <p class="small">"Ranked by:"</p>
                <ol class="small" data-test="placement-why-ranking">
                    {why.ranking.iter().map(|t| view! { <li>{t.clone()}</li> }).collect_view()}
                </ol>
                <div class="table-scroll">
                    <table class="small" data-test="placement-why-ranked">
                        <thead>
                            <tr>
                                <th scope="col">"Place"</th>
                                <th scope="col">"Host"</th>
                                <th scope="col">"GPUs"</th>
                                {(1..=terms).map(|i| view! { <th scope="col" class="num">{i.to_string()}</th> }).collect_view()}
                            </tr>
                        </thead>
                        <tbody>
                            {why.ranked.iter().enumerate().map(|(i, r)| {
                                let gpus = r.gpus.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
                                let gpus = match r.mig_start {
                                    Some(s) => format!("{gpus} · MIG slice {s}"),
                                    None => gpus,
                                };
                                view! {
                                    <tr data-test="placement-why-place">
                                        <td>{if i == 0 { view! { <span class="badge accent">"chosen"</span> }.into_any() } else { format!("#{}", i + 1).into_any() }}</td>
                                        <td class="mono">{r.host.clone()}</td>
                                        <td>{gpus}</td>
                                        {r.scores.iter().map(|v| view! { <td class="num">{score(*v)}</td> }).collect_view()}
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
                <p class="muted small">"Equal scores: the earlier host and GPU in fleet order wins."</p>
            </details>
        </section>
    }
}
