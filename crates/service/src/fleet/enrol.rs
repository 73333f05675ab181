//! Enrolment: a host trades a join token for its own credential, and
//! authenticates with it afterwards.

use super::heartbeat::CREDENTIAL_BELIEVED_FOR;
use crate::audit::Actor;
use crate::entity::{host, join_token};
use crate::events::DomainEvent;
use crate::runtime::memo::BELIEVED_FOR;
use crate::{secret, Service, ServiceError};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QuerySelect, Set};
use tessera_core::checked::Hostname;
use tessera_core::ids::HostId;
use tessera_protocol::agent::{EnrollRequest, EnrollResponse};

/// A host that authenticated with its credential: a proof, only made by
/// [`Service::authenticate_host`] (and enrolment in tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticatedHost {
    /// Host id.
    pub(crate) id: HostId,
    /// The host name the credential was issued for.
    pub(crate) hostname: Hostname,
}

impl AuthenticatedHost {
    /// Host id.
    pub fn id(&self) -> HostId {
        self.id
    }

    /// The host name the credential was issued for.
    pub fn hostname(&self) -> &Hostname {
        &self.hostname
    }

    /// The host as the actor of what its agent does.
    pub(crate) fn actor(&self) -> Actor<'static> {
        Actor::Host {
            host_id: self.id,
            hostname: self.hostname.clone(),
        }
    }
}

fn already_enrolled(hostname: &str) -> ServiceError {
    ServiceError::Conflict(format!(
        "host '{hostname}' is already enrolled; ask a platform admin for a re-enrolment token for this host"
    ))
}

impl Service {
    /// Trades a join token for a host credential. The token is consumed in the
    /// same transaction that creates (or re-keys) the host, so a token works once.
    ///
    /// A plain token enrols a new host name only: an enrolled host's
    /// credential is replaced only with a re-enrolment token an admin made
    /// for that host, which enrols nothing else. A refused enrolment changes
    /// nothing and leaves the token usable.
    pub async fn enroll(&self, req: &EnrollRequest) -> Result<EnrollResponse, ServiceError> {
        let now = self.now();
        let token_hash = secret::hash(req.join_token.trim());
        let credential = secret::generate("tsh");
        let mut w = self.begin_write().await?;
        let token = join_token::Entity::find()
            .filter(join_token::Column::TokenHash.eq(&token_hash))
            .filter(join_token::Column::UsedAt.is_null())
            .filter(join_token::Column::RevokedAt.is_null())
            .filter(join_token::Column::ExpiresAt.gt(now))
            .one(w.db())
            .await?
            .ok_or(ServiceError::InvalidJoinToken)?;
        let existing = host::Entity::find()
            .filter(host::Column::Hostname.eq(req.hostname.as_str()))
            .one(w.db())
            .await?;
        match (token.for_host_id, &existing) {
            (None, None) => {}
            (Some(for_id), Some(h)) if h.id == for_id => {}
            (None, Some(_)) => return Err(already_enrolled(&req.hostname)),
            (Some(for_id), _) => {
                let for_name = host::Entity::find_by_id(for_id)
                    .one(w.db())
                    .await?
                    .map_or_else(|| format!("host {for_id}"), |h| format!("'{}'", h.hostname));
                return Err(ServiceError::Conflict(format!(
                    "this join token re-enrols host {for_name} only; it cannot enrol '{}'",
                    req.hostname
                )));
            }
        }
        // Claim the token atomically: only one enrolment can flip used_at.
        let claimed = join_token::Entity::update_many()
            .col_expr(join_token::Column::UsedAt, Expr::value(now))
            .filter(join_token::Column::Id.eq(token.id))
            .filter(join_token::Column::UsedAt.is_null())
            .exec(w.db())
            .await?;
        if claimed.rows_affected != 1 {
            return Err(ServiceError::InvalidJoinToken);
        }
        let (host_id, reenrolled) = match existing {
            Some(h) => {
                let id = h.id;
                let mut active: host::ActiveModel = h.into();
                active.credential_hash = Set(secret::hash(&credential));
                active.report_digest = Set(None);
                active.enrolled_at = Set(now);
                active.update(w.db()).await?;
                (id, true)
            }
            None => {
                let h = host::ActiveModel {
                    hostname: Set(req.hostname.clone()),
                    credential_hash: Set(secret::hash(&credential)),
                    cpu_milli: Set(0),
                    memory_mib: Set(0),
                    enrolled_at: Set(now),
                    ..Default::default()
                }
                .insert(w.db())
                .await
                .map_err(|e| match e.sql_err() {
                    // Another enrolment took the name since we looked.
                    Some(sea_orm::SqlErr::UniqueConstraintViolation(_)) => {
                        already_enrolled(&req.hostname)
                    }
                    _ => e.into(),
                })?;
                (h.id, false)
            }
        };
        join_token::Entity::update_many()
            .col_expr(join_token::Column::UsedByHostId, Expr::value(host_id))
            .filter(join_token::Column::Id.eq(token.id))
            .exec(w.db())
            .await?;
        w.emit(DomainEvent::HostEnrolled {
            host_id,
            hostname: req.hostname.clone(),
            reenrolled,
        });
        w.commit(
            self,
            &Actor::Host {
                host_id,
                hostname: req.hostname.clone(),
            },
        )
        .await?;
        if reenrolled {
            // The old credential stopped working with the commit (here and,
            // by a notice, on the other replicas: see the event's
            // after-commit); the next report is processed in full.
            self.host_checks.forget_report(Some(host_id));
        }
        Ok(EnrollResponse {
            host_id,
            credential,
        })
    }

    /// The host a credential belongs to.
    pub async fn authenticate_host(
        &self,
        credential: &str,
    ) -> Result<AuthenticatedHost, ServiceError> {
        let hash = secret::hash(credential.trim());
        let now = self.now();
        let within = if self.peers_heard() {
            CREDENTIAL_BELIEVED_FOR
        } else {
            BELIEVED_FOR
        };
        let asked = match self.host_checks.credential(&hash, now, within) {
            Ok(host) => return Ok(host),
            Err(asked) => asked,
        };
        let (id, hostname) = host::Entity::find()
            .select_only()
            .columns([host::Column::Id, host::Column::Hostname])
            .filter(host::Column::CredentialHash.eq(hash.as_str()))
            .into_tuple::<(HostId, Hostname)>()
            .one(&self.db)
            .await?
            .ok_or(ServiceError::InvalidCredential)?;
        let host = AuthenticatedHost { id, hostname };
        self.host_checks
            .remember_credential(asked, hash, host.clone(), now);
        Ok(host)
    }
}
