//! A tenant's home: members, roles and allocations.

use crate::api::get_tenant;
use crate::components::allocation_state::StateBadge;
use crate::components::error_panel::ErrorPanel;
use crate::components::live_region::LiveRegion;
use crate::format;
use leptos::prelude::*;
use leptos_meta::Title;
use tessera_core::lifecycle::AllocationPhase;
use tessera_protocol::views::{QuotaView, TenantRole, TenantView};

/// How often an open tenant page refreshes, in milliseconds.
const REFRESH_MS: u64 = 3_000;

/// The id of the part of the page that refreshes.
const LIVE: &str = "tenant-live";

/// `/t/:slug`. Refreshes while open, so states change without a reload.
#[component]
pub fn TenantPage() -> impl IntoView {
    let slug = super::path_slug();
    let tenant = Resource::new(move || slug.clone(), get_tenant);
    view! {
        <LiveRegion region=LIVE.to_owned() every_ms=REFRESH_MS/>
        <div id=LIVE>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    match tenant.await {
                        Ok(t) => view! { <Tenant t/> }.into_any(),
                        Err(err) => view! { <Title text="Error"/><ErrorPanel err/> }.into_any(),
                    }
                })}
            </Transition>
        </div>
    }
}

#[component]
fn QuotaCard(q: QuotaView) -> impl IntoView {
    let pct = format::percent_of;
    let rows = [
        (
            "GPU compute",
            pct(u64::from(q.usage.compute.0), u64::from(q.quota.compute.0)),
            format!("{} of {}", q.usage.compute, q.quota.compute),
        ),
        (
            "GPU memory",
            pct(q.usage.memory.0, q.quota.memory.0),
            format!(
                "{} of {}",
                format::mem(q.usage.memory),
                format::mem(q.quota.memory)
            ),
        ),
        (
            "Slices",
            pct(u64::from(q.usage.slices), u64::from(q.quota.max_slices)),
            format!("{} of {}", q.usage.slices, q.quota.max_slices),
        ),
    ];
    view! {
        <div class="card tile" data-test="quota" data-pool=q.pool.clone()>
            <span class="tile-title mono">{q.pool.clone()}</span>
            {rows.into_iter().map(|(label, p, text)| view! {
                <div class="quota-line">
                    <div class="quota-head"><span class="small">{label}</span><span class="muted small" data-test="quota-text">{text}</span></div>
                    <div class="bar"><span class=bar_class(p) style=format!("width:{p}%")></span></div>
                </div>
            }).collect_view()}
        </div>
    }
}

#[component]
fn Tenant(t: TenantView) -> impl IntoView {
    let member_count = t.members.len();
    view! {
        <Title text=t.name.clone()/>
        <section class="page-head">
            <p class="eyebrow">"Tenant"</p>
            <h1 data-test="tenant-name">{t.name.clone()}</h1>
            <p class="muted">
                {t.cost_centre.clone().map(|c| format!("Cost centre {c} · ")).unwrap_or_default()}
                {format!("{member_count} member{}", if member_count == 1 { "" } else { "s" })}
            </p>
        </section>
        <section>
            <div class="section-row">
                <h2 class="section-title">"Quota"</h2>
                <div class="row-actions">
                    <a class="button ghost" href=format!("/usage?tenant={}", t.slug) data-test="usage-link">"Usage & cost"</a>
                    <a class="button ghost" href=format!("/t/{}/budget", t.slug) data-test="budget-link">"Budget & statement"</a>
                    <a class="button ghost" href=format!("/api/v1/tenants/{}/kubernetes", t.slug) download=format!("{}-kubernetes.yaml", t.slug) data-test="kubernetes-bundle-link" title="Your namespaces' ResourceQuota (GPU devices and resources your quota in force allows) and the priority classes open to you; a platform admin applies it">"Kubernetes bundle (YAML)"</a>
                    <a class="button ghost" href=format!("/t/{}/quota", t.slug) data-test="tenant-quota-link">"Quota & requests"</a>
                </div>
            </div>
            {(!t.budgets.is_empty()).then(|| view! {
                <div class="grid budgets-grid" data-test="tenant-budgets">
                    {t.budgets.iter().map(|b| view! { <super::budget::BudgetCard b=b.clone()/> }).collect_view()}
                </div>
            })}
            {if t.quotas.is_empty() {
                view! {
                    <div class="card empty" data-test="tenant-quota-empty">
                        <p>"No quota yet."</p>
                        <p class="muted">"Your team needs quota in a pool before it can request slices there. "<a href=format!("/t/{}/quota#new-request", t.slug)>"Ask for it"</a>"."</p>
                    </div>
                }.into_any()
            } else {
                view! {
                    <div class="grid">
                        {t.quotas.iter().map(|q| view! { <QuotaCard q=q.clone()/> }).collect_view()}
                    </div>
                }.into_any()
            }}
        </section>
        <section>
            <div class="section-row">
                <h2 class="section-title">"Allocations"</h2>
                <div class="row-actions">
                    {t.can_manage_tokens.then(|| view! { <a class="button ghost" href=format!("/t/{}/webhook", t.slug) data-test="tenant-webhook-link">"Webhook"</a> })}
                    {t.can_manage_tokens.then(|| view! { <a class="button ghost" href=format!("/t/{}/api-tokens", t.slug) data-test="api-tokens-link">"API tokens"</a> })}
                    {t.can_request.then(|| view! { <a class="button primary" href=format!("/t/{}/request", t.slug) data-test="request-slice">"Request a slice"</a> })}
                </div>
            </div>
            {if t.allocations.is_empty() {
                view! {
                    <div class="card empty" data-test="allocations-empty">
                        <p>"No GPU slices yet."</p>
                        <p class="muted">"Slices your team requests appear here with their state, shape, GPU and time left."</p>
                    </div>
                }.into_any()
            } else {
                let now = t.allocations.first().map(|a| a.as_of);
                view! {
                    <div class="card table-card">
                        <table data-test="allocations">
                            <thead><tr><th>"Slice"</th><th>"State"</th><th>"Pool"</th><th>"Where"</th><th>"Requested"</th><th>"Time left"</th></tr></thead>
                            <tbody>
                                {t.allocations.iter().map(|a| {
                                    let left = match (a.lease_ends_at, now, a.state) {
                                        (Some(end), Some(now), AllocationPhase::Active) => format::until(end, now),
                                        (_, _, AllocationPhase::Queued) => a.queue_position.map(|p| format!("queue #{p}")).unwrap_or_default(),
                                        _ => "—".to_owned(),
                                    };
                                    let place = match (&a.host, a.gpus.first()) {
                                        (Some(h), Some(g)) => format!("{h} · GPU {}", g.index),
                                        _ => "—".to_owned(),
                                    };
                                    view! {
                                        <tr data-test="allocation-row" data-id=a.id.to_string()>
                                            <td><a href=format!("/t/{}/a/{}", t.slug, a.id) data-test="allocation-link">{a.shape_label.clone()}</a><div class="muted small">{format!("#{} · {}", a.id, a.requested_by)}</div></td>
                                            <td>
                                                <StateBadge state=a.state/>
                                                {a.qos.preemptible().then(|| view! { " " <span class="badge subtle" data-test="qos-badge" title=a.qos.describe()>{a.qos.label()}</span> })}
                                                {(a.preemption.as_ref().is_some_and(|p| p.preempted_at.is_none())).then(|| view! { " " <span class="badge warn" data-test="preempt-badge">"preempting"</span> })}
                                            </td>
                                            <td class="mono">{a.pool.clone()}</td>
                                            <td>{place}</td>
                                            <td class="muted">{now.map(|n| format::ago(a.created_at, n)).unwrap_or_default()}</td>
                                            <td>{left}</td>
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                    </div>
                }.into_any()
            }}
        </section>
        <section>
            <h2 class="section-title">"Members"</h2>
            <div class="card table-card">
                <table data-test="members">
                    <thead><tr><th>"Name"</th><th>"E-mail"</th><th>"Role"</th><th>"Last sign-in"</th></tr></thead>
                    <tbody>
                        {t.members.into_iter().map(|m| view! {
                            <tr data-test="member">
                                <td>{m.name}</td>
                                <td class="muted">{m.email.unwrap_or_default()}</td>
                                <td>
                                    <span class=match m.role { TenantRole::TenantAdmin => "badge accent", TenantRole::Member => "badge" } data-test="member-role">
                                        {m.role.as_str()}
                                    </span>
                                </td>
                                <td class="muted">{m.last_login_at.map(format::when).unwrap_or_else(|| "never".into())}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        </section>
    }
}

fn bar_class(pct: u64) -> &'static str {
    if pct >= 90 {
        "bar-used full"
    } else {
        "bar-used"
    }
}
