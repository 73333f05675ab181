//! Join tokens: one-time secrets with which a new host enrols.

use crate::audit::Actor;
use crate::entity::{host, join_token};
use crate::events::DomainEvent;
use crate::{secret, PlatformAdmin, Service, ServiceError};
use chrono::{DateTime, Duration, Utc};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Set};
use std::collections::BTreeMap;
use tessera_core::checked::Hostname;
use tessera_core::ids::{HostId, JoinTokenId};
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
    hosts: &BTreeMap<HostId, String>,
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
        for_host: t.for_host_id.and_then(|id| hosts.get(&id).cloned()),
    }
}

/// A join token to create.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewJoinToken {
    /// What it is for (1-200 characters).
    pub description: String,
    /// Minutes until it expires: from 1 up to [`MAX_JOIN_TOKEN_TTL`].
    pub ttl_minutes: i64,
    /// Makes it a re-enrolment token: it re-keys this already enrolled host
    /// and enrols nothing else. `None` (or empty): it enrols a new host only.
    pub for_host: Option<String>,
}

/// The token's expiry: `ttl_minutes` from `now`, within the allowed range.
fn token_expiry(now: DateTime<Utc>, ttl_minutes: i64) -> Result<DateTime<Utc>, ServiceError> {
    let max = MAX_JOIN_TOKEN_TTL.num_minutes();
    let out_of_range = || {
        ServiceError::invalid(
            "ttl_minutes",
            format!("must be between 1 minute and 30 days ({max} minutes); got {ttl_minutes}"),
        )
    };
    if !(1..=max).contains(&ttl_minutes) {
        return Err(out_of_range());
    }
    Duration::try_minutes(ttl_minutes)
        .and_then(|ttl| now.checked_add_signed(ttl))
        .ok_or_else(out_of_range)
}

impl Service {
    /// Creates a one-time join token. The secret is returned once.
    pub async fn create_join_token(
        &self,
        admin: &PlatformAdmin<'_>,
        new: &NewJoinToken,
    ) -> Result<CreatedJoinToken, ServiceError> {
        self.create_join_token_as(Actor::User(admin.principal()), new)
            .await
    }

    /// Like [`Self::create_join_token`], for the operator's command line.
    pub async fn create_join_token_as(
        &self,
        actor: Actor<'_>,
        new: &NewJoinToken,
    ) -> Result<CreatedJoinToken, ServiceError> {
        let description = new.description.trim();
        if description.is_empty() || description.chars().count() > 200 {
            return Err(ServiceError::invalid(
                "description",
                "say what the token is for, in 1-200 characters",
            ));
        }
        let now = self.now();
        let expires_at = token_expiry(now, new.ttl_minutes)?;
        let for_host = new
            .for_host
            .as_deref()
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(|h| {
                Hostname::parse(h).map_err(|e| ServiceError::invalid("for_host", e.to_string()))
            })
            .transpose()?;
        let secret = secret::generate("tsj");
        let created_by = match &actor {
            Actor::User(p) => Some(p.audit_name()),
            _ => Some("command line".to_owned()),
        };
        let mut w = self.begin_write().await?;
        let for_host = match for_host {
            None => None,
            Some(name) => Some(
                host::Entity::find()
                    .filter(host::Column::Hostname.eq(name.as_str()))
                    .one(w.db())
                    .await?
                    .ok_or_else(|| {
                        ServiceError::invalid(
                            "for_host",
                            format!(
                                "no host named '{name}' is enrolled; leave it empty to make a token for a new host"
                            ),
                        )
                    })?,
            ),
        };
        let t = join_token::ActiveModel {
            token_hash: Set(secret::hash(&secret)),
            description: Set(description.to_owned()),
            created_by: Set(created_by),
            created_at: Set(now),
            expires_at: Set(expires_at),
            for_host_id: Set(for_host.as_ref().map(|h| h.id)),
            ..Default::default()
        }
        .insert(w.db())
        .await?;
        w.emit(DomainEvent::JoinTokenCreated {
            token_id: t.id,
            description: t.description.clone(),
            expires_at: t.expires_at,
            for_host: for_host.as_ref().map(|h| h.hostname.to_string()),
        });
        w.commit(self, &actor).await?;
        let hosts: BTreeMap<HostId, String> = for_host
            .map(|h| (h.id, h.hostname.into()))
            .into_iter()
            .collect();
        Ok(CreatedJoinToken {
            token: token_view(&t, &hosts, now),
            secret,
        })
    }

    /// Revokes an unused join token.
    pub async fn revoke_join_token(
        &self,
        admin: &PlatformAdmin<'_>,
        id: JoinTokenId,
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

    async fn host_names(&self) -> Result<BTreeMap<HostId, String>, ServiceError> {
        Ok(host::Entity::find()
            .all(&self.db)
            .await?
            .into_iter()
            .map(|h| (h.id, h.hostname.into()))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn expiry_is_checked_not_overflowed() {
        let now = Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap();
        assert_eq!(token_expiry(now, 60).unwrap(), now + Duration::hours(1));
        assert!(token_expiry(now, MAX_JOIN_TOKEN_TTL.num_minutes()).is_ok());
        for bad in [
            0,
            -1,
            MAX_JOIN_TOKEN_TTL.num_minutes() + 1,
            i64::MAX,
            i64::MIN,
        ] {
            let err = token_expiry(now, bad).unwrap_err();
            assert!(
                matches!(&err, ServiceError::Invalid { field, .. } if field == "ttl_minutes"),
                "{bad}: {err:?}"
            );
        }
        // At the end of time even a short token cannot be represented.
        assert!(token_expiry(DateTime::<Utc>::MAX_UTC, 1).is_err());
    }
}
