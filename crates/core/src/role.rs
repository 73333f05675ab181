//! Roles a person holds in a tenant (from IdP groups at each login).

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
}
