//! Pools (platform admins): what each pool is and holds, a form to create or
//! change one, what the change would do before it is made, and planned
//! changes waiting for GPUs to drain (cancel them).

use crate::api::{list_pools_admin, CancelPoolChange, PoolReview, ReviewPool, SavePool};
use crate::components::error_panel::{ErrorPanel, FormError};
use crate::format::{self, plural};
use leptos::prelude::*;
use leptos_meta::Title;
use tessera_core::pool::{PoolForm, PoolPlacement, MAX_LEASE_HOURS};
use tessera_core::sharing::SharingMode;
use tessera_protocol::views::{PoolAdminView, PoolsAdminView};

/// The page's actions.
#[derive(Clone, Copy)]
struct Actions {
    review: ServerAction<ReviewPool>,
    /// The form whose change is under review (a pool's name; `""`: the new
    /// pool's form): its review shows right under it.
    editing: RwSignal<String>,
    save: ServerAction<SavePool>,
    cancel: ServerAction<CancelPoolChange>,
}

/// `/admin/pools` (platform admins).
#[component]
pub fn PoolsAdminPage() -> impl IntoView {
    view! {
        <Title text="Pools"/>
        <LivePools/>
    }
}

/// The pools with their forms: a lazy island (its own WASM file).
#[island(lazy)]
fn LivePools() -> impl IntoView {
    crate::components::hydrated::island_hydrated();
    let actions = Actions {
        review: ServerAction::new(),
        editing: RwSignal::new(String::new()),
        save: ServerAction::new(),
        cancel: ServerAction::new(),
    };
    let pools = Resource::new(
        move || (actions.save.version().get(), actions.cancel.version().get()),
        |_| list_pools_admin(),
    );
    // A saved change has been reviewed: the review closes.
    Effect::new(move |_| {
        if matches!(actions.save.value().get(), Some(Ok(()))) {
            actions.review.value().set(None);
        }
    });
    view! {
        <section class="page-head">
            <p class="eyebrow">"Platform"</p>
            <h1>"Pools"</h1>
            <p class="muted">"A GPU joins the first pool, in this order, that takes its model and host. Changing a pool's sharing mode or which GPUs it takes is planned: GPUs with slices on them drain first (their owners are told, with a deadline), and the change takes effect once they are empty. Every change is in the audit log."</p>
        </section>
        {move || actions.save.value().get().map(|r| match r {
            Ok(()) => view! { <p class="callout success" role="status" data-test="pool-saved">"Saved."</p> }.into_any(),
            Err(err) => view! { <FormError err/> }.into_any(),
        })}
        {move || actions.cancel.value().get().and_then(Result::err).map(|err| view! { <FormError err/> })}
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match pools.await {
                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                    Ok(page) => view! { <Pools page actions/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Pools(page: PoolsAdminView, actions: Actions) -> impl IntoView {
    let models = page.models.clone();
    let hosts = page.hosts.clone();
    let blank = PoolForm::blank();
    view! {
        <datalist id="pool-models">{models.iter().map(|m| view! { <option value=m.clone()/> }).collect_view()}</datalist>
        <datalist id="pool-hosts">{hosts.iter().map(|h| view! { <option value=h.clone()/> }).collect_view()}</datalist>
        <section class="card">
            <details data-test="new-pool">
                <summary class="button primary">"New pool"</summary>
                <PoolEditor form=blank revision=None actions models=page.models.clone()/>
            </details>
        </section>
        {page.pools.into_iter().map(|p| view! { <PoolCard p actions models=models.clone()/> }).collect_view()}
    }
}

#[component]
fn PoolCard(p: PoolAdminView, actions: Actions, models: Vec<String>) -> impl IntoView {
    let s = p.spec.clone();
    let list = |v: &[String], empty: &str| {
        if v.is_empty() {
            empty.to_owned()
        } else {
            v.join(", ")
        }
    };
    let name = s.name.to_string();
    view! {
        <section class="card pool-card" data-test="pool" data-pool=s.name.to_string()>
            <header class="pool-head">
                <h2 class="mono">{s.name.to_string()}</h2>
                <span class="badge accent" data-test="pool-sharing">{s.sharing.to_string()}</span>
                <span class="badge">{s.isolation.to_string()}</span>
                <span class="muted small">{format!("{} GPU{} · {} live slice{}", p.gpus, plural(p.gpus), p.live_slices, plural(p.live_slices))}</span>
            </header>
            {(!s.description.is_empty()).then(|| view! { <p class="muted">{s.description.clone()}</p> })}
            <dl class="pool-facts">
                <dt>"Models"</dt><dd data-test="pool-models">{s.models.join(", ")}</dd>
                <dt>"Hosts"</dt><dd data-test="pool-hosts">{list(&s.hosts, "every host")}</dd>
                {(s.sharing == SharingMode::TimeSlicing).then(|| view! { <dt>"Replicas per GPU"</dt><dd>{s.time_slice_replicas}</dd> })}
                {(s.sharing == SharingMode::Mig).then(|| view! { <dt>"MIG profiles"</dt><dd>{list(&s.allowed_mig_profiles, "all the model has")}</dd> })}
                <dt>"Longest lease"</dt><dd>{format!("{} h", s.max_lease_hours)}</dd>
                <dt>"Placement"</dt><dd data-test="pool-placement" title=s.placement.summary()>{s.placement.as_str()}</dd>
                <dt>"Queue"</dt><dd>{format!("{} (reserve after {} min)", s.queue.name(), s.reserve_after_minutes)}</dd>
                <dt>"On release"</dt><dd>{s.on_release.as_str()}</dd>
                {(s.sharing == SharingMode::Mps).then(|| view! { <dt title="MPS clients that run without their slice's variables or ask for more than their grant">"MPS strays"</dt><dd data-test="pool-mps-strays">{match s.mps_strays { tessera_core::pool::MpsStrayPolicy::Report => "reported", tessera_core::pool::MpsStrayPolicy::Stop => "reported and stopped" }}</dd> })}
                <dt>"Preemption notice"</dt><dd data-test="pool-preemption">{format!("{} min", s.preemption_grace_minutes)}</dd>
                <dt>"Idle reclaim"</dt><dd data-test="pool-idle">{s.idle_reclaim.map_or_else(|| "off".to_owned(), |p| format!("below {} % for {} min, then {} min to keep ({} keeps)", p.below_pct, p.idle_minutes, p.notice_minutes, p.max_keeps))}</dd>
                <dt>"Changed"</dt><dd class="muted">{format!("{} by {}", format::when(p.updated_at), p.updated_by.clone().unwrap_or_else(|| "the configuration".into()))}</dd>
            </dl>
            {p.planned.clone().map(|c| {
                let name = name.clone();
                view! {
                    <div class="callout warn" data-test="planned-change">
                        <p><strong>"Planned change"</strong>{format!(" by {} — {}", c.by, c.reason)}</p>
                        <ul class="small">
                            {c.changes.iter().map(|f| view! { <li><span class="mono">{f.field.clone()}</span>": "{f.before.clone()}" → "{f.after.clone()}</li> }).collect_view()}
                        </ul>
                        <p class="small">{format!("Waiting for {} slice{} on {} GPU{} to end; they end by {} at the latest.", c.waiting_slices, plural(c.waiting_slices), c.moves.len(), plural(u32::try_from(c.moves.len()).unwrap_or(0)), format::when(c.drain_deadline))}</p>
                        <ActionForm action=actions.cancel>
                            <input type="hidden" name="name" value=name/>
                            <button class="button ghost danger" type="submit" data-test="cancel-change">"Cancel the planned change"</button>
                        </ActionForm>
                    </div>
                }
            })}
            {p.planned.is_none().then(|| view! {
                <details data-test="edit-pool">
                    <summary class="button ghost">"Change…"</summary>
                    <PoolEditor form=PoolForm::of(&s) revision=Some(p.revision) actions models=models.clone()/>
                </details>
            })}
        </section>
    }
}

/// The form: a new pool (`revision` = `None`) or a change to one.
#[component]
fn PoolEditor(
    form: PoolForm,
    revision: Option<i64>,
    actions: Actions,
    models: Vec<String>,
) -> impl IntoView {
    let f = form;
    let new = revision.is_none();
    let key = if new { String::new() } else { f.name.clone() };
    let mine = key.clone();
    let option = |value: &'static str, current: &str| {
        view! { <option value=value selected=current == value>{value}</option> }
    };
    view! {
        <ActionForm action=actions.review attr:class="pool-form" attr:data-test="pool-form" on:submit=move |_| actions.editing.set(key.clone())>
            {revision.map(|r| view! { <input type="hidden" name="revision" value=r/> })}
            <div class="form-row">
                <label class="field">
                    <span>"Name"</span>
                    <input type="text" name="name" required maxlength="64" pattern="[a-z0-9-]+" value=f.name.clone() readonly=!new data-test="pool-name" title="Lower-case letters, digits and dashes; a pool's name never changes"/>
                </label>
                <label class="field">
                    <span>"Sharing"</span>
                    <select name="sharing" data-test="pool-sharing-input">
                        {option("exclusive", &f.sharing)}{option("mig", &f.sharing)}{option("mps", &f.sharing)}{option("time-slicing", &f.sharing)}
                    </select>
                </label>
                <label class="field">
                    <span>"Isolation"</span>
                    <select name="isolation">
                        {option("production", &f.isolation)}{option("batch", &f.isolation)}{option("development", &f.isolation)}
                    </select>
                </label>
            </div>
            <label class="field">
                <span>"Description (shown to tenants)"</span>
                <input type="text" name="description" maxlength="500" value=f.description.clone()/>
            </label>
            <div class="form-row">
                <label class="field grow">
                    <span>"GPU models (comma-separated)"</span>
                    <input type="text" name="models" required list="pool-models" value=f.models.clone() data-test="pool-models-input" placeholder=models.first().cloned().unwrap_or_default()/>
                </label>
                <label class="field grow">
                    <span>"Hosts (names or prefix*; empty: every host)"</span>
                    <input type="text" name="hosts" list="pool-hosts" value=f.hosts.clone() data-test="pool-hosts-input"/>
                </label>
            </div>
            <div class="form-row">
                <label class="field"><span>"Time-slice replicas"</span><input type="number" name="time_slice_replicas" min="1" max="64" required value=f.time_slice_replicas.to_string()/></label>
                <label class="field grow"><span>"MIG profiles (empty: all)"</span><input type="text" name="allowed_mig_profiles" value=f.allowed_mig_profiles.clone()/></label>
                <label class="field"><span>"Longest lease (h)"</span><input type="number" name="max_lease_hours" min="1" max=MAX_LEASE_HOURS.to_string() required value=f.max_lease_hours.to_string()/></label>
            </div>
            <div class="form-row">
                <label class="field" title="Where a request goes among the places it fits">
                    <span>"Placement"</span>
                    <select name="placement" data-test="pool-placement-select">
                        {PoolPlacement::ALL.map(|p| view! { <option value=p.as_str() selected={f.placement == p.as_str()}>{format!("{} — {}", p.as_str(), p.summary())}</option> }).collect_view()}
                    </select>
                </label>
                <label class="field">
                    <span>"Queue"</span>
                    <select name="queue">{option("backfill", &f.queue)}{option("fifo", &f.queue)}</select>
                </label>
                <label class="field"><span>"Reserve after (min)"</span><input type="number" name="reserve_after_minutes" min="0" max="10080" required value=f.reserve_after_minutes.to_string()/></label>
                <label class="field"><span>"Preemption notice (min)"</span><input type="number" name="preemption_grace_minutes" min="0" max="1440" value=f.preemption_grace_minutes.to_string() data-test="pool-preemption-grace"/></label>
                <label class="field">
                    <span>"On release"</span>
                    <select name="on_release">{option("stop", &f.on_release)}{option("refuse", &f.on_release)}</select>
                </label>
                <label class="field" title="MPS pools: what the agent does with a client process that runs without its slice's variables or asks for more than its grant">
                    <span>"MPS clients over their grant"</span>
                    <select name="mps_strays" data-test="pool-mps-strays-select">{option("report", &f.mps_strays)}{option("stop", &f.mps_strays)}</select>
                </label>
            </div>
            <div class="form-row">
                <label class="field grow"><span>"Fair-share weights (tenant=weight)"</span><input type="text" name="fair_share_weights" value=f.fair_share_weights.clone()/></label>
                <label class="field"><span>"Use half-life (h)"</span><input type="number" name="usage_half_life_hours" min="0" required value=f.usage_half_life_hours.to_string()/></label>
            </div>
            <div class="form-row">
                <label class="field"><span>"Idle reclaim after (min, 0: off)"</span><input type="number" name="idle_minutes" min="0" max="43200" value=f.idle_minutes.to_string() data-test="pool-idle-minutes"/></label>
                <label class="field"><span>"Idle below (%)"</span><input type="number" name="idle_below_pct" min="1" max="100" value=f.idle_below_pct.to_string()/></label>
                <label class="field"><span>"Notice (min)"</span><input type="number" name="idle_notice_minutes" min="1" max="10080" value=f.idle_notice_minutes.to_string()/></label>
                <label class="field"><span>"Keeps allowed"</span><input type="number" name="idle_max_keeps" min="0" max="100" value=f.idle_max_keeps.to_string()/></label>
            </div>
            {(!new).then(|| view! {
                <div class="form-row">
                    <label class="field grow"><span>"Why (told to owners of slices that must end)"</span><input type="text" name="reason" maxlength="500" data-test="pool-reason" placeholder="Switching to MPS for inference"/></label>
                    <label class="field"><span>"Drain deadline (min)"</span><input type="number" name="drain_minutes" min="0" max="10080" value="60" data-test="pool-drain-minutes"/></label>
                </div>
            })}
            {new.then(|| view! { <input type="hidden" name="drain_minutes" value="60"/> })}
            <button class="button primary" type="submit" data-test="review-pool">"Review change"</button>
        </ActionForm>
        {move || (actions.editing.get() == mine).then(|| view! { <Review actions/> })}
    }
}

/// What the reviewed change would do, with the button that makes it.
#[component]
fn Review(actions: Actions) -> impl IntoView {
    move || {
        actions.review.value().get().map(|r| match r {
            Err(err) => view! { <FormError err/> }.into_any(),
            Ok(review) => view! { <ReviewPanel review actions/> }.into_any(),
        })
    }
}

#[component]
fn ReviewPanel(review: PoolReview, actions: Actions) -> impl IntoView {
    let json = serde_json::to_string(&review).unwrap_or_default();
    let p = review.preview.clone();
    let verb = if review.existing { "Change" } else { "Create" };
    let name = review.edit.spec.name.clone();
    view! {
        <section class="card review" data-test="pool-review" id="review">
            <h2 class="section-title">{format!("{verb} pool {name}?")}</h2>
            {(review.existing && p.changes.is_empty()).then(|| view! { <p class="muted">"Nothing changes."</p> })}
            {(!p.changes.is_empty()).then(|| view! {
                <table class="small" data-test="review-changes">
                    <thead><tr><th>"Field"</th><th>"Now"</th><th>"After"</th></tr></thead>
                    <tbody>{p.changes.iter().map(|c| view! { <tr><td class="mono">{c.field.clone()}</td><td>{c.before.clone()}</td><td>{c.after.clone()}</td></tr> }).collect_view()}</tbody>
                </table>
            })}
            {(!p.moves.is_empty()).then(|| view! {
                <h3 class="small">"GPUs that change pool or sharing mode"</h3>
                <ul data-test="review-moves">{p.moves.iter().map(|m| view! {
                    <li>{m.to_string()}{(m.live_slices > 0).then(|| view! { <span class="badge warn">{format!("{} slice{} to drain", m.live_slices, plural(m.live_slices))}</span> })}</li>
                }).collect_view()}</ul>
            })}
            {if p.immediate {
                view! { <p class="callout success" data-test="review-immediate">"No slice is in the way: the change takes effect at once."</p> }.into_any()
            } else {
                view! {
                    <div class="callout warn" data-test="review-drain">
                        <p>{format!("{} slice{} must end first. Their GPUs are drained now: owners are told, and whatever still runs after {} minutes is released. The change takes effect once the GPUs are empty.", p.affected.len(), plural(u32::try_from(p.affected.len()).unwrap_or(0)), review.edit.drain_minutes)}</p>
                        <ul class="small">{p.affected.iter().map(|a| view! { <li><a href=format!("/t/{}/a/{}", a.tenant, a.id)>{format!("#{} {} ({}) on {}", a.id, a.shape, a.tenant, a.host)}</a></li> }).collect_view()}</ul>
                    </div>
                }.into_any()
            }}
            <ActionForm action=actions.save>
                <input type="hidden" name="review" value=json/>
                <button class="button primary" type="submit" data-test="apply-pool">{if p.immediate { format!("{verb} pool") } else { "Plan the change and drain".to_owned() }}</button>
            </ActionForm>
        </section>
    }
}
