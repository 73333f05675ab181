//! Rules for telling people what happened: when a lease counts as ending
//! soon, and how outgoing webhooks are retried.

use crate::names::stable_names;

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

stable_names! {
    /// What a notification (and the matching webhook event) is about. The
    /// names are stable: they are stored, sent to webhooks and shown in the API.
    pub enum NotificationKind ("notification_kind") {
        /// A slice became usable.
        AllocationActive = "allocation.active",
        /// A slice could not be provided, broke, or a waiting slice still does not fit.
        AllocationFailed = "allocation.failed",
        /// A queued slice was placed.
        AllocationPlaced = "allocation.placed",
        /// A lease ended.
        AllocationExpired = "allocation.expired",
        /// A lease ends within [`LEASE_ENDING_SOON_MINUTES`].
        AllocationLeaseEnding = "allocation.lease_ending",
        /// The host or GPU under a slice is being drained: it ends at the deadline.
        AllocationDraining = "allocation.draining",
        /// A slice's GPU turned unhealthy or went missing, or its host went offline.
        AllocationCapacityLost = "allocation.capacity_lost",
        /// A slice's lost GPU or host came back.
        AllocationCapacityRestored = "allocation.capacity_restored",
        /// A slice is idle: it is reclaimed at a deadline unless kept.
        AllocationIdle = "allocation.idle",
        /// An idle slice was reclaimed.
        AllocationReclaimed = "allocation.reclaimed",
        /// A slice must give way to a waiting request: it is preempted at a deadline.
        AllocationPreempting = "allocation.preempting",
        /// A slice was preempted.
        AllocationPreempted = "allocation.preempted",
        /// A tenant's quota changed (set, or a temporary grant).
        QuotaChanged = "quota.changed",
        /// A quota request was filed (proposed or sent to the platform admins).
        QuotaRequestCreated = "quota_request.created",
        /// A proposal was submitted to the platform admins.
        QuotaRequestSubmitted = "quota_request.submitted",
        /// A quota request was approved.
        QuotaRequestApproved = "quota_request.approved",
        /// A quota request was rejected.
        QuotaRequestRejected = "quota_request.rejected",
        /// A quota request was withdrawn.
        QuotaRequestWithdrawn = "quota_request.withdrawn",
        /// A tenant admin's test of the webhook.
        WebhookTest = "webhook.test",
        /// A GPU's health verdict changed (platform admins).
        GpuHealthChanged = "gpu.health_changed",
        /// A budget's month reached 80 % or 100 %, spent or forecast.
        BudgetThreshold = "budget.threshold",
        /// A tenant admin asked for a larger budget (platform admins).
        BudgetRequestCreated = "budget_request.created",
        /// A request for a larger budget was decided.
        BudgetRequestDecided = "budget_request.decided",
    }
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
    /// Hosts and GPUs.
    Fleet,
    /// Budgets.
    Budget,
}

impl NotificationKind {
    /// What it is about.
    pub fn topic(self) -> NotificationTopic {
        match self {
            Self::AllocationActive
            | Self::AllocationFailed
            | Self::AllocationPlaced
            | Self::AllocationExpired
            | Self::AllocationLeaseEnding
            | Self::AllocationDraining
            | Self::AllocationCapacityLost
            | Self::AllocationCapacityRestored
            | Self::AllocationIdle
            | Self::AllocationReclaimed
            | Self::AllocationPreempting
            | Self::AllocationPreempted => NotificationTopic::Allocation,
            Self::QuotaChanged => NotificationTopic::Quota,
            Self::QuotaRequestCreated
            | Self::QuotaRequestSubmitted
            | Self::QuotaRequestApproved
            | Self::QuotaRequestRejected
            | Self::QuotaRequestWithdrawn => NotificationTopic::QuotaRequest,
            Self::WebhookTest => NotificationTopic::Webhook,
            Self::GpuHealthChanged => NotificationTopic::Fleet,
            Self::BudgetThreshold | Self::BudgetRequestCreated | Self::BudgetRequestDecided => {
                NotificationTopic::Budget
            }
        }
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
                "allocation.draining",
                "allocation.capacity_lost",
                "allocation.capacity_restored",
                "allocation.idle",
                "allocation.reclaimed",
                "allocation.preempting",
                "allocation.preempted",
                "quota.changed",
                "quota_request.created",
                "quota_request.submitted",
                "quota_request.approved",
                "quota_request.rejected",
                "quota_request.withdrawn",
                "webhook.test",
                "gpu.health_changed",
                "budget.threshold",
                "budget_request.created",
                "budget_request.decided",
            ]
        );
        for &k in NotificationKind::ALL {
            assert_eq!(NotificationKind::parse(k.as_str()), Some(k));
            let json = serde_json::to_string(&k).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", k.as_str()));
        }
        assert_eq!(NotificationKind::parse("allocation"), None);
    }
}
