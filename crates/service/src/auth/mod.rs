//! Who is acting, and proofs of what they may do.

mod tenant;

pub use tenant::TenantActor;

use crate::ServiceError;
use tessera_core::ids::{TenantId, UserId};
use tessera_protocol::views::{MembershipView, TenantRole, ViewerView};

/// A signed-in user with the roles of their latest login. Only the service
/// makes one ([`crate::Service::principal`], from the session's user), so
/// holding one is proof of who is calling: the fields are private.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub(crate) user_id: UserId,
    pub(crate) name: String,
    pub(crate) email: Option<String>,
    pub(crate) platform_admin: bool,
    pub(crate) memberships: Vec<(TenantId, MembershipView)>,
}

/// Proof that the holder is a platform admin; only [`Principal::platform_admin`] makes one.
#[derive(Debug, Clone, Copy)]
pub struct PlatformAdmin<'a> {
    principal: &'a Principal,
}

impl PlatformAdmin<'_> {
    /// The admin acting.
    pub fn principal(&self) -> &Principal {
        self.principal
    }
}

impl Principal {
    /// User id.
    pub fn user_id(&self) -> UserId {
        self.user_id
    }

    /// Display name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// E-mail, when known.
    pub fn email(&self) -> Option<&str> {
        self.email.as_deref()
    }

    /// Platform admin (as of the latest login)?
    pub fn is_platform_admin(&self) -> bool {
        self.platform_admin
    }

    /// Tenant memberships: (tenant id, view).
    pub fn memberships(&self) -> &[(TenantId, MembershipView)] {
        &self.memberships
    }

    /// A proof of the platform-admin role, or `Forbidden`.
    pub fn require_platform_admin(&self) -> Result<PlatformAdmin<'_>, ServiceError> {
        if self.platform_admin {
            Ok(PlatformAdmin { principal: self })
        } else {
            Err(ServiceError::Forbidden(
                "this page is for platform admins; ask your platform team if you need access"
                    .to_owned(),
            ))
        }
    }

    /// The caller's role in a tenant, if any.
    pub fn role_in(&self, tenant_id: TenantId) -> Option<TenantRole> {
        self.memberships
            .iter()
            .find(|(id, _)| *id == tenant_id)
            .map(|(_, m)| m.role)
    }

    /// How the audit log names this actor.
    pub fn audit_name(&self) -> String {
        match &self.email {
            Some(email) => format!("{} <{email}>", self.name),
            None => self.name.clone(),
        }
    }

    /// The layout's view of the user.
    pub fn view(&self) -> ViewerView {
        ViewerView {
            id: self.user_id,
            name: self.name.clone(),
            email: self.email.clone(),
            platform_admin: self.platform_admin,
            tenants: self.memberships.iter().map(|(_, m)| m.clone()).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn principal(admin: bool) -> Principal {
        Principal {
            user_id: UserId::new(1),
            name: "Ada".into(),
            email: Some("ada@example.com".into()),
            platform_admin: admin,
            memberships: vec![(
                TenantId::new(7),
                MembershipView {
                    slug: "ml".into(),
                    name: "ML".into(),
                    role: TenantRole::TenantAdmin,
                },
            )],
        }
    }

    #[test]
    fn only_platform_admins_get_the_proof() {
        assert!(principal(true).require_platform_admin().is_ok());
        let err = principal(false)
            .require_platform_admin()
            .map(|_| ())
            .unwrap_err();
        assert_eq!(err.status(), 403);
    }

    #[test]
    fn role_lookup() {
        let p = principal(false);
        assert_eq!(p.role_in(TenantId::new(7)), Some(TenantRole::TenantAdmin));
        assert_eq!(p.role_in(TenantId::new(8)), None);
        assert_eq!(p.audit_name(), "Ada <ada@example.com>");
    }
}

/// The request's signed-in user, if any; the server's middleware puts it in the
/// request extensions for handlers and server functions.
#[derive(Debug, Clone, Default)]
pub struct Viewer(pub Option<Principal>);

impl Viewer {
    /// The principal, or `Unauthenticated`.
    pub fn require(&self) -> Result<&Principal, ServiceError> {
        self.0.as_ref().ok_or(ServiceError::Unauthenticated)
    }
}
