//! A tenant's quota: what is in force per pool (permanent and temporary),
//! what is used and left, the tenant's quota requests, and a form to ask for
//! more.

use crate::api::{get_tenant_quota, CreateQuotaRequest, SubmitQuotaRequest, WithdrawQuotaRequest};
use crate::components::error_panel::{ErrorPanel, FormError};
use crate::components::layout::ViewerResource;
use crate::components::quota::QuotaBars;
use crate::components::quota_request::QuotaRequestRow;
use crate::format;
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use tessera_protocol::quotas::TenantQuotaPage as QuotaPage;
use tessera_protocol::views::QuotaView;

/// `/t/:slug/quota`
#[component]
pub fn TenantQuotaPage() -> impl IntoView {
    let slug = StoredValue::new(super::path_slug());
    let query = use_query_map();
    let viewer = expect_context::<ViewerResource>();
    view! {
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                let slug = slug.get_value();
                let member = matches!(viewer.await, Ok(Some(v)) if v.tenants.iter().any(|m| m.slug == slug));
                let prefill = query.with(Prefill::from_query);
                view! { <LiveTenantQuota slug member prefill/> }
            })}
        </Suspense>
    }
}

/// What the query string fills the request form with
/// (`?pool=&gpus=&memory_gib=&max_slices=`; empty values count as absent).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Prefill {
    pool: Option<String>,
    gpus: Option<String>,
    memory_gib: Option<String>,
    max_slices: Option<String>,
}

impl Prefill {
    fn from_query(query: &leptos_router::params::ParamsMap) -> Self {
        let get = |key: &str| query.get(key).filter(|v| !v.is_empty());
        Self {
            pool: get("pool"),
            gpus: get("gpus"),
            memory_gib: get("memory_gib"),
            max_slices: get("max_slices"),
        }
    }
}

/// The quota page with its request forms: a lazy island (its own
/// WASM file).
#[island(lazy)]
fn LiveTenantQuota(
    /// The tenant's slug.
    slug: String,
    /// The viewer is a member (platform admins may look without being one).
    member: bool,
    /// The request form's initial values.
    prefill: Prefill,
) -> impl IntoView {
    crate::components::hydrated::island_hydrated();
    let slug = StoredValue::new(slug);
    let slug = move || slug.get_value();
    let prefill = StoredValue::new(prefill);
    let create = ServerAction::<CreateQuotaRequest>::new();
    let submit = ServerAction::<SubmitQuotaRequest>::new();
    let withdraw = ServerAction::<WithdrawQuotaRequest>::new();
    let page = Resource::new(
        move || {
            (
                slug(),
                create.version().get(),
                submit.version().get(),
                withdraw.version().get(),
            )
        },
        |(slug, ..)| get_tenant_quota(slug),
    );
    view! {
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Ok(p) => view! { <TenantQuota p=p.value now=p.now member prefill=prefill.get_value() create submit withdraw/> }.into_any(),
                    Err(err) => view! { <Title text="Error"/><ErrorPanel err/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn TenantQuota(
    p: QuotaPage,
    now: DateTime<Utc>,
    /// The viewer is a member (platform admins may look without being one).
    member: bool,
    prefill: Prefill,
    create: ServerAction<CreateQuotaRequest>,
    submit: ServerAction<SubmitQuotaRequest>,
    withdraw: ServerAction<WithdrawQuotaRequest>,
) -> impl IntoView {
    let slug = p.slug.clone();
    let open = p.requests.iter().filter(|r| !r.state.is_terminal()).count();
    view! {
        <Title text=format!("Quota · {}", p.name)/>
        <section class="page-head">
            <p class="eyebrow"><a href=format!("/t/{slug}")>{p.name.clone()}</a></p>
            <h1>"Quota & requests"</h1>
            <p class="muted">"Your quota is what your team may hold at once in each pool: the permanent part plus any temporary grants. Slices within it are placed at once; for more, ask the platform team below."</p>
        </section>
        <section>
            <h2 class="section-title">"Quota by pool"</h2>
            {if p.quotas.is_empty() {
                view! {
                    <div class="card empty" data-test="quota-empty">
                        <p>"No quota in any pool yet."</p>
                        <p class="muted">"Ask for one with the form below; a platform admin reviews it."</p>
                    </div>
                }.into_any()
            } else {
                view! {
                    <div class="grid quota-grid">
                        {p.quotas.iter().map(|q| view! { <PoolQuota q=q.clone() now slug=slug.clone() can_ask=member/> }).collect_view()}
                    </div>
                }.into_any()
            }}
        </section>
        {if member {
            view! { <RequestForm slug=slug.clone() pools=p.pools.clone() admin=p.can_submit prefill=prefill.clone() create/> }.into_any()
        } else {
            view! { <p class="callout warn" data-test="not-member">"You are not a member of this tenant, so you cannot ask for its quota. As a platform admin, change it on "<a href="/admin/quotas">"the Quotas page"</a>"."</p> }.into_any()
        }}
        <section>
            <div class="section-row">
                <h2 class="section-title">"Quota requests"</h2>
                <span class="muted small">{format!("{open} open · {} in all", p.requests.len())}</span>
            </div>
            {move || submit.value().get().and_then(Result::err).map(|err| view! { <FormError err/> })}
            {move || withdraw.value().get().and_then(Result::err).map(|err| view! { <FormError err/> })}
            {if p.requests.is_empty() {
                view! {
                    <div class="card empty" data-test="quota-requests-empty">
                        <p>"No quota requests yet."</p>
                        <p class="muted">"Requests your team files appear here with their state, who decided them and why."</p>
                    </div>
                }.into_any()
            } else {
                view! {
                    <ul class="card qr-list" data-test="quota-requests">
                        {p.requests.into_iter().map(|r| view! { <QuotaRequestRow r now submit withdraw/> }).collect_view()}
                    </ul>
                }.into_any()
            }}
        </section>
    }
}

/// One pool: quota in force, its permanent and temporary parts, use and headroom.
#[component]
fn PoolQuota(q: QuotaView, now: DateTime<Utc>, slug: String, can_ask: bool) -> impl IntoView {
    let ask = format!("/t/{slug}/quota?pool={}#new-request", q.pool);
    view! {
        <div class="card pool-quota" data-test="pool-quota" data-pool=q.pool.clone()>
            <div class="section-row">
                <span class="tile-title mono">{q.pool.clone()}</span>
                {(!q.grants.is_empty()).then(|| view! { <span class="badge warn">"temporary boost"</span> })}
            </div>
            <div>
                <span class="muted small">"In force"</span>
                <p class="quota-total num" data-test="quota-in-force">{format::quota(&q.quota)}</p>
            </div>
            <QuotaBars quota=q.quota usage=q.usage headroom_text=true/>
            <dl class="quota-parts">
                <dt>"Permanent"</dt>
                <dd class="num" data-test="quota-base">{format::quota(&q.base)}</dd>
                {q.grants.into_iter().map(|g| view! {
                    <dt>"Temporary"</dt>
                    <dd data-test="quota-grant">
                        <span class="num">{format!("+{}", format::quota(&g.amount))}</span>
                        <span class="muted small" data-test="grant-until">{format!("until {} ({})", format::when(g.ends_at), format::until(g.ends_at, now))}</span>
                        {(!g.reason.is_empty()).then(|| view! { <span class="muted small">{g.reason.clone()}</span> })}
                    </dd>
                }).collect_view()}
            </dl>
            {can_ask.then(|| view! { <a class="button ghost" href=ask data-test="ask-more">"Ask for more"</a> })}
        </div>
    }
}

/// "Request more quota", pre-filled from `?pool=&gpus=&memory_gib=&max_slices=`.
#[component]
fn RequestForm(
    slug: String,
    pools: Vec<String>,
    /// Tenant admins submit; members propose to them.
    admin: bool,
    prefill: Prefill,
    create: ServerAction<CreateQuotaRequest>,
) -> impl IntoView {
    let value =
        |given: &Option<String>, default: &str| given.clone().unwrap_or_else(|| default.to_owned());
    let pool = value(&prefill.pool, "");
    let done_slug = slug.clone();
    let (label, intro) = if admin {
        (
            "Submit request",
            "As a tenant admin, your request goes straight to the platform admins.",
        )
    } else {
        (
            "Propose to tenant admins",
            "As a member, you propose; a tenant admin of your team submits it to the platform admins.",
        )
    };
    // A request filed from this form clears it, so it is not filed twice by
    // accident (only one filed after the form was drawn: the page redraws
    // it after every change).
    let form = NodeRef::<leptos::html::Form>::new();
    let drawn_at = create.version().get_untracked();
    Effect::new(move |_| {
        let filed = matches!(create.value().get(), Some(Ok(_)));
        if filed && create.version().get_untracked() > drawn_at {
            if let Some(form) = form.get_untracked() {
                form.reset();
            }
        }
    });
    view! {
        <section class="card" id="new-request">
            <h2 class="section-title">"Request more quota"</h2>
            <p class="muted small">{intro}" Ask for the increase, not the new total."</p>
            <ActionForm action=create node_ref=form attr:class="qr-form" attr:data-test="quota-request-form">
                <input type="hidden" name="slug" value=slug.clone()/>
                <input type="hidden" name="slice" value=""/>
                <div class="form-row">
                    <label class="field">
                        <span>"Pool"</span>
                        <select name="pool" required data-test="qr-pool">
                            {pools.into_iter().map(|name| {
                                let (n, value) = (name.clone(), name.clone());
                                view! { <option value=value selected=pool == n>{name}</option> }
                            }).collect_view()}
                        </select>
                    </label>
                    <label class="field">
                        <span>"GPUs"</span>
                        <input type="number" name="gpus" min="0" step="any" required value=value(&prefill.gpus, "0") data-test="qr-gpus"/>
                    </label>
                    <label class="field">
                        <span>"Memory (GiB)"</span>
                        <input type="number" name="memory_gib" min="0" step="any" required value=value(&prefill.memory_gib, "0") data-test="qr-memory"/>
                    </label>
                    <label class="field">
                        <span>"Slices"</span>
                        <input type="number" name="max_slices" min="0" step="1" required value=value(&prefill.max_slices, "0") data-test="qr-slices"/>
                    </label>
                    <label class="field">
                        <span>"Until (optional)"</span>
                        <input type="date" name="ends_on" data-test="qr-ends-at"/>
                    </label>
                </div>
                <p class="muted small">"Leave “Until” empty for a permanent increase; with a date it is a temporary boost that ends at the end of that day (UTC)."</p>
                <label class="field">
                    <span>"Justification"</span>
                    <textarea name="justification" rows="3" required maxlength="2000" data-test="qr-justification"
                        placeholder="What it is for, for how long, and what happens without it"></textarea>
                </label>
                <div class="form-row end">
                    <button class="button primary" type="submit" data-test="qr-submit" disabled=move || create.pending().get()>{label}</button>
                </div>
            </ActionForm>
            {move || create.value().get().map(|result| match result {
                Ok(r) => view! {
                    <p class="callout success" data-test="qr-done">
                        {format!("Request #{} filed ({}). ", r.id, r.state.name())}
                        <a href=format!("/t/{done_slug}/quota#request-{}", r.id)>"See it below"</a>
                    </p>
                }.into_any(),
                Err(err) => view! { <FormError err/> }.into_any(),
            })}
        </section>
    }
}
