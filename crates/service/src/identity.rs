//! Users, tenants and roles: how IdP groups become tenant roles at each login.

use crate::audit::Actor;
use crate::entity::{membership, tenant, user};
use crate::events::{DomainEvent, Roles, TenantRef};
use crate::write::Write;
use crate::{Principal, Service, ServiceError};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Set};
use serde::{Deserialize, Serialize};
use tessera_core::ids::{TenantId, UserId};

use std::collections::BTreeMap;
use tessera_protocol::views::{MembershipView, TenantRole};

/// A tenant as configured, with the IdP groups that grant its roles.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantSpec {
    /// URL slug (lower-case letters, digits, dashes; checked where the
    /// configuration is read).
    pub slug: tessera_core::checked::TenantSlug,
    /// Display name.
    pub name: String,
    /// Cost centre for chargeback.
    #[serde(default)]
    pub cost_centre: Option<String>,
    /// Members of any of these groups are tenant members.
    #[serde(default)]
    pub member_groups: Vec<String>,
    /// Members of any of these groups are tenant admins.
    #[serde(default)]
    pub admin_groups: Vec<String>,
    /// Kubernetes namespaces of its workloads (empty: the slug).
    #[serde(default)]
    pub namespaces: Vec<tessera_core::checked::Namespace>,
    /// Starting quota per pool (`[[directory.tenants.quotas]]`).
    #[serde(default)]
    pub quotas: Vec<QuotaSpec>,
}

/// A tenant's quota in one pool, as configured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaSpec {
    /// Pool name.
    pub pool: tessera_core::checked::PoolName,
    /// GPU-equivalents (e.g. `2` or `1.5`).
    pub gpus: f64,
    /// GPU memory in GiB.
    pub memory_gib: u64,
    /// Concurrent slices.
    pub max_slices: u32,
}

impl QuotaSpec {
    /// In core's integer units.
    pub fn quota(&self) -> tessera_core::quota::Quota {
        tessera_core::quota::Quota {
            compute: tessera_core::units::ComputeMilli((self.gpus * 1000.0).round() as u32),
            memory: tessera_core::units::MemMiB(self.memory_gib.saturating_mul(1024)),
            max_slices: self.max_slices,
        }
    }
}

/// Tenants and the platform-admin groups.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Directory {
    /// Members of any of these groups are platform admins.
    #[serde(default)]
    pub platform_admin_groups: Vec<String>,
    /// The tenants.
    #[serde(default)]
    pub tenants: Vec<TenantSpec>,
}

/// Roles a set of groups grants: platform admin?, and slug → role (admin wins over member).
pub fn map_groups(
    directory: &Directory,
    groups: &[String],
) -> (
    bool,
    BTreeMap<tessera_core::checked::TenantSlug, TenantRole>,
) {
    let has = |wanted: &[String]| wanted.iter().any(|g| groups.contains(g));
    let platform_admin = has(&directory.platform_admin_groups);
    let mut roles = BTreeMap::new();
    for t in &directory.tenants {
        if has(&t.admin_groups) {
            roles.insert(t.slug.clone(), TenantRole::TenantAdmin);
        } else if has(&t.member_groups) {
            roles.insert(t.slug.clone(), TenantRole::Member);
        }
    }
    (platform_admin, roles)
}

/// Checks a directory for mistakes a config author would make.
pub fn validate_directory(directory: &Directory) -> Result<(), ServiceError> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, t) in directory.tenants.iter().enumerate() {
        let field = format!("tenants[{i}].slug");
        if !seen.insert(t.slug.clone()) {
            return Err(ServiceError::invalid(
                field,
                format!("'{}' appears twice", t.slug),
            ));
        }
        if t.name.trim().is_empty() {
            return Err(ServiceError::invalid(
                format!("tenants[{i}].name"),
                "must not be empty",
            ));
        }
        let mut pools_seen = std::collections::BTreeSet::new();
        for (q, quota) in t.quotas.iter().enumerate() {
            let field = |f: &str| format!("tenants[{i}].quotas[{q}].{f}");
            if !pools_seen.insert(quota.pool.as_str()) {
                return Err(ServiceError::invalid(
                    field("pool"),
                    format!("'{}' appears twice", quota.pool),
                ));
            }
            if !quota.gpus.is_finite() || quota.gpus < 0.0 || quota.gpus > 100_000.0 {
                return Err(ServiceError::invalid(
                    field("gpus"),
                    "must be between 0 and 100000",
                ));
            }
            if quota.memory_gib > 100_000_000 {
                return Err(ServiceError::invalid(field("memory_gib"), "is too large"));
            }
        }
    }
    Ok(())
}

/// What the IdP said about the user, after the id_token was verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginClaims {
    /// `iss`.
    pub issuer: String,
    /// `sub`.
    pub subject: String,
    /// `email`, if sent.
    pub email: Option<String>,
    /// `name`, `preferred_username` or the e-mail, whichever came first.
    pub name: String,
    /// Group names from the configured claim.
    pub groups: Vec<String>,
}

impl Service {
    /// Creates the configured starting quotas that do not exist yet (audited).
    pub(crate) async fn sync_quotas(
        &self,
        w: &mut Write,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), ServiceError> {
        use crate::entity::quota;
        let pools = self.pools(w.db()).await?;
        for (i, spec) in self.settings.directory.tenants.iter().enumerate() {
            let Some(t) = tenant::Entity::find()
                .filter(tenant::Column::Slug.eq(&spec.slug))
                .one(w.db())
                .await?
            else {
                continue;
            };
            for (q, qs) in spec.quotas.iter().enumerate() {
                if !pools.iter().any(|p| p.name == qs.pool) {
                    return Err(ServiceError::invalid(
                        format!("tenants[{i}].quotas[{q}].pool"),
                        format!("there is no pool '{}'", qs.pool),
                    ));
                }
                // Configuration seeds a quota; once set, platform admins own
                // it (the Quotas page, approved requests), so a restart does
                // not undo their changes.
                let exists = quota::Entity::find()
                    .filter(quota::Column::TenantId.eq(t.id))
                    .filter(quota::Column::Pool.eq(&qs.pool))
                    .one(w.db())
                    .await?
                    .is_some();
                if exists {
                    continue;
                }
                let want = qs.quota();
                Self::write_base_quota(w.db(), t.id, &qs.pool, &want, now).await?;
                w.emit(DomainEvent::QuotaSet {
                    tenant: TenantRef::of(&t),
                    pool: qs.pool.clone(),
                    before: None,
                    after: (want, want),
                    by: None,
                });
            }
        }
        Ok(())
    }

    /// Records a login: creates or updates the user and replaces their roles with
    /// the ones their groups grant now. Returns the user id.
    pub async fn login(&self, claims: &LoginClaims) -> Result<UserId, ServiceError> {
        let now = self.now();
        let mut w = self.begin_write().await?;
        let (platform_admin, roles) = map_groups(&self.directory(w.db()).await?, &claims.groups);
        let existing = user::Entity::find()
            .filter(user::Column::Issuer.eq(&claims.issuer))
            .filter(user::Column::Subject.eq(&claims.subject))
            .one(w.db())
            .await?;
        if let Some(u) = existing.as_ref().filter(|u| u.deactivated_at.is_some()) {
            tracing::info!(user_id = %u.id, "sign-in refused: deactivated");
            return Err(ServiceError::Forbidden(
                "your access to Tessera was deactivated by a platform admin; ask one to reactivate it"
                    .to_owned(),
            ));
        }
        let (user_id, before_admin) = match existing {
            Some(u) => {
                let id = u.id;
                let was_admin = u.platform_admin;
                let mut active: user::ActiveModel = u.into();
                active.email = Set(claims.email.clone());
                active.name = Set(claims.name.clone());
                active.platform_admin = Set(platform_admin);
                active.last_login_at = Set(Some(now));
                active.update(w.db()).await?;
                (id, Some(was_admin))
            }
            None => {
                let u = user::ActiveModel {
                    issuer: Set(claims.issuer.clone()),
                    subject: Set(claims.subject.clone()),
                    email: Set(claims.email.clone()),
                    name: Set(claims.name.clone()),
                    platform_admin: Set(platform_admin),
                    created_at: Set(now),
                    last_login_at: Set(Some(now)),
                    ..Default::default()
                }
                .insert(w.db())
                .await?;
                (u.id, None)
            }
        };

        let tenants: BTreeMap<tessera_core::checked::TenantSlug, TenantId> = tenant::Entity::find()
            .all(w.db())
            .await?
            .into_iter()
            .map(|t| (t.slug, t.id))
            .collect();
        let old: BTreeMap<TenantId, TenantRole> = membership::Entity::find()
            .filter(membership::Column::UserId.eq(user_id))
            .all(w.db())
            .await?
            .into_iter()
            .map(|m| (m.tenant_id, m.role))
            .collect();
        let new: BTreeMap<TenantId, TenantRole> = roles
            .iter()
            .filter_map(|(slug, role)| tenants.get(slug).map(|id| (*id, *role)))
            .collect();

        let actor_name = match &claims.email {
            Some(e) => format!("{} <{e}>", claims.name),
            None => claims.name.clone(),
        };
        if old != new {
            membership::Entity::delete_many()
                .filter(membership::Column::UserId.eq(user_id))
                .exec(w.db())
                .await?;
            for (tenant_id, role) in &new {
                membership::ActiveModel {
                    user_id: Set(user_id),
                    tenant_id: Set(*tenant_id),
                    role: Set(*role),
                    ..Default::default()
                }
                .insert(w.db())
                .await?;
            }
        }
        // The IdP no longer puts them in a tenant: the API tokens they made
        // there stop for good (they follow the person who made them).
        let kept: Vec<TenantId> = new.keys().copied().collect();
        Self::revoke_tokens_made_by(&mut w, user_id, &kept, now).await?;
        let roles_before = before_admin.map(|a| Roles {
            platform_admin: a,
            memberships: old,
        });
        let roles_after = Roles {
            platform_admin,
            memberships: new,
        };
        if roles_before.as_ref() != Some(&roles_after) {
            w.emit(DomainEvent::UserRolesChanged {
                user_id,
                before: roles_before,
                after: roles_after,
            });
        }
        w.emit(DomainEvent::UserLoggedIn { user_id });
        w.commit(
            self,
            &Actor::Login {
                user_id,
                name: actor_name,
            },
        )
        .await?;
        Ok(user_id)
    }

    /// Loads the principal for a user id; `Unauthenticated` if the user is
    /// gone or deactivated.
    pub async fn principal(&self, user_id: UserId) -> Result<Principal, ServiceError> {
        self.session_principal(user_id, None).await
    }

    /// Loads the principal for a session signed in at `signed_in_at`;
    /// `Unauthenticated` if the user is gone or deactivated, or their
    /// sessions were ended after it ("sign out everywhere").
    pub async fn session_principal(
        &self,
        user_id: UserId,
        signed_in_at: Option<chrono::DateTime<chrono::Utc>>,
    ) -> Result<Principal, ServiceError> {
        let u = user::Entity::find_by_id(user_id)
            .one(&self.db)
            .await?
            .ok_or(ServiceError::Unauthenticated)?;
        let ended = crate::people::session_ended(signed_in_at, u.sessions_valid_after);
        if u.deactivated_at.is_some() || ended {
            return Err(ServiceError::Unauthenticated);
        }
        let ms = membership::Entity::find()
            .filter(membership::Column::UserId.eq(user_id))
            .all(&self.db)
            .await?;
        let tenants = tenant::Entity::find()
            .order_by_asc(tenant::Column::Name)
            .all(&self.db)
            .await?;
        let memberships = memberships_of(&tenants, &ms, user_id);
        Ok(Principal {
            user_id: u.id,
            name: u.name,
            email: u.email,
            platform_admin: u.platform_admin,
            memberships,
        })
    }
}

/// `user`'s tenants (in `tenants`' order) with their role in each, from
/// `ms` (memberships, of any users).
pub(crate) fn memberships_of(
    tenants: &[tenant::Model],
    ms: &[membership::Model],
    user: UserId,
) -> Vec<(TenantId, MembershipView)> {
    tenants
        .iter()
        .filter_map(|t| {
            let m = ms
                .iter()
                .find(|m| m.user_id == user && m.tenant_id == t.id)?;
            Some((
                t.id,
                MembershipView {
                    slug: t.slug.to_string(),
                    name: t.name.clone(),
                    role: m.role,
                },
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn directory() -> Directory {
        Directory {
            platform_admin_groups: vec!["platform".into()],
            tenants: vec![
                TenantSpec {
                    slug: "vision".parse().unwrap(),
                    name: "Vision".into(),
                    cost_centre: None,
                    member_groups: vec!["vision".into()],
                    admin_groups: vec!["vision-leads".into()],
                    namespaces: Vec::new(),
                    quotas: vec![],
                },
                TenantSpec {
                    slug: "nlp".parse().unwrap(),
                    name: "NLP".into(),
                    cost_centre: Some("CC-2".into()),
                    member_groups: vec!["nlp".into()],
                    admin_groups: vec![],
                    namespaces: Vec::new(),
                    quotas: vec![],
                },
            ],
        }
    }

    #[test]
    fn groups_map_to_roles_admin_wins() {
        let (admin, roles) = map_groups(
            &directory(),
            &["vision".into(), "vision-leads".into(), "nlp".into()],
        );
        assert!(!admin);
        assert_eq!(roles.get("vision"), Some(&TenantRole::TenantAdmin));
        assert_eq!(roles.get("nlp"), Some(&TenantRole::Member));
        let (admin, roles) = map_groups(&directory(), &["platform".into()]);
        assert!(admin);
        assert!(roles.is_empty());
        let (admin, roles) = map_groups(&directory(), &[]);
        assert!(!admin && roles.is_empty());
    }

    #[test]
    fn directory_validation_names_the_field() {
        let d = directory();
        assert!(validate_directory(&d).is_ok());
        let bad: Result<TenantSpec, _> =
            serde_json::from_value(serde_json::json!({"slug": "Bad Slug", "name": "Bad"}));
        let err = bad.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("is not a valid tenant slug"), "{err}");
        let mut d = directory();
        d.tenants[1].slug = "vision".parse().unwrap();
        assert!(validate_directory(&d)
            .unwrap_err()
            .to_string()
            .contains("twice"));
    }
}
