//! How an allocation's state is shown: a badge, and the progress steps.

use leptos::prelude::*;

/// The badge class for a state.
pub fn badge_class(state: &str) -> &'static str {
    match state {
        "active" => "badge ok",
        "queued" | "placed" | "provisioning" | "requested" => "badge accent",
        "releasing" => "badge warn",
        "failed" => "badge danger",
        _ => "badge subtle",
    }
}

/// A state badge.
#[component]
pub fn StateBadge(#[prop(into)] state: String) -> impl IntoView {
    view! { <span class=badge_class(&state) data-test="state">{state.clone()}</span> }
}

/// The steps from request to active, with the current one marked.
#[component]
pub fn Progress(#[prop(into)] state: String) -> impl IntoView {
    let second = if state == "queued" {
        "queued"
    } else {
        "placed"
    };
    let steps = ["requested", second, "provisioning", "active"];
    let reached = match state.as_str() {
        "requested" => 0,
        "queued" | "placed" => 1,
        "provisioning" => 2,
        // Reached the end: every step is done.
        "active" | "releasing" | "released" | "expired" => 4,
        _ => 0,
    };
    let failed = state == "failed";
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
                view! { <li class=class><span class="dot"></span><span>{*s}</span></li> }
            }).collect_view()}
        </ol>
    }
}
