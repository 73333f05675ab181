//! Tenants, their members and roles, and what the signed-in user belongs to.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tessera_core::ids::UserId;

use super::AllocationView;

pub use tessera_core::role::TenantRole;

/// The signed-in user as the layout shows them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewerView {
    /// User id.
    pub id: UserId,
    /// Display name.
    pub name: String,
    /// E-mail, when the IdP sent one.
    pub email: Option<String>,
    /// Whether the user is a platform admin.
    pub platform_admin: bool,
    /// The user's tenants with their role in each.
    pub tenants: Vec<MembershipView>,
}

/// One of the viewer's tenants.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembershipView {
    /// URL slug of the tenant.
    pub slug: String,
    /// Display name of the tenant.
    pub name: String,
    /// The viewer's role there.
    pub role: TenantRole,
}

/// A tenant's home page.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TenantView {
    /// URL slug.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Cost centre for chargeback.
    pub cost_centre: Option<String>,
    /// Members and their roles.
    pub members: Vec<MemberView>,
    /// The tenant's allocations (live first, then newest first).
    pub allocations: Vec<AllocationView>,
    /// Quota and use per pool.
    pub quotas: Vec<QuotaView>,
    /// The viewer may request slices here (a member).
    pub can_request: bool,
    /// The viewer may manage API tokens here (a tenant admin).
    pub can_manage_tokens: bool,
    /// The budgets that cover the tenant (its own and its cost centre's),
    /// with this month's spend.
    #[serde(default)]
    pub budgets: Vec<super::BudgetView>,
}

/// One member of a tenant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberView {
    /// Display name.
    pub name: String,
    /// E-mail, when known.
    pub email: Option<String>,
    /// Role in the tenant.
    pub role: TenantRole,
    /// Last login.
    pub last_login_at: Option<DateTime<Utc>>,
}

/// A tenant's quota and use in one pool.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaView {
    /// Pool name.
    pub pool: String,
    /// The limit in force: permanent plus unexpired temporary grants.
    pub quota: tessera_core::quota::Quota,
    /// What live allocations (queued included) hold.
    pub usage: tessera_core::quota::Usage,
    /// The permanent part.
    #[serde(default)]
    pub base: tessera_core::quota::Quota,
    /// Temporary grants in force.
    #[serde(default)]
    pub grants: Vec<crate::quotas::QuotaGrantView>,
}
