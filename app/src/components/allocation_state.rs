//! How an allocation's state is shown: a badge, and the progress steps.

use leptos::prelude::*;
use tessera_core::lifecycle::AllocationPhase;

/// The badge class for a phase.
pub fn badge_class(state: AllocationPhase) -> &'static str {
    use AllocationPhase as P;
    match state {
        P::Active => "badge ok",
        P::Queued | P::Placed | P::Provisioning | P::Requested => "badge accent",
        P::Releasing => "badge warn",
        P::Failed => "badge danger",
        P::Released | P::Expired => "badge subtle",
    }
}

/// A state badge.
#[component]
pub fn StateBadge(state: AllocationPhase) -> impl IntoView {
    view! { <span class=badge_class(state) data-test="state">{state.name()}</span> }
}

/// The steps from request to active, with the current one marked.
#[component]
pub fn Progress(state: AllocationPhase) -> impl IntoView {
    use AllocationPhase as P;
    let second = if state == P::Queued {
        P::Queued
    } else {
        P::Placed
    };
    let steps = [P::Requested, second, P::Provisioning, P::Active];
    let reached = match state {
        P::Requested | P::Failed => 0,
        P::Queued | P::Placed => 1,
        P::Provisioning => 2,
        // Reached the end: every step is done.
        P::Active | P::Releasing | P::Released | P::Expired => 4,
    };
    let failed = state == P::Failed;
    view! {
        <ol class="steps" data-test="progress">
            {steps.iter().enumerate().map(|(i, s)| {
                let class = if failed && i == reached {
                    "step failed"
                } else if i < reached {
                    "step done"
                } else if i == reached {
                    "step current"
                } else {
                    "step"
                };
                view! { <li class=class><span class="dot"></span><span>{s.name()}</span></li> }
            }).collect_view()}
        </ol>
    }
}
