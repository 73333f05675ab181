//! Who may act on a tenant's allocations: a member (UI or session-cookie
//! API), a tenant API token, or a platform admin (view and release only).

use crate::audit::Actor;
use crate::entity::{api_token, tenant};
use crate::{secret, Principal, Service, ServiceError};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};

/// A caller acting within one tenant: proof that the caller may act there,
/// made only by [`Service::tenant_actor`] and
/// [`Service::authenticate_api_token`] (the fields are private).
#[derive(Debug, Clone)]
pub struct TenantActor {
    /// Tenant id.
    pub(crate) tenant_id: i64,
    /// Tenant slug.
    pub(crate) tenant_slug: String,
    /// How the audit log and the allocation name the caller.
    pub(crate) name: String,
    /// The user, when a person acts.
    pub(crate) user_id: Option<i64>,
    /// May request and extend (members and tokens).
    pub(crate) can_request: bool,
}

impl TenantActor {
    /// Tenant id.
    pub fn tenant_id(&self) -> i64 {
        self.tenant_id
    }

    /// Tenant slug.
    pub fn tenant_slug(&self) -> &str {
        &self.tenant_slug
    }

    /// How the audit log names the caller (`Name <email>` or `token:<name>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The user, when a person acts (`None` for an API token).
    pub fn user_id(&self) -> Option<i64> {
        self.user_id
    }

    /// May request and extend slices (members and tokens; not a platform
    /// admin looking in).
    pub fn can_request(&self) -> bool {
        self.can_request
    }

    /// The audit actor.
    pub fn audit(&self) -> Actor<'static> {
        Actor::Tenant {
            user_id: self.user_id,
            name: self.name.clone(),
        }
    }
}

impl Service {
    /// The caller's access to tenant `slug`: members may request; platform
    /// admins may look and release; anyone else gets `NotFound`.
    pub async fn tenant_actor(
        &self,
        who: &Principal,
        slug: &str,
    ) -> Result<TenantActor, ServiceError> {
        let t = Self::tenant_by_slug(&self.db, slug).await?;
        let member = who.role_in(t.id).is_some();
        if !member && !who.platform_admin {
            return Err(ServiceError::not_found(format!("tenant '{slug}'")));
        }
        Ok(TenantActor {
            tenant_id: t.id,
            tenant_slug: t.slug,
            name: who.audit_name(),
            user_id: Some(who.user_id),
            can_request: member,
        })
    }

    /// The tenant an API token acts for; unknown, revoked or expired tokens
    /// are refused.
    pub async fn authenticate_api_token(&self, secret: &str) -> Result<TenantActor, ServiceError> {
        let hash = secret::hash(secret.trim());
        let token = api_token::Entity::find()
            .filter(api_token::Column::TokenHash.eq(&hash))
            .filter(api_token::Column::RevokedAt.is_null())
            .one(&self.db)
            .await?
            .ok_or(ServiceError::InvalidApiToken)?;
        let now = self.now();
        if let Some(expired_at) =
            crate::api_tokens::expired_at(&self.settings.api_tokens, &token, now)
        {
            return Err(ServiceError::ExpiredApiToken { expired_at });
        }
        let t = tenant::Entity::find_by_id(token.tenant_id)
            .one(&self.db)
            .await?
            .ok_or(ServiceError::InvalidApiToken)?;
        // Best effort: a failed timestamp update must not fail the call.
        let stale = token
            .last_used_at
            .is_none_or(|at| now - at > chrono::Duration::minutes(1));
        if stale {
            if let Ok(w) = self.begin_write().await {
                let updated = api_token::Entity::update_many()
                    .col_expr(api_token::Column::LastUsedAt, Expr::value(now))
                    .filter(api_token::Column::Id.eq(token.id))
                    .exec(w.db())
                    .await;
                if updated.is_ok() {
                    if let Err(e) = w.commit(self, &Actor::System).await {
                        tracing::debug!(error = %e, "could not record the token's last use");
                    }
                }
            }
        }
        Ok(TenantActor {
            tenant_id: t.id,
            tenant_slug: t.slug,
            name: format!("token:{}", token.name),
            user_id: None,
            can_request: true,
        })
    }
}
