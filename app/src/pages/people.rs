//! People (platform admins): everyone who signed in, their roles from the
//! IdP, the API tokens they made; sign a person out everywhere, deactivate
//! or reactivate them.

use crate::api::{list_people, SetPersonActive, SignOutPerson};
use crate::components::error_panel::ErrorPanel;
use crate::format;
use leptos::prelude::*;
use leptos_meta::Title;
use tessera_protocol::views::PersonView;

/// `/admin/people` (platform admins).
#[component]
pub fn PeoplePage() -> impl IntoView {
    view! {
        <Title text="People"/>
        <LivePeople/>
    }
}

/// The list with its actions: a lazy island (its own WASM file).
#[island(lazy)]
fn LivePeople() -> impl IntoView {
    crate::components::hydrated::island_hydrated();
    let sign_out = ServerAction::<SignOutPerson>::new();
    let set_active = ServerAction::<SetPersonActive>::new();
    let people = Resource::new(
        move || (sign_out.version().get(), set_active.version().get()),
        |_| list_people(),
    );
    let outcome = move || {
        let done = |p: &PersonView, what: &str| format!("{} {what}.", p.name);
        let last = set_active
            .value()
            .get()
            .map(|r| {
                r.map(|p| {
                    if p.deactivated_at.is_some() {
                        done(
                            &p,
                            "is deactivated: sign-in refused, sessions ended, API tokens revoked",
                        )
                    } else {
                        done(&p, "may sign in again")
                    }
                })
            })
            .or_else(|| {
                sign_out
                    .value()
                    .get()
                    .map(|r| r.map(|p| done(&p, "is signed out everywhere")))
            });
        last.map(|r| match r {
            Ok(text) => {
                view! { <p class="callout success" data-test="people-done">{text}</p> }.into_any()
            }
            Err(err) => {
                view! { <p class="callout danger" data-test="form-error">{err.message}</p> }
                    .into_any()
            }
        })
    };
    view! {
        <section class="page-head">
            <p class="eyebrow">"Platform"</p>
            <h1>"People"</h1>
            <p class="muted">"Everyone who has signed in. Roles come from the IdP's groups at each sign-in and are re-checked while a session lasts. Deactivating a person refuses their sign-in, ends their sessions and revokes the API tokens they made; removing them from the IdP's groups does the rest."</p>
        </section>
        {outcome}
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match people.await {
                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                    Ok(list) => {
                        let now = list.now;
                        let me = list.value.me;
                        view! {
                            <section class="card table-card">
                                <table data-test="people">
                                    <thead><tr><th>"Person"</th><th>"Roles"</th><th>"Last sign-in"</th><th>"API tokens"</th><th>"Status"</th><th></th></tr></thead>
                                    <tbody>
                                        {list.value.people.into_iter().map(|p| {
                                            let active = p.deactivated_at.is_none();
                                            let id = p.id.get();
                                            let roles = roles(&p);
                                            view! {
                                                <tr data-test="person-row" data-user-id=id data-active=active.to_string()>
                                                    <td>{p.name.clone()}<div class="muted small">{p.email.clone().unwrap_or_default()}</div></td>
                                                    <td class="small">{roles}</td>
                                                    <td class="muted">{p.last_login_at.map(|t| format::ago(t, now)).unwrap_or_else(|| "never".into())}</td>
                                                    <td data-test="person-tokens">{p.api_tokens}</td>
                                                    <td>{match p.deactivated_at {
                                                        Some(at) => view! { <span class="badge subtle" data-test="person-status">"deactivated"</span><div class="muted small">{format::when(at)}</div> }.into_any(),
                                                        None => view! { <span class="badge ok" data-test="person-status">"active"</span> }.into_any(),
                                                    }}</td>
                                                    <td class="actions inline-actions">
                                                        {active.then(|| view! {
                                                            <ActionForm action=sign_out>
                                                                <input type="hidden" name="id" value=id/>
                                                                <button class="button ghost" type="submit" title="End every session this person has; their browsers sign in again" data-test="person-sign-out">"Sign out everywhere"</button>
                                                            </ActionForm>
                                                        })}
                                                        {(p.id != me).then(|| view! {
                                                            <ActionForm action=set_active>
                                                                <input type="hidden" name="id" value=id/>
                                                                <input type="hidden" name="active" value=(!active).to_string()/>
                                                                {if active {
                                                                    view! { <button class="button ghost danger" type="submit" data-test="person-deactivate">"Deactivate"</button> }.into_any()
                                                                } else {
                                                                    view! { <button class="button ghost" type="submit" data-test="person-reactivate">"Reactivate"</button> }.into_any()
                                                                }}
                                                            </ActionForm>
                                                        })}
                                                    </td>
                                                </tr>
                                            }
                                        }).collect_view()}
                                    </tbody>
                                </table>
                            </section>
                        }.into_any()
                    }
                }
            })}
        </Suspense>
    }
}

/// "Platform admin · Vision admin · NLP", or "no roles".
fn roles(p: &PersonView) -> String {
    let r = format::roles(p.platform_admin, &p.tenants);
    if r.is_empty() {
        "no roles".to_owned()
    } else {
        r
    }
}
