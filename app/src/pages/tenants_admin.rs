//! Tenants (platform admins): name, cost centre and the IdP groups whose
//! members get the tenant's roles at their next sign-in.

use crate::api::{list_tenants_admin, SaveTenant};
use crate::components::error_panel::{ErrorPanel, FormError};
use leptos::prelude::*;
use leptos_meta::Title;
use tessera_protocol::views::TenantAdminView;

/// `/admin/tenants` (platform admins).
#[component]
pub fn TenantsAdminPage() -> impl IntoView {
    view! {
        <Title text="Tenants"/>
        <LiveTenants/>
    }
}

/// The tenants with their forms: a lazy island (its own WASM file).
#[island(lazy)]
fn LiveTenants() -> impl IntoView {
    crate::components::hydrated::island_hydrated();
    let save = ServerAction::<SaveTenant>::new();
    let tenants = Resource::new(move || save.version().get(), |_| list_tenants_admin());
    view! {
        <section class="page-head">
            <p class="eyebrow">"Platform"</p>
            <h1>"Tenants"</h1>
            <p class="muted">"Teams that share GPUs. People get a tenant's roles from their single sign-on groups, at their next sign-in. Quotas are set on the Quotas page; every change is in the audit log."</p>
        </section>
        {move || save.value().get().map(|r| match r {
            Ok(()) => view! { <p class="callout success" role="status" data-test="tenant-saved">"Saved. Role changes reach people at their next sign-in."</p> }.into_any(),
            Err(err) => view! { <FormError err/> }.into_any(),
        })}
        <section class="card">
            <details data-test="new-tenant">
                <summary class="button primary">"New tenant"</summary>
                <TenantForm t=None save/>
            </details>
        </section>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match tenants.await {
                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                    Ok(list) => view! {
                        <section class="card table-card">
                            <table data-test="tenants">
                                <thead><tr><th>"Tenant"</th><th>"Cost centre"</th><th>"Member groups"</th><th>"Admin groups"</th><th>"Namespaces"</th><th>"People"</th><th>"Live slices"</th><th></th></tr></thead>
                                <tbody>
                                    {list.into_iter().map(|t| view! { <Row t save/> }).collect_view()}
                                </tbody>
                            </table>
                        </section>
                    }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn Row(t: TenantAdminView, save: ServerAction<SaveTenant>) -> impl IntoView {
    let groups = |g: &[String]| {
        if g.is_empty() {
            "—".to_owned()
        } else {
            g.join(", ")
        }
    };
    view! {
        <tr data-test="tenant-row" data-tenant=t.slug.clone()>
            <td><a href=format!("/t/{}", t.slug)>{t.name.clone()}</a><div class="muted mono small">{t.slug.clone()}</div></td>
            <td>{t.cost_centre.clone().unwrap_or_else(|| "—".into())}</td>
            <td class="mono small" data-test="member-groups">{groups(&t.member_groups)}</td>
            <td class="mono small" data-test="admin-groups">{groups(&t.admin_groups)}</td>
            <td class="mono small" data-test="namespaces">{groups(&t.namespaces)}</td>
            <td class="num">{t.members}</td>
            <td class="num">{t.live_slices}</td>
            <td class="actions">
                <details data-test="edit-tenant">
                    <summary class="button ghost">"Change…"</summary>
                    <TenantForm t=Some(t.clone()) save/>
                </details>
            </td>
        </tr>
    }
}

#[component]
fn TenantForm(t: Option<TenantAdminView>, save: ServerAction<SaveTenant>) -> impl IntoView {
    let new = t.is_none();
    let t = t.unwrap_or(TenantAdminView {
        slug: String::new(),
        name: String::new(),
        cost_centre: None,
        member_groups: Vec::new(),
        admin_groups: Vec::new(),
        namespaces: Vec::new(),
        revision: 0,
        members: 0,
        live_slices: 0,
    });
    view! {
        <ActionForm action=save attr:class="tenant-form" attr:data-test="tenant-form">
            {(!new).then(|| view! { <input type="hidden" name="revision" value=t.revision/> })}
            <div class="form-row">
                <label class="field">
                    <span>"Slug"</span>
                    <input type="text" name="slug" required maxlength="64" pattern="[a-z0-9-]+" value=t.slug.clone() readonly=!new data-test="tenant-slug" title="Lower-case letters, digits and dashes; it is in every address and never changes"/>
                </label>
                <label class="field grow">
                    <span>"Name"</span>
                    <input type="text" name="name" required maxlength="200" value=t.name.clone() data-test="tenant-name"/>
                </label>
                <label class="field">
                    <span>"Cost centre"</span>
                    <input type="text" name="cost_centre" maxlength="100" value=t.cost_centre.clone().unwrap_or_default() data-test="tenant-cost-centre"/>
                </label>
            </div>
            <div class="form-row">
                <label class="field grow">
                    <span>"Member groups (comma-separated)"</span>
                    <input type="text" name="member_groups" value=t.member_groups.join(", ") data-test="tenant-member-groups"/>
                </label>
                <label class="field grow">
                    <span>"Admin groups"</span>
                    <input type="text" name="admin_groups" value=t.admin_groups.join(", ") data-test="tenant-admin-groups"/>
                </label>
                <label class="field grow">
                    <span>"Kubernetes namespaces"</span>
                    <input type="text" name="namespaces" value=t.namespaces.join(", ") placeholder="the slug" data-test="tenant-namespaces" title="Where its pods run: claims and its quota bundle go there (the first gets the claims). Empty: a namespace named like the slug. No two tenants share one."/>
                </label>
            </div>
            <button class="button primary" type="submit" data-test="save-tenant">{if new { "Create tenant" } else { "Save" }}</button>
        </ActionForm>
    }
}
