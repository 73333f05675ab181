//! The append-only audit log. Writers call [`record`] inside the transaction of
//! the change they describe, so a change and its event commit or fail together.

use crate::entity::audit_event;
use crate::Principal;
use chrono::{DateTime, Utc};
use sea_orm::{ActiveModelTrait, ConnectionTrait, DbErr, Set};
use serde_json::Value;

/// Who did it.
#[derive(Debug, Clone)]
pub enum Actor<'a> {
    /// A signed-in user.
    User(&'a Principal),
    /// A user at login time (before a principal exists).
    Login { user_id: i64, name: String },
    /// A host agent.
    Host { host_id: i64, hostname: String },
    /// Someone acting within a tenant: a member, or a tenant API token.
    Tenant {
        /// The user, when a person acts.
        user_id: Option<i64>,
        /// Display name (`Name <email>` or `token:<name>`).
        name: String,
    },
    /// The server itself (timers, start-up).
    System,
}

impl Actor<'_> {
    fn parts(&self) -> (Option<i64>, String) {
        match self {
            Actor::User(p) => (Some(p.user_id), p.audit_name()),
            Actor::Login { user_id, name } => (Some(*user_id), name.clone()),
            Actor::Host { hostname, .. } => (None, format!("host:{hostname}")),
            Actor::Tenant { user_id, name } => (*user_id, name.clone()),
            Actor::System => (None, "system".to_owned()),
        }
    }
}

/// One event to append.
#[derive(Debug, Clone)]
pub struct Event<'a> {
    /// Who.
    pub actor: Actor<'a>,
    /// Tenant concerned, if any (tenant admins see their tenant's events).
    pub tenant_id: Option<i64>,
    /// Dotted verb, e.g. `join_token.create`.
    pub action: &'static str,
    /// Kind of target, e.g. `join_token`.
    pub target_type: &'static str,
    /// Target id.
    pub target_id: String,
    /// State before (None for creations).
    pub before: Option<Value>,
    /// State after (None for deletions).
    pub after: Option<Value>,
}

/// Appends an event using `conn` (pass the transaction of the change).
pub async fn record<C: ConnectionTrait>(
    conn: &C,
    event: Event<'_>,
    at: DateTime<Utc>,
) -> Result<(), DbErr> {
    let (actor_user_id, actor) = event.actor.parts();
    audit_event::ActiveModel {
        at: Set(at),
        actor_user_id: Set(actor_user_id),
        actor: Set(actor),
        tenant_id: Set(event.tenant_id),
        action: Set(event.action.to_owned()),
        target_type: Set(event.target_type.to_owned()),
        target_id: Set(event.target_id),
        before: Set(event.before),
        after: Set(event.after),
        ..Default::default()
    }
    .insert(conn)
    .await?;
    Ok(())
}
