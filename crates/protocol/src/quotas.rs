//! Quota administration, quota requests and notifications: what the pages
//! render and what the REST API takes and returns.

use crate::timestamp::Timestamp;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tessera_core::ids::{AllocationId, NotificationId, QuotaGrantId, QuotaRequestId};
use tessera_core::lifecycle::QuotaRequestState;
use tessera_core::notify::NotificationKind;
use tessera_core::quota::{Quota, QuotaAmount};

use crate::requests::NewAllocation;
use crate::views::QuotaView;

/// Temporary quota on top of the permanent quota.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaGrantView {
    /// Id (to end it early).
    pub id: QuotaGrantId,
    /// The extra amount.
    pub amount: Quota,
    /// When it ends.
    pub ends_at: DateTime<Utc>,
    /// Why it was granted.
    pub reason: String,
    /// The quota request it came from, if any.
    pub quota_request_id: Option<QuotaRequestId>,
}

/// A platform admin sets a tenant's permanent quota in a pool.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetQuota {
    /// Tenant slug.
    pub tenant: tessera_core::checked::TenantSlug,
    /// Pool name.
    pub pool: tessera_core::checked::PoolName,
    /// The new permanent quota (replaces the old one).
    pub amount: QuotaAmount,
    /// Why (shown to the platform admin who approves a raise).
    #[serde(default)]
    pub reason: String,
}

/// What a platform admin's direct quota change did. With four-eyes on (the
/// default), lowering applies at once and raising waits as a quota request
/// that a different platform admin approves; with it off, all of it applies.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuotaChange {
    /// The tenant's quota in the pool now.
    pub quota: QuotaView,
    /// The raise that waits for another platform admin, if any.
    pub proposal: Option<QuotaRequestView>,
}

/// A platform admin grants temporary extra quota.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewQuotaGrant {
    /// Tenant slug.
    pub tenant: tessera_core::checked::TenantSlug,
    /// Pool name.
    pub pool: tessera_core::checked::PoolName,
    /// The extra amount.
    pub amount: QuotaAmount,
    /// When it ends (must be in the future, and before 10000-01-01).
    pub ends_at: Timestamp,
    /// Why (shown to the tenant).
    #[serde(default)]
    pub reason: String,
}

/// One tenant's quotas, as the platform admin's quota page shows them.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantQuotasView {
    /// Tenant slug.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Every pool, with its quota (zero where none is set) and use.
    pub quotas: Vec<QuotaView>,
    /// Pending quota requests of this tenant.
    pub pending_requests: u32,
}

/// A tenant asks for more quota (members propose; tenant admins submit).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewQuotaRequest {
    /// Tenant slug.
    pub tenant: tessera_core::checked::TenantSlug,
    /// Pool name.
    pub pool: tessera_core::checked::PoolName,
    /// The increase asked for.
    pub amount: QuotaAmount,
    /// Temporary until then (a burst); permanent when omitted.
    #[serde(default)]
    pub ends_at: Option<Timestamp>,
    /// Why the tenant needs it (required).
    pub justification: String,
    /// The slice request that was refused for lack of quota; it is requested
    /// again, for the same person, when the quota request is approved.
    #[serde(default)]
    pub slice: Option<NewAllocation>,
}

/// A platform admin's decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case", deny_unknown_fields)]
pub enum QuotaDecision {
    /// Grant it, optionally a different amount or end date.
    Approve {
        /// Grant this instead of what was asked.
        #[serde(default)]
        amount: Option<QuotaAmount>,
        /// End the grant then instead (temporary requests only keep theirs
        /// when omitted).
        #[serde(default)]
        ends_at: Option<Timestamp>,
    },
    /// Refuse it.
    Reject {
        /// Why (required; the tenant sees it).
        reason: String,
    },
}

/// A quota request as its tenant and the platform admins see it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaRequestView {
    /// Id.
    pub id: QuotaRequestId,
    /// Tenant slug.
    pub tenant: String,
    /// Tenant display name.
    pub tenant_name: String,
    /// Pool name.
    pub pool: String,
    /// The increase asked for.
    pub amount: Quota,
    /// Temporary until then; permanent when `None`.
    pub ends_at: Option<DateTime<Utc>>,
    /// Why.
    pub justification: String,
    /// Where it is (a rejection carries the reason).
    pub state: QuotaRequestState,
    /// Who asked.
    pub requested_by: String,
    /// The tenant admin who submitted it (a member's proposal).
    pub submitted_by: Option<String>,
    /// Who decided.
    pub decided_by: Option<String>,
    /// When.
    pub decided_at: Option<DateTime<Utc>>,
    /// What was granted.
    pub granted: Option<Quota>,
    /// Until when the grant runs (temporary grants).
    pub granted_ends_at: Option<DateTime<Utc>>,
    /// The waiting slice, as a label (`1g.10gb MIG`), if one is attached.
    pub slice: Option<String>,
    /// The allocation made from the waiting slice on approval.
    pub allocation_id: Option<AllocationId>,
    /// Why the waiting slice could still not be requested on approval.
    pub slice_error: Option<String>,
    /// When it was filed.
    pub created_at: DateTime<Utc>,
    /// What the viewer may do with it now.
    pub can_submit: bool,
    /// The viewer may withdraw it.
    pub can_withdraw: bool,
    /// The viewer may approve or reject it.
    pub can_decide: bool,
    /// Why a platform admin may not decide it (four-eyes), if so.
    pub decide_blocked: Option<String>,
}

/// Free capacity of a pool, for the approval queue.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolCapacityView {
    /// Pool name.
    pub pool: String,
    /// Healthy GPUs on online hosts.
    pub gpus: u32,
    /// GPU compute not held by any live allocation.
    pub free: Quota,
    /// Total GPU compute and memory of those GPUs.
    pub total: Quota,
    /// Sum of every tenant's quota in the pool (may exceed the total:
    /// quota is a promise, capacity is shared).
    pub promised: Quota,
}

/// One entry of the approval queue, with what a decision needs.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalItem {
    /// The request.
    pub request: QuotaRequestView,
    /// The tenant's quota and use in the pool now.
    pub current: QuotaView,
    /// The tenant's earlier requests (newest first, at most 5).
    pub history: Vec<QuotaRequestView>,
    /// The pool's capacity.
    pub pool: PoolCapacityView,
}

/// The platform admins' approval queue (oldest first).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalQueueView {
    /// Pending requests, oldest first.
    pub items: Vec<ApprovalItem>,
    /// Requests decided recently (newest first).
    pub recent: Vec<QuotaRequestView>,
    /// Whether four-eyes is on.
    pub four_eyes: bool,
}

/// A tenant's quota page: quota, use and headroom per pool, and its requests.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantQuotaPage {
    /// Tenant slug.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Every pool the tenant has a quota in or uses.
    pub quotas: Vec<QuotaView>,
    /// Pool names (for the request form).
    pub pools: Vec<String>,
    /// The tenant's quota requests, newest first.
    pub requests: Vec<QuotaRequestView>,
    /// The viewer submits (a tenant admin) rather than proposes (a member).
    pub can_submit: bool,
}

/// One in-app notification.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotificationView {
    /// Id.
    pub id: NotificationId,
    /// Machine-readable kind, e.g. `quota_request.approved`, `allocation.active`.
    pub kind: NotificationKind,
    /// One line.
    pub title: String,
    /// Detail.
    pub body: String,
    /// Where to look.
    pub link: Option<String>,
    /// When.
    pub created_at: DateTime<Utc>,
    /// Read?
    pub read: bool,
}

/// The viewer's notifications, newest first.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotificationsPage {
    /// Newest first (at most 100).
    pub items: Vec<NotificationView>,
    /// Unread in all.
    pub unread: u64,
}

/// A tenant's outgoing webhook, as its admins see it (never the secret).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookView {
    /// Where events are posted.
    pub url: String,
    /// When it was set up.
    pub created_at: DateTime<Utc>,
    /// By whom.
    pub created_by: String,
    /// Latest deliveries, newest first.
    pub deliveries: Vec<WebhookDeliveryView>,
}

/// One webhook call.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WebhookDeliveryView {
    /// Id.
    pub id: i64,
    /// Event kind.
    pub event: NotificationKind,
    /// Whether it went through.
    pub status: WebhookDeliveryStatus,
    /// Tries so far.
    pub attempts: u32,
    /// Last error, if any (the same words for every way a receiver can be
    /// unreachable).
    pub last_error: Option<String>,
    /// Why it failed, exactly: for platform admins only, `None` for others.
    #[serde(default)]
    pub detail: Option<String>,
    /// When the event happened.
    pub created_at: DateTime<Utc>,
}

/// Where a webhook call stands.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WebhookDeliveryStatus {
    /// Not delivered yet; tried again later.
    Pending,
    /// The receiver accepted it.
    Delivered,
    /// Given up after the last try.
    Failed,
}

impl WebhookDeliveryStatus {
    /// Lower-case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::Failed => "failed",
        }
    }
}

impl std::fmt::Display for WebhookDeliveryStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A webhook just set up: the signing secret, shown once.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedWebhook {
    /// The webhook.
    pub webhook: WebhookView,
    /// HMAC-SHA256 key for `X-Tessera-Signature`.
    pub secret: String,
}
