//! Tenant API tokens: created by a tenant admin, shown once, stored hashed,
//! scoped to one tenant, revocable.

use crate::allocations::TenantActor;
use crate::entity::api_token;
use crate::events::DomainEvent;
use crate::{secret, Principal, Service, ServiceError};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Set};

use tessera_protocol::views::{ApiTokenView, CreatedApiToken, TenantRole};

/// Prefix of tenant API tokens.
pub const TOKEN_PREFIX: &str = "tsk";

fn view(t: api_token::Model) -> ApiTokenView {
    ApiTokenView {
        id: t.id,
        name: t.name,
        prefix: t.prefix,
        created_by: t.created_by,
        created_at: t.created_at,
        last_used_at: t.last_used_at,
        revoked_at: t.revoked_at,
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

    /// Creates a token for the tenant; the secret is in the answer only.
    pub async fn create_api_token(
        &self,
        who: &Principal,
        actor: &TenantActor,
        name: &str,
    ) -> Result<CreatedApiToken, ServiceError> {
        Self::require_tenant_admin(who, actor)?;
        self.insert_api_token(actor, name).await
    }

    /// Creates a token for tenant `slug` on the operator's behalf (the
    /// server's command line; scripts and benchmarks).
    pub async fn create_api_token_as_system(
        &self,
        slug: &str,
        name: &str,
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
            can_request: true,
        };
        self.insert_api_token(&actor, name).await
    }

    async fn insert_api_token(
        &self,
        actor: &TenantActor,
        name: &str,
    ) -> Result<CreatedApiToken, ServiceError> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 100 {
            return Err(ServiceError::invalid("name", "must be 1-100 characters"));
        }
        let secret = secret::generate(TOKEN_PREFIX);
        let now = self.now();
        let mut w = self.begin_write().await?;
        let t = api_token::ActiveModel {
            tenant_id: Set(actor.tenant_id),
            name: Set(name.to_owned()),
            token_hash: Set(secret::hash(&secret)),
            prefix: Set(secret.chars().take(12).collect()),
            created_by: Set(actor.name.clone()),
            created_at: Set(now),
            ..Default::default()
        }
        .insert(w.db())
        .await?;
        w.emit(DomainEvent::ApiTokenCreated {
            tenant_id: actor.tenant_id,
            token_id: t.id,
            name: t.name.clone(),
            prefix: t.prefix.clone(),
        });
        w.commit(self, &actor.audit()).await?;
        Ok(CreatedApiToken {
            token: view(t),
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
        Ok(api_token::Entity::find()
            .filter(api_token::Column::TenantId.eq(actor.tenant_id))
            .order_by_desc(api_token::Column::Id)
            .all(&self.db)
            .await?
            .into_iter()
            .map(view)
            .collect())
    }

    /// Revokes a token of the tenant; it stops working at once.
    pub async fn revoke_api_token(
        &self,
        who: &Principal,
        actor: &TenantActor,
        id: i64,
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
        Ok(view(t))
    }
}
