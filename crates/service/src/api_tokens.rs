//! Tenant API tokens: created by a tenant admin, shown once, stored hashed,
//! scoped to one tenant, revocable, and expiring.

use crate::audit::Actor;
use crate::entity::{api_token, membership, user};
use crate::events::DomainEvent;
use crate::write::Write;
use crate::TenantActor;
use crate::{secret, Principal, Service, ServiceError};
use chrono::{DateTime, TimeDelta, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder, Set,
};
use tessera_core::ids::{ApiTokenId, TenantId, UserId};
use tessera_core::role::TokenScope;

use tessera_protocol::views::{ApiTokenView, CreatedApiToken, TenantRole};

/// Prefix of tenant API tokens.
pub const TOKEN_PREFIX: &str = "tsk";

/// How long API tokens live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiTokenPolicy {
    /// Lifetime of a token created without one, in days.
    pub default_days: u32,
    /// Longest lifetime a token may be given, in days.
    pub max_days: u32,
    /// A token works only while the person who made it signed in within
    /// this many days: their roles are what the IdP said at that sign-in, so
    /// this bounds how long a token outlives a creator who left the group
    /// and never signs in again.
    pub creator_signin_days: u32,
}

impl Default for ApiTokenPolicy {
    fn default() -> Self {
        Self {
            default_days: 90,
            max_days: 365,
            creator_signin_days: 30,
        }
    }
}

impl ApiTokenPolicy {
    /// Checks the policy itself (both at least 1 day, the default within the
    /// maximum, the maximum at most [`MAX_API_TOKEN_DAYS`]).
    pub fn validate(&self) -> Result<(), ServiceError> {
        if self.max_days == 0 || self.max_days > MAX_API_TOKEN_DAYS {
            return Err(ServiceError::invalid(
                "api_tokens.max_days",
                format!("must be between 1 and {MAX_API_TOKEN_DAYS} days"),
            ));
        }
        if self.creator_signin_days == 0 || self.creator_signin_days > MAX_API_TOKEN_DAYS {
            return Err(ServiceError::invalid(
                "api_tokens.creator_signin_days",
                format!("must be between 1 and {MAX_API_TOKEN_DAYS} days"),
            ));
        }
        if self.default_days == 0 || self.default_days > self.max_days {
            return Err(ServiceError::invalid(
                "api_tokens.default_days",
                format!("must be between 1 and max_days ({} days)", self.max_days),
            ));
        }
        Ok(())
    }

    /// When a token created at `now` for `days` (or the default) expires.
    pub fn expiry(
        &self,
        now: DateTime<Utc>,
        days: Option<u32>,
    ) -> Result<DateTime<Utc>, ServiceError> {
        let days = days.unwrap_or(self.default_days);
        let max = self.max_days;
        if days == 0 || days > max {
            return Err(ServiceError::invalid(
                "days",
                format!("an API token lives between 1 and {max} days; got {days}"),
            ));
        }
        TimeDelta::try_days(i64::from(days))
            .and_then(|d| now.checked_add_signed(d))
            .ok_or_else(|| {
                ServiceError::invalid("days", format!("{days} days from now is not a date"))
            })
    }

    /// When a stored token expires (an older row without an expiry: its
    /// creation plus the default lifetime).
    pub(crate) fn expiry_of(&self, t: &api_token::Model) -> DateTime<Utc> {
        t.expires_at.unwrap_or_else(|| {
            TimeDelta::try_days(i64::from(self.default_days))
                .and_then(|d| t.created_at.checked_add_signed(d))
                .unwrap_or(t.created_at)
        })
    }
}

/// Why a token whose creator is `creator` (with `member`: whether they
/// still belong to the token's tenant) does not work now, or `None` when it
/// does. A token made on the server's command line has no creator and
/// follows nobody.
pub(crate) fn creator_refusal(
    t: &api_token::Model,
    creator: Option<&user::Model>,
    member: bool,
    policy: &ApiTokenPolicy,
    now: DateTime<Utc>,
) -> Option<String> {
    t.created_by_user_id?;
    let Some(u) = creator else {
        return Some("the person who made it is no longer known".to_owned());
    };
    if u.deactivated_at.is_some() {
        return Some(format!("{} was deactivated", u.name));
    }
    if !member {
        return Some(format!("{} no longer belongs to the tenant", u.name));
    }
    let days = i64::from(policy.creator_signin_days);
    let fresh = u
        .last_login_at
        .is_some_and(|at| now.signed_duration_since(at) <= TimeDelta::days(days));
    if !fresh {
        return Some(format!(
            "{} has not signed in for {days} days (their roles are re-checked at sign-in)",
            u.name
        ));
    }
    None
}

/// The longest lifetime any configuration may allow: ten years.
pub const MAX_API_TOKEN_DAYS: u32 = 3650;

fn view(t: api_token::Model, policy: &ApiTokenPolicy, now: DateTime<Utc>) -> ApiTokenView {
    let expires_at = policy.expiry_of(&t);
    ApiTokenView {
        id: t.id,
        name: t.name,
        prefix: t.prefix,
        created_by: t.created_by,
        created_at: t.created_at,
        last_used_at: t.last_used_at,
        revoked_at: t.revoked_at,
        expires_at,
        expired: expires_at <= now,
        suspended: None,
        scope: t.scope,
    }
}

impl Service {
    fn require_tenant_admin(who: &Principal, actor: &TenantActor) -> Result<(), ServiceError> {
        if who.role_in(actor.tenant_id) == Some(TenantRole::TenantAdmin) {
            Ok(())
        } else {
            Err(ServiceError::Forbidden(
                "only tenant admins manage API tokens; ask one of your tenant's admins".to_owned(),
            ))
        }
    }

    /// Creates a token for the tenant that lives `days` (the configured
    /// default when `None`, at most the configured maximum); the secret is in
    /// the answer only.
    pub async fn create_api_token(
        &self,
        who: &Principal,
        actor: &TenantActor,
        name: &str,
        days: Option<u32>,
        scope: TokenScope,
    ) -> Result<CreatedApiToken, ServiceError> {
        Self::require_tenant_admin(who, actor)?;
        self.insert_api_token(actor, name, days, scope).await
    }

    /// Creates a token for tenant `slug` on the operator's behalf (the
    /// server's command line; scripts and benchmarks).
    pub async fn create_api_token_as_system(
        &self,
        slug: &tessera_core::checked::TenantSlug,
        name: &str,
        days: Option<u32>,
        scope: TokenScope,
    ) -> Result<CreatedApiToken, ServiceError> {
        let t = crate::entity::tenant::Entity::find()
            .filter(crate::entity::tenant::Column::Slug.eq(slug))
            .one(&self.db)
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("tenant '{slug}'")))?;
        let actor = TenantActor {
            tenant_id: t.id,
            tenant_slug: t.slug,
            name: "system".to_owned(),
            user_id: None,
            rights: tessera_core::role::SliceRights::Use,
            platform_admin: false,
        };
        self.insert_api_token(&actor, name, days, scope).await
    }

    async fn insert_api_token(
        &self,
        actor: &TenantActor,
        name: &str,
        days: Option<u32>,
        scope: TokenScope,
    ) -> Result<CreatedApiToken, ServiceError> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 100 {
            return Err(ServiceError::invalid("name", "must be 1-100 characters"));
        }
        let now = self.now();
        let policy = self.settings.api_tokens;
        let expires_at = policy.expiry(now, days)?;
        let secret = secret::generate(TOKEN_PREFIX);
        let mut w = self.begin_write().await?;
        let t = api_token::ActiveModel {
            tenant_id: Set(actor.tenant_id),
            name: Set(name.to_owned()),
            token_hash: Set(secret::hash(&secret)),
            prefix: Set(secret.chars().take(12).collect()),
            created_by: Set(actor.name.clone()),
            created_by_user_id: Set(actor.user_id),
            created_at: Set(now),
            expires_at: Set(Some(expires_at)),
            scope: Set(scope),
            ..Default::default()
        }
        .insert(w.db())
        .await?;
        w.emit(DomainEvent::ApiTokenCreated {
            tenant_id: actor.tenant_id,
            token_id: t.id,
            name: t.name.clone(),
            prefix: t.prefix.clone(),
            expires_at,
            scope,
        });
        w.commit(self, &actor.audit()).await?;
        Ok(CreatedApiToken {
            token: view(t, &policy, now),
            secret,
        })
    }

    /// The tenant's tokens, newest first (tenant admins only).
    pub async fn list_api_tokens(
        &self,
        who: &Principal,
        actor: &TenantActor,
    ) -> Result<Vec<ApiTokenView>, ServiceError> {
        Self::require_tenant_admin(who, actor)?;
        let now = self.now();
        let tokens = api_token::Entity::find()
            .filter(api_token::Column::TenantId.eq(actor.tenant_id))
            .order_by_desc(api_token::Column::Id)
            .all(&self.db)
            .await?;
        let creators: Vec<_> = tokens.iter().filter_map(|t| t.created_by_user_id).collect();
        let users = user::Entity::find()
            .filter(user::Column::Id.is_in(creators.clone()))
            .all(&self.db)
            .await?;
        let members: Vec<_> = membership::Entity::find()
            .filter(membership::Column::TenantId.eq(actor.tenant_id))
            .filter(membership::Column::UserId.is_in(creators))
            .all(&self.db)
            .await?
            .into_iter()
            .map(|m| m.user_id)
            .collect();
        let policy = &self.settings.api_tokens;
        Ok(tokens
            .into_iter()
            .map(|t| {
                let creator = t
                    .created_by_user_id
                    .and_then(|id| users.iter().find(|u| u.id == id));
                let member = t.created_by_user_id.is_some_and(|id| members.contains(&id));
                let suspended = creator_refusal(&t, creator, member, policy, now);
                let mut v = view(t, policy, now);
                v.suspended = suspended.filter(|_| v.revoked_at.is_none() && !v.expired);
                // A use this process noted but has not written yet.
                v.last_used_at = v.last_used_at.max(self.token_checks.unwritten_use(v.id));
                v
            })
            .collect())
    }

    /// Writes the tokens' last uses noted since the last call, in one
    /// transaction (never moving a time backwards, whichever replica wrote
    /// last); returns how many tokens it wrote. The server calls it every
    /// scheduler round and at shutdown; uses that could not be written are
    /// kept for the next call.
    pub async fn flush_token_uses(&self) -> Result<usize, ServiceError> {
        let uses = self.token_checks.take_uses();
        if uses.is_empty() {
            return Ok(0);
        }
        let written = async {
            let w = self.begin_write().await?;
            for (id, at) in &uses {
                api_token::Entity::update_many()
                    .col_expr(api_token::Column::LastUsedAt, Expr::value(*at))
                    .filter(api_token::Column::Id.eq(*id))
                    .filter(
                        Condition::any()
                            .add(api_token::Column::LastUsedAt.is_null())
                            .add(api_token::Column::LastUsedAt.lt(*at)),
                    )
                    .exec(w.db())
                    .await?;
            }
            w.commit(self, &Actor::System).await
        }
        .await;
        match written {
            Ok(()) => Ok(uses.len()),
            Err(e) => {
                self.token_checks.restore_uses(uses);
                Err(e)
            }
        }
    }

    /// Revokes the unrevoked API tokens `user` made in tenants other than
    /// `keep` (each audited); returns how many.
    pub(crate) async fn revoke_tokens_made_by(
        w: &mut Write,
        user: UserId,
        keep: &[TenantId],
        now: DateTime<Utc>,
    ) -> Result<u64, ServiceError> {
        let gone = api_token::Entity::find()
            .filter(api_token::Column::CreatedByUserId.eq(user))
            .filter(api_token::Column::RevokedAt.is_null())
            .filter(api_token::Column::TenantId.is_not_in(keep.iter().copied()))
            .all(w.db())
            .await?;
        for t in &gone {
            api_token::Entity::update_many()
                .col_expr(api_token::Column::RevokedAt, Expr::value(now))
                .filter(api_token::Column::Id.eq(t.id))
                .exec(w.db())
                .await?;
            w.emit(DomainEvent::ApiTokenRevoked {
                tenant_id: t.tenant_id,
                token_id: t.id,
                name: t.name.clone(),
            });
        }
        Ok(gone.len() as u64)
    }

    /// Revokes a token of the tenant; it stops working at once.
    pub async fn revoke_api_token(
        &self,
        who: &Principal,
        actor: &TenantActor,
        id: ApiTokenId,
    ) -> Result<ApiTokenView, ServiceError> {
        Self::require_tenant_admin(who, actor)?;
        let now = self.now();
        let mut w = self.begin_write().await?;
        let revoked = api_token::Entity::update_many()
            .col_expr(api_token::Column::RevokedAt, Expr::value(now))
            .filter(api_token::Column::Id.eq(id))
            .filter(api_token::Column::TenantId.eq(actor.tenant_id))
            .filter(api_token::Column::RevokedAt.is_null())
            .exec(w.db())
            .await?;
        let t = api_token::Entity::find_by_id(id)
            .filter(api_token::Column::TenantId.eq(actor.tenant_id))
            .one(w.db())
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("API token {id}")))?;
        if revoked.rows_affected == 1 {
            w.emit(DomainEvent::ApiTokenRevoked {
                tenant_id: actor.tenant_id,
                token_id: id,
                name: t.name.clone(),
            });
        }
        w.commit(self, &actor.audit()).await?;
        Ok(view(t, &self.settings.api_tokens, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap()
    }

    #[test]
    fn lifetimes_default_and_stop_at_the_maximum() {
        let p = ApiTokenPolicy::default();
        assert_eq!(p.expiry(now(), None).unwrap(), now() + TimeDelta::days(90));
        assert_eq!(
            p.expiry(now(), Some(365)).unwrap(),
            now() + TimeDelta::days(365)
        );
        for bad in [0, 366, u32::MAX] {
            let err = p.expiry(now(), Some(bad)).unwrap_err();
            assert!(
                matches!(&err, ServiceError::Invalid { field, message }
                    if field == "days" && message.contains("between 1 and 365 days")),
                "{bad}: {err:?}"
            );
        }
        // Near the end of time the sum does not fit: an error, not a panic.
        assert!(p.expiry(DateTime::<Utc>::MAX_UTC, Some(1)).is_err());
    }

    #[test]
    fn policy_is_checked() {
        assert!(ApiTokenPolicy::default().validate().is_ok());
        for (default_days, max_days, creator_signin_days, field) in [
            (0, 365, 30, "api_tokens.default_days"),
            (400, 365, 30, "api_tokens.default_days"),
            (1, 0, 30, "api_tokens.max_days"),
            (1, MAX_API_TOKEN_DAYS + 1, 30, "api_tokens.max_days"),
            (1, 365, 0, "api_tokens.creator_signin_days"),
        ] {
            let err = ApiTokenPolicy {
                default_days,
                max_days,
                creator_signin_days,
            }
            .validate()
            .unwrap_err();
            assert!(
                matches!(&err, ServiceError::Invalid { field: f, .. } if f == field),
                "{err:?}"
            );
        }
    }
}
