//! The landing page after sign-in.

use crate::components::layout::ViewerResource;
use leptos::prelude::*;
use leptos_meta::Title;
use tessera_protocol::views::TenantRole;

/// Welcome, your tenants, and admin shortcuts.
#[component]
pub fn HomePage() -> impl IntoView {
    let viewer = expect_context::<ViewerResource>();
    view! {
        <Title text="Home"/>
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                let Ok(Some(v)) = viewer.await else {
                    return view! { <p class="muted">"Sign in to continue."</p> }.into_any();
                };
                let first = v.name.split_whitespace().next().unwrap_or(&v.name).to_owned();
                let no_tenants = v.tenants.is_empty();
                view! {
                    <section class="page-head">
                        <h1 data-test="welcome">{format!("Welcome, {first}")}</h1>
                        <p class="muted">"Ask for a GPU slice within your team's quota and start using it in seconds."</p>
                    </section>
                    <section>
                        <h2 class="section-title">"Your tenants"</h2>
                        {no_tenants.then(|| view! {
                            <div class="card empty" data-test="no-tenants">
                                <p>"You are not a member of any tenant yet."</p>
                                <p class="muted">"Tenant membership comes from your single sign-on groups. Ask your platform team to add you to your team's group, then sign in again."</p>
                            </div>
                        })}
                        <div class="grid">
                            {v.tenants.into_iter().map(|m| view! {
                                <a class="card tile" href=format!("/t/{}", m.slug) data-test="tenant-tile">
                                    <span class="tile-title">{m.name}</span>
                                    <span class=match m.role { TenantRole::TenantAdmin => "badge accent", TenantRole::Member => "badge" }>
                                        {m.role.as_str()}
                                    </span>
                                </a>
                            }).collect_view()}
                        </div>
                    </section>
                    {v.platform_admin.then(|| view! {
                        <section>
                            <h2 class="section-title">"Platform"</h2>
                            <div class="grid">
                                <a class="card tile" href="/fleet">
                                    <span class="tile-title">"Fleet"</span>
                                    <span class="muted">"Hosts, GPUs and their health"</span>
                                </a>
                                <a class="card tile" href="/admin/approvals">
                                    <span class="tile-title">"Approvals"</span>
                                    <span class="muted">"Quota requests waiting for a decision"</span>
                                </a>
                                <a class="card tile" href="/admin/quotas">
                                    <span class="tile-title">"Quotas"</span>
                                    <span class="muted">"Every tenant's quota per pool"</span>
                                </a>
                                <a class="card tile" href="/admin/join-tokens">
                                    <span class="tile-title">"Join tokens"</span>
                                    <span class="muted">"Enrol new GPU hosts"</span>
                                </a>
                            </div>
                        </section>
                    })}
                }.into_any()
            })}
        </Suspense>
    }
}
