//! A tenant's API tokens (the secret only once, at creation).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tessera_core::ids::ApiTokenId;
use tessera_core::role::TokenScope;

/// A tenant API token as listed (never the secret).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiTokenView {
    /// Id.
    pub id: ApiTokenId,
    /// Name.
    pub name: String,
    /// First characters, to tell tokens apart.
    pub prefix: String,
    /// Who created it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// Last use.
    pub last_used_at: Option<DateTime<Utc>>,
    /// Revoked, if so.
    pub revoked_at: Option<DateTime<Utc>>,
    /// When it stops working.
    pub expires_at: DateTime<Utc>,
    /// Whether it had expired when the view was made.
    pub expired: bool,
    /// Why it does not work now although neither revoked nor expired: it
    /// follows the person who made it, and they were deactivated, left the
    /// tenant or have not signed in lately.
    #[serde(default)]
    pub suspended: Option<String>,
    /// What it may do (`read`: look only; `request`: a member's rights).
    #[serde(default)]
    pub scope: TokenScope,
}

/// A token right after creation: the only time the secret is shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedApiToken {
    /// The listed view.
    pub token: ApiTokenView,
    /// The secret (`tsk_...`).
    pub secret: String,
}
