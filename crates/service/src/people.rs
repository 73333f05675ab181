//! People: the platform admin's list of everyone who signed in, ending a
//! person's sessions everywhere (themselves or a platform admin), and
//! deactivating a person (sign-in refused, sessions over, the API tokens
//! they made revoked) or reactivating them.

use crate::audit::Actor;
use crate::entity::{api_token, membership, tenant, user};
use crate::events::{AccessChange, DomainEvent};
use crate::identity::memberships_of;
use crate::{PlatformAdmin, Principal, Service, ServiceError};
use chrono::{DateTime, SubsecRound, Utc};
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Set};
use tessera_core::ids::UserId;
use tessera_protocol::views::PersonView;

impl Service {
    /// Everyone who has signed in, by name (platform admins).
    pub async fn people(
        &self,
        _admin: &PlatformAdmin<'_>,
    ) -> Result<Vec<PersonView>, ServiceError> {
        let users = user::Entity::find()
            .order_by_asc(user::Column::Name)
            .order_by_asc(user::Column::Id)
            .all(&self.db)
            .await?;
        self.person_views(users).await
    }

    /// Ends every session `target` has, this one included if it is theirs:
    /// each of their browsers signs in again. A person may do it for
    /// themselves, a platform admin for anyone.
    pub async fn sign_out_everywhere(
        &self,
        who: &Principal,
        target: UserId,
    ) -> Result<PersonView, ServiceError> {
        if who.user_id != target {
            who.require_platform_admin()?;
        }
        self.change_access(who, target, AccessChange::SignedOutEverywhere)
            .await
    }

    /// Deactivates (`active = false`) or reactivates a person (platform
    /// admins; not themselves). Deactivating refuses their sign-in, ends
    /// their sessions and revokes the API tokens they made.
    pub async fn set_person_active(
        &self,
        admin: &PlatformAdmin<'_>,
        target: UserId,
        active: bool,
    ) -> Result<PersonView, ServiceError> {
        let who = admin.principal();
        if !active && who.user_id == target {
            return Err(ServiceError::Conflict(
                "you cannot deactivate yourself; ask another platform admin".to_owned(),
            ));
        }
        let change = if active {
            AccessChange::Reactivated
        } else {
            AccessChange::Deactivated
        };
        self.change_access(who, target, change).await
    }

    async fn change_access(
        &self,
        who: &Principal,
        target: UserId,
        change: AccessChange,
    ) -> Result<PersonView, ServiceError> {
        // Whole seconds: sessions record their sign-in in seconds, so one
        // that signs in again in the same second still counts.
        let now = self.now().trunc_subsecs(0);
        let mut w = self.begin_write().await?;
        let u = user::Entity::find_by_id(target)
            .one(w.db())
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("person {target}")))?;
        let name = u.name.clone();
        let was_active = u.deactivated_at.is_none();
        let mut row: user::ActiveModel = u.into();
        let mut tokens_revoked = 0;
        match change {
            AccessChange::SignedOutEverywhere => {
                row.sessions_valid_after = Set(Some(now));
            }
            AccessChange::Deactivated => {
                if !was_active {
                    return Err(ServiceError::Conflict(format!(
                        "{name} is already deactivated"
                    )));
                }
                row.deactivated_at = Set(Some(now));
                row.sessions_valid_after = Set(Some(now));
                tokens_revoked = Self::revoke_tokens_made_by(&mut w, target, &[], now).await?;
            }
            AccessChange::Reactivated => {
                if was_active {
                    return Err(ServiceError::Conflict(format!("{name} is already active")));
                }
                row.deactivated_at = Set(None);
            }
        }
        let u = row.update(w.db()).await?;
        w.emit(DomainEvent::UserAccessChanged {
            user_id: target,
            name,
            change,
            tokens_revoked,
        });
        w.commit(self, &Actor::User(who)).await?;
        let mut views = self.person_views(vec![u]).await?;
        views
            .pop()
            .ok_or_else(|| ServiceError::internal("a person vanished while read"))
    }

    async fn person_views(&self, users: Vec<user::Model>) -> Result<Vec<PersonView>, ServiceError> {
        let ids: Vec<UserId> = users.iter().map(|u| u.id).collect();
        let ms = membership::Entity::find()
            .filter(membership::Column::UserId.is_in(ids.clone()))
            .all(&self.db)
            .await?;
        let tenants = tenant::Entity::find()
            .order_by_asc(tenant::Column::Name)
            .all(&self.db)
            .await?;
        let now = self.now();
        let tokens = api_token::Entity::find()
            .filter(api_token::Column::CreatedByUserId.is_in(ids))
            .filter(api_token::Column::RevokedAt.is_null())
            .all(&self.db)
            .await?;
        let live = |t: &api_token::Model| self.settings.api_tokens.expiry_of(t) > now;
        Ok(users
            .into_iter()
            .map(|u| PersonView {
                tenants: memberships_of(&tenants, &ms, u.id)
                    .into_iter()
                    .map(|(_, m)| m)
                    .collect(),
                api_tokens: tokens
                    .iter()
                    .filter(|t| t.created_by_user_id == Some(u.id) && live(t))
                    .count() as u64,
                id: u.id,
                name: u.name,
                email: u.email,
                platform_admin: u.platform_admin,
                created_at: u.created_at,
                last_login_at: u.last_login_at,
                deactivated_at: u.deactivated_at,
                sessions_valid_after: u.sessions_valid_after,
            })
            .collect())
    }
}

/// Whether a session signed in at `signed_in_at` outlived a "sign out
/// everywhere" at `valid_after`.
pub(crate) fn session_ended(
    signed_in_at: Option<DateTime<Utc>>,
    valid_after: Option<DateTime<Utc>>,
) -> bool {
    matches!((signed_in_at, valid_after), (Some(at), Some(after)) if at < after)
}
