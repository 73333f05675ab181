//! A tenant's outgoing webhook (tenant admins): where events are posted, the
//! signing secret (shown once), a test event, and the latest deliveries.

use crate::api::{get_webhook, DeleteWebhook, SendTestWebhook, SetWebhook};
use crate::components::copy::CopyButton;
use crate::components::error_panel::{ErrorPanel, FormError};
use crate::format;
use leptos::prelude::*;
use leptos_meta::Title;
use tessera_protocol::quotas::WebhookDeliveryStatus;

/// How often the deliveries reload while the page is open.
const REFRESH: std::time::Duration = std::time::Duration::from_secs(5);

/// `/t/:slug/webhook` (tenant admins).
#[component]
pub fn WebhookPage() -> impl IntoView {
    let slug = super::path_slug();
    view! {
        <Title text="Webhook"/>
        <LiveWebhook slug/>
    }
}

/// The webhook form and its deliveries, reloaded while open: a lazy island (its
/// own WASM file).
#[island(lazy)]
fn LiveWebhook(
    /// The tenant's slug.
    slug: String,
) -> impl IntoView {
    crate::components::hydrated::island_hydrated();
    let slug = StoredValue::new(slug);
    let slug = move || slug.get_value();
    let save = ServerAction::<SetWebhook>::new();
    let delete = ServerAction::<DeleteWebhook>::new();
    let test = ServerAction::<SendTestWebhook>::new();
    let versions = move || {
        (
            slug(),
            save.version().get(),
            delete.version().get(),
            test.version().get(),
        )
    };
    let hook = Resource::new(versions, |(slug, ..)| get_webhook(slug));
    // Deliveries change as the server sends them: reload those on their own,
    // so the form above keeps what is typed in it.
    let (tick, set_tick) = signal(0u64);
    let deliveries = Resource::new(
        move || (versions(), tick.get()),
        |((slug, ..), _)| get_webhook(slug),
    );
    Effect::new(move |_| {
        if let Ok(handle) = set_interval_with_handle(move || set_tick.update(|t| *t += 1), REFRESH)
        {
            on_cleanup(move || handle.clear());
        }
    });
    view! {
        <section class="page-head">
            <p class="eyebrow"><a href=move || format!("/t/{}", slug())>{slug}</a></p>
            <h1>"Webhook"</h1>
            <p class="muted">"Tessera posts your tenant's events — quota decisions, slices that become active, fail or near the end of their lease — as JSON to one HTTPS endpoint of yours: a chat bot, a pipeline, an incident tool."</p>
        </section>
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match hook.await {
                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                    Ok(h) => {
                        let current = h.value;
                        let url = current.as_ref().map(|w| w.url.clone()).unwrap_or_default();
                        let exists = current.is_some();
                        view! {
                            <section class="card">
                                <h2 class="section-title">"Endpoint"</h2>
                                {current.as_ref().map(|w| view! {
                                    <p class="muted small" data-test="webhook-current">{format!("Sending to {} · set up by {} on {}", w.url, w.created_by, format::when(w.created_at))}</p>
                                })}
                                <ActionForm action=save attr:class="form-row" attr:data-test="webhook-form">
                                    <input type="hidden" name="slug" value=slug/>
                                    <label class="field grow">
                                        <span>"URL"</span>
                                        <input type="url" name="url" required maxlength="2000" placeholder="https://hooks.example.com/tessera" value=url data-test="webhook-url"/>
                                    </label>
                                    <button class="button primary" type="submit" data-test="webhook-save">{if exists { "Save and rotate secret" } else { "Save" }}</button>
                                </ActionForm>
                                {exists.then(|| view! {
                                    <div class="form-row webhook-actions">
                                        <ActionForm action=test>
                                            <input type="hidden" name="slug" value=slug/>
                                            <button class="button" type="submit" data-test="webhook-test">"Send test event"</button>
                                        </ActionForm>
                                        <ActionForm action=delete>
                                            <input type="hidden" name="slug" value=slug/>
                                            <button class="button ghost danger" type="submit" data-test="webhook-delete">"Remove webhook"</button>
                                        </ActionForm>
                                    </div>
                                })}
                            </section>
                        }.into_any()
                    }
                }
            })}
        </Suspense>
        {move || save.value().get().map(|r| match r {
            Ok(created) => view! {
                <section class="callout success" data-test="webhook-saved">
                    <p><strong>"Copy the signing secret now — it will not be shown again."</strong></p>
                    <div class="code-block">
                        <pre class="secret" data-test="webhook-secret">{created.secret.clone()}</pre>
                        <CopyButton text=created.secret what="webhook-secret"/>
                    </div>
                </section>
            }.into_any(),
            Err(err) => view! { <FormError err/> }.into_any(),
        })}
        {move || test.value().get().map(|r| match r {
            Ok(()) => view! { <p class="callout success" data-test="webhook-test-sent">"Test event queued; it appears in the deliveries below within seconds."</p> }.into_any(),
            Err(err) => view! { <FormError err/> }.into_any(),
        })}
        {move || delete.value().get().and_then(Result::err).map(|err| view! { <FormError err/> })}
        <section class="card">
            <h2 class="section-title">"Verifying a delivery"</h2>
            <p class="small">"Each request carries two headers. Recompute the signature with your secret and compare it in constant time; reject requests whose timestamp is more than a few minutes old."</p>
            <pre class="code small">"X-Tessera-Timestamp: 1764412200\nX-Tessera-Signature: sha256=HMAC-SHA256(secret, \"<X-Tessera-Timestamp>.<body>\")"</pre>
            <p class="muted small">"Failed deliveries (no 2xx answer within a few seconds) are retried with growing delays for a while, then given up."</p>
        </section>
        <section>
            <h2 class="section-title">"Latest deliveries"</h2>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let Ok(h) = deliveries.await else {
                        return ().into_any();
                    };
                    match h.value.map(|w| (w.deliveries, h.now)) {
                        None => view! { <div class="card empty" data-test="webhook-none"><p>"No webhook set up."</p><p class="muted">"Enter your endpoint's URL above to start receiving events."</p></div> }.into_any(),
                        Some((d, _)) if d.is_empty() => view! { <div class="card empty" data-test="webhook-deliveries-empty"><p>"Nothing sent yet."</p><p class="muted">"Send a test event to check your endpoint."</p></div> }.into_any(),
                        Some((d, now)) => view! {
                            <div class="card table-card">
                                <table data-test="webhook-deliveries">
                                    <thead><tr><th>"Event"</th><th>"Status"</th><th class="num">"Attempts"</th><th>"Last error"</th><th>"When"</th></tr></thead>
                                    <tbody>
                                        {d.into_iter().map(|x| {
                                            let badge = match x.status {
                                                WebhookDeliveryStatus::Delivered => "badge ok",
                                                WebhookDeliveryStatus::Failed => "badge danger",
                                                WebhookDeliveryStatus::Pending => "badge warn",
                                            };
                                            view! {
                                                <tr data-test="webhook-delivery" data-status=x.status.as_str()>
                                                    <td class="mono small">{x.event.as_str()}</td>
                                                    <td><span class=badge data-test="delivery-status">{x.status.as_str()}</span></td>
                                                    <td class="num">{x.attempts}</td>
                                                    <td class="small error-text">{x.last_error.unwrap_or_else(|| "—".into())}{x.detail.map(|d| view! { <div class="muted small" data-test="delivery-detail">{format!("Exactly (platform admins only): {d}")}</div> })}</td>
                                                    <td class="muted small" title=format::when(x.created_at)>{format::ago(x.created_at, now)}</td>
                                                </tr>
                                            }
                                        }).collect_view()}
                                    </tbody>
                                </table>
                            </div>
                        }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}
