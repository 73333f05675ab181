//! One quota request as its tenant sees it: what was asked, by whom, where it
//! stands, what was granted, and the slice that waits for it.

use crate::api::{SubmitQuotaRequest, WithdrawQuotaRequest};
use crate::components::quota::{term, RequestStateBadge};
use crate::format;
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use tessera_core::lifecycle::QuotaRequestState;
use tessera_protocol::quotas::QuotaRequestView;

/// A row of the tenant's quota request list, with submit and withdraw.
#[component]
pub fn QuotaRequestRow(
    r: QuotaRequestView,
    /// The server's time when the list was read.
    now: DateTime<Utc>,
    submit: ServerAction<SubmitQuotaRequest>,
    withdraw: ServerAction<WithdrawQuotaRequest>,
) -> impl IntoView {
    let id = r.id;
    let state = r.state.name();
    let waiting = !r.state.is_terminal();
    let mut who = vec![format!(
        "asked by {} {}",
        r.requested_by,
        format::ago(r.created_at, now)
    )];
    if let Some(s) = &r.submitted_by {
        if *s != r.requested_by {
            who.push(format!("submitted by {s}"));
        }
    }
    if let (Some(by), Some(at)) = (&r.decided_by, r.decided_at) {
        let verb = match r.state {
            QuotaRequestState::Approved => "approved",
            QuotaRequestState::Rejected { .. } => "rejected",
            _ => "decided",
        };
        who.push(format!("{verb} by {by} on {}", format::when(at)));
    }
    let granted = r
        .granted
        .filter(|g| *g != r.amount || r.granted_ends_at != r.ends_at)
        .map(|g| {
            format!(
                "Granted {} ({}) instead",
                format::quota(&g),
                term(r.granted_ends_at)
            )
        });
    let reason = match &r.state {
        QuotaRequestState::Rejected { reason } => Some(reason.clone()),
        _ => None,
    };
    let slice = r.slice.clone().map(|label| {
        let link = r.allocation_id.map(|a| {
            view! { <a href=format!("/t/{}/a/{a}", r.tenant) data-test="qr-allocation">{format!("allocation #{a}")}</a> }
        });
        let note = if waiting {
            Some("requested automatically once this is approved".to_owned())
        } else if r.allocation_id.is_some() {
            Some("requested on approval:".to_owned())
        } else {
            None
        };
        view! {
            <p class="qr-slice small" data-test="qr-slice">
                <span class="qr-slice-label">"Waiting slice "<strong class="mono">{label}</strong></span>
                {note.map(|n| view! { <span class="muted">{format!(" — {n} ")}</span> })}
                {link}
                {r.slice_error.clone().map(|e| view! { <span class="callout-inline danger" data-test="qr-slice-error">{e}</span> })}
            </p>
        }
    });
    view! {
        <li class=format!("qr-row qr-row-{state}") id=format!("request-{id}") data-test="quota-request" data-state=state data-request-id=id.to_string()>
            <div class="qr-main">
                <div class="qr-head">
                    <span class="qr-amount num" data-test="qr-amount">{format!("+{}", format::quota(&r.amount))}</span>
                    <RequestStateBadge state=r.state.clone()/>
                </div>
                <p class="qr-facts small">
                    <span class="badge mono">{r.pool.clone()}</span>
                    <span class=if r.ends_at.is_some() { "badge warn" } else { "badge" } data-test="qr-term">{term(r.ends_at)}</span>
                    <span class="muted">{format!("#{id}")}</span>
                </p>
                <p class="qr-why" data-test="qr-justification">{r.justification.clone()}</p>
                <p class="muted small" data-test="qr-who">{who.join(" · ")}</p>
                {reason.map(|why| view! { <p class="callout danger small" data-test="qr-reject-reason"><strong>"Reason: "</strong>{why}</p> })}
                {granted.map(|g| view! { <p class="callout success small" data-test="qr-granted">{g}</p> })}
                {slice}
            </div>
            <div class="qr-actions">
                {r.can_submit.then(|| view! {
                    <ActionForm action=submit>
                        <input type="hidden" name="id" value=id.get()/>
                        <button class="button primary" type="submit" data-test="submit-quota-request">"Submit to platform admins"</button>
                    </ActionForm>
                })}
                {r.can_withdraw.then(|| view! {
                    <ActionForm action=withdraw>
                        <input type="hidden" name="id" value=id.get()/>
                        <button class="button ghost danger" type="submit" data-test="withdraw-quota-request">"Withdraw"</button>
                    </ActionForm>
                })}
            </div>
        </li>
    }
}
