//! The offer under a slice the quota refuses: what is missing, and one click
//! to ask for exactly that, with the slice attached so it is requested
//! automatically once the increase is approved.

use crate::api::CreateQuotaRequest;
use crate::components::error_panel::FormError;
use crate::format;
use leptos::prelude::*;
use tessera_core::lifecycle::QuotaRequestState;
use tessera_core::quota::{headroom, shortfall, Demand, Quota, QuotaAmount, Usage};
use tessera_protocol::quotas::QuotaRequestView;
use tessera_protocol::views::NewAllocation;

/// "This slice needs more quota": per dimension what it needs, what is left
/// and what is missing, a justification, and the button that files it.
#[component]
pub fn QuotaOffer(
    /// The tenant's quota in the slice's pool (`None`: it has none there).
    quota: Option<Quota>,
    usage: Usage,
    /// What the slice costs.
    demand: Demand,
    /// The slice, as the form would request it.
    slice: NewAllocation,
    /// Tenant admins request; members propose.
    admin: bool,
    action: ServerAction<CreateQuotaRequest>,
    justification: RwSignal<String>,
    ends_on: RwSignal<String>,
) -> impl IntoView {
    let q = quota.unwrap_or_default();
    let left = headroom(&q, &usage);
    let missing = shortfall(&q, &usage, &demand).rounded_up();
    let amount = QuotaAmount::from_quota(&missing);
    let rows = [
        (
            "GPU compute",
            demand.compute.to_string(),
            left.compute.to_string(),
            missing.compute.0 > 0,
            missing.compute.to_string(),
        ),
        (
            "GPU memory",
            format::gib(demand.memory),
            format::gib(left.memory),
            missing.memory.0 > 0,
            format::gib(missing.memory),
        ),
        (
            "Slices",
            demand.slices.to_string(),
            left.slices.to_string(),
            missing.max_slices > 0,
            missing.max_slices.to_string(),
        ),
    ];
    let headline = match quota {
        None => format!("Your team has no quota in {} yet.", slice.pool),
        Some(_) => "This slice does not fit in what is left of your team's quota.".to_owned(),
    };
    let (button, who) = if admin {
        ("Request quota increase", "It goes to the platform admins")
    } else {
        (
            "Propose quota increase",
            "Your tenant admins submit it to the platform admins",
        )
    };
    let slice_json = serde_json::to_string(&slice).unwrap_or_default();
    let slug = slice.tenant.clone().map(String::from).unwrap_or_default();
    view! {
        <section class="card offer" data-test="quota-offer">
            <p class="eyebrow">"Quota"</p>
            <h2>{headline}</h2>
            <p class="muted">{format!("Ask for the missing amount. {who}; once it is approved, your slice is requested automatically.")}</p>
            <table class="offer-table">
                <thead><tr><th></th><th class="num">"This slice needs"</th><th class="num">"Left in quota"</th><th class="num">"Missing"</th></tr></thead>
                <tbody>
                    {rows.into_iter().map(|(label, needs, left, short, missing)| view! {
                        <tr class:short=short>
                            <td>{label}</td>
                            <td class="num">{needs}</td>
                            <td class="num">{left}</td>
                            <td class="num"><strong>{if short { format!("+{missing}") } else { "—".to_owned() }}</strong></td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
            <p class="offer-amount" data-test="offer-amount">"Ask for "<strong class="num">{format!("+{}", format::quota(&missing))}</strong>{format!(" in {}", slice.pool)}</p>
            <ActionForm action attr:class="qr-form" attr:data-test="offer-form">
                <input type="hidden" name="slug" value=slug/>
                <input type="hidden" name="pool" value=slice.pool.to_string()/>
                <input type="hidden" name="gpus" value=format::number(amount.gpus)/>
                <input type="hidden" name="memory_gib" value=format::number(amount.memory_gib)/>
                <input type="hidden" name="max_slices" value=amount.max_slices.to_string()/>
                <input type="hidden" name="slice" value=slice_json/>
                <div class="form-row">
                    <label class="field grow">
                        <span>"Why does your team need it?"</span>
                        <textarea name="justification" rows="2" required maxlength="2000" data-test="offer-justification"
                            placeholder="What it is for and what happens without it"
                            prop:value=move || justification.get()
                            on:input=move |ev| justification.set(event_target_value(&ev))></textarea>
                    </label>
                    <label class="field">
                        <span>"Until (optional)"</span>
                        <input type="date" name="ends_on" data-test="offer-ends-at"
                            prop:value=move || ends_on.get()
                            on:input=move |ev| ends_on.set(event_target_value(&ev))/>
                    </label>
                </div>
                <p class="muted small">"Without a date the increase is permanent; with one it ends at the end of that day (UTC)."</p>
                <div class="form-row end">
                    <button class="button primary" type="submit" data-test="offer-submit" disabled=move || action.pending().get()>{button}</button>
                </div>
            </ActionForm>
            {move || action.value().get().and_then(Result::err).map(|err| view! { <FormError err/> })}
        </section>
    }
}

/// The confirmation once the quota request is filed.
#[component]
pub fn OfferDone(r: QuotaRequestView) -> impl IntoView {
    let next = if matches!(r.state, QuotaRequestState::Proposed) {
        "Your tenant admins have been asked to submit it to the platform admins."
    } else {
        "The platform admins have been asked to approve it."
    };
    view! {
        <section class="callout success offer-done" data-test="offer-done">
            <p><strong>{format!("Quota request #{} filed: +{} in {}.", r.id, format::quota(&r.amount), r.pool)}</strong></p>
            <p>{next}" "{format!("Your slice{} will be requested automatically once it is approved.", r.slice.as_ref().map(|s| format!(" ({s})")).unwrap_or_default())}</p>
            <p><a class="button" href=format!("/t/{}/quota#request-{}", r.tenant, r.id) data-test="offer-request-link">"Follow the request"</a></p>
        </section>
    }
}
