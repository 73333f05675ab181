//! One module per page.

pub mod allocation;
pub mod api_tokens;
pub mod approvals;
pub mod audit;
pub mod fleet;
pub mod home;
pub mod insights;
pub mod join_tokens;
pub mod not_found;
pub mod notifications;
pub mod pools_admin;
pub mod quotas_admin;
pub mod request;
pub mod signed_out;
pub mod tenant;
pub mod tenant_quota;
pub mod tenants_admin;
pub mod usage;
pub mod webhook;
