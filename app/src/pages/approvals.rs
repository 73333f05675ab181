//! The platform admins' approval queue: pending quota requests, oldest first,
//! each with what a decision needs (the tenant's quota and use, its history,
//! the pool's capacity), approve (optionally a different amount) or reject.

use crate::api::{get_approval_queue, ApproveQuotaRequest, RejectQuotaRequest};
use crate::components::error_panel::{ErrorPanel, FormError};
use crate::components::quota::{term, QuotaBars, RequestStateBadge};
use crate::format;
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use leptos_meta::Title;
use tessera_core::quota::{QuotaAmount, Usage};
use tessera_protocol::quotas::{
    ApprovalItem, ApprovalQueueView, PoolCapacityView, QuotaRequestView,
};

/// `/admin/approvals` (platform admins).
#[component]
pub fn ApprovalsPage() -> impl IntoView {
    view! {
        <Title text="Approvals"/>
        <LiveApprovals/>
    }
}

/// The queue with its decision forms: a lazy island (its own WASM file).
#[island(lazy)]
fn LiveApprovals() -> impl IntoView {
    crate::components::hydrated::island_hydrated();
    let approve = ServerAction::<ApproveQuotaRequest>::new();
    let reject = ServerAction::<RejectQuotaRequest>::new();
    // Every decision, refused ones included (someone else decided first),
    // reloads the queue.
    let queue = Resource::new(
        move || (approve.version().get(), reject.version().get()),
        |_| get_approval_queue(),
    );
    view! {
        <section class="page-head">
            <p class="eyebrow">"Platform"</p>
            <h1>"Quota approvals"</h1>
            <p class="muted">"Tenants asking for more quota, oldest first. Approving changes the quota at once and places the slices that were waiting for it."</p>
        </section>
        {move || approve.value().get().map(|r| match r {
            Ok(v) => view! { <p class="callout success" data-test="decided">{format!("Approved #{}: {} gets +{} in {}.", v.id, v.tenant_name, format::quota(&v.granted.unwrap_or(v.amount)), v.pool)}</p> }.into_any(),
            Err(err) => view! { <FormError err/> }.into_any(),
        })}
        {move || reject.value().get().map(|r| match r {
            Ok(v) => view! { <p class="callout success" data-test="decided">{format!("Rejected #{} of {}.", v.id, v.tenant_name)}</p> }.into_any(),
            Err(err) => view! { <FormError err/> }.into_any(),
        })}
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match queue.await {
                    Ok(q) => view! { <Queue q=q.value now=q.now approve reject/> }.into_any(),
                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Queue(
    q: ApprovalQueueView,
    now: DateTime<Utc>,
    approve: ServerAction<ApproveQuotaRequest>,
    reject: ServerAction<RejectQuotaRequest>,
) -> impl IntoView {
    let waiting = q.items.len();
    let items = q.items.clone();
    view! {
        <div class="section-row">
            <h2 class="section-title">{format!("Waiting ({waiting})")}</h2>
            {q.four_eyes.then(|| view! { <span class="badge accent" title="A platform admin who asked, submitted or administers the tenant cannot decide its request">"four-eyes on"</span> })}
        </div>
        {if q.items.is_empty() {
            view! {
                <div class="card empty" data-test="approvals-empty">
                    <p>"Nothing waits for a decision."</p>
                    <p class="muted">"Quota requests that tenant admins submit appear here, oldest first."</p>
                </div>
            }.into_any()
        } else {
            view! {
                <div class="approvals">
                    // Keyed by request: after a decision the next request
                    // gets its own form, never the fields typed for another.
                    <For each=move || items.clone() key=|item| item.request.id children=move |item| view! { <Item item now approve reject/> }/>
                </div>
            }.into_any()
        }}
        <section>
            <h2 class="section-title">"Recent decisions"</h2>
            {if q.recent.is_empty() {
                view! { <div class="card empty"><p class="muted">"No decisions yet."</p></div> }.into_any()
            } else {
                view! {
                    <div class="card table-card">
                        <table data-test="recent-decisions">
                            <thead><tr><th>"Tenant"</th><th>"Pool"</th><th class="num">"Asked"</th><th>"Decision"</th><th>"By"</th><th>"When"</th></tr></thead>
                            <tbody>
                                {q.recent.into_iter().map(|r| view! { <Decided r/> }).collect_view()}
                            </tbody>
                        </table>
                    </div>
                }.into_any()
            }}
        </section>
    }
}

#[component]
fn Decided(r: QuotaRequestView) -> impl IntoView {
    let detail = match (&r.state, r.granted) {
        (tessera_core::lifecycle::QuotaRequestState::Rejected { reason }, _) => reason.clone(),
        (_, Some(g)) if g != r.amount => format!("granted +{}", format::quota(&g)),
        _ => String::new(),
    };
    view! {
        <tr data-test="recent-decision" data-request-id=r.id.to_string()>
            <td><a href=format!("/t/{}/quota#request-{}", r.tenant, r.id)>{r.tenant_name.clone()}</a></td>
            <td class="mono">{r.pool.clone()}</td>
            <td class="num">{format!("+{}", format::quota(&r.amount))}<div class="muted small">{term(r.ends_at)}</div></td>
            <td><RequestStateBadge state=r.state.clone()/><div class="muted small">{detail}</div></td>
            <td class="small">{r.decided_by.clone().unwrap_or_default()}</td>
            <td class="muted small">{r.decided_at.map(format::when).unwrap_or_default()}</td>
        </tr>
    }
}

#[component]
fn Item(
    item: ApprovalItem,
    now: DateTime<Utc>,
    approve: ServerAction<ApproveQuotaRequest>,
    reject: ServerAction<RejectQuotaRequest>,
) -> impl IntoView {
    let r = item.request;
    let id = r.id;
    let asked = QuotaAmount::from_quota(&r.amount);
    let who = match &r.submitted_by {
        Some(s) if *s != r.requested_by => {
            format!("proposed by {}, submitted by {s}", r.requested_by)
        }
        _ => format!("asked by {}", r.requested_by),
    };
    let after = item.current.quota.plus(&r.amount);
    view! {
        <article class="card approval" data-test="approval-item" data-request-id=id.to_string()>
            <header class="approval-head">
                <div>
                    <p class="eyebrow"><a href=format!("/t/{}/quota#request-{id}", r.tenant)>{r.tenant_name.clone()}</a>{format!(" · {} · #{id}", r.pool)}</p>
                    <h2 class="approval-amount num" data-test="approval-amount">{format!("+{}", format::quota(&r.amount))}</h2>
                    <p class="muted small">
                        <span class=if r.ends_at.is_some() { "badge warn" } else { "badge" } data-test="approval-term">{term(r.ends_at)}</span>
                        {format!(" {who} · {}", format::ago(r.created_at, now))}
                    </p>
                </div>
                <RequestStateBadge state=r.state.clone()/>
            </header>
            <blockquote class="justification" data-test="approval-justification">{r.justification.clone()}</blockquote>
            {r.slice.clone().map(|s| view! { <p class="small"><span class="muted">"Slice waiting for it: "</span><strong class="mono">{s}</strong><span class="muted">" — requested automatically on approval"</span></p> })}
            <div class="approval-grid">
                <section data-test="approval-current">
                    <h3 class="small muted">{format!("{} now in {}", r.tenant_name, r.pool)}</h3>
                    <QuotaBars quota=item.current.quota usage=item.current.usage/>
                    <p class="small muted num">{format!("After approval: {}", format::quota(&after))}</p>
                </section>
                <Capacity pool=item.pool asked=r.amount/>
                <section data-test="approval-history">
                    <h3 class="small muted">"Earlier requests"</h3>
                    {if item.history.is_empty() {
                        view! { <p class="muted small">"None — this is the tenant's first."</p> }.into_any()
                    } else {
                        view! {
                            <ul class="history">
                                {item.history.into_iter().map(|h| view! {
                                    <li data-test="history-item">
                                        <RequestStateBadge state=h.state.clone()/>
                                        <span class="num small">{format!("+{}", format::quota(&h.amount))}</span>
                                        <span class="muted small">{format!("{} · {}", h.pool, format::ago(h.created_at, now))}</span>
                                    </li>
                                }).collect_view()}
                            </ul>
                        }.into_any()
                    }}
                </section>
            </div>
            <footer class="approval-actions">
                {match (r.decide_blocked.clone(), r.can_decide) {
                    (Some(why), _) => view! { <p class="callout warn" data-test="four-eyes">{why}</p> }.into_any(),
                    (None, true) => view! {
                        <ActionForm action=approve attr:class="decide approve-form" attr:data-test="approve-form">
                            <input type="hidden" name="id" value=id.get()/>
                            <div class="form-row">
                                <label class="field"><span>"GPUs"</span><input type="number" name="gpus" min="0" step="any" required value=format::number(asked.gpus) data-test="approve-gpus"/></label>
                                <label class="field"><span>"Memory (GiB)"</span><input type="number" name="memory_gib" min="0" step="any" required value=format::number(asked.memory_gib) data-test="approve-memory"/></label>
                                <label class="field"><span>"Slices"</span><input type="number" name="max_slices" min="0" step="1" required value=asked.max_slices.to_string() data-test="approve-slices"/></label>
                                <button class="button primary" type="submit" data-test="approve">"Approve"</button>
                            </div>
                            <p class="muted small">"Change the amounts to grant less or more than was asked."</p>
                        </ActionForm>
                        <ActionForm action=reject attr:class="decide reject-form" attr:data-test="reject-form">
                            <input type="hidden" name="id" value=id.get()/>
                            <div class="form-row">
                                <label class="field grow"><span>"Reason for rejecting"</span><textarea name="reason" rows="2" required maxlength="2000" placeholder="The tenant sees this" data-test="reject-reason"></textarea></label>
                                <button class="button danger" type="submit" data-test="reject">"Reject"</button>
                            </div>
                        </ActionForm>
                    }.into_any(),
                    (None, false) => view! { <p class="muted small">"You cannot decide this request."</p> }.into_any(),
                }}
            </footer>
        </article>
    }
}

/// The pool: GPUs, free compute and memory of the total, and what tenants
/// have been promised (quota is a promise, capacity is shared).
#[component]
fn Capacity(pool: PoolCapacityView, asked: tessera_core::quota::Quota) -> impl IntoView {
    let busy = Usage {
        compute: pool.total.compute - pool.free.compute,
        memory: pool.total.memory - pool.free.memory,
        slices: 0,
    };
    // The bars show what is in use; a pool without GPUs shows empty bars.
    let in_use = |used: u64, total: u64| format::share_of(used, total).unwrap_or(0).min(100);
    let compute_pct = in_use(u64::from(busy.compute.0), u64::from(pool.total.compute.0));
    let memory_pct = in_use(busy.memory.0, pool.total.memory.0);
    let promised_after = pool.promised.plus(&asked);
    let total = u64::from(pool.total.compute.0);
    let promised_pct =
        |p: &tessera_core::quota::Quota| format::share_of(u64::from(p.compute.0), total);
    let promised_text = match (promised_pct(&pool.promised), promised_pct(&promised_after)) {
        (Some(now), Some(after)) => format!("{now}% of the compute now, {after}% after"),
        _ => "no healthy GPUs online".to_owned(),
    };
    view! {
        <section data-test="approval-pool">
            <h3 class="small muted">{format!("Pool {} · {}", pool.pool, format::gpus(pool.gpus))}</h3>
            <div class="quota-line">
                <div class="quota-head"><span class="small">"Compute"</span><span class="muted small num">{format!("{} free of {}", pool.free.compute, pool.total.compute)}</span></div>
                <div class="bar"><span class=crate::components::quota::bar_class(compute_pct) style=format!("width:{compute_pct}%")></span></div>
            </div>
            <div class="quota-line">
                <div class="quota-head"><span class="small">"Memory"</span><span class="muted small num">{format!("{} free of {}", format::gib(pool.free.memory), format::gib(pool.total.memory))}</span></div>
                <div class="bar"><span class=crate::components::quota::bar_class(memory_pct) style=format!("width:{memory_pct}%")></span></div>
            </div>
            <p class="small"><span class="muted">"Promised to tenants: "</span><span class="num">{format!("{} · {}", pool.promised.compute, format::gib(pool.promised.memory))}</span></p>
            <p class="muted small">{promised_text}</p>
        </section>
    }
}
