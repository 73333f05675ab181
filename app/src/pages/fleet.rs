//! The fleet: hosts with status and last-seen, GPUs with model, memory, MIG
//! mode and health, and what platform admins decided about each (cordon,
//! drain, maintenance), with the form to decide it.

use crate::api::{get_fleet, OperateFleet};
use crate::components::error_panel::ErrorPanel;
use crate::components::host_filter::{host_query, shown_text, HostFilterForm, HostPager};
use crate::components::live_region::LiveRegion;
use crate::format;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use tessera_core::availability::{OpsMode, MAX_DRAIN_MINUTES, MAX_REASON_CHARS};
use tessera_core::health::HealthVerdict;
use tessera_protocol::views::{FleetQuery, FleetView, HostStatus, HostView, OpsView};

/// How often an open fleet page refreshes itself, in milliseconds.
const REFRESH_MS: u64 = 5_000;

/// The id of the part of the page that refreshes.
const LIVE: &str = "fleet-live";

/// `/fleet` (platform admins). Refreshes while open, so hosts going offline
/// show without a reload; an open "Operate" panel holds the refresh, so what
/// is typed stays.
#[component]
pub fn FleetPage() -> impl IntoView {
    // Its forms post without JS and come back to the page, with an error
    // (if any) as the action's value.
    let operate = ServerAction::<OperateFleet>::new();
    let query = use_query_map();
    let current = move || query.with(host_query);
    let fleet = Resource::new(current, get_fleet);
    view! {
        <Title text="Fleet"/>
        <LiveRegion region=LIVE.to_owned() every_ms=REFRESH_MS hold="details.ops-panel[open]"/>
        <div id=LIVE>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || Suspend::new(async move {
                    let q = current();
                    match fleet.await {
                        Ok(f) => view! { <Fleet f q operate/> }.into_any(),
                        Err(err) => view! { <ErrorPanel err/> }.into_any(),
                    }
                })}
            </Transition>
        </div>
    }
}

#[component]
fn Fleet(f: FleetView, q: FleetQuery, operate: ServerAction<OperateFleet>) -> impl IntoView {
    let s = &f.summary;
    let (hosts, online, gpus, mig, memory) =
        (s.hosts, s.hosts_online, s.gpus, s.gpus_mig, s.memory_mib);
    let attention = s.hosts_attention;
    let now = f.as_of;
    let page_link = |page: u32| format!("/fleet?{}", q.to_query_string(page));
    let prev = (f.page > 1).then(|| page_link(f.page - 1));
    let next = (f.page < f.pages).then(|| page_link(f.page + 1));
    let shown = shown_text(&q, f.matching, f.page, f.pages, f.hosts.len());
    let pool_names: Vec<String> = f.pools.iter().map(|p| p.name.clone()).collect();
    view! {
        <section class="page-head">
            <p class="eyebrow">"Platform"</p>
            <h1>"Fleet"</h1>
            <p><a class="button ghost" href="/fleet/insights" data-test="fleet-insights">"Insights: utilisation, capacity, queue"</a></p>
        </section>
        <section class="stats">
            <div class="stat card"><span class="stat-value" data-test="stat-hosts">{format!("{online}/{hosts}")}</span><span class="stat-label">"hosts online"</span></div>
            <div class="stat card"><span class="stat-value" data-test="stat-gpus">{gpus}</span><span class="stat-label">"GPUs"</span></div>
            <div class="stat card"><span class="stat-value">{mig}</span><span class="stat-label">"in MIG mode"</span></div>
            <div class="stat card"><span class="stat-value">{format::mib(memory)}</span><span class="stat-label">"GPU memory"</span></div>
            <a class="stat card" href="/fleet?status=attention" data-test="stat-attention"><span class="stat-value">{attention}</span><span class="stat-label">"need attention"</span></a>
        </section>
        {(!f.pools.is_empty()).then(|| view! {
            <section>
                <h2 class="section-title">"Pools "<a class="small" href="/admin/pools" data-test="edit-pools">"Edit pools"</a></h2>
                <div class="grid">
                    {f.pools.iter().map(|p| view! {
                        <div class="card tile" data-test="pool" data-pool=p.name.clone()>
                            <span class="tile-title mono">{p.name.clone()}</span>
                            <span class="muted small">{p.description.clone()}</span>
                            <span>
                                <span class="badge accent" data-test="pool-sharing">{p.sharing.to_string()}</span>" "
                                <span class="badge">{p.isolation.as_str()}</span>
                            </span>
                            <span class="small" data-test="pool-gpus">{format!("{} of {} GPUs online", p.gpus_online, p.gpus)}</span>
                            <span class="small muted" data-test="pool-schedulable">{format!("{} take new slices", p.gpus_schedulable)}</span>
                            <span class="small muted" data-test="pool-fragmentation">{format!(
                                "{} GPU free, {} of it fragmented for the current mix",
                                format::gpu_milli(p.free_gpu_milli),
                                format::gpu_milli(p.fragmented_gpu_milli)
                            )}</span>
                            {(p.gpus > 0 && !p.unplaceable.is_empty()).then(|| view! {
                                <span class="small" data-test="pool-unplaceable">{format!("Fits nowhere now: {}", p.unplaceable.join(", "))}</span>
                            })}
                        </div>
                    }).collect_view()}
                </div>
            </section>
        })}
        {(hosts == 0).then(|| view! {
            <div class="card empty" data-test="fleet-empty">
                <p>"No hosts yet."</p>
                <p class="muted">"Create a join token, then start "<code>"TESSERA_JOIN_TOKEN=TOKEN tessera-agent --server URL"</code>" on each GPU machine."</p>
                <p><a class="button" href="/admin/join-tokens">"Create a join token"</a></p>
            </div>
        })}
        {(hosts > 0).then(|| view! {
            <HostFilterForm action="/fleet" q=q.clone() pools=pool_names test="fleet-filters"/>
            <p class="muted small" data-test="fleet-total">{shown}</p>
        })}
        {(hosts > 0 && f.matching == 0).then(|| view! {
            <div class="card empty" data-test="fleet-none-match"><p>"No hosts match these filters."</p></div>
        })}
        {move || operate.value().get().and_then(|r| r.err()).map(|e| view! { <p class="callout danger" data-test="ops-error" role="alert">{e.message}</p> })}
        {f.hosts.into_iter().map(|h| view! { <Host h now operate/> }).collect_view()}
        <HostPager prev next test="fleet"/>
    }
}

/// What an admin decided, for people: "cordoned by Ada 5 min ago: rack work".
fn ops_text(ops: &OpsView, live: u32, now: chrono::DateTime<chrono::Utc>) -> Option<String> {
    let who = ops
        .by
        .as_ref()
        .map(|b| format!(" by {b}"))
        .unwrap_or_default();
    let when = ops
        .at
        .map(|t| format!(" {}", format::ago(t, now)))
        .unwrap_or_default();
    let why = ops
        .reason
        .as_ref()
        .map(|r| format!(": {r}"))
        .unwrap_or_default();
    let what = match ops.mode {
        OpsMode::Available => return None,
        OpsMode::Draining if live == 0 => "drained (empty)".to_owned(),
        OpsMode::Draining => format!(
            "draining, {live} slice{} end{} {}",
            if live == 1 { "" } else { "s" },
            if live == 1 { "s" } else { "" },
            ops.drain_deadline
                .map(|d| format::until(d, now))
                .unwrap_or_default()
        ),
        m => m.as_str().to_owned(),
    };
    Some(format!("{what}{who}{when}{why}"))
}

/// The badge class of an admin decision.
fn ops_badge(mode: OpsMode) -> &'static str {
    match mode {
        OpsMode::Available => "badge",
        OpsMode::Cordoned | OpsMode::Draining => "badge warn",
        OpsMode::Maintenance => "badge danger",
    }
}

#[component]
fn Host(
    h: HostView,
    now: chrono::DateTime<chrono::Utc>,
    operate: ServerAction<OperateFleet>,
) -> impl IntoView {
    let status = h.status.as_str();
    let seen = h
        .last_seen_at
        .map(|t| format::ago(t, now))
        .unwrap_or_else(|| "never".into());
    let details = [
        Some(format::cores(h.cpu_milli)),
        Some(format!("{} RAM", format::mib(h.memory_mib))),
        h.backend.clone().map(|b| format!("{b} backend")),
        h.driver_version.clone().map(|d| format!("driver {d}")),
        h.agent_version.clone().map(|v| format!("agent {v}")),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>()
    .join(" · ");
    let gpu_choices: Vec<i32> = h.gpus.iter().map(|g| g.index).collect();
    let online = h.status == HostStatus::Online;
    let host_mode = h.ops.mode;
    view! {
        <section class="card host" data-test="host" data-hostname=h.hostname.to_string()>
            <div class="host-head">
                <div>
                    <h2 class="host-name" data-test="host-name">{h.hostname.to_string()}</h2>
                    <p class="muted small">{details}</p>
                </div>
                <div class="host-status">
                    <span class=format!("status status-{status}") data-test="host-status">{status}</span>
                    {(h.ops.mode != OpsMode::Available).then(|| view! {
                        <span class=ops_badge(h.ops.mode) data-test="host-ops">{h.ops.mode.as_str()}</span>
                    })}
                    <span class="muted small" data-test="host-last-seen">{format!("last seen {seen}")}</span>
                </div>
            </div>
            {ops_text(&h.ops, h.live_slices, now).map(|t| view! { <p class="callout warn small" data-test="host-ops-text">{t}</p> })}
            <table class="gpus" data-test="gpus">
                <thead><tr><th>"#"</th><th>"Model"</th><th>"Memory"</th><th>"Pool"</th><th>"MIG"</th><th>"Health"</th><th>"State"</th><th>"UUID"</th></tr></thead>
                <tbody>
                    {h.gpus.into_iter().map(|g| {
                        let mig = match (g.mig_capable, g.mig_enabled) {
                            (true, true) => ("badge accent", "enabled"),
                            (true, false) => ("badge", "disabled"),
                            _ => ("badge subtle", "n/a"),
                        };
                        let instances = g.mig_instances.clone();
                        let takes = online
                            && g.health.verdict.takes_placements()
                            && OpsMode::effective(host_mode, g.ops.mode).takes_placements();
                        let map = g.mig_map.clone().map(|m| (m, g.mig_instances.clone(), g.index, takes));
                        let holders = g.holders.clone();
                        view! {
                            <tr data-test="gpu">
                                <td>{g.index}</td>
                                <td data-test="gpu-model">{g.model}</td>
                                <td>{format::mib(g.memory_mib)}</td>
                                <td class="mono small" data-test="gpu-pool">{g.pool.clone().unwrap_or_else(|| "—".into())}</td>
                                <td>
                                    <span class=mig.0 data-test="gpu-mig">{mig.1}</span>
                                    {instances.into_iter().map(|i| view! {
                                        <span
                                            class=if i.in_use || i.tenant.is_some() { "chip busy" } else { "chip" }
                                            title=match (&i.tenant, i.in_use) {
                                                (Some(t), _) => format!("held by {t}"),
                                                (None, true) => "made outside Tessera, in use".to_owned(),
                                                (None, false) => "made outside Tessera, idle".to_owned(),
                                            }
                                            data-test="mig-instance"
                                        >
                                            {format!("{}@{}", i.profile, i.start)}
                                            {i.tenant.clone().map(|t| view! { <span class="chip-tenant" data-test="mig-tenant">{t}</span> })}
                                        </span>
                                    }).collect_view()}
                                    {holders.into_iter().map(|h| view! { <span class="chip busy" data-test="gpu-holder">{h}</span> }).collect_view()}
                                    {g.mps.map(|m| view! {
                                        <span class="chip" data-test="gpu-mps" title="MPS control daemon defaults: the smallest share granted to a client of this GPU, what a client that sets no limits of its own gets from a new server; running servers are raised to the largest grant">
                                            {format!(
                                                "MPS default {} % · {}",
                                                m.default_active_thread_percentage,
                                                m.default_pinned_mem_limit.map_or_else(|| "no memory limit".to_owned(), format::mem)
                                            )}
                                        </span>
                                    })}
                                    {(!g.mps_strays.is_empty()).then(|| view! {
                                        <ul class="findings small" data-test="gpu-mps-strays" title="MPS clients that do not keep to their slice (the agent reads each client's environment)">
                                            {g.mps_strays.iter().map(|s| view! { <li>{format!("process {}: {}{}", s.pid, s.problem, if s.stopped { " — stopped by the pool's policy" } else { "" })}</li> }).collect_view()}
                                        </ul>
                                    })}
                                </td>
                                <td data-test="gpu-health">
                                    <span class=match g.health.verdict {
                                        HealthVerdict::Healthy => "badge ok",
                                        HealthVerdict::Degraded => "badge warn",
                                        HealthVerdict::Unhealthy => "badge danger",
                                    } data-test="gpu-health-verdict">{g.health.verdict.as_str()}</span>
                                    {(!g.health.findings.is_empty()).then(|| view! {
                                        <ul class="findings small" data-test="gpu-health-findings">
                                            {g.health.findings.iter().map(|f| view! { <li>{f.message.clone()}</li> }).collect_view()}
                                        </ul>
                                    })}
                                </td>
                                <td data-test="gpu-ops">
                                    <span class=ops_badge(g.ops.mode)>{g.ops.mode.as_str()}</span>
                                    {ops_text(&g.ops, g.live_slices, now).map(|t| view! { <span class="muted small block">{t}</span> })}
                                </td>
                                <td class="mono muted small uuid" title=g.uuid.clone()>{g.uuid.clone()}</td>
                            </tr>
                            {map.map(|(m, held, index, takes)| view! {
                                <tr class="mig-map-row"><td colspan="8"><MigMapView map=m held index takes/></td></tr>
                            })}
                        }
                    }).collect_view()}
                </tbody>
            </table>
            <p class="small muted k8s-links">
                "Kubernetes: "
                <a href=format!("/api/v1/hosts/{}/mig-parted.yaml", h.id) download data-test="mig-parted-link">"mig-parted config"</a>
                " · "
                <a href=format!("/api/v1/hosts/{}/device-plugin.yaml", h.id) download data-test="device-plugin-link">"device plugin config"</a>
            </p>
            <details class="ops-panel" data-test="ops-panel">
                <summary>"Operate…"</summary>
                <ActionForm action=operate attr:class="ops-form" attr:data-test="ops-form">
                    <input type="hidden" name="host_id" value=h.id.get()/>
                    <label class="field">
                        <span>"On"</span>
                        <select name="target" data-test="ops-target">
                            <option value="host">"the whole host"</option>
                            {gpu_choices.into_iter().map(|i| view! { <option value=i.to_string()>{format!("GPU {i}")}</option> }).collect_view()}
                        </select>
                    </label>
                    <label class="field">
                        <span>"Action"</span>
                        <select name="action" data-test="ops-action">
                            <option value="cordon">"Cordon: no new slices"</option>
                            <option value="drain">"Drain: end its slices at a deadline"</option>
                            <option value="maintenance">"Maintenance (must be empty)"</option>
                            <option value="resume">"Resume: back in service"</option>
                            <option value="decommission">"Decommission host (must be empty)"</option>
                        </select>
                    </label>
                    <label class="field">
                        <span>"Drain deadline (minutes)"</span>
                        <input type="number" name="deadline_minutes" min="0" max=MAX_DRAIN_MINUTES value="60" data-test="ops-deadline"/>
                    </label>
                    <label class="field wide">
                        <span>"Reason (owners and the audit log see it)"</span>
                        <input type="text" name="reason" required maxlength=MAX_REASON_CHARS placeholder="e.g. rack 4 power work" data-test="ops-reason"/>
                    </label>
                    <button class="button" type="submit" data-test="ops-submit">"Apply"</button>
                </ActionForm>
            </details>
        </section>
    }
}

/// One MIG GPU's memory slices to scale: instances (profile and tenant),
/// free slices, and where each profile could still start.
#[component]
fn MigMapView(
    map: tessera_core::mig::MigMap,
    held: Vec<tessera_protocol::views::MigInstanceView>,
    index: i32,
    /// Whether the GPU takes new slices now (online, not unhealthy, not
    /// cordoned, drained or in maintenance).
    takes: bool,
) -> impl IntoView {
    let tenant_at = |start: u8| {
        held.iter()
            .find(|i| i.start == start)
            .and_then(|i| i.tenant.clone())
    };
    let fits: Vec<String> = map
        .can_start
        .iter()
        .filter(|p| !p.starts.is_empty())
        .map(|p| {
            let at: Vec<String> = p.starts.iter().map(u8::to_string).collect();
            format!("{} at {}", p.profile, at.join(", "))
        })
        .collect();
    let no_room: Vec<String> = map
        .can_start
        .iter()
        .filter(|p| p.starts.is_empty())
        .map(|p| p.profile.clone())
        .collect();
    view! {
        <div class="mig-map" style=format!("--slices: {}", map.memory_slices) data-test="mig-map"
            role="img" aria-label=format!("GPU {index}: {} of {} memory slices free", map.free.len(), map.memory_slices)>
            {map.instances.iter().map(|i| {
                let tenant = tenant_at(i.start);
                let class = if tenant.is_some() { "mig-cell held" } else { "mig-cell unmanaged" };
                let title = format!(
                    "{} at slice {}{}",
                    i.profile,
                    i.start,
                    tenant.as_ref().map_or_else(|| ", made outside Tessera".to_owned(), |t| format!(", {t}"))
                );
                let who = tenant.unwrap_or_else(|| "unmanaged".into());
                view! {
                    <div class=class
                        style=format!("grid-column: {} / span {}", i.start + 1, i.size)
                        title=title
                        data-test="mig-map-instance">
                        <span class="mono">{i.profile.clone()}</span>
                        <span class="small">{who}</span>
                    </div>
                }
            }).collect_view()}
            {map.free.iter().map(|s| view! {
                <div class="mig-cell free" style=format!("grid-column: {} / span 1", s + 1) data-test="mig-map-free">
                    <span class="small">{format!("{s}")}</span>
                </div>
            }).collect_view()}
        </div>
        <p class="small muted mig-fits" data-test="mig-map-fits">
            {if !takes {
                "Takes no new slices now (offline, unhealthy, cordoned, draining or in maintenance).".to_owned()
            } else if fits.is_empty() {
                "Full: no profile fits.".to_owned()
            } else {
                format!("Could start: {}.", fits.join(" · "))
            }}
            {(takes && !no_room.is_empty() && !fits.is_empty()).then(|| format!(" No room for {}.", no_room.join(", ")))}
        </p>
    }
}
