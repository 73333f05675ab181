//! The frame of every page: header with navigation and the signed-in user.

use crate::api::get_viewer;
use leptos::prelude::*;
use leptos_router::hooks::use_location;
use tessera_protocol::views::{TenantRole, ViewerView};

/// The viewer, loaded once per page load and shared through context.
pub type ViewerResource = Resource<Result<Option<ViewerView>, crate::error::AppError>>;

/// Header, navigation and content area.
#[component]
pub fn Layout(children: Children) -> impl IntoView {
    let viewer: ViewerResource = Resource::new(|| (), |_| get_viewer());
    provide_context(viewer);
    view! {
        <div class="app">
            <header class="topbar">
                <a class="brand" href="/">
                    <span class="brand-mark" aria-hidden="true"></span>
                    "Tessera"
                </a>
                <Suspense fallback=|| ()>
                    {move || Suspend::new(async move {
                        match viewer.await {
                            Ok(Some(v)) => view! { <Nav viewer=v/> }.into_any(),
                            _ => view! {
                                <nav class="nav"></nav>
                                <a class="button" href="/auth/login" rel="external" data-test="sign-in">"Sign in"</a>
                            }.into_any(),
                        }
                    })}
                </Suspense>
            </header>
            <main class="content">{children()}</main>
            <footer class="footer">"Tessera · self-service GPU sharing"</footer>
        </div>
    }
}

#[component]
fn Nav(viewer: ViewerView) -> impl IntoView {
    let pathname = use_location().pathname;
    let current = move |prefix: &str| {
        let path = pathname.get();
        if (prefix == "/" && path == "/") || (prefix != "/" && path.starts_with(prefix)) {
            "nav-link active"
        } else {
            "nav-link"
        }
    };
    let tenants = viewer.tenants.clone();
    let admin = viewer.platform_admin;
    let tenant_admin = viewer
        .tenants
        .iter()
        .any(|m| m.role == TenantRole::TenantAdmin);
    let initials: String = viewer
        .name
        .split_whitespace()
        .filter_map(|w| w.chars().next())
        .take(2)
        .collect::<String>()
        .to_uppercase();
    let roles = {
        let mut r: Vec<String> = viewer
            .tenants
            .iter()
            .map(|m| match m.role {
                TenantRole::TenantAdmin => format!("{} admin", m.name),
                TenantRole::Member => m.name.clone(),
            })
            .collect();
        if admin {
            r.insert(0, "Platform admin".to_owned());
        }
        r.join(" · ")
    };
    view! {
        <nav class="nav" data-test="nav">
            <a class=move || current("/") href="/">"Home"</a>
            {tenants
                .into_iter()
                .map(|m| {
                    let href = format!("/t/{}", m.slug);
                    let prefix = href.clone();
                    view! { <a class=move || current(&prefix) href=href data-test="nav-tenant">{m.name}</a> }
                })
                .collect_view()}
            {admin.then(|| view! {
                <a class=move || current("/fleet") href="/fleet" data-test="nav-fleet">"Fleet"</a>
                <a class=move || current("/admin") href="/admin/join-tokens" data-test="nav-admin">"Join tokens"</a>
            })}
            {(admin || tenant_admin).then(|| view! {
                <a class=move || current("/audit") href="/audit" data-test="nav-audit">"Audit log"</a>
            })}
        </nav>
        <div class="user" data-test="user">
            <span class="avatar" aria-hidden="true">{initials}</span>
            <span class="user-text">
                <span class="user-name" data-test="user-name">{viewer.name.clone()}</span>
                <span class="user-roles" data-test="user-roles">{roles}</span>
            </span>
            <form method="post" action="/auth/logout">
                <button class="button ghost" type="submit" data-test="sign-out">"Sign out"</button>
            </form>
        </div>
    }
}
