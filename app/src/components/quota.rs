//! Quota pieces shared by the tenant, approval and admin pages: use-of-quota
//! bars, headroom figures and the state badge of a quota request.

use crate::format;
use leptos::prelude::*;
use tessera_core::lifecycle::QuotaRequestState;
use tessera_core::quota::{headroom, Quota, Usage};

/// Used of quota per dimension (GPU compute, memory, slices), as bars.
#[component]
pub fn QuotaBars(
    /// The limit in force.
    quota: Quota,
    /// What live allocations hold.
    usage: Usage,
    /// Also say what is left under each bar.
    #[prop(optional)]
    headroom_text: bool,
    /// Short labels and thin bars, for table rows.
    #[prop(optional)]
    compact: bool,
) -> impl IntoView {
    let left = headroom(&quota, &usage);
    let label = |long: &'static str, short: &'static str| if compact { short } else { long };
    let rows = [
        (
            label("GPU compute", "GPU"),
            format::percent_of(u64::from(usage.compute.0), u64::from(quota.compute.0)),
            format!("{} of {}", usage.compute, quota.compute),
            format!("{} left", left.compute),
        ),
        (
            label("GPU memory", "Memory"),
            format::percent_of(usage.memory.0, quota.memory.0),
            format!(
                "{} of {}",
                format::gib(usage.memory),
                format::gib(quota.memory)
            ),
            format!("{} left", format::gib(left.memory)),
        ),
        (
            "Slices",
            format::percent_of(u64::from(usage.slices), u64::from(quota.max_slices)),
            format!("{} of {}", usage.slices, quota.max_slices),
            format!("{} left", left.slices),
        ),
    ];
    view! {
        <div class="quota-bars" class:compact=compact>
            {rows.into_iter().map(|(label, pct, text, left)| view! {
                <div class="quota-line">
                    <div class="quota-head">
                        <span class="small">{label}</span>
                        <span class="muted small num" data-test="quota-text">{text}</span>
                    </div>
                    <div class="bar" role="meter" aria-label=label aria-valuenow=pct aria-valuemin="0" aria-valuemax="100">
                        <span class=bar_class(pct) style=format!("width:{pct}%")></span>
                    </div>
                    {headroom_text.then(|| view! { <span class="muted small num headroom" data-test="headroom">{left}</span> })}
                </div>
            }).collect_view()}
        </div>
    }
}

/// The bar's class: a warning colour from 90 % on.
pub fn bar_class(pct: u64) -> &'static str {
    if pct >= 90 {
        "bar-used full"
    } else {
        "bar-used"
    }
}

/// `proposed`, `pending`, `approved`, `rejected`, `withdrawn`, each in its colour.
#[component]
pub fn RequestStateBadge(state: QuotaRequestState) -> impl IntoView {
    let name = state.name();
    let title = match &state {
        QuotaRequestState::Proposed => "A member's proposal; a tenant admin submits it",
        QuotaRequestState::Pending => "Waiting for a platform admin",
        QuotaRequestState::Approved => "Granted; the quota changed",
        QuotaRequestState::Rejected { .. } => "Refused by a platform admin",
        QuotaRequestState::Withdrawn => "Taken back by the tenant",
    };
    view! {
        <span class=format!("badge qr-state qr-{name}") title=title data-test="quota-request-state" data-state=name>{name}</span>
    }
}

/// "permanent" or "until 2026-12-01 23:59 UTC".
pub fn term(ends_at: Option<chrono::DateTime<chrono::Utc>>) -> String {
    match ends_at {
        Some(t) => format!("until {}", format::when(t)),
        None => "permanent".to_owned(),
    }
}
