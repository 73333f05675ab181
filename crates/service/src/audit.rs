//! Who acts in a write. The audit rows themselves are derived from the
//! write's domain events when it commits (see [`crate::write`]), so a change
//! and its record commit or fail together.

use crate::Principal;
use tessera_core::ids::{HostId, UserId};

/// Who did it.
#[derive(Debug, Clone)]
pub enum Actor<'a> {
    /// A signed-in user.
    User(&'a Principal),
    /// A user at login time (before a principal exists).
    Login { user_id: UserId, name: String },
    /// A host agent.
    Host {
        host_id: HostId,
        hostname: tessera_core::checked::Hostname,
    },
    /// Someone acting within a tenant: a member, or a tenant API token.
    Tenant {
        /// The user, when a person acts.
        user_id: Option<UserId>,
        /// Display name (`Name <email>` or `token:<name>`).
        name: String,
    },
    /// The server itself (timers, start-up).
    System,
}

impl Actor<'_> {
    pub(crate) fn parts(&self) -> (Option<UserId>, String) {
        match self {
            Actor::User(p) => (Some(p.user_id), p.audit_name()),
            Actor::Login { user_id, name } => (Some(*user_id), name.clone()),
            Actor::Host { hostname, .. } => (None, format!("host:{hostname}")),
            Actor::Tenant { user_id, name } => (*user_id, name.clone()),
            Actor::System => (None, "system".to_owned()),
        }
    }
}
