//! Tessera's pages. Server functions in [`api`] are thin adapters over
//! `tessera-service`; the components only render.
#![recursion_limit = "256"]

pub mod api;
pub mod components;
pub mod error;
pub mod format;
pub mod pages;

use components::layout::Layout;
use leptos::prelude::*;
use leptos_meta::{provide_meta_context, HashedStylesheet, MetaTags, Title};
use leptos_router::components::{Route, Router, Routes};
use leptos_router::{path, SsrMode};
use pages::{
    allocation::AllocationPage,
    api_tokens::ApiTokensPage,
    approvals::ApprovalsPage,
    audit::AuditLogPage,
    budget::{BudgetPage, StatementPage},
    fleet::FleetPage,
    home::HomePage,
    insights::InsightsPage,
    join_tokens::JoinTokensPage,
    not_found::NotFound,
    notifications::NotificationsPage,
    people::PeoplePage,
    pools_admin::PoolsAdminPage,
    quotas_admin::QuotasAdminPage,
    request::RequestPage,
    signed_out::SignedOutPage,
    tenant::TenantPage,
    tenant_quota::TenantQuotaPage,
    tenants_admin::TenantsAdminPage,
    usage::UsagePage,
    webhook::WebhookPage,
};

/// The HTML document around the app.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <meta name="color-scheme" content="light dark"/>
                <link rel="icon" type="image/svg+xml" href="/favicon.svg"/>
                // `/pkg/tessera.<hash>.css` when the bundle is built with hashed names.
                <HashedStylesheet options=options.clone() id="tessera"/>
                <HydrationScripts options islands=true/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// The app: routes inside the layout.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Title formatter=|text: String| if text.is_empty() { "Tessera".to_owned() } else { format!("{text} · Tessera") }/>
        <Router>
            <Layout>
                <Routes fallback=|| view! { <NotFound/> }>
                    <Route path=path!("/") view=HomePage ssr=SsrMode::Async/>
                    <Route path=path!("/t/:slug") view=TenantPage ssr=SsrMode::Async/>
                    <Route path=path!("/t/:slug/request") view=RequestPage ssr=SsrMode::Async/>
                    <Route path=path!("/t/:slug/a/:id") view=AllocationPage ssr=SsrMode::Async/>
                    <Route path=path!("/t/:slug/api-tokens") view=ApiTokensPage ssr=SsrMode::Async/>
                    <Route path=path!("/t/:slug/quota") view=TenantQuotaPage ssr=SsrMode::Async/>
                    <Route path=path!("/t/:slug/webhook") view=WebhookPage ssr=SsrMode::Async/>
                    <Route path=path!("/t/:slug/budget") view=BudgetPage ssr=SsrMode::Async/>
                    <Route path=path!("/statement") view=StatementPage ssr=SsrMode::Async/>
                    <Route path=path!("/fleet") view=FleetPage ssr=SsrMode::Async/>
                    <Route path=path!("/fleet/insights") view=InsightsPage ssr=SsrMode::Async/>
                    <Route path=path!("/audit") view=AuditLogPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/join-tokens") view=JoinTokensPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/people") view=PeoplePage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/approvals") view=ApprovalsPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/quotas") view=QuotasAdminPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/pools") view=PoolsAdminPage ssr=SsrMode::Async/>
                    <Route path=path!("/admin/tenants") view=TenantsAdminPage ssr=SsrMode::Async/>
                    <Route path=path!("/usage") view=UsagePage ssr=SsrMode::Async/>
                    <Route path=path!("/notifications") view=NotificationsPage ssr=SsrMode::Async/>
                    <Route path=path!("/signed-out") view=SignedOutPage ssr=SsrMode::Async/>
                </Routes>
            </Layout>
        </Router>
    }
}
