//! The frame of every page: header with navigation and the signed-in user.

use crate::api::{get_unread_notifications, get_viewer};
use crate::error::AppError;
use leptos::prelude::*;
use leptos_router::hooks::use_location;
use tessera_protocol::views::{TenantRole, ViewerView};

/// The viewer, loaded once per page load and shared through context.
pub type ViewerResource = Resource<Result<Option<ViewerView>, crate::error::AppError>>;

/// A window event: the viewer's notifications were read here (the bell
/// reloads its count at once).
pub const NOTIFICATIONS_READ: &str = "tessera:notifications-read";

/// A window event: the bell's count changed, or the bell counted again
/// because something was read (pages that list notifications reload, once
/// per read).
pub const UNREAD_CHANGED: &str = "tessera:unread-changed";

/// Tells the window's listeners that `event` happened (browser only).
pub fn announce(event: &str) {
    if let Ok(e) = web_sys::Event::new(event) {
        let _ = window().dispatch_event(&e);
    }
}

/// How often the bell asks for the unread count.
const UNREAD_REFRESH: std::time::Duration = std::time::Duration::from_secs(10);

/// Header, navigation and content area.
#[component]
pub fn Layout(children: Children) -> impl IntoView {
    let viewer: ViewerResource = Resource::new(|| (), |_| get_viewer());
    provide_context(viewer);
    // The count when the page is rendered; the bell reloads it itself. (A
    // Suspense inside the header would be created before the page's own on
    // hydration but after them on the server, and shift their ids.)
    let unread_at_load: Resource<Result<u64, AppError>> =
        Resource::new(|| (), |_| get_unread_notifications());
    view! {
        <div class="app">
            <header class="topbar">
                <a class="brand" href="/">
                    <span class="brand-mark" aria-hidden="true"></span>
                    "Tessera"
                </a>
                <Suspense fallback=|| ()>
                    {move || Suspend::new(async move {
                        let viewer = viewer.await;
                        let unread = unread_at_load.await.unwrap_or(0);
                        match viewer {
                            Ok(Some(v)) => view! { <Nav viewer=v unread/> }.into_any(),
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
fn Nav(viewer: ViewerView, unread: u64) -> impl IntoView {
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
    let sees_usage = admin || !tenants.is_empty();
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
    let roles = crate::format::roles(admin, &viewer.tenants);
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
                <a class=move || current("/admin/approvals") href="/admin/approvals" data-test="nav-approvals">"Approvals"</a>
                <a class=move || current("/admin/quotas") href="/admin/quotas" data-test="nav-quotas">"Quotas"</a>
                <a class=move || current("/admin/pools") href="/admin/pools" data-test="nav-pools">"Pools"</a>
                <a class=move || current("/admin/tenants") href="/admin/tenants" data-test="nav-tenants">"Tenants"</a>
                <a class=move || current("/admin/people") href="/admin/people" data-test="nav-people">"People"</a>
                <a class=move || current("/admin/join-tokens") href="/admin/join-tokens" data-test="nav-admin">"Join tokens"</a>
            })}
            {sees_usage.then(|| view! {
                <a class=move || current("/usage") href="/usage" data-test="nav-usage">"Usage"</a>
            })}
            {(admin || tenant_admin).then(|| view! {
                <a class=move || current("/audit") href="/audit" data-test="nav-audit">"Audit log"</a>
            })}
        </nav>
        <div class="user" data-test="user">
            // The island renders the same on every page; the highlight is
            // the page's.
            <span class=move || if pathname.get() == "/notifications" { "bell-slot active" } else { "bell-slot" }>
                <Bell unread/>
            </span>
            <span class="avatar" aria-hidden="true">{initials}</span>
            <span class="user-text">
                <span class="user-name" data-test="user-name">{viewer.name.clone()}</span>
                <span class="user-roles" data-test="user-roles">{roles}</span>
            </span>
            <form method="post" action="/auth/logout">
                <button class="button ghost" type="submit" data-test="sign-out">"Sign out"</button>
            </form>
            <form method="post" action="/auth/logout-everywhere">
                <button class="button ghost small-button" type="submit" title="End every session you have, on every browser and device" aria-label="Sign out everywhere" data-test="sign-out-everywhere">"Everywhere"</button>
            </form>
        </div>
    }
}

/// The notification bell with the unread count: an island, so it polls on
/// every page whatever the page around it does.
#[island]
fn Bell(
    /// The count when the page was rendered.
    unread: u64,
) -> impl IntoView {
    crate::components::hydrated::island_hydrated();
    let unread = RwSignal::new(unread);
    // Counts again; tells the page when the count changed, or always after
    // something was read (`after_read`), so a list on the page reloads once.
    let reload = move |after_read: bool| {
        leptos::task::spawn_local(async move {
            let counted = get_unread_notifications().await;
            let changed = match counted {
                Ok(n) if n != unread.get_untracked() => {
                    unread.set(n);
                    true
                }
                _ => false,
            };
            if changed || after_read {
                announce(UNREAD_CHANGED);
            }
        });
    };
    // Effects run only in the browser: the server renders the count once
    // and never polls.
    Effect::new(move |_| {
        if let Ok(handle) = set_interval_with_handle(move || reload(false), UNREAD_REFRESH) {
            on_cleanup(move || handle.clear());
        }
        let read = window_event_listener_untyped(NOTIFICATIONS_READ, move |_| reload(true));
        on_cleanup(move || read.remove());
    });
    view! {
        <a class="bell" href="/notifications" data-test="notifications-bell" aria-label="Notifications" title="Notifications">
            <svg viewBox="0 0 24 24" width="20" height="20" aria-hidden="true" fill="none" stroke="currentColor" stroke-width="2" stroke-linecap="round" stroke-linejoin="round">
                <path d="M6 8a6 6 0 0 1 12 0c0 7 3 9 3 9H3s3-2 3-9"/>
                <path d="M10.3 21a1.94 1.94 0 0 0 3.4 0"/>
            </svg>
            {move || {
                let n = unread.get();
                (n > 0).then(|| view! {
                    <span class="bell-count" data-test="unread-count" aria-label=format!("{n} unread")>{if n > 99 { "99+".to_owned() } else { n.to_string() }}</span>
                })
            }}
        </a>
    }
}
