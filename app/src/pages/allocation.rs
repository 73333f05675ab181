//! One allocation: live progress, connection details, release and extend;
//! when its GPU or host is lost or drained, why, and a way to ask again.

use crate::api::{
    get_allocation, get_allocation_activity, get_allocation_advice, ExtendSlice, KeepSlice,
    ReleaseSlice, RequestInstead, RequeueSlice, ResizeSlice,
};
use crate::components::activity_chart::ActivityChart;
use crate::components::allocation_state::{Progress, StateBadge};
use crate::components::copy::CopyButton;
use crate::components::error_panel::ErrorPanel;
use crate::components::go::navigator;
use crate::components::live_region::LiveRegion;
use crate::components::placement_why::PlacementWhySection;
use crate::error::AppError;
use crate::format;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;
use tessera_core::ids::AllocationId;
use tessera_core::lifecycle::AllocationPhase;
use tessera_core::rightsize::Advice;
use tessera_core::schedule::QosClass;
use tessera_protocol::views::{AllocationActivity, AllocationView, SliceAdvice};

/// How often an open allocation page refreshes while the allocation changes.
const REFRESH: std::time::Duration = std::time::Duration::from_secs(1);

/// `/t/:slug/a/:id`
#[component]
pub fn AllocationPage() -> impl IntoView {
    let params = use_params_map();
    let path = move || {
        params.with(|p| {
            (
                p.get("slug").unwrap_or_default(),
                p.get("id").unwrap_or_default(),
            )
        })
    };
    // The allocation, and its charts when it has been active (drawn on the
    // server too). Page components run only on the server (the browser
    // hydrates the islands), so this is read once per page load.
    let page = Resource::new(path, |(slug, id)| async move {
        let id = id
            .parse::<AllocationId>()
            .map_err(|_| not_an_id(&slug, &id))?;
        let a = get_allocation(slug.clone(), id).await?;
        let activity = match a.active_at {
            Some(_) => Some(get_allocation_activity(slug.clone(), id).await?),
            None => None,
        };
        let advice = match a.state {
            AllocationPhase::Active => get_allocation_advice(slug, id).await?,
            _ => None,
        };
        Ok::<_, AppError>((a, activity, advice))
    });
    view! {
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                let (slug, _) = path();
                match page.await {
                    Ok((a, activity, advice)) => {
                        let charts = a.active_at.is_some() && !a.is_terminal();
                        view! {
                            {charts.then(|| view! { <LiveRegion region=ACTIVITY.to_owned() every_ms=ACTIVITY_REFRESH_MS/> })}
                            <LiveAllocation slug a activity advice/>
                        }.into_any()
                    }
                    Err(err) => view! { <Title text="Error"/><ErrorPanel err/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// The allocation as the server rendered it, reloaded every [`REFRESH`]
/// until it settles, with its actions: a lazy island (its own WASM file).
/// It gets the allocation as a prop, so it hydrates exactly what the server
/// rendered, whatever changed since.
#[island(lazy)]
fn LiveAllocation(
    /// The tenant's slug.
    slug: String,
    /// The allocation when the page was rendered.
    a: AllocationView,
    /// Its utilisation and memory then (`None` if it has none yet).
    activity: Option<AllocationActivity>,
    /// Right-sizing advice then (running slices only).
    advice: Option<SliceAdvice>,
) -> impl IntoView {
    crate::components::hydrated::island_hydrated();
    let id = a.id;
    // What the page shows: reloads compare with it.
    let shown = StoredValue::new(a.clone());
    let release = ServerAction::<ReleaseSlice>::new();
    let extend = ServerAction::<ExtendSlice>::new();
    let requeue = ServerAction::<RequeueSlice>::new();
    let keep = ServerAction::<KeepSlice>::new();
    let resize = ServerAction::<ResizeSlice>::new();
    let instead = ServerAction::<RequestInstead>::new();
    // Asked again, for a smaller size or for what starts now: go to the
    // new request.
    let navigate = navigator();
    Effect::new(move |_| {
        if let Some(Ok(v)) = requeue
            .value()
            .get()
            .or_else(|| resize.value().get())
            .or_else(|| instead.value().get())
        {
            navigate(&format!("/t/{}/a/{}", v.tenant, v.id));
        }
    });
    let slug = StoredValue::new(slug);
    // News (a new state, a notice, the connection details) loads the page
    // again: the server renders it and the island hydrates it afresh, which
    // (unlike redrawing it here) keeps every button working. A failed read
    // (the server restarting, say) leaves the page as it is until one works.
    let reload = move || {
        leptos::task::spawn_local(async move {
            if let Ok(fresh) = get_allocation(slug.get_value(), id).await {
                // `as_of` changes with every read.
                let news = shown.with_value(|shown| {
                    let mut same = fresh.clone();
                    same.as_of = shown.as_of;
                    same != *shown
                });
                if news {
                    let _ = window().location().reload();
                }
            }
        });
    };
    // Effects run only in the browser.
    Effect::new(move |_| {
        if let Ok(handle) = set_interval_with_handle(
            move || {
                if !shown.with_value(AllocationView::is_terminal) {
                    reload();
                }
            },
            REFRESH,
        ) {
            on_cleanup(move || handle.clear());
        }
    });
    // After a release, an extension or a keep, at once.
    Effect::new(move |first: Option<()>| {
        let _ = (
            release.version().get(),
            extend.version().get(),
            keep.version().get(),
        );
        if first.is_some() {
            reload();
        }
    });
    let starts_now = a.starts_now.clone();
    view! {
        <Allocation a activity release extend requeue keep/>
        {(!starts_now.is_empty()).then(|| view! { <StartsNowSection slug=slug.get_value() id starts_now instead/> })}
        {advice.map(|advice| view! { <RightSizeSection slug=slug.get_value() advice resize/> })}
    }
}

/// A path whose id is not a number names no allocation.
fn not_an_id(slug: &str, id: &str) -> AppError {
    AppError::not_found(format!(
        "'{id}' is not an allocation id: allocation ids are numbers, as in /t/{slug}/a/42; your slices are listed on /t/{slug}"
    ))
}

#[component]
fn Allocation(
    a: AllocationView,
    activity: Option<AllocationActivity>,
    release: ServerAction<ReleaseSlice>,
    extend: ServerAction<ExtendSlice>,
    requeue: ServerAction<RequeueSlice>,
    keep: ServerAction<KeepSlice>,
) -> impl IntoView {
    use AllocationPhase as P;
    let now = a.as_of;
    let open = !a.is_terminal() && a.state != P::Releasing;
    let gpu_text = a
        .gpus
        .iter()
        .map(|g| format!("#{} {}", g.index, g.model))
        .collect::<Vec<_>>()
        .join(", ");
    let ending_soon = a
        .lease_ends_at
        .is_some_and(|end| a.state == P::Active && (end - now).num_minutes() < 60);
    let (slug, id) = (a.tenant.clone(), a.id);
    let release_label = if matches!(a.state, P::Queued | P::Requested) {
        "Cancel request"
    } else {
        "Release"
    };
    let status_line = match a.state {
        P::Requested => P::Requested.name().to_owned(),
        P::Queued => format!(
            "Waiting for capacity in {}: number {} in the queue. It starts automatically when a slice frees up.{}{}",
            a.pool,
            a.queue_position.unwrap_or(1),
            a.waiting_for
                .as_ref()
                .map(|w| format!(" Why: {w}."))
                .unwrap_or_default(),
            a.estimated_start
                .map(|t| if t <= now {
                    " Expected to start within seconds.".to_owned()
                } else {
                    format!(
                        " Expected to start {} ({}), going by the leases of the slices running now.",
                        format::until(t, now),
                        format::when(t)
                    )
                })
                .unwrap_or_default()
        ),
        P::Placed => "Placed on a GPU; the host agent is picking it up.".to_owned(),
        P::Provisioning => "The host agent is creating the slice…".to_owned(),
        P::Active => "Ready to use.".to_owned(),
        P::Releasing => format!(
            "Being torn down on the host (will end as {}).",
            a.ending_as.unwrap_or(P::Released)
        ),
        P::Released => "Released; its capacity and quota are back.".to_owned(),
        P::Expired => "The lease ended and the slice was released.".to_owned(),
        P::Failed => "This slice could not be provided; its quota is back.".to_owned(),
    };
    view! {
        <Title text=format!("Allocation {}", a.id)/>
        <section class="page-head">
            <p class="eyebrow"><a href=format!("/t/{}", a.tenant)>{a.tenant.clone()}</a>" · allocation"</p>
            <div class="section-row">
                <h1 data-test="allocation-title">{a.shape_label.clone()}<span class="muted">{format!(" #{}", a.id)}</span></h1>
                <StateBadge state=a.state/>
            </div>
            <p class="muted" data-test="status-line">{status_line}</p>
        </section>
        {a.capacity_lost.clone().map(|lost| {
            let slug = slug.clone();
            view! {
                <section class="callout warn" data-test="capacity-lost" role="alert">
                    <p><strong>"This slice lost its GPU "</strong>{format!("({}): ", format::ago(lost.at, now))}{lost.reason.clone()}"."</p>
                    <p>"It no longer counts against your quota. Request it again to run elsewhere; this one is released in the same step."</p>
                    <ActionForm action=requeue attr:data-test="requeue-form">
                        <input type="hidden" name="slug" value=slug/>
                        <input type="hidden" name="id" value=id.get()/>
                        <button class="button" type="submit" data-test="requeue">"Request again elsewhere"</button>
                    </ActionForm>
                </section>
            }
        })}
        {a.drain.clone().map(|d| view! {
            <section class="callout warn" data-test="drain-notice" role="alert">
                <p>
                    <strong>{format!("Host {} is being drained: ", d.host)}</strong>
                    {format!("this slice ends {} ({}). ", format::until(d.deadline, now), format::when(d.deadline))}
                    {format!("Reason: {}.", d.reason)}
                </p>
                <p>"Save your work; you can request the slice again and it is placed on another GPU."</p>
            </section>
        })}
        {a.idle.clone().map(|n| {
            let slug = slug.clone();
            let left = n.max_keeps.saturating_sub(n.keeps);
            view! {
                <section class="callout warn" data-test="idle-notice" role="alert">
                    <p>
                        <strong>"This slice is idle: "</strong>
                        {format!("pool {} reclaims idle slices, so it is released {} ({}) unless it gets busy or you keep it.", a.pool, format::until(n.deadline, now), format::when(n.deadline))}
                    </p>
                    {if left > 0 {
                        view! {
                            <ActionForm action=keep attr:class="form-row" attr:data-test="keep-form">
                                <input type="hidden" name="slug" value=slug/>
                                <input type="hidden" name="id" value=id.get()/>
                                <label class="field grow">
                                    <span>{format!("Why keep it? ({left} of {} keeps left)", n.max_keeps)}</span>
                                    <input type="text" name="reason" required maxlength="500" placeholder="Training resumes after the data refresh" data-test="keep-reason"/>
                                </label>
                                <button class="button" type="submit" data-test="keep">"Keep it"</button>
                            </ActionForm>
                        }.into_any()
                    } else {
                        view! { <p data-test="no-keeps">{format!("It was kept {} times, all the pool allows; save your work.", n.keeps)}</p> }.into_any()
                    }}
                    {move || keep.value().get().and_then(|r| r.err()).map(|e| view! { <p class="callout danger" data-test="form-error">{e.message}</p> })}
                </section>
            }
        })}
        {a.preemption.clone().map(|p| match p.preempted_at {
            None => view! {
                <section class="callout warn" data-test="preempt-notice" role="alert">
                    <p>
                        <strong>"This slice will be preempted: "</strong>
                        {format!("it is released {} ({}) unless request #{} stops waiting first.", format::until(p.deadline, now), format::when(p.deadline), p.for_request)}
                    </p>
                    <p class="small">{format!("{}. Save your work; guaranteed slices, within your quota, are never preempted.", p.reason)}</p>
                </section>
            }.into_any(),
            Some(at) => view! {
                <section class="callout warn" data-test="preempted" role="status">
                    <p><strong>"This slice was preempted "</strong>{format!("{}.", format::when(at))}</p>
                    <p class="small">{format!("{}.", p.reason)}</p>
                </section>
            }.into_any(),
        })}
        <section class="card">
            <Progress state=a.state/>
            {a.reason.clone().map(|r| view! { <p class="callout danger" data-test="reason">{r}</p> })}
        </section>
        {a.connection.clone().map(|c| {
            let id = a.id;
            let env_block = c.env.iter().map(|(k, v)| format!("export {k}={v}")).collect::<Vec<_>>().join("\n");
            let mig_uuid = c.env.iter().find(|(k, _)| k == "CUDA_VISIBLE_DEVICES").map(|(_, v)| v.clone());
            view! {
                <section class="card" data-test="connection">
                    <h2 class="section-title">"Connect"</h2>
                    <dl class="facts">
                        <dt>"Host"</dt>
                        <dd><code data-test="conn-host">{c.host.clone()}</code><CopyButton text=c.host.clone() what="host"/></dd>
                        {mig_uuid.map(|u| view! {
                            <dt>"Device"</dt>
                            <dd><code data-test="conn-device">{u.clone()}</code><CopyButton text=u what="device"/></dd>
                        })}
                        <dt>"Kubernetes"</dt>
                        <dd><code data-test="conn-k8s">{format!("{}: {}", c.k8s_resource, c.k8s_count)}</code></dd>
                    </dl>
                    <h3 class="small muted">"Environment"</h3>
                    <div class="code-block">
                        <pre data-test="conn-env">{env_block.clone()}</pre>
                        <CopyButton text=env_block what="env"/>
                    </div>
                    {(!c.kubernetes_yaml.is_empty()).then(|| {
                        let apply = format!("kubectl apply -f tessera-alloc-{id}.yaml");
                        view! {
                            <h3 class="small muted">"Kubernetes: a claim on exactly this slice (DRA)"</h3>
                            <p class="small">
                                "A ResourceClaim that selects this slice's device by its UUID, and a pod on its node that uses it. "
                                <a href=format!("/api/v1/allocations/{id}/kubernetes") download=format!("tessera-alloc-{id}.yaml") data-test="claim-download">"Download"</a>
                                ", then:"
                            </p>
                            <div class="code-block">
                                <pre data-test="claim-apply">{apply.clone()}</pre>
                                <CopyButton text=apply what="command"/>
                            </div>
                            <div class="code-block">
                                <pre class="tall" tabindex="0" aria-label="ResourceClaim and check pod (YAML)" data-test="claim-yaml">{c.kubernetes_yaml.clone()}</pre>
                                <CopyButton text=c.kubernetes_yaml.clone() what="claim"/>
                            </div>
                            <ul class="small muted" data-test="claim-notes">
                                {c.kubernetes_notes.iter().map(|n| view! { <li>{n.clone()}</li> }).collect_view()}
                            </ul>
                        }
                    })}
                    <h3 class="small muted">"Kubernetes without DRA: device-plugin pod snippet"</h3>
                    <p class="small muted">"The NVIDIA device plugin picks a device of this kind on the node: the snippet binds the node, not the device Tessera placed."</p>
                    <div class="code-block">
                        <pre data-test="conn-pod">{c.pod_snippet.clone()}</pre>
                        <CopyButton text=c.pod_snippet.clone() what="pod"/>
                    </div>
                </section>
            }
        })}
        {a.active_at.is_some().then(|| view! { <ActivitySection activity/> })}
        <section class="card">
            <h2 class="section-title">"Details"</h2>
            <dl class="facts">
                <dt>"Pool"</dt><dd class="mono">{a.pool.clone()}</dd>
                <dt>"Priority"</dt><dd class="mono" data-test="priority-class">{a.priority_class.clone()}</dd>
                <dt>"QoS"</dt><dd data-test="qos-class" title=a.qos.describe()>{a.qos.label()}</dd>
                <dt>"Host"</dt><dd>{a.host.clone().unwrap_or_else(|| "—".into())}</dd>
                <dt>"GPU"</dt><dd>{if gpu_text.is_empty() { "—".to_owned() } else { gpu_text }}{a.mig_start.map(|s| format!(" · MIG slice {s}"))}</dd>
                <dt>{match a.qos {
                    QosClass::Guaranteed => "Quota cost",
                    QosClass::Burstable => "Borrowed quota",
                    QosClass::BestEffort => "Size (no quota)",
                }}</dt><dd>{format!("{} · {} · {} slice(s)", a.demand.compute, format::mem(a.demand.memory), a.demand.slices)}</dd>
                <dt>"Lease"</dt>
                <dd data-test="lease">
                    {match (a.ended_at, a.lease_ends_at) {
                        (Some(ended), _) if a.is_terminal() => format!("ended {}", format::when(ended)),
                        (_, Some(end)) => format!("ends {} ({})", format::until(end, now), format::when(end)),
                        _ => format!("{} h from activation", a.lease_hours),
                    }}
                    {ending_soon.then(|| view! { <span class="badge warn">"ending soon"</span> })}
                </dd>
                <dt>"Requested"</dt><dd>{format!("{} by {}", format::when(a.created_at), a.requested_by)}</dd>
                {(!a.purpose.is_empty()).then(|| view! { <dt>"Purpose"</dt><dd>{a.purpose.clone()}</dd> })}
                {a.replaces.map(|r| view! {
                    <dt>"Replaces"</dt>
                    <dd data-test="replaces"><a href=format!("/t/{}/a/{}", a.tenant, r)>{format!("#{r}")}</a>" — released once this one is active"</dd>
                })}
                {a.processes_stopped.map(|p| view! {
                    <dt>"At release"</dt>
                    <dd data-test="processes-stopped" title="SIGTERM, then SIGKILL for what still ran after the grace period">{p.describe()}</dd>
                })}
            </dl>
        </section>
        {a.placement_why.clone().map(|why| view! { <PlacementWhySection why/> })}
        {open.then(|| {
            let (slug2, slug3) = (slug.clone(), slug.clone());
            view! {
                <section class="card actions-card">
                    {(a.state == P::Active).then(|| view! {
                        <ActionForm action=extend attr:class="form-row" attr:data-test="extend-form">
                            <input type="hidden" name="slug" value=slug2.clone()/>
                            <input type="hidden" name="id" value=id.get()/>
                            <label class="field">
                                <span>"Extend by (hours)"</span>
                                <input type="number" name="hours" min="1" max=a.max_lease_hours value="1" data-test="extend-hours"/>
                            </label>
                            <button class="button" type="submit" data-test="extend">"Extend lease"</button>
                        </ActionForm>
                    })}
                    <ActionForm action=release attr:data-test="release-form">
                        <input type="hidden" name="slug" value=slug3.clone()/>
                        <input type="hidden" name="id" value=id.get()/>
                        <button class="button danger" type="submit" data-test="release">{release_label}</button>
                    </ActionForm>
                </section>
            }
        })}
        {matches!(a.state, P::Failed | P::Expired | P::Released).then(|| view! {
            <section class="card actions-card">
                <ActionForm action=requeue attr:data-test="requeue-form">
                    <input type="hidden" name="slug" value=slug.clone()/>
                    <input type="hidden" name="id" value=id.get()/>
                    <button class="button" type="submit" data-test="requeue">"Request again"</button>
                </ActionForm>
            </section>
        })}
        {move || requeue.value().get().and_then(|r| r.err()).map(|e| view! { <p class="callout danger" data-test="form-error">{e.message}</p> })}
        {move || extend.value().get().and_then(|r| r.err()).map(|e| view! { <p class="callout danger" data-test="form-error">{e.message}</p> })}
        {move || release.value().get().and_then(|r| r.err()).map(|e| view! { <p class="callout danger" data-test="form-error">{e.message}</p> })}
    }
}

/// How often the activity charts refresh, in milliseconds (telemetry
/// arrives every few seconds; the charts show minutes).
const ACTIVITY_REFRESH_MS: u64 = 10_000;

/// The id of the activity charts, which the page keeps current.
const ACTIVITY: &str = "allocation-activity";

/// The slice's utilisation and memory since it started (the page keeps it
/// current, see [`ACTIVITY_REFRESH_MS`]).
#[component]
fn ActivitySection(activity: Option<AllocationActivity>) -> impl IntoView {
    view! {
        <section class="card" data-test="activity" id=ACTIVITY>
            <h2 class="section-title">"Activity"</h2>
            {match activity {
                Some(activity) => view! { <ActivityChart activity/> }.into_any(),
                None => view! { <p class="muted small">"No figures yet."</p> }.into_any(),
            }}
        </section>
    }
}

/// What the slice used against what it holds, and a smaller shape when one
/// would do, one click away (the new request replaces this slice).
#[component]
fn RightSizeSection(
    slug: String,
    advice: SliceAdvice,
    resize: ServerAction<ResizeSlice>,
) -> impl IntoView {
    let id = advice.allocation;
    let (confidence, smaller) = match &advice.advice {
        Advice::TooLittleData { .. } => (None, None),
        Advice::Keep { confidence, .. } => (Some(*confidence), None),
        Advice::Smaller { resize, confidence } => (Some(*confidence), Some(resize.clone())),
    };
    view! {
        <section class="card" data-test="right-size">
            <h2 class="section-title">"Right size"</h2>
            <p data-test="right-size-sentence">{advice.sentence.clone()}</p>
            {confidence.map(|c| view! {
                <p class="muted small" data-test="right-size-confidence">
                    {format!("Confidence: {} (from {} of telemetry; more data, more confidence).", c.label(), tessera_core::rightsize::span_words(advice.used.measured_ms))}
                </p>
            })}
            {smaller.map(|r| view! {
                <ActionForm action=resize attr:class="form-row" attr:data-test="resize-form">
                    <input type="hidden" name="slug" value=slug.clone()/>
                    <input type="hidden" name="id" value=id.get()/>
                    <button class="button" type="submit" data-test="resize">{format!("Request a {} instead", r.label)}</button>
                    <span class="muted small">"This slice is released once the new one is active."</span>
                </ActionForm>
            })}
            {move || resize.value().get().and_then(|r| r.err()).map(|e| view! { <p class="callout danger" data-test="form-error">{e.message}</p> })}
        </section>
    }
}

/// For a waiting request: shapes that would start at once within the
/// quota, each one click away (the new request replaces the waiting one).
#[component]
fn StartsNowSection(
    slug: String,
    id: AllocationId,
    starts_now: Vec<tessera_core::slice::alternatives::StartsNow>,
    instead: ServerAction<RequestInstead>,
) -> impl IntoView {
    view! {
        <section class="card" data-test="starts-now">
            <h2 class="section-title">"Would start now"</h2>
            <p class="muted small">"These fit on free capacity and within your quota at the moment. Asking for one withdraws this request once the new slice is active."</p>
            <ul class="history">
                {starts_now.into_iter().map(|s| {
                    let shape = serde_json::to_string(&s.shape).unwrap_or_default();
                    let slug = slug.clone();
                    view! {
                        <li data-test="starts-now-option">
                            <ActionForm action=instead attr:class="form-row">
                                <input type="hidden" name="slug" value=slug/>
                                <input type="hidden" name="id" value=id.get()/>
                                <input type="hidden" name="pool" value=s.pool.clone()/>
                                <input type="hidden" name="shape" value=shape/>
                                <span><strong>{s.label.clone()}</strong>{format!(" in {} · {} · {}", s.pool, s.demand.compute, format::mem(s.demand.memory))}</span>
                                <button class="button" type="submit" data-test="request-instead">"Request this instead"</button>
                            </ActionForm>
                        </li>
                    }
                }).collect_view()}
            </ul>
            {move || instead.value().get().and_then(|r| r.err()).map(|e| view! { <p class="callout danger" data-test="form-error">{e.message}</p> })}
        </section>
    }
}
