//! Rules for telling people what happened: when a lease counts as ending
//! soon, and how outgoing webhooks are retried.

/// A lease with this many minutes or fewer left is "ending soon" (one
/// notification, and the badge on the allocation page).
pub const LEASE_ENDING_SOON_MINUTES: i64 = 60;

/// How many times a webhook delivery is tried before it is given up.
pub const WEBHOOK_MAX_ATTEMPTS: u32 = 8;

/// Seconds to wait before the next try after `attempts` failed tries
/// (exponential from `base_s`, capped at one hour), or `None` once
/// [`WEBHOOK_MAX_ATTEMPTS`] tries have failed.
pub fn webhook_retry_delay_s(attempts: u32, base_s: u64) -> Option<u64> {
    if attempts == 0 || attempts >= WEBHOOK_MAX_ATTEMPTS {
        return None;
    }
    let factor = 1u64 << (attempts - 1).min(20);
    Some(base_s.max(1).saturating_mul(factor).min(3600))
}

/// What a notification (and the matching webhook event) is about. The names
/// are stable: they are stored, sent to webhooks and shown in the API.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "sea-orm",
    derive(sea_orm::EnumIter, sea_orm::DeriveActiveEnum)
)]
#[cfg_attr(
    feature = "sea-orm",
    sea_orm(rs_type = "String", db_type = "Text", enum_name = "notification_kind")
)]
pub enum NotificationKind {
    /// A slice became usable.
    #[serde(rename = "allocation.active")]
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "allocation.active"))]
    AllocationActive,
    /// A slice could not be provided, broke, or a waiting slice still does not fit.
    #[serde(rename = "allocation.failed")]
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "allocation.failed"))]
    AllocationFailed,
    /// A queued slice was placed.
    #[serde(rename = "allocation.placed")]
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "allocation.placed"))]
    AllocationPlaced,
    /// A lease ended.
    #[serde(rename = "allocation.expired")]
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "allocation.expired"))]
    AllocationExpired,
    /// A lease ends within [`LEASE_ENDING_SOON_MINUTES`].
    #[serde(rename = "allocation.lease_ending")]
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "allocation.lease_ending"))]
    AllocationLeaseEnding,
    /// A tenant's quota changed (set, or a temporary grant).
    #[serde(rename = "quota.changed")]
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "quota.changed"))]
    QuotaChanged,
    /// A quota request was filed (proposed or sent to the platform admins).
    #[serde(rename = "quota_request.created")]
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "quota_request.created"))]
    QuotaRequestCreated,
    /// A proposal was submitted to the platform admins.
    #[serde(rename = "quota_request.submitted")]
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "quota_request.submitted"))]
    QuotaRequestSubmitted,
    /// A quota request was approved.
    #[serde(rename = "quota_request.approved")]
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "quota_request.approved"))]
    QuotaRequestApproved,
    /// A quota request was rejected.
    #[serde(rename = "quota_request.rejected")]
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "quota_request.rejected"))]
    QuotaRequestRejected,
    /// A quota request was withdrawn.
    #[serde(rename = "quota_request.withdrawn")]
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "quota_request.withdrawn"))]
    QuotaRequestWithdrawn,
    /// A tenant admin's test of the webhook.
    #[serde(rename = "webhook.test")]
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "webhook.test"))]
    WebhookTest,
}

/// What a notification is about, for grouping and icons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotificationTopic {
    /// Slices.
    Allocation,
    /// Quota.
    Quota,
    /// Quota requests.
    QuotaRequest,
    /// The webhook.
    Webhook,
}

impl NotificationKind {
    /// Every kind, in declaration order.
    pub const ALL: [Self; 12] = [
        Self::AllocationActive,
        Self::AllocationFailed,
        Self::AllocationPlaced,
        Self::AllocationExpired,
        Self::AllocationLeaseEnding,
        Self::QuotaChanged,
        Self::QuotaRequestCreated,
        Self::QuotaRequestSubmitted,
        Self::QuotaRequestApproved,
        Self::QuotaRequestRejected,
        Self::QuotaRequestWithdrawn,
        Self::WebhookTest,
    ];

    /// The stable name (`allocation.active`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AllocationActive => "allocation.active",
            Self::AllocationFailed => "allocation.failed",
            Self::AllocationPlaced => "allocation.placed",
            Self::AllocationExpired => "allocation.expired",
            Self::AllocationLeaseEnding => "allocation.lease_ending",
            Self::QuotaChanged => "quota.changed",
            Self::QuotaRequestCreated => "quota_request.created",
            Self::QuotaRequestSubmitted => "quota_request.submitted",
            Self::QuotaRequestApproved => "quota_request.approved",
            Self::QuotaRequestRejected => "quota_request.rejected",
            Self::QuotaRequestWithdrawn => "quota_request.withdrawn",
            Self::WebhookTest => "webhook.test",
        }
    }

    /// The kind called `name`, if any.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// What it is about.
    pub fn topic(self) -> NotificationTopic {
        match self {
            Self::AllocationActive
            | Self::AllocationFailed
            | Self::AllocationPlaced
            | Self::AllocationExpired
            | Self::AllocationLeaseEnding => NotificationTopic::Allocation,
            Self::QuotaChanged => NotificationTopic::Quota,
            Self::QuotaRequestCreated
            | Self::QuotaRequestSubmitted
            | Self::QuotaRequestApproved
            | Self::QuotaRequestRejected
            | Self::QuotaRequestWithdrawn => NotificationTopic::QuotaRequest,
            Self::WebhookTest => NotificationTopic::Webhook,
        }
    }
}

impl std::fmt::Display for NotificationKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_retries_back_off_and_give_up() {
        assert_eq!(webhook_retry_delay_s(0, 5), None);
        assert_eq!(webhook_retry_delay_s(1, 5), Some(5));
        assert_eq!(webhook_retry_delay_s(2, 5), Some(10));
        assert_eq!(webhook_retry_delay_s(3, 5), Some(20));
        assert_eq!(webhook_retry_delay_s(7, 100), Some(3600));
        assert_eq!(webhook_retry_delay_s(WEBHOOK_MAX_ATTEMPTS, 5), None);
        assert_eq!(webhook_retry_delay_s(1, 0), Some(1));
    }

    #[test]
    fn notification_kind_names_are_stable_and_round_trip() {
        let names: Vec<&str> = NotificationKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "allocation.active",
                "allocation.failed",
                "allocation.placed",
                "allocation.expired",
                "allocation.lease_ending",
                "quota.changed",
                "quota_request.created",
                "quota_request.submitted",
                "quota_request.approved",
                "quota_request.rejected",
                "quota_request.withdrawn",
                "webhook.test",
            ]
        );
        for k in NotificationKind::ALL {
            assert_eq!(NotificationKind::parse(k.as_str()), Some(k));
            let json = serde_json::to_string(&k).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
        }
        assert_eq!(NotificationKind::parse("allocation"), None);
    }
}
