//! Who may act on a tenant's allocations: a member (UI or session-cookie
//! API), a tenant API token, or a platform admin (view and release only).

use crate::api_tokens::creator_refusal;
use crate::audit::Actor;
use crate::entity::{api_token, membership, tenant, user};
use crate::token_auth::Verified;
use crate::{secret, Principal, Service, ServiceError};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use tessera_core::ids::{TenantId, UserId};
use tessera_core::role::SliceRights;

/// A caller acting within one tenant: proof that the caller may act there,
/// made only by [`Service::tenant_actor`] and
/// [`Service::authenticate_api_token`] (the fields are private).
#[derive(Debug, Clone)]
pub struct TenantActor {
    /// Tenant id.
    pub(crate) tenant_id: TenantId,
    /// Tenant slug.
    pub(crate) tenant_slug: tessera_core::checked::TenantSlug,
    /// How the audit log and the allocation name the caller.
    pub(crate) name: String,
    /// The user, when a person acts.
    pub(crate) user_id: Option<UserId>,
    /// What the caller may do with the tenant's slices.
    pub(crate) rights: SliceRights,
    /// A platform admin acts (sees how slices were placed).
    pub(crate) platform_admin: bool,
}

impl TenantActor {
    /// Tenant id.
    pub fn tenant_id(&self) -> TenantId {
        self.tenant_id
    }

    /// Tenant slug.
    pub fn tenant_slug(&self) -> &tessera_core::checked::TenantSlug {
        &self.tenant_slug
    }

    /// How the audit log names the caller (`Name <email>` or `token:<name>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The user, when a person acts (`None` for an API token).
    pub fn user_id(&self) -> Option<UserId> {
        self.user_id
    }

    /// May request and extend slices (members and tokens; not a platform
    /// admin looking in).
    pub fn can_request(&self) -> bool {
        self.rights.may_request()
    }

    /// Refuses unless the caller may take or hold capacity (request,
    /// extend, keep); `what` completes "cannot …".
    pub(crate) fn require_request(&self, what: &str) -> Result<(), ServiceError> {
        match self.rights {
            SliceRights::Use => Ok(()),
            SliceRights::Oversee => Err(ServiceError::Forbidden(format!(
                "only members of this tenant can {what}"
            ))),
            SliceRights::Read => Err(read_only(what)),
        }
    }

    /// Refuses a read-only token's release.
    pub(crate) fn require_release(&self) -> Result<(), ServiceError> {
        if self.rights.may_release() {
            Ok(())
        } else {
            Err(read_only("release its slices"))
        }
    }

    /// The audit actor.
    pub fn audit(&self) -> Actor<'static> {
        Actor::Tenant {
            user_id: self.user_id,
            name: self.name.clone(),
        }
    }
}

/// The refusal of a read-only token's change.
fn read_only(what: &str) -> ServiceError {
    ServiceError::Forbidden(format!(
        "this API token is read-only (scope `read`): it cannot {what}; a tenant admin can make one with scope `request`"
    ))
}

impl Service {
    /// The caller's access to tenant `slug`: members may request; platform
    /// admins may look and release; anyone else gets `NotFound`.
    pub async fn tenant_actor(
        &self,
        who: &Principal,
        slug: &tessera_core::checked::TenantSlug,
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
            rights: if member {
                SliceRights::Use
            } else {
                SliceRights::Oversee
            },
            platform_admin: who.platform_admin,
        })
    }

    /// The tenant an API token acts for; unknown, revoked or expired tokens
    /// are refused. A token that verified in the last second is believed
    /// without a read, and the use is noted in memory, not written (see
    /// [`crate::token_auth`]): the call costs no database round trip.
    pub async fn authenticate_api_token(&self, secret: &str) -> Result<TenantActor, ServiceError> {
        let hash = secret::hash(secret.trim());
        let now = self.now();
        let verified = match self.token_checks.cached(&hash, now) {
            Ok(v) => v,
            Err(asked) => {
                // Checks of one token that missed together share one read.
                let service = self.clone();
                let key = hash.clone();
                let shared = self
                    .token_checks
                    .flights
                    .share(hash.clone(), asked.generation(), move || async move {
                        match service.verify_api_token(&key).await {
                            Ok(v) => Some(Some(v)),
                            Err(ServiceError::InvalidApiToken) => Some(None),
                            Err(_) => None,
                        }
                    })
                    .await;
                let v = match shared {
                    Some(Some(v)) => v,
                    Some(None) => return Err(ServiceError::InvalidApiToken),
                    None => self.verify_api_token(&hash).await?,
                };
                self.token_checks.remember(asked, hash, v.clone(), now);
                v
            }
        };
        if verified.expires_at <= now {
            return Err(ServiceError::ExpiredApiToken {
                expired_at: verified.expires_at,
            });
        }
        self.token_checks.used(verified.token_id, now);
        Ok(verified.actor)
    }

    /// Reads a token by its hash: unrevoked, with its tenant, and its
    /// creator still entitled to it.
    async fn verify_api_token(&self, hash: &str) -> Result<Verified, ServiceError> {
        let token = api_token::Entity::find()
            .filter(api_token::Column::TokenHash.eq(hash))
            .filter(api_token::Column::RevokedAt.is_null())
            .one(&self.db)
            .await?
            .ok_or(ServiceError::InvalidApiToken)?;
        let t = tenant::Entity::find_by_id(token.tenant_id)
            .one(&self.db)
            .await?
            .ok_or(ServiceError::InvalidApiToken)?;
        // A token follows the person who made it: it works only while they
        // are active, still belong to the tenant and signed in lately.
        if let Some(uid) = token.created_by_user_id {
            let creator = user::Entity::find_by_id(uid).one(&self.db).await?;
            let member = membership::Entity::find()
                .filter(membership::Column::UserId.eq(uid))
                .filter(membership::Column::TenantId.eq(t.id))
                .one(&self.db)
                .await?
                .is_some();
            let policy = &self.settings.api_tokens;
            if let Some(why) = creator_refusal(&token, creator.as_ref(), member, policy, self.now())
            {
                return Err(ServiceError::SuspendedApiToken(why));
            }
        }
        Ok(Verified {
            token_id: token.id,
            expires_at: self.settings.api_tokens.expiry_of(&token),
            actor: TenantActor {
                tenant_id: t.id,
                tenant_slug: t.slug,
                name: format!("token:{}", token.name),
                user_id: None,
                rights: SliceRights::of_token(token.scope),
                platform_admin: false,
            },
        })
    }
}
