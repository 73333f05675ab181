//! The read path of tenant API tokens: checks believed for a second, and
//! last uses recorded in memory (see [`crate::memo`]).
//!
//! Without this, every API call read the token and its tenant and wrote the
//! token's "last used" time. Now a verified token is believed for
//! [`crate::runtime::memo::BELIEVED_FOR`] (a revocation here forgets it at once), and
//! each use is noted in memory and written in one batch by
//! [`crate::Service::flush_token_uses`] (the server calls it every scheduler
//! round, and at shutdown); token lists show the noted time before it is
//! written.

use crate::runtime::memo::{Asked, Believed, Flights, Unwritten, BELIEVED_FOR};
use crate::TenantActor;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use tessera_core::ids::ApiTokenId;

/// A token that verified: who it acts as, and until when it is valid.
#[derive(Debug, Clone)]
pub(crate) struct Verified {
    pub(crate) token_id: ApiTokenId,
    pub(crate) actor: TenantActor,
    pub(crate) expires_at: DateTime<Utc>,
}

/// Verified tokens and unwritten last uses, per process.
#[derive(Debug, Default)]
pub(crate) struct TokenChecks {
    /// By the token's hash.
    verified: Believed<Verified>,
    /// Checks being read, by the token's hash: `Some(None)` for a token
    /// that is not valid, `None` when the read failed.
    pub(crate) flights: Flights<String, u64, Option<Verified>>,
    /// Token id → latest use not yet written.
    uses: Unwritten<ApiTokenId>,
}

impl TokenChecks {
    /// The token with this hash, if it verified less than a second ago.
    pub(crate) fn cached(&self, hash: &str, now: DateTime<Utc>) -> Result<Verified, Asked> {
        self.verified.lookup(hash, now, BELIEVED_FOR)
    }

    /// Remembers a token that verified at `now` (unless one was revoked
    /// here since it was `asked`).
    pub(crate) fn remember(
        &self,
        asked: Asked,
        hash: String,
        verified: Verified,
        now: DateTime<Utc>,
    ) {
        self.verified
            .remember(asked, hash, verified, now, BELIEVED_FOR);
    }

    /// Forgets a token (it was revoked here).
    pub(crate) fn forget(&self, token_id: ApiTokenId) {
        self.verified.forget(|v| v.token_id == token_id);
    }

    /// Notes a use of a token at `now`.
    pub(crate) fn used(&self, token_id: ApiTokenId, now: DateTime<Utc>) {
        self.uses.note(token_id, now);
    }

    /// The noted, unwritten last use of a token.
    pub(crate) fn unwritten_use(&self, token_id: ApiTokenId) -> Option<DateTime<Utc>> {
        self.uses.get(token_id)
    }

    /// Takes the noted uses to write them.
    pub(crate) fn take_uses(&self) -> HashMap<ApiTokenId, DateTime<Utc>> {
        self.uses.take()
    }

    /// Puts back uses that could not be written (newer notes win).
    pub(crate) fn restore_uses(&self, uses: HashMap<ApiTokenId, DateTime<Utc>>) {
        self.uses.restore(uses);
    }
}
