//! Join tokens: one-time secrets with which a new host enrols.

use crate::audit::Actor;
use crate::entity::{host, join_token};
use crate::events::DomainEvent;
use crate::{secret, PlatformAdmin, Service, ServiceError};
use chrono::{DateTime, Duration, Utc};
use sea_orm::{ActiveModelTrait, EntityTrait, QueryOrder, Set};
use std::collections::BTreeMap;
use tessera_protocol::views::{CreatedJoinToken, JoinTokenStatus, JoinTokenView};

/// Longest lifetime of a join token.
pub const MAX_JOIN_TOKEN_TTL: Duration = Duration::days(30);

fn token_status(t: &join_token::Model, now: DateTime<Utc>) -> JoinTokenStatus {
    if t.revoked_at.is_some() {
        JoinTokenStatus::Revoked
    } else if t.used_at.is_some() {
        JoinTokenStatus::Used
    } else if t.expires_at <= now {
        JoinTokenStatus::Expired
    } else {
        JoinTokenStatus::Active
    }
}

fn token_view(
    t: &join_token::Model,
    hosts: &BTreeMap<i64, String>,
    now: DateTime<Utc>,
) -> JoinTokenView {
    JoinTokenView {
        id: t.id,
        description: t.description.clone(),
        created_by: t.created_by.clone(),
        created_at: t.created_at,
        expires_at: t.expires_at,
        status: token_status(t, now),
        used_by_host: t.used_by_host_id.and_then(|id| hosts.get(&id).cloned()),
    }
}

impl Service {
    /// Creates a one-time join token valid for `ttl`. The secret is returned once.
    pub async fn create_join_token(
        &self,
        admin: &PlatformAdmin<'_>,
        description: &str,
        ttl: Duration,
    ) -> Result<CreatedJoinToken, ServiceError> {
        self.create_join_token_as(Actor::User(admin.principal()), description, ttl)
            .await
    }

    /// Like [`Self::create_join_token`], for the operator's command line.
    pub async fn create_join_token_as(
        &self,
        actor: Actor<'_>,
        description: &str,
        ttl: Duration,
    ) -> Result<CreatedJoinToken, ServiceError> {
        let description = description.trim();
        if description.is_empty() || description.chars().count() > 200 {
            return Err(ServiceError::invalid(
                "description",
                "say what the token is for, in 1-200 characters",
            ));
        }
        if ttl <= Duration::zero() || ttl > MAX_JOIN_TOKEN_TTL {
            return Err(ServiceError::invalid(
                "ttl",
                "must be between 1 minute and 30 days",
            ));
        }
        let now = self.now();
        let secret = secret::generate("tsj");
        let created_by = match &actor {
            Actor::User(p) => Some(p.audit_name()),
            _ => Some("command line".to_owned()),
        };
        let mut w = self.begin_write().await?;
        let t = join_token::ActiveModel {
            token_hash: Set(secret::hash(&secret)),
            description: Set(description.to_owned()),
            created_by: Set(created_by),
            created_at: Set(now),
            expires_at: Set(now + ttl),
            ..Default::default()
        }
        .insert(w.db())
        .await?;
        w.emit(DomainEvent::JoinTokenCreated {
            token_id: t.id,
            description: t.description.clone(),
            expires_at: t.expires_at,
        });
        w.commit(self, &actor).await?;
        Ok(CreatedJoinToken {
            token: token_view(&t, &BTreeMap::new(), now),
            secret,
        })
    }

    /// Revokes an unused join token.
    pub async fn revoke_join_token(
        &self,
        admin: &PlatformAdmin<'_>,
        id: i64,
    ) -> Result<(), ServiceError> {
        let now = self.now();
        let mut w = self.begin_write().await?;
        let t = join_token::Entity::find_by_id(id)
            .one(w.db())
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("join token {id}")))?;
        let status = token_status(&t, now);
        if status != JoinTokenStatus::Active {
            return Err(ServiceError::Conflict(format!(
                "join token {id} is already {status}"
            )));
        }
        let mut active: join_token::ActiveModel = t.into();
        active.revoked_at = Set(Some(now));
        active.update(w.db()).await?;
        w.emit(DomainEvent::JoinTokenRevoked {
            token_id: id,
            status_before: status,
        });
        w.commit(self, &Actor::User(admin.principal())).await?;
        Ok(())
    }

    /// All join tokens, newest first.
    pub async fn list_join_tokens(
        &self,
        _admin: &PlatformAdmin<'_>,
    ) -> Result<Vec<JoinTokenView>, ServiceError> {
        let now = self.now();
        let hosts = self.host_names().await?;
        let tokens = join_token::Entity::find()
            .order_by_desc(join_token::Column::Id)
            .all(&self.db)
            .await?;
        Ok(tokens.iter().map(|t| token_view(t, &hosts, now)).collect())
    }

    async fn host_names(&self) -> Result<BTreeMap<i64, String>, ServiceError> {
        Ok(host::Entity::find()
            .all(&self.db)
            .await?
            .into_iter()
            .map(|h| (h.id, h.hostname))
            .collect())
    }
}
