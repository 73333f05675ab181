//! Every tenant's quota in every pool (platform admins): the permanent part,
//! temporary grants (end them early), use, and forms to change the quota or
//! grant extra for a while.

use crate::api::{get_admin_quotas, EndQuotaGrant, GrantTenantQuota, SetTenantQuota};
use crate::components::error_panel::{ErrorPanel, FormError};
use crate::components::quota::QuotaBars;
use crate::error::AppError;
use crate::format;
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use leptos_meta::Title;
use tessera_core::quota::QuotaAmount;
use tessera_protocol::quotas::{QuotaChange, TenantQuotasView};
use tessera_protocol::views::QuotaView;

/// The page's three actions.
#[derive(Clone, Copy)]
struct Actions {
    set: ServerAction<SetTenantQuota>,
    grant: ServerAction<GrantTenantQuota>,
    end: ServerAction<EndQuotaGrant>,
}

/// `/admin/quotas` (platform admins).
#[component]
pub fn QuotasAdminPage() -> impl IntoView {
    view! {
        <Title text="Quotas"/>
        <LiveQuotas/>
    }
}

/// The quotas with their forms: a lazy island (its own WASM file).
#[island(lazy)]
fn LiveQuotas() -> impl IntoView {
    crate::components::hydrated::island_hydrated();
    let actions = Actions {
        set: ServerAction::new(),
        grant: ServerAction::new(),
        end: ServerAction::new(),
    };
    // Reload after a change went through; a refused one leaves the open form
    // (and what was typed in it) as it is. Only the latest outcome is shown.
    let changed = RwSignal::new(0u64);
    let last = RwSignal::new(None::<Result<String, AppError>>);
    let report = move |r: Result<String, AppError>| {
        if r.is_ok() {
            changed.update(|n| *n += 1);
        }
        last.set(Some(r));
    };
    Effect::new(move |_| {
        if let Some(r) = actions.set.value().get() {
            report(r.map(|c| {
                change_text(&c, |q| {
                    format!(
                        "Saved: the permanent quota in {} is now {}.",
                        q.pool,
                        format::quota(&q.base)
                    )
                })
            }));
        }
    });
    Effect::new(move |_| {
        if let Some(r) = actions.grant.value().get() {
            report(r.map(|c| {
                change_text(&c, |q| {
                    format!(
                        "Granted: the quota in force in {} is now {}.",
                        q.pool,
                        format::quota(&q.quota)
                    )
                })
            }));
        }
    });
    Effect::new(move |_| {
        if let Some(r) = actions.end.value().get() {
            report(r.map(|()| "The grant has ended.".to_owned()));
        }
    });
    let tenants = Resource::new(move || changed.get(), |_| get_admin_quotas());
    view! {
        <section class="page-head">
            <p class="eyebrow">"Platform"</p>
            <h1>"Quotas"</h1>
            <p class="muted">"What each tenant may hold at once in each pool: a permanent quota plus temporary grants that end on their own. Lowering applies at once; with four-eyes on, a raise or a grant waits for another platform admin on the Approvals page. Slices waiting in the queue are placed when quota grows."</p>
        </section>
        <div class="toasts">{move || last.get().map(outcome)}</div>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match tenants.await {
                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                    Ok(list) if list.value.is_empty() => view! {
                        <div class="card empty" data-test="quotas-empty"><p>"No tenants yet."</p><p class="muted">"Tenants come from the directory in the server's configuration."</p></div>
                    }.into_any(),
                    Ok(list) => {
                        let now = list.now;
                        list.value.into_iter().map(|t| view! { <Tenant t now actions/> }).collect_view().into_any()
                    }
                }
            })}
        </Transition>
    }
}

/// What a change did, in words: applied, or waiting for a second platform
/// admin (four-eyes), with what already applied.
fn change_text(c: &QuotaChange, applied: impl Fn(&QuotaView) -> String) -> String {
    match &c.proposal {
        None => applied(&c.quota),
        Some(p) => format!(
            "Four-eyes: the raise of +{} in {} waits as request #{} for another platform admin's approval (Approvals). In force now: {}.",
            format::quota(&p.amount),
            c.quota.pool,
            p.id,
            format::quota(&c.quota.quota)
        ),
    }
}

fn outcome(r: Result<String, AppError>) -> AnyView {
    match r {
        Ok(text) => {
            view! { <p class="callout success" role="status" data-test="quota-saved">{text}</p> }
                .into_any()
        }
        Err(err) => view! { <FormError err/> }.into_any(),
    }
}

#[component]
fn Tenant(t: TenantQuotasView, now: DateTime<Utc>, actions: Actions) -> impl IntoView {
    let slug = t.slug.clone();
    view! {
        <section class="card table-card tenant-quotas" data-test="tenant-quotas" data-tenant=t.slug.clone()>
            <header class="tq-head">
                <h2><a href=format!("/t/{}/quota", t.slug)>{t.name.clone()}</a>" "<span class="muted mono small">{t.slug.clone()}</span></h2>
                {(t.pending_requests > 0).then(|| view! {
                    <a class="badge warn" href="/admin/approvals" data-test="pending-count">{format!("{} pending request{}", t.pending_requests, if t.pending_requests == 1 { "" } else { "s" })}</a>
                })}
            </header>
            <div class="qa-grid qa-labels" aria-hidden="true">
                <span>"Pool"</span><span>"In force"</span><span>"Permanent"</span><span>"Temporary"</span><span>"Use"</span>
            </div>
            {t.quotas.into_iter().map(|q| view! { <Row slug=slug.clone() q now actions/> }).collect_view()}
        </section>
    }
}

#[component]
fn Row(slug: String, q: QuotaView, now: DateTime<Utc>, actions: Actions) -> impl IntoView {
    let base = QuotaAmount::from_quota(&q.base);
    let unset = q.quota.is_zero() && q.usage.slices == 0;
    let in_a_week = format::day(now + chrono::Duration::days(7));
    let (set_tenant, set_pool) = (slug.clone(), q.pool.clone());
    let (grant_tenant, grant_pool) = (slug.clone(), q.pool.clone());
    view! {
        <div class="qa-row" class:unset=unset data-test="quota-row" data-tenant=slug.clone() data-pool=q.pool.clone()>
            <div class="qa-grid">
                <span class="mono qa-pool">{q.pool.clone()}</span>
                <span class="num" data-test="row-in-force">{if q.quota.is_zero() { "none".to_owned() } else { format::quota(&q.quota) }}</span>
                <span class="num muted" data-test="row-base">{format::quota(&q.base)}</span>
                <div class="qa-grants">
                    {if q.grants.is_empty() { Some(view! { <span class="muted">"—"</span> }) } else { None }}
                    {q.grants.into_iter().map(|g| view! {
                        <div class="qa-grant" data-test="grant">
                            <span class="num">{format!("+{}", format::quota(&g.amount))}</span>
                            <span class="muted small">{format!("until {} ({})", format::when(g.ends_at), format::until(g.ends_at, now))}</span>
                            <ActionForm action=actions.end>
                                <input type="hidden" name="id" value=g.id.get()/>
                                <button class="button ghost danger small-button" type="submit" data-test="end-grant">"End now"</button>
                            </ActionForm>
                        </div>
                    }).collect_view()}
                </div>
                <div class="qa-use">{(!unset).then(|| view! { <QuotaBars quota=q.quota usage=q.usage compact=true/> })}</div>
            </div>
            <details class="qa-edit">
                <summary data-test="edit-quota">"Change quota or grant extra"</summary>
                <div class="qa-forms">
                    <ActionForm action=actions.set attr:class="qa-form" attr:data-test="set-quota-form">
                        <h3 class="small">"Permanent quota"</h3>
                        <input type="hidden" name="tenant" value=set_tenant/>
                        <input type="hidden" name="pool" value=set_pool/>
                        <div class="form-row">
                            <label class="field"><span>"GPUs"</span><input type="number" name="gpus" min="0" step="any" required value=format::number(base.gpus) data-test="set-gpus"/></label>
                            <label class="field"><span>"Memory (GiB)"</span><input type="number" name="memory_gib" min="0" step="any" required value=format::number(base.memory_gib) data-test="set-memory"/></label>
                            <label class="field"><span>"Slices"</span><input type="number" name="max_slices" min="0" step="1" required value=base.max_slices.to_string() data-test="set-slices"/></label>
                        </div>
                        <div class="form-row">
                            <label class="field grow"><span>"Reason (for the approver of a raise)"</span><input type="text" name="reason" maxlength="1000" placeholder="New team members joined" data-test="set-reason"/></label>
                            <button class="button primary" type="submit" data-test="set-save">"Save quota"</button>
                        </div>
                        <p class="muted small">"Replaces the permanent quota; zero everywhere removes it."</p>
                    </ActionForm>
                    <ActionForm action=actions.grant attr:class="qa-form" attr:data-test="grant-form">
                        <h3 class="small">"Temporary extra"</h3>
                        <input type="hidden" name="tenant" value=grant_tenant/>
                        <input type="hidden" name="pool" value=grant_pool/>
                        <div class="form-row">
                            <label class="field"><span>"GPUs"</span><input type="number" name="gpus" min="0" step="any" required value="0" data-test="grant-gpus"/></label>
                            <label class="field"><span>"Memory (GiB)"</span><input type="number" name="memory_gib" min="0" step="any" required value="0" data-test="grant-memory"/></label>
                            <label class="field"><span>"Slices"</span><input type="number" name="max_slices" min="0" step="1" required value="0" data-test="grant-slices"/></label>
                            <label class="field"><span>"Until"</span><input type="date" name="ends_on" required value=in_a_week data-test="grant-ends-at"/></label>
                        </div>
                        <div class="form-row">
                            <label class="field grow"><span>"Reason"</span><input type="text" name="reason" maxlength="2000" placeholder="Conference deadline burst" data-test="grant-reason"/></label>
                            <button class="button primary" type="submit" data-test="grant-save">"Grant"</button>
                        </div>
                    </ActionForm>
                </div>
            </details>
        </div>
    }
}
