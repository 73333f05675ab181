//! The viewer's notifications, newest first: quota decisions, slices that
//! became active or whose lease ends soon, and the like.

use crate::api::{
    get_notifications, mark_notification_read, MarkAllNotificationsRead, MarkNotificationRead,
};
use crate::components::error_panel::{ErrorPanel, FormError};
use crate::components::go::navigator;
use crate::components::layout::{announce, NOTIFICATIONS_READ, UNREAD_CHANGED};
use crate::format;
use chrono::{DateTime, Utc};
use leptos::prelude::*;
use leptos_meta::Title;
use tessera_core::notify::{NotificationKind, NotificationTopic};
use tessera_protocol::quotas::{NotificationView, NotificationsPage as Page};

/// `/notifications`
#[component]
pub fn NotificationsPage() -> impl IntoView {
    view! {
        <Title text="Notifications"/>
        <LiveNotifications/>
    }
}

/// The inbox, reloaded when something is read here or the bell's count changes:
/// a lazy island (its own WASM file).
#[island(lazy)]
fn LiveNotifications() -> impl IntoView {
    crate::components::hydrated::island_hydrated();
    // Bumped to reload the list when the bell has counted again: after its
    // count changed (news arrived, or was read elsewhere) and after
    // something was read here (the bell counts at once, then the list
    // reloads: once).
    let refresh = RwSignal::new(0u64);
    let mark_all = ServerAction::<MarkAllNotificationsRead>::new();
    let mark_one = ServerAction::<MarkNotificationRead>::new();
    Effect::new(move |_| {
        if mark_all.value().get().is_some() || mark_one.value().get().is_some() {
            announce(NOTIFICATIONS_READ);
        }
    });
    Effect::new(move |_| {
        let changed = window_event_listener_untyped(UNREAD_CHANGED, move |_| {
            refresh.update(|n| *n += 1);
        });
        on_cleanup(move || changed.remove());
    });
    let list = Resource::new(move || refresh.get(), |_| get_notifications());
    view! {
        <section class="page-head">
            <div class="section-row">
                <div>
                    <p class="eyebrow">"Inbox"</p>
                    <h1>"Notifications"</h1>
                </div>
                <ActionForm action=mark_all>
                    <button class="button ghost" type="submit" data-test="mark-all-read">"Mark all read"</button>
                </ActionForm>
            </div>
            <p class="muted">"Decisions on your team's quota requests, slices that became ready or whose lease is ending, and other news for you."</p>
        </section>
        {move || mark_all.value().get().and_then(Result::err).map(|err| view! { <FormError err/> })}
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match list.await {
                    Ok(p) => view! { <Inbox p=p.value now=p.now mark_one/> }.into_any(),
                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Inbox(
    p: Page,
    now: DateTime<Utc>,
    mark_one: ServerAction<MarkNotificationRead>,
) -> impl IntoView {
    if p.items.is_empty() {
        return view! {
            <div class="card empty" data-test="notifications-empty">
                <p class="empty-icon" aria-hidden="true">"🔔"</p>
                <p>"You are all caught up."</p>
                <p class="muted">"When a quota request is decided or a slice needs your attention, it shows up here."</p>
            </div>
        }
        .into_any();
    }
    view! {
        <p class="muted small" data-test="unread-total">{format!("{} unread · {} shown", p.unread, p.items.len())}</p>
        <ul class="card notifications" data-test="notifications">
            {p.items.into_iter().map(|n| view! { <Item n now mark_one/> }).collect_view()}
        </ul>
    }
    .into_any()
}

/// What a notification is about, from its kind (`quota_request.approved`).
fn topic(kind: NotificationKind) -> &'static str {
    match kind.topic() {
        NotificationTopic::Quota | NotificationTopic::QuotaRequest => "Quota",
        NotificationTopic::Allocation => "Slice",
        NotificationTopic::Webhook => "Webhook",
        NotificationTopic::Fleet => "Fleet",
        NotificationTopic::Budget => "Budget",
    }
}

#[component]
fn Item(
    n: NotificationView,
    now: DateTime<Utc>,
    mark_one: ServerAction<MarkNotificationRead>,
) -> impl IntoView {
    let navigate = navigator();
    let (id, read) = (n.id, n.read);
    let open = n.link.clone().map(|link| {
        let href = link.clone();
        let on_click = move |ev: leptos::ev::MouseEvent| {
            // Mark it read first, then follow the link inside the app.
            if read || !link.starts_with('/') {
                return;
            }
            ev.prevent_default();
            let (link, navigate) = (link.clone(), navigate.clone());
            leptos::task::spawn_local(async move {
                let _ = mark_notification_read(id).await;
                announce(NOTIFICATIONS_READ);
                navigate(&link);
            });
        };
        view! { <a class="button" href=href on:click=on_click data-test="notification-open">"Open"</a> }
    });
    let mark = (!read).then(|| {
        view! {
            <ActionForm action=mark_one>
                <input type="hidden" name="id" value=id.get()/>
                <button class="button ghost" type="submit" data-test="mark-read">"Mark read"</button>
            </ActionForm>
        }
    });
    view! {
        <li class="notification" class:unread=!read data-test="notification" data-kind=n.kind.as_str() data-read=read.to_string() data-id=id.to_string()>
            <span class="dot" aria-hidden="true"></span>
            <div class="notification-main">
                <div class="notification-head">
                    <span class="badge subtle">{topic(n.kind)}</span>
                    <strong class="notification-title" data-test="notification-title">{n.title.clone()}</strong>
                </div>
                {(!n.body.is_empty()).then(|| view! { <p class="notification-body" data-test="notification-body">{n.body.clone()}</p> })}
                <span class="muted small" title=format::when(n.created_at)>{format::ago(n.created_at, now)}</span>
            </div>
            <div class="notification-actions">{mark}{open}</div>
        </li>
    }
}
