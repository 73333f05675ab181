//! Join tokens: create (secret shown once) and revoke.

use crate::api::{list_host_names, list_join_tokens, CreateJoinToken, RevokeJoinToken};
use crate::components::error_panel::ErrorPanel;
use crate::format;
use leptos::prelude::*;
use leptos_meta::Title;
use tessera_protocol::views::JoinTokenStatus;

/// `/admin/join-tokens` (platform admins).
#[component]
pub fn JoinTokensPage() -> impl IntoView {
    view! {
        <Title text="Join tokens"/>
        <LiveJoinTokens/>
    }
}

/// The join tokens with their create and revoke forms (a created secret is
/// shown once): a lazy island (its own WASM file).
#[island(lazy)]
fn LiveJoinTokens() -> impl IntoView {
    crate::components::hydrated::island_hydrated();
    let create = ServerAction::<CreateJoinToken>::new();
    let revoke = ServerAction::<RevokeJoinToken>::new();
    let tokens = Resource::new(
        move || (create.version().get(), revoke.version().get()),
        |_| list_join_tokens(),
    );
    // Enrolled hosts, for re-enrolment tokens.
    let hosts = Resource::new(|| (), |_| list_host_names());
    view! {
        <section class="page-head">
            <p class="eyebrow">"Platform"</p>
            <h1>"Join tokens"</h1>
            <p class="muted">"A join token enrols one GPU host. The agent trades it for its own credential on first start; the token then stops working."</p>
        </section>
        <section class="card">
            <h2 class="section-title">"Create a token"</h2>
            <ActionForm action=create attr:class="form-row" attr:data-test="create-token-form">
                <label class="field grow">
                    <span>"What is it for?"</span>
                    <input type="text" name="description" required maxlength="200" placeholder="gpu-node-17 in rack B" data-test="token-description"/>
                </label>
                <label class="field">
                    <span>"Expires after"</span>
                    <select name="ttl_hours" data-test="token-ttl">
                        <option value="1">"1 hour"</option>
                        <option value="24" selected>"1 day"</option>
                        <option value="168">"7 days"</option>
                    </select>
                </label>
                <Suspense fallback=|| ()>
                    {move || Suspend::new(async move {
                        let names: Vec<String> = hosts.await.unwrap_or_default();
                        (!names.is_empty()).then(|| view! {
                            <label class="field" title="Empty: the token enrols a new host only. To give an enrolled host a new credential (a reinstalled machine, a lost credential file), name that host.">
                                <span>"Re-enrol host (optional)"</span>
                                <input type="text" name="for_host" list="enrolled-hosts" maxlength="253" placeholder="a new host" autocomplete="off" data-test="token-for-host"/>
                                <datalist id="enrolled-hosts">
                                    {names.into_iter().map(|n| view! { <option value=n/> }).collect_view()}
                                </datalist>
                            </label>
                        })
                    })}
                </Suspense>
                <button class="button primary" type="submit" data-test="create-token">"Create token"</button>
            </ActionForm>
            {move || create.value().get().map(|result| match result {
                Ok(created) => view! {
                    <div class="callout success" data-test="token-created">
                        <p><strong>"Copy this token now — it will not be shown again."</strong></p>
                        <pre class="secret" data-test="token-secret">{created.secret.clone()}</pre>
                        <p class="muted small">"Start the agent with "<code>{format!("TESSERA_JOIN_TOKEN={} tessera-agent --server <URL>", created.secret)}</code>" (or "<code>"--join-token-file FILE"</code>"; a token on the command line is visible to every user in "<code>"ps"</code>")."</p>
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
                        <div class="card empty"><p>"No join tokens yet."</p></div>
                    }.into_any(),
                    Ok(list) => view! {
                        <section class="card table-card">
                            <table data-test="tokens">
                                <thead><tr><th>"Description"</th><th>"Status"</th><th>"Created"</th><th>"Expires"</th><th>"Enrols"</th><th>"Used by"</th><th></th></tr></thead>
                                <tbody>
                                    {list.into_iter().map(|t| {
                                        let active = t.status == JoinTokenStatus::Active;
                                        let badge = match t.status {
                                            JoinTokenStatus::Active => "badge accent",
                                            JoinTokenStatus::Used => "badge",
                                            JoinTokenStatus::Expired | JoinTokenStatus::Revoked => "badge subtle",
                                        };
                                        view! {
                                            <tr data-test="token-row">
                                                <td>{t.description}<div class="muted small">{t.created_by.unwrap_or_default()}</div></td>
                                                <td><span class=badge data-test="token-status">{t.status.as_str()}</span></td>
                                                <td class="muted">{format::when(t.created_at)}</td>
                                                <td class="muted">{format::when(t.expires_at)}</td>
                                                <td data-test="token-for-host">{t.for_host.map_or_else(|| "a new host".to_owned(), |h| format!("re-enrols {h}"))}</td>
                                                <td>{t.used_by_host.unwrap_or_else(|| "—".into())}</td>
                                                <td class="actions">
                                                    {active.then(|| view! {
                                                        <ActionForm action=revoke>
                                                            <input type="hidden" name="id" value=t.id.get()/>
                                                            <button class="button ghost danger" type="submit" data-test="revoke-token">"Revoke"</button>
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
