//! Roles a person holds in a tenant (from IdP groups at each login).

use crate::names::stable_names;
use serde::{Deserialize, Serialize};

/// A tenant role. The names are stable: stored in `memberships.role`, and
/// shown in the API and the audit log.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(
    feature = "sea-orm",
    derive(sea_orm::EnumIter, sea_orm::DeriveActiveEnum)
)]
#[cfg_attr(
    feature = "sea-orm",
    sea_orm(rs_type = "String", db_type = "Text", enum_name = "tenant_role")
)]
pub enum TenantRole {
    /// Uses the tenant's quota.
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "member"))]
    Member,
    /// Also manages the tenant (quota requests, API tokens).
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "tenant-admin"))]
    TenantAdmin,
}

impl TenantRole {
    /// The stored and displayed name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Member => "member",
            Self::TenantAdmin => "tenant-admin",
        }
    }
}

stable_names! {
    /// What a tenant API token may do. The names are stable: stored in
    /// `api_tokens.scope`, and shown in the API and the audit log.
    pub enum TokenScope ("token_scope") {
        /// Look only: list and read slices, their activity and the request
        /// options; every change is refused.
        Read = "read",
        /// A member's rights: also request, extend, keep and release slices.
        Request = "request",
    }
}

impl Default for TokenScope {
    /// A token made without a scope has a member's rights (what every token
    /// had before scopes existed).
    fn default() -> Self {
        Self::Request
    }
}

/// What a caller may do with one tenant's slices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SliceRights {
    /// Request, extend, keep and release (members; `request` tokens).
    Use,
    /// Look and release, nothing that takes capacity (a platform admin who
    /// is not a member).
    Oversee,
    /// Look only (`read` tokens).
    Read,
}

impl SliceRights {
    /// The rights a token of `scope` acts with.
    pub fn of_token(scope: TokenScope) -> Self {
        match scope {
            TokenScope::Read => Self::Read,
            TokenScope::Request => Self::Use,
        }
    }

    /// May request, extend and keep slices (take or hold capacity).
    pub fn may_request(self) -> bool {
        self == Self::Use
    }

    /// May release slices.
    pub fn may_release(self) -> bool {
        self != Self::Read
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_names_are_stable() {
        for (role, name) in [
            (TenantRole::Member, "member"),
            (TenantRole::TenantAdmin, "tenant-admin"),
        ] {
            assert_eq!(role.as_str(), name);
            assert_eq!(
                serde_json::to_value(role).ok(),
                Some(serde_json::Value::String(name.to_owned()))
            );
        }
        // Admins sort after members (the member list shows admins first).
        assert!(TenantRole::TenantAdmin > TenantRole::Member);
    }

    #[test]
    fn a_read_token_may_look_only_and_a_request_token_acts_as_a_member() {
        let read = SliceRights::of_token(TokenScope::Read);
        assert!(!read.may_request());
        assert!(!read.may_release());
        let request = SliceRights::of_token(TokenScope::Request);
        assert!(request.may_request());
        assert!(request.may_release());
        assert!(!SliceRights::Oversee.may_request());
        assert!(SliceRights::Oversee.may_release());
        assert_eq!(TokenScope::default(), TokenScope::Request);
        assert_eq!(TokenScope::parse("read"), Some(TokenScope::Read));
        assert_eq!(TokenScope::parse("admin"), None);
    }
}
