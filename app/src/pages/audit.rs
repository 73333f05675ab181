//! The audit log: every state change, newest first, with filters, paging and
//! CSV export. Platform admins see everything; tenant admins their tenants.

use crate::api::get_audit;
use crate::components::error_panel::ErrorPanel;
use crate::format;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use tessera_core::audit::{AuditAction, AuditTarget};
use tessera_protocol::views::{AuditPage, AuditQuery};

/// `/audit`
#[component]
pub fn AuditLogPage() -> impl IntoView {
    let query = use_query_map();
    let current = move || {
        query.with(|q| AuditQuery {
            tenant: q.get("tenant").unwrap_or_default(),
            actor: q.get("actor").unwrap_or_default(),
            action: q.get("action").unwrap_or_default(),
            from: q.get("from").unwrap_or_default(),
            until: q.get("until").unwrap_or_default(),
            page: q.get("page").unwrap_or_default(),
        })
    };
    let page = Resource::new(current, get_audit);
    view! {
        <Title text="Audit log"/>
        <section class="page-head">
            <p class="eyebrow">"Platform"</p>
            <h1>"Audit log"</h1>
            <p class="muted">"Every change anyone made — sign-ins, roles, tenants, quotas, allocations, hosts, tokens — written in the same transaction as the change."</p>
        </section>
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                let q = current();
                match page.await {
                    Ok(p) => view! { <Audit p q/> }.into_any(),
                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// Suggestions for the action filter (a prefix match): every kind of target
/// (`allocation.` matches all of its actions), then every action.
#[component]
fn ActionNames() -> impl IntoView {
    let prefixes = AuditTarget::ALL.iter().map(|t| format!("{t}."));
    let actions = AuditAction::ALL.iter().map(|a| a.to_string());
    view! {
        <datalist id="audit-action-names" data-test="action-names">
            {prefixes.chain(actions).map(|name| view! { <option value=name/> }).collect_view()}
        </datalist>
    }
}

#[component]
fn Audit(p: AuditPage, q: AuditQuery) -> impl IntoView {
    let csv = format!("/audit.csv?{}", q.to_query_string(1));
    let jsonl = format!("/audit.jsonl?{}", q.to_query_string(1));
    let prev = (p.page > 1).then(|| format!("/audit?{}", q.to_query_string(p.page - 1)));
    let next = (p.page < p.pages).then(|| format!("/audit?{}", q.to_query_string(p.page + 1)));
    view! {
        <form class="card form-row" method="get" action="/audit" data-test="audit-filters">
            <label class="field">
                <span>"Tenant"</span>
                <select name="tenant" data-test="filter-tenant">
                    <option value="">"All"</option>
                    {p.tenants.iter().map(|(slug, name)| {
                        let selected = *slug == q.tenant;
                        view! { <option value=slug.clone() selected=selected>{name.clone()}</option> }
                    }).collect_view()}
                </select>
            </label>
            <label class="field"><span>"Actor"</span><input type="text" name="actor" value=q.actor.clone() placeholder="name or e-mail" data-test="filter-actor"/></label>
            <label class="field"><span>"Action"</span><input type="text" name="action" list="audit-action-names" value=q.action.clone() placeholder="allocation." data-test="filter-action"/></label>
            <ActionNames/>
            <label class="field"><span>"From"</span><input type="date" name="from" value=q.from.clone()/></label>
            <label class="field"><span>"Until"</span><input type="date" name="until" value=q.until.clone()/></label>
            <button class="button primary" type="submit" data-test="filter-apply">"Filter"</button>
            <a class="button ghost" href=csv data-test="audit-csv">"Download CSV"</a>
            <a class="button ghost" href=jsonl title="JSON lines, oldest first, with each row's chain hash: for a SIEM's independent copy" data-test="audit-jsonl">"JSON lines"</a>
        </form>
        {p.chain.clone().map(chain_status)}
        <p class="muted small" data-test="audit-total">{format!("{} event{} · page {} of {}", p.total, if p.total == 1 { "" } else { "s" }, p.page, p.pages)}</p>
        {if p.events.is_empty() {
            view! { <div class="card empty"><p>"No events match these filters."</p></div> }.into_any()
        } else {
            view! {
                <section class="card table-card">
                    <table data-test="audit-events">
                        <thead><tr><th>"When"</th><th>"Actor"</th><th>"Action"</th><th>"Target"</th><th>"Tenant"</th><th>"Change"</th></tr></thead>
                        <tbody>
                            {p.events.into_iter().map(|e| view! {
                                <tr data-test="audit-event">
                                    <td class="muted small">{format::when(e.at)}</td>
                                    <td class="small">{e.actor}</td>
                                    <td><span class="badge" data-test="audit-action">{e.action.as_str()}</span></td>
                                    <td class="mono small">{format!("{} {}", e.target_type, e.target_id)}</td>
                                    <td class="mono small">{e.tenant.unwrap_or_else(|| "—".into())}</td>
                                    <td class="mono small change">
                                        {e.before.map(|b| view! { <div class="muted">{format!("before {b}")}</div> })}
                                        {e.after.map(|a| view! { <div>{format!("after {a}")}</div> })}
                                    </td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                </section>
            }.into_any()
        }}
        <nav class="pager">
            {prev.map(|h| view! { <a class="button ghost" href=h data-test="audit-prev">"← Newer"</a> })}
            {next.map(|h| view! { <a class="button ghost" href=h data-test="audit-next">"Older →"</a> })}
        </nav>
    }
}

/// "Chain verified up to row N", or where it breaks.
fn chain_status(c: tessera_protocol::views::AuditChainStatus) -> AnyView {
    let earlier = match c.unchained {
        0 => String::new(),
        n => format!(" ({n} earlier rows predate the chain)"),
    };
    let retention = match (c.keep_days, c.pruned_through) {
        (None, _) => " Rows are kept forever.".to_owned(),
        (Some(days), None) => format!(" Rows older than {days} days will be deleted."),
        (Some(days), Some(id)) => format!(
            " Rows older than {days} days are deleted: {} up to row {id} so far; the chain goes on from the last one's hash.",
            c.pruned
        ),
    };
    match c.broken {
        None => {
            let text = match c.verified_up_to {
                Some(id) => format!(
                    "Hash chain verified up to row {id}: {} rows{earlier}.{retention}",
                    c.verified
                ),
                None => format!("Hash chain: no chained rows yet{earlier}.{retention}"),
            };
            view! { <p class="callout success small" data-test="audit-chain" data-state="verified">{text}</p> }.into_any()
        }
        Some((row, reason)) => {
            let at = row.map_or_else(|| "the start".to_owned(), |id| format!("row {id}"));
            let text = format!("Hash chain broken at {at}: {reason}. {} rows verified before it; run tessera-server verify-audit and compare with your SIEM's copy.", c.verified);
            view! { <p class="callout danger small" data-test="audit-chain" data-state="broken">{text}</p> }.into_any()
        }
    }
}
