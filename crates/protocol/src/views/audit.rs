//! The audit log as the page and the CSV export show it.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tessera_core::audit::{AuditAction, AuditTarget};

/// One audit event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEventView {
    /// Id (events are append-only; ids grow with time).
    pub id: i64,
    /// When.
    pub at: DateTime<Utc>,
    /// Who.
    pub actor: String,
    /// Tenant concerned, if any.
    pub tenant: Option<String>,
    /// What, e.g. `allocation.release`.
    pub action: AuditAction,
    /// Kind of target.
    pub target_type: AuditTarget,
    /// Target id.
    pub target_id: String,
    /// State before, as JSON.
    pub before: Option<String>,
    /// State after, as JSON.
    pub after: Option<String>,
}

/// A page of the audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditPage {
    /// Newest first.
    pub events: Vec<AuditEventView>,
    /// Events matching the filter.
    pub total: u64,
    /// This page (from 1).
    pub page: u32,
    /// Pages.
    pub pages: u32,
    /// Tenants the viewer may filter by (slug, name).
    pub tenants: Vec<(String, String)>,
    /// The hash chain's state (platform admins; `None` for others).
    #[serde(default)]
    pub chain: Option<AuditChainStatus>,
}

/// What a walk of the audit log's hash chain found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditChainStatus {
    /// Rows whose hash matched.
    pub verified: u64,
    /// The last of them.
    pub verified_up_to: Option<i64>,
    /// Rows written before the chain began.
    pub unchained: u64,
    /// Chained rows deleted by retention.
    #[serde(default)]
    pub pruned: u64,
    /// The last row deleted by retention.
    #[serde(default)]
    pub pruned_through: Option<i64>,
    /// The retention (`[audit] keep_days`; `None`: rows are kept forever).
    #[serde(default)]
    pub keep_days: Option<u32>,
    /// The first row that breaks the chain, and why.
    pub broken: Option<(Option<i64>, String)>,
}
