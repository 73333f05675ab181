//! A tenant's home: members, roles and allocations.

use crate::api::get_tenant;
use crate::components::error_panel::ErrorPanel;
use crate::format;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;
use tessera_protocol::views::{TenantRole, TenantView};

/// `/t/:slug`
#[component]
pub fn TenantPage() -> impl IntoView {
    let params = use_params_map();
    let slug = move || params.read().get("slug").unwrap_or_default();
    let tenant = Resource::new(slug, get_tenant);
    view! {
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match tenant.await {
                    Ok(t) => view! { <Tenant t/> }.into_any(),
                    Err(err) => view! { <Title text="Error"/><ErrorPanel err/> }.into_any(),
                }
            })}
        </Suspense>
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
                <h2 class="section-title">"Allocations"</h2>
            </div>
            {if t.allocations.is_empty() {
                view! {
                    <div class="card empty" data-test="allocations-empty">
                        <p>"No GPU slices yet."</p>
                        <p class="muted">"Slices your team requests appear here with their state, shape, GPU and time left."</p>
                    </div>
                }.into_any()
            } else {
                view! {
                    <div class="card table-card">
                        <table data-test="allocations">
                            <thead><tr><th>"Id"</th><th>"State"</th><th>"Shape"</th><th>"GPU"</th><th>"Requested"</th></tr></thead>
                            <tbody>
                                {t.allocations.iter().map(|a| view! {
                                    <tr>
                                        <td>{a.id}</td>
                                        <td><span class="badge">{a.state.clone()}</span></td>
                                        <td>{a.shape.clone()}</td>
                                        <td>{a.gpu.clone().unwrap_or_else(|| "—".into())}</td>
                                        <td>{format::when(a.created_at)}</td>
                                    </tr>
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
