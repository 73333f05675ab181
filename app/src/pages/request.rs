//! "Request a slice": pick a pool and a shape the pool allows; the form
//! checks it with `tessera-core` as you type and shows the quota before and
//! after. A slice the quota refuses comes with an offer to ask for exactly
//! the missing quota, the slice attached.

use crate::api::{get_request_options, CreateQuotaRequest, RequestSlice};
use crate::components::error_panel::ErrorPanel;
use crate::components::go::navigator;
use crate::components::layout::ViewerResource;
use crate::components::quota_offer::{OfferDone, QuotaOffer};
use leptos::prelude::*;
use leptos_meta::Title;
use tessera_core::guide::{self, Precision, Sketch, Suggestion, WorkKind};
use tessera_core::quota::{self, Demand, Quota, Usage};
use tessera_core::schedule::QosClass;
use tessera_core::sharing::{SharingMode, SliceShape};
use tessera_core::units::MemMiB;
use tessera_protocol::views::{NewAllocation, PoolChoice, RequestOptions, TenantRole};

/// `/t/:slug/request`
#[component]
pub fn RequestPage() -> impl IntoView {
    let slug = StoredValue::new(super::path_slug());
    let viewer = expect_context::<ViewerResource>();
    let options = Resource::new(move || slug.get_value(), get_request_options);
    view! {
        <Title text="Request a slice"/>
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                let here = slug.get_value();
                let admin = matches!(viewer.await, Ok(Some(v)) if v.tenants.iter().any(|m| m.slug == here && m.role == TenantRole::TenantAdmin));
                match options.await {
                    Ok(o) => view! { <RequestForm o admin/> }.into_any(),
                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// MIG profiles the pool offers (union over its models, catalogue order).
fn mig_profiles(p: &PoolChoice) -> Vec<(String, String)> {
    p.offer
        .mig_profiles()
        .into_iter()
        .map(|o| {
            (
                o.profile.name.to_owned(),
                format!(
                    "{} — {} of {} compute slices, {}",
                    o.profile.name,
                    o.profile.compute_slices,
                    o.of_compute_slices,
                    crate::format::mem(MemMiB(o.profile.memory_mib))
                ),
            )
        })
        .collect()
}

fn mode_label(mode: SharingMode) -> &'static str {
    match mode {
        SharingMode::Mig => "MIG instances",
        SharingMode::Mps => "MPS shares",
        SharingMode::TimeSlicing => "Time-sliced replicas",
        SharingMode::Exclusive => "Whole GPUs",
    }
}

/// The form: a lazy island, in its own WASM file (it carries
/// `tessera-core`'s checks, which only this page needs).
#[island(lazy)]
fn RequestForm(
    o: RequestOptions,
    /// The viewer is a tenant admin here (requests quota rather than proposes).
    admin: bool,
) -> impl IntoView {
    crate::components::hydrated::island_hydrated();
    let slug = o.tenant.clone();
    let pools = RwSignal::new(o.pools.clone());
    let first = o
        .pools
        .iter()
        .find(|p| p.quota.is_some())
        .or(o.pools.first())
        .map(|p| p.offer.pool.clone())
        .unwrap_or_default();
    let (pool, set_pool) = signal(first);
    let (profile, set_profile) = signal(String::new());
    let (mps_percent, set_mps_percent) = signal(25u8);
    let (mps_gib, set_mps_gib) = signal(8u64);
    let (count, set_count) = signal(1u32);
    let (nvlink, set_nvlink) = signal(false);
    let (hours, set_hours) = signal(8u32);
    let (purpose, set_purpose) = signal(String::new());
    // Empty: the pool's default class.
    let (priority, set_priority) = signal(String::new());
    let (qos, set_qos) = signal(QosClass::Guaranteed);

    let chosen = move || pools.with(|ps| ps.iter().find(|p| p.offer.pool == pool.get()).cloned());
    let profiles = move || chosen().map(|p| mig_profiles(&p)).unwrap_or_default();
    let shape = move || -> Option<SliceShape> {
        let p = chosen()?;
        Some(match p.offer.policy.mode {
            SharingMode::Mig => {
                let name = profile.get();
                let name = if name.is_empty() {
                    profiles().first().map(|(n, _)| n.clone())?
                } else {
                    name
                };
                SliceShape::Mig { profile: name }
            }
            SharingMode::Mps => SliceShape::Mps {
                compute_percent: mps_percent.get(),
                memory_mib: MemMiB(mps_gib.get().saturating_mul(1024)),
            },
            SharingMode::TimeSlicing => SliceShape::TimeSlice {},
            SharingMode::Exclusive => SliceShape::Whole {
                count: count.get(),
                nvlink_local: nvlink.get(),
            },
        })
    };
    // The same checks the server makes: shape, lease, and the quota the
    // QoS class draws on.
    let check = move || -> Result<Cost, String> {
        let p = chosen().ok_or("choose a pool")?;
        let s = shape().ok_or("choose a shape")?;
        let demand = p.offer.admit(&s, hours.get()).map_err(|e| e.to_string())?;
        let q = p.quota.ok_or_else(|| {
            format!(
                "your tenant has no quota in pool '{}'; ask a platform admin for one",
                p.offer.pool
            )
        })?;
        let class = qos.get();
        class
            .check_quota((&q, &p.usage), &p.borrowable, &demand)
            .map_err(|e| e.to_string())?;
        Ok(match class {
            QosClass::Guaranteed => Cost::Quota(demand, q, p.usage),
            QosClass::Burstable => Cost::Borrowed(demand, p.borrowable, p.preemption_grace_minutes),
            QosClass::BestEffort => Cost::Idle(p.preemption_grace_minutes),
        })
    };
    // When the quota refuses the slice: what it costs, and the slice itself,
    // for the offer to ask for the missing quota.
    let offer_slug = slug.clone();
    let over_quota = Memo::new(move |_| -> Option<(PoolChoice, Demand, NewAllocation)> {
        let p = chosen()?;
        let s = shape()?;
        let demand = p.offer.admit(&s, hours.get()).ok()?;
        // Only a guaranteed slice needs more quota of the tenant's own.
        (qos.get() == QosClass::Guaranteed).then_some(())?;
        quota::check(&p.quota.unwrap_or_default(), &p.usage, &demand).err()?;
        let slice = NewAllocation {
            tenant: offer_slug.parse().ok(),
            pool: p.offer.pool.parse().ok()?,
            shape: s,
            lease_hours: hours.get(),
            purpose: purpose.get(),
            priority_class: Some(priority.get()).filter(|c| !c.is_empty()),
            qos: QosClass::Guaranteed,
            replaces: None,
        };
        Some((p, demand, slice))
    });
    let offer = ServerAction::<CreateQuotaRequest>::new();
    let justification = RwSignal::new(String::new());
    let ends_on = RwSignal::new(String::new());
    let submit = ServerAction::<RequestSlice>::new();
    let navigate = navigator();
    let nav_slug = slug.clone();
    let fresh_slug = slug.clone();
    Effect::new(move |_| match submit.value().get() {
        Some(Ok(a)) => navigate(&format!("/t/{}/a/{}", nav_slug, a.id)),
        // Someone else took the quota first: reload the quota and use, so
        // the form sees the refusal too and offers the increase.
        Some(Err(e)) if e.code == crate::error::ErrorCode::QuotaExceeded => {
            let slug = fresh_slug.clone();
            leptos::task::spawn_local(async move {
                if let Ok(o) = get_request_options(slug).await {
                    pools.set(o.pools);
                }
            });
        }
        _ => {}
    });
    let shape_json = move || {
        shape()
            .and_then(|s| serde_json::to_string(&s).ok())
            .unwrap_or_default()
    };

    // The workload profile helper: a suggestion from what the work is,
    // worked out here by `tessera-core` as the fields change.
    let (work, set_work) = signal(WorkKind::Notebook);
    let (params_b, set_params_b) = signal("7".to_owned());
    let (precision, set_precision) = signal(Precision::Bf16);
    let suggestion = move || -> Result<Suggestion, Vec<String>> {
        let billions: f64 = params_b
            .get()
            .trim()
            .parse()
            .ok()
            .filter(|b: &f64| b.is_finite() && *b > 0.0 && *b <= 10_000.0)
            .ok_or_else(|| {
                vec!["say how many billion parameters the model has, e.g. 7 or 0.5".to_owned()]
            })?;
        let sketch = Sketch {
            kind: work.get(),
            params_millions: (billions * 1000.0).round() as u64,
            precision: precision.get(),
        };
        let offers: Vec<_> = pools.with(|ps| ps.iter().map(|p| p.offer.clone()).collect());
        guide::suggest(&sketch, &offers)
    };
    let apply = move |_| {
        let Ok(s) = suggestion() else { return };
        set_pool.set(s.pool.clone());
        set_priority.set(String::new());
        match s.shape {
            SliceShape::Mig { profile } => set_profile.set(profile),
            SliceShape::Mps {
                compute_percent,
                memory_mib,
            } => {
                set_mps_percent.set(compute_percent);
                set_mps_gib.set(memory_mib.0.div_ceil(1024));
            }
            SliceShape::TimeSlice {} => {}
            SliceShape::Whole {
                count,
                nvlink_local,
            } => {
                set_count.set(count);
                set_nvlink.set(nvlink_local);
            }
        }
    };
    view! {
        <section class="page-head">
            <p class="eyebrow"><a href=format!("/t/{slug}")>{o.tenant_name.clone()}</a></p>
            <h1>"Request a GPU slice"</h1>
            <p class="muted">"Within your quota it is placed at once and ready in seconds; without free capacity it waits in the queue and starts automatically."</p>
        </section>
        <ActionForm action=submit attr:class="request-form" attr:data-test="request-form">
            <input type="hidden" name="slug" value=slug.clone()/>
            <input type="hidden" name="pool" prop:value=move || pool.get()/>
            <input type="hidden" name="shape" prop:value=shape_json/>
            <details class="card" data-test="workload-helper">
                <summary>"Not sure what to ask for? Describe the work"</summary>
                <div class="form-row">
                    <label class="field">
                        <span>"Work"</span>
                        <select data-test="work-kind" on:change=move |ev| {
                            if let Some(k) = WorkKind::parse(&event_target_value(&ev)) { set_work.set(k) }
                        }>
                            {WorkKind::ALL.iter().map(|k| view! { <option value=k.as_str() selected=*k == WorkKind::Notebook>{k.label()}</option> }).collect_view()}
                        </select>
                    </label>
                    <label class="field">
                        <span>"Model size (billion parameters)"</span>
                        <input type="text" inputmode="decimal" data-test="work-params" prop:value=move || params_b.get()
                            on:input=move |ev| set_params_b.set(event_target_value(&ev))/>
                    </label>
                    <label class="field">
                        <span>"Precision"</span>
                        <select data-test="work-precision" on:change=move |ev| {
                            if let Some(p) = Precision::parse(&event_target_value(&ev)) { set_precision.set(p) }
                        }>
                            {Precision::ALL.iter().map(|p| view! { <option value=p.as_str() selected=*p == Precision::Bf16>{p.as_str()}</option> }).collect_view()}
                        </select>
                    </label>
                </div>
                {move || match suggestion() {
                    Ok(s) => view! {
                        <p data-test="work-suggestion"><strong>{format!("Suggested: {} in {}", s.label, s.pool)}</strong></p>
                        <ol class="small muted" data-test="work-reasons">
                            {s.reasons.into_iter().map(|r| view! { <li>{r}</li> }).collect_view()}
                        </ol>
                        <button class="button" type="button" data-test="work-apply" on:click=apply>"Use this shape"</button>
                    }.into_any(),
                    Err(reasons) => view! {
                        <ol class="small muted" data-test="work-reasons">
                            {reasons.into_iter().map(|r| view! { <li>{r}</li> }).collect_view()}
                        </ol>
                    }.into_any(),
                }}
                <p class="muted small">"A first guess from rules of thumb; once the slice runs, its page says whether a smaller shape would do."</p>
            </details>
            <section class="card">
                <h2 class="section-title">"1. Pool"</h2>
                <div class="grid pools">
                    {o.pools.iter().map(|p| {
                        let name = p.offer.pool.clone();
                        let n2 = name.clone();
                        let n3 = name.clone();
                        let n4 = name.clone();
                        let quota_text = match p.quota {
                            Some(q) => format!("quota {} · {} · {} slices", q.compute, crate::format::mem(q.memory), q.max_slices),
                            None => "no quota here".to_owned(),
                        };
                        view! {
                            <label class="card tile choice" class:selected=move || pool.get() == n2 data-test="pool-choice" data-pool=name.clone()>
                                <input type="radio" name="pool_choice" value=name.clone() prop:checked=move || pool.get() == n3
                                    on:change=move |_| { set_pool.set(n4.clone()); set_profile.set(String::new()); set_priority.set(String::new()); }/>
                                <span class="tile-title mono">{p.offer.pool.clone()}</span>
                                <span class="muted small">{p.description.clone()}</span>
                                <span class="small"><span class="badge">{mode_label(p.offer.policy.mode)}</span>" "<span class="badge subtle">{p.isolation.as_str()}</span></span>
                                <span class="muted small">{format!("{} online · {} queued · leases up to {} h", crate::format::gpus(p.gpus_online), p.queued, p.offer.max_lease_hours)}</span>
                                <span class="muted small">{quota_text}</span>
                            </label>
                        }
                    }).collect_view()}
                </div>
            </section>
            <section class="card">
                <h2 class="section-title">"2. Shape"</h2>
                {move || chosen().map(|p| match p.offer.policy.mode {
                    SharingMode::Mig => view! {
                        <label class="field">
                            <span>"MIG profile"</span>
                            <select data-test="profile" on:change=move |ev| set_profile.set(event_target_value(&ev))
                                prop:value=move || { let p = profile.get(); if p.is_empty() { profiles().first().map(|(n, _)| n.clone()).unwrap_or_default() } else { p } }>
                                {profiles().into_iter().map(|(n, text)| {
                                    let sel = profile.get_untracked() == n;
                                    view! { <option value=n.clone() selected=sel>{text}</option> }
                                }).collect_view()}
                            </select>
                        </label>
                    }.into_any(),
                    SharingMode::Mps => view! {
                        <div class="form-row">
                            <label class="field">
                                <span>"Compute share (%)"</span>
                                <input type="number" min="1" max="100" data-test="mps-percent" prop:value=move || mps_percent.get().to_string()
                                    on:input=move |ev| set_mps_percent.set(event_target_value(&ev).parse().unwrap_or(0))/>
                            </label>
                            <label class="field">
                                <span>"Memory limit (GiB)"</span>
                                <input type="number" min="1" data-test="mps-memory" prop:value=move || mps_gib.get().to_string()
                                    on:input=move |ev| set_mps_gib.set(event_target_value(&ev).parse().unwrap_or(0))/>
                            </label>
                        </div>
                    }.into_any(),
                    SharingMode::TimeSlicing => view! {
                        <p class="muted">{format!("One of {} time-sliced replicas of a GPU. Replicas share the GPU's memory; nothing isolates it.", p.offer.policy.time_slice_replicas)}</p>
                    }.into_any(),
                    SharingMode::Exclusive => view! {
                        <div class="form-row">
                            <label class="field">
                                <span>"Whole GPUs"</span>
                                <input type="number" min="1" max="16" data-test="whole-count" prop:value=move || count.get().to_string()
                                    on:input=move |ev| set_count.set(event_target_value(&ev).parse().unwrap_or(0))/>
                            </label>
                            <label class="check">
                                <input type="checkbox" data-test="nvlink" prop:checked=move || nvlink.get()
                                    on:change=move |ev| set_nvlink.set(event_target_checked(&ev))/>
                                <span>"All on one NVLink island"</span>
                            </label>
                        </div>
                    }.into_any(),
                })}
            </section>
            <section class="card">
                <h2 class="section-title">"3. Lease, priority and purpose"</h2>
                <fieldset class="qos-choice" data-test="qos">
                    <legend>"Quality of service"</legend>
                    {QosClass::ALL.iter().map(|c| {
                        let c = *c;
                        view! {
                            <label class="check qos-option">
                                <input type="radio" name="qos" value=c.as_str() data-test=format!("qos-{}", c.as_str())
                                    prop:checked=move || qos.get() == c on:change=move |_| set_qos.set(c)/>
                                <span><strong>{c.label()}</strong>" "<span class="muted small">{c.describe()}</span></span>
                            </label>
                        }
                    }).collect_view()}
                </fieldset>
                <div class="form-row">
                    <label class="field">
                        <span>{move || format!("Lease (hours, at most {})", chosen().map_or(0, |p| p.offer.max_lease_hours))}</span>
                        <input type="number" name="lease_hours" min="1" data-test="lease-hours" prop:value=move || hours.get().to_string()
                            on:input=move |ev| set_hours.set(event_target_value(&ev).parse().unwrap_or(0))/>
                    </label>
                    {move || chosen().map(|p| {
                        let classes = p.priority_classes.clone();
                        if classes.len() < 2 {
                            view! { <input type="hidden" name="priority_class" value=""/> }.into_any()
                        } else {
                            view! {
                                <label class="field">
                                    <span>"Priority"</span>
                                    <select name="priority_class" data-test="priority-class" on:change=move |ev| set_priority.set(event_target_value(&ev))>
                                        {classes.into_iter().map(|c| {
                                            let selected = if priority.get_untracked().is_empty() { c.default } else { priority.get_untracked() == c.name };
                                            let text = if c.description.is_empty() { c.name.clone() } else { format!("{} — {}", c.name, c.description) };
                                            view! { <option value=c.name.clone() selected=selected>{text}</option> }
                                        }).collect_view()}
                                    </select>
                                </label>
                            }.into_any()
                        }
                    })}
                    <label class="field grow">
                        <span>"Purpose"</span>
                        <input type="text" name="purpose" maxlength="500" placeholder="fine-tuning ViT-L on the new labels" data-test="purpose"
                            prop:value=move || purpose.get() on:input=move |ev| set_purpose.set(event_target_value(&ev))/>
                    </label>
                </div>
            </section>
            <section class="card summary" data-test="summary">
                {move || match check() {
                    Ok(Cost::Borrowed(d, left, grace)) => view! {
                        <p data-test="cost">{format!("Borrows {} and {} of the {} and {} the pool's quota leaves unused. It may be preempted, {}, when the lenders need their quota back.", d.compute, crate::format::mem(d.memory), left.compute, crate::format::mem(left.memory), notice(grace))}</p>
                    }.into_any(),
                    Ok(Cost::Idle(grace)) => view! {
                        <p data-test="cost">{format!("Uses none of your quota: it runs on idle capacity and is the first to be preempted, {}, when anyone needs the room.", notice(grace))}</p>
                    }.into_any(),
                    Ok(Cost::Quota(d, q, u)) => {
                        let after = u.plus(&d);
                        view! {
                            <div class="quota-compare">
                                <QuotaLine label="GPU compute" before=u64::from(u.compute.0) after=u64::from(after.compute.0) limit=u64::from(q.compute.0) text=format!("{} → {} of {}", u.compute, after.compute, q.compute)/>
                                <QuotaLine label="GPU memory" before=u.memory.0 after=after.memory.0 limit=q.memory.0 text=format!("{} → {} of {}", crate::format::mem(u.memory), crate::format::mem(after.memory), crate::format::mem(q.memory))/>
                                <QuotaLine label="Slices" before=u64::from(u.slices) after=u64::from(after.slices) limit=u64::from(q.max_slices) text=format!("{} → {} of {}", u.slices, after.slices, q.max_slices)/>
                            </div>
                            <p class="muted small" data-test="cost">{format!("This slice costs {} and {} of your quota.", d.compute, crate::format::mem(d.memory))}</p>
                        }.into_any()
                    }
                    Err(msg) => view! { <p class="callout warn" data-test="validation">{msg}</p> }.into_any(),
                }}
                <div class="form-row end">
                    <button class="button primary" type="submit" data-test="submit-request" disabled=move || check().is_err() || submit.pending().get()>
                        {move || if submit.pending().get() { "Requesting…" } else { "Request slice" }}
                    </button>
                </div>
                {move || submit.value().get().and_then(|r| r.err()).map(|e| view! { <p class="callout danger" data-test="form-error">{e.message}</p> })}
            </section>
        </ActionForm>
        {move || match offer.value().get() {
            Some(Ok(r)) => Some(view! { <OfferDone r/> }.into_any()),
            _ => over_quota.get().map(|(p, demand, slice)| view! {
                <QuotaOffer quota=p.quota usage=p.usage demand slice admin action=offer justification ends_on/>
            }.into_any()),
        }}
    }
}

/// The pool's preemption notice in words.
fn notice(minutes: u32) -> String {
    match minutes {
        0 => "without notice".to_owned(),
        m => format!("with {m} min notice"),
    }
}

/// What a slice costs, by the quota its QoS class draws on.
#[derive(Clone)]
enum Cost {
    /// Guaranteed: the tenant's own quota and use.
    Quota(Demand, Quota, Usage),
    /// Burstable: what the pool lends, and the preemption notice.
    Borrowed(Demand, Demand, u32),
    /// Best-effort: no quota; the preemption notice.
    Idle(u32),
}

#[component]
fn QuotaLine(
    label: &'static str,
    before: u64,
    after: u64,
    limit: u64,
    text: String,
) -> impl IntoView {
    let pct = |v: u64| crate::format::percent_of(v, limit);
    view! {
        <div class="quota-line">
            <div class="quota-head"><span>{label}</span><span class="muted small">{text}</span></div>
            <div class="bar">
                <span class="bar-used" style=format!("width:{}%", pct(before))></span>
                <span class="bar-new" style=format!("width:{}%", pct(after).saturating_sub(pct(before)))></span>
            </div>
        </div>
    }
}
