//! People as platform admins see them: who signed in, with which roles, and
//! whether their access is deactivated.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tessera_core::ids::UserId;

use super::MembershipView;

/// A person Tessera knows (from their first sign-in).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PersonView {
    /// User id.
    pub id: UserId,
    /// Display name.
    pub name: String,
    /// E-mail, when the IdP sent one.
    pub email: Option<String>,
    /// Platform admin (from the IdP's groups at their last sign-in).
    pub platform_admin: bool,
    /// Tenants and roles (from the IdP's groups at their last sign-in).
    pub tenants: Vec<MembershipView>,
    /// First sign-in.
    pub created_at: DateTime<Utc>,
    /// Last sign-in.
    pub last_login_at: Option<DateTime<Utc>>,
    /// When a platform admin deactivated them (sign-in refused).
    pub deactivated_at: Option<DateTime<Utc>>,
    /// Sessions signed in before this were ended ("sign out everywhere").
    pub sessions_valid_after: Option<DateTime<Utc>>,
    /// Unrevoked, unexpired API tokens they made.
    pub api_tokens: u64,
}
