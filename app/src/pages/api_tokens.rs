//! A tenant's API tokens: create (secret shown once), list, revoke.

use crate::api::{list_api_tokens, CreateApiToken, RevokeApiToken};
use crate::components::error_panel::ErrorPanel;
use crate::format;
use leptos::prelude::*;
use leptos_meta::Title;
use tessera_core::role::TokenScope;

/// What a token of `scope` may do, in the table's words.
fn scope_label(scope: TokenScope) -> &'static str {
    match scope {
        TokenScope::Read => "read",
        TokenScope::Request => "request and release",
    }
}

/// `/t/:slug/api-tokens` (tenant admins).
#[component]
pub fn ApiTokensPage() -> impl IntoView {
    let slug = super::path_slug();
    view! {
        <Title text="API tokens"/>
        <LiveApiTokens slug/>
    }
}

/// The tenant's API tokens with their create and revoke forms (a created secret
/// is shown once): a lazy island (its own WASM file).
#[island(lazy)]
fn LiveApiTokens(
    /// The tenant's slug.
    slug: String,
) -> impl IntoView {
    crate::components::hydrated::island_hydrated();
    let slug = StoredValue::new(slug);
    let slug = move || slug.get_value();
    let create = ServerAction::<CreateApiToken>::new();
    let revoke = ServerAction::<RevokeApiToken>::new();
    let tokens = Resource::new(
        move || (slug(), create.version().get(), revoke.version().get()),
        |(slug, _, _)| list_api_tokens(slug),
    );
    view! {
        <section class="page-head">
            <p class="eyebrow"><a href=move || format!("/t/{}", slug())>{slug}</a></p>
            <h1>"API tokens"</h1>
            <p class="muted">"Scripts and CI pipelines use a token to request and release slices for this tenant through "<a href="/api/v1/openapi.json">"the REST API"</a>"; a dashboard that only looks needs a read-only one. A token acts for the tenant, and only while you still belong to it; revoke it when it is no longer needed."</p>
        </section>
        <section class="card">
            <ActionForm action=create attr:class="form-row" attr:data-test="create-api-token-form">
                <input type="hidden" name="slug" prop:value=slug/>
                <label class="field grow">
                    <span>"Name"</span>
                    <input type="text" name="name" required maxlength="100" placeholder="nightly-training CI" data-test="api-token-name"/>
                </label>
                <label class="field">
                    <span>"May"</span>
                    <select name="scope" data-test="api-token-scope">
                        <option value="request" selected>"request and release"</option>
                        <option value="read">"only read"</option>
                    </select>
                </label>
                <label class="field">
                    <span>"Expires in (days)"</span>
                    <input type="number" name="days" min="1" step="1" placeholder="default" data-test="api-token-days"/>
                </label>
                <button class="button primary" type="submit" data-test="create-api-token">"Create token"</button>
            </ActionForm>
            {move || create.value().get().map(|result| match result {
                Ok(created) => view! {
                    <div class="callout success" data-test="api-token-created">
                        <p><strong>"Copy this token now — it will not be shown again."</strong></p>
                        <pre class="secret" data-test="api-token-secret">{created.secret.clone()}</pre>
                        <p class="muted small" data-test="api-token-expiry">{format!("It works until {}; then create a new one.", format::when(created.token.expires_at))}</p>
                        <p class="muted small"><code>{format!("curl -H 'Authorization: Bearer {}' <URL>/api/v1/allocations", created.secret)}</code></p>
                    </div>
                }.into_any(),
                Err(err) => view! { <p class="callout danger" data-test="form-error">{err.message}</p> }.into_any(),
            })}
        </section>
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match tokens.await {
                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                    Ok(list) if list.is_empty() => view! {
                        <div class="card empty"><p>"No API tokens yet."</p></div>
                    }.into_any(),
                    Ok(list) => view! {
                        <section class="card table-card">
                            <table data-test="api-tokens">
                                <thead><tr><th>"Name"</th><th>"Token"</th><th>"May"</th><th>"Created"</th><th>"Expires"</th><th>"Last used"</th><th>"Status"</th><th></th></tr></thead>
                                <tbody>
                                    {list.into_iter().map(|t| {
                                        let revoked = t.revoked_at.is_some();
                                        let active = !revoked && !t.expired;
                                        view! {
                                            <tr data-test="api-token-row">
                                                <td>{t.name}<div class="muted small">{t.created_by}</div></td>
                                                <td class="mono">{format!("{}…", t.prefix)}</td>
                                                <td data-test="api-token-scope">{scope_label(t.scope)}</td>
                                                <td class="muted">{format::when(t.created_at)}</td>
                                                <td class="muted" data-test="api-token-expires">{format::when(t.expires_at)}</td>
                                                <td class="muted">{t.last_used_at.map(format::when).unwrap_or_else(|| "never".into())}</td>
                                                <td>{match (revoked, t.expired, t.suspended) {
                                                    (true, _, _) => view! { <span class="badge subtle">"revoked"</span> }.into_any(),
                                                    (false, true, _) => view! { <span class="badge subtle">"expired"</span> }.into_any(),
                                                    (false, false, Some(why)) => view! { <span class="badge warn" title=why.clone() data-test="api-token-suspended">"suspended"</span><div class="muted small">{why}</div> }.into_any(),
                                                    (false, false, None) => view! { <span class="badge ok">"active"</span> }.into_any(),
                                                }}</td>
                                                <td class="actions">
                                                    {active.then(|| view! {
                                                        <ActionForm action=revoke>
                                                            <input type="hidden" name="slug" prop:value=slug/>
                                                            <input type="hidden" name="id" value=t.id.get()/>
                                                            <button class="button ghost danger" type="submit" data-test="revoke-api-token">"Revoke"</button>
                                                        </ActionForm>
                                                    })}
                                                </td>
                                            </tr>
                                        }
                                    }).collect_view()}
                                </tbody>
                            </table>
                        </section>
                    }.into_any(),
                }
            })}
        </Suspense>
    }
}
