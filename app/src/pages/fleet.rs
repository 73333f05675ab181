//! The fleet: hosts with status and last-seen, GPUs with model, memory and MIG mode.

use crate::api::get_fleet;
use crate::components::error_panel::ErrorPanel;
use crate::format;
use leptos::prelude::*;
use leptos_meta::Title;
use tessera_protocol::views::{FleetView, HostStatus, HostView};

/// How often an open fleet page refreshes itself.
const REFRESH: std::time::Duration = std::time::Duration::from_secs(5);

/// `/fleet` (platform admins). Refreshes while open, so hosts going offline
/// show without a reload.
#[component]
pub fn FleetPage() -> impl IntoView {
    let (tick, set_tick) = signal(0u64);
    let fleet = Resource::new(move || tick.get(), |_| get_fleet());
    // Effects run only in the browser: no timers during server rendering.
    Effect::new(move |_| {
        if let Ok(handle) = set_interval_with_handle(move || set_tick.update(|t| *t += 1), REFRESH)
        {
            on_cleanup(move || handle.clear());
        }
    });
    view! {
        <Title text="Fleet"/>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match fleet.await {
                    Ok(f) => view! { <Fleet f/> }.into_any(),
                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Fleet(f: FleetView) -> impl IntoView {
    let hosts = f.hosts.len();
    let online = f
        .hosts
        .iter()
        .filter(|h| h.status == HostStatus::Online)
        .count();
    let gpus: usize = f.hosts.iter().map(|h| h.gpus.len()).sum();
    let mig = f
        .hosts
        .iter()
        .flat_map(|h| &h.gpus)
        .filter(|g| g.mig_enabled)
        .count();
    let memory: i64 = f
        .hosts
        .iter()
        .flat_map(|h| &h.gpus)
        .map(|g| g.memory_mib)
        .sum();
    let now = f.as_of;
    view! {
        <section class="page-head">
            <p class="eyebrow">"Platform"</p>
            <h1>"Fleet"</h1>
        </section>
        <section class="stats">
            <div class="stat card"><span class="stat-value" data-test="stat-hosts">{format!("{online}/{hosts}")}</span><span class="stat-label">"hosts online"</span></div>
            <div class="stat card"><span class="stat-value" data-test="stat-gpus">{gpus}</span><span class="stat-label">"GPUs"</span></div>
            <div class="stat card"><span class="stat-value">{mig}</span><span class="stat-label">"in MIG mode"</span></div>
            <div class="stat card"><span class="stat-value">{format::mib(memory)}</span><span class="stat-label">"GPU memory"</span></div>
        </section>
        {(!f.pools.is_empty()).then(|| view! {
            <section>
                <h2 class="section-title">"Pools"</h2>
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
        {f.hosts.into_iter().map(|h| view! { <Host h now/> }).collect_view()}
    }
}

#[component]
fn Host(h: HostView, now: chrono::DateTime<chrono::Utc>) -> impl IntoView {
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
    view! {
        <section class="card host" data-test="host" data-hostname=h.hostname.clone()>
            <div class="host-head">
                <div>
                    <h2 class="host-name" data-test="host-name">{h.hostname.clone()}</h2>
                    <p class="muted small">{details}</p>
                </div>
                <div class="host-status">
                    <span class=format!("status status-{status}") data-test="host-status">{status}</span>
                    <span class="muted small" data-test="host-last-seen">{format!("last seen {seen}")}</span>
                </div>
            </div>
            <table class="gpus" data-test="gpus">
                <thead><tr><th>"#"</th><th>"Model"</th><th>"Memory"</th><th>"Pool"</th><th>"MIG"</th><th>"Health"</th><th>"UUID"</th></tr></thead>
                <tbody>
                    {h.gpus.into_iter().map(|g| {
                        let mig = match (g.mig_capable, g.mig_enabled) {
                            (true, true) => ("badge accent", "enabled"),
                            (true, false) => ("badge", "disabled"),
                            _ => ("badge subtle", "n/a"),
                        };
                        let instances = g.mig_instances.clone();
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
                                </td>
                                <td>{g.health}</td>
                                <td class="mono muted small uuid" title=g.uuid.clone()>{g.uuid.clone()}</td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </section>
    }
}
