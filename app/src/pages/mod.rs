//! One module per page.

pub mod allocation;
pub mod api_tokens;
pub mod approvals;
pub mod audit;
pub mod budget;
pub mod fleet;
pub mod home;
pub mod insights;
pub mod join_tokens;
pub mod not_found;
pub mod notifications;
pub mod people;
pub mod pools_admin;
pub mod quotas_admin;
pub mod request;
pub mod signed_out;
pub mod tenant;
pub mod tenant_quota;
pub mod tenants_admin;
pub mod usage;
pub mod webhook;

/// The `:slug` of the page's path. Page components run on the server, once
/// per request (only islands run in the browser), so it is read once.
fn path_slug() -> String {
    use leptos::prelude::WithUntracked;
    leptos_router::hooks::use_params_map().with_untracked(|p| p.get("slug").unwrap_or_default())
}
