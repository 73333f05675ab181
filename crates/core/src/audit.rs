//! What the audit log records: the action and the kind of target of each
//! entry. The names are stable: they are stored, filtered on (by prefix),
//! exported as CSV and shown in the API.

use crate::names::stable_names;

stable_names! {
    /// What happened (`<target>.<verb>`).
    pub enum AuditAction ("audit_action") {
        /// A slice was requested.
        AllocationCreate = "allocation.create",
        /// A queued slice was placed.
        AllocationPlace = "allocation.place",
        /// The agent started providing a slice.
        AllocationProvision = "allocation.provision",
        /// A slice became usable.
        AllocationActivate = "allocation.activate",
        /// A slice could not be provided or broke.
        AllocationFail = "allocation.fail",
        /// Tearing a slice down failed.
        AllocationTeardownError = "allocation.teardown_error",
        /// A slice's teardown finished.
        AllocationEnd = "allocation.end",
        /// A lease ended.
        AllocationExpire = "allocation.expire",
        /// A lease was extended.
        AllocationExtend = "allocation.extend",
        /// A slice was released by its owner or an admin.
        AllocationRelease = "allocation.release",
        /// A slice's GPU or host was lost (a placed one went back to the queue).
        AllocationCapacityLost = "allocation.capacity_lost",
        /// A slice's lost GPU or host came back.
        AllocationCapacityRestored = "allocation.capacity_restored",
        /// A slice was found idle; its owner was told the deadline to keep it.
        AllocationIdle = "allocation.idle",
        /// An idle slice turned busy again before its deadline.
        AllocationIdleClear = "allocation.idle_clear",
        /// Its owner kept an idle slice (with a reason).
        AllocationKeep = "allocation.keep",
        /// An idle slice was released at its deadline.
        AllocationReclaim = "allocation.reclaim",
        /// A slice was told to give way to a waiting request (preemption notice).
        AllocationPreemptNotice = "allocation.preempt_notice",
        /// A preemption notice was lifted: the request it was for stopped waiting.
        AllocationPreemptLift = "allocation.preempt_lift",
        /// A slice was preempted at the end of its notice.
        AllocationPreempt = "allocation.preempt",
        /// A tenant's quota was set.
        QuotaSet = "quota.set",
        /// A temporary quota grant began.
        QuotaGrant = "quota.grant",
        /// A temporary quota grant ended.
        QuotaGrantEnd = "quota.grant_end",
        /// A quota request was filed.
        QuotaRequestCreate = "quota_request.create",
        /// A proposal was submitted to the platform admins.
        QuotaRequestSubmit = "quota_request.submit",
        /// A quota request was approved.
        QuotaRequestApprove = "quota_request.approve",
        /// A quota request was rejected.
        QuotaRequestReject = "quota_request.reject",
        /// A quota request was withdrawn.
        QuotaRequestWithdraw = "quota_request.withdraw",
        /// An API token was created.
        ApiTokenCreate = "api_token.create",
        /// An API token was revoked.
        ApiTokenRevoke = "api_token.revoke",
        /// A host join token was created.
        JoinTokenCreate = "join_token.create",
        /// A host join token was revoked.
        JoinTokenRevoke = "join_token.revoke",
        /// A host enrolled.
        HostEnroll = "host.enroll",
        /// An enrolled host was given a new credential.
        HostReenroll = "host.reenroll",
        /// A host reported for the first time.
        HostFirstReport = "host.first_report",
        /// A host was cordoned.
        HostCordon = "host.cordon",
        /// A host's drain began (or got a new deadline).
        HostDrain = "host.drain",
        /// A host went into maintenance.
        HostMaintenance = "host.maintenance",
        /// A host was brought back into service.
        HostResume = "host.resume",
        /// A host was decommissioned.
        HostDecommission = "host.decommission",
        /// A GPU was cordoned.
        GpuCordon = "gpu.cordon",
        /// A GPU's drain began (or got a new deadline).
        GpuDrain = "gpu.drain",
        /// A GPU went into maintenance.
        GpuMaintenance = "gpu.maintenance",
        /// A GPU was brought back into service.
        GpuResume = "gpu.resume",
        /// A GPU's health verdict changed.
        GpuHealth = "gpu.health",
        /// A tenant was created.
        TenantCreate = "tenant.create",
        /// A tenant was changed.
        TenantUpdate = "tenant.update",
        /// A pool was created.
        PoolCreate = "pool.create",
        /// A change to a pool took effect.
        PoolUpdate = "pool.update",
        /// A change to a pool waits for GPUs to be drained.
        PoolPlanChange = "pool.plan_change",
        /// A planned change to a pool was called off.
        PoolCancelChange = "pool.cancel_change",
        /// A pool's price was set from a moment on.
        PoolSetPrice = "pool.set_price",
        /// A person signed in.
        UserLogin = "user.login",
        /// A person's roles changed.
        UserRolesChange = "user.roles_change",
        /// A person's sessions were ended (by themselves or a platform admin).
        UserSignOutEverywhere = "user.sign_out_everywhere",
        /// A platform admin deactivated a person.
        UserDeactivate = "user.deactivate",
        /// A platform admin reactivated a person.
        UserReactivate = "user.reactivate",
        /// A tenant's webhook was set.
        WebhookSet = "webhook.set",
        /// A tenant's webhook was removed.
        WebhookDelete = "webhook.delete",
        /// A test event was sent to a tenant's webhook.
        WebhookTest = "webhook.test",
        /// Retention deleted the oldest audit rows (the chain keeps their
        /// last hash as its anchor).
        AuditPrune = "audit.prune",
        /// A budget was set or changed.
        BudgetSet = "budget.set",
        /// A budget was removed.
        BudgetDelete = "budget.delete",
        /// A budget's month crossed a threshold (80 % or 100 %, actual or
        /// forecast).
        BudgetThreshold = "budget.threshold",
        /// A tenant admin asked for a larger budget.
        BudgetRequestCreate = "budget_request.create",
        /// A platform admin decided a budget request.
        BudgetRequestDecide = "budget_request.decide",
    }
}

stable_names! {
    /// The kind of thing an audit entry is about.
    pub enum AuditTarget ("audit_target") {
        /// A slice.
        Allocation = "allocation",
        /// A tenant's quota.
        Quota = "quota",
        /// A temporary quota grant.
        QuotaGrant = "quota_grant",
        /// A quota request.
        QuotaRequest = "quota_request",
        /// An API token.
        ApiToken = "api_token",
        /// A host join token.
        JoinToken = "join_token",
        /// A host.
        Host = "host",
        /// A GPU (`<host id>/<index>`).
        Gpu = "gpu",
        /// A tenant.
        Tenant = "tenant",
        /// A GPU pool.
        Pool = "pool",
        /// A person.
        User = "user",
        /// A tenant's webhook.
        Webhook = "webhook",
        /// The audit log itself.
        AuditLog = "audit",
        /// A tenant's or cost centre's budget.
        Budget = "budget",
        /// A request for a larger budget.
        BudgetRequest = "budget_request",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_stable_unique_and_round_trip() {
        let actions: Vec<&str> = AuditAction::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(
            actions,
            [
                "allocation.create",
                "allocation.place",
                "allocation.provision",
                "allocation.activate",
                "allocation.fail",
                "allocation.teardown_error",
                "allocation.end",
                "allocation.expire",
                "allocation.extend",
                "allocation.release",
                "allocation.capacity_lost",
                "allocation.capacity_restored",
                "allocation.idle",
                "allocation.idle_clear",
                "allocation.keep",
                "allocation.reclaim",
                "allocation.preempt_notice",
                "allocation.preempt_lift",
                "allocation.preempt",
                "quota.set",
                "quota.grant",
                "quota.grant_end",
                "quota_request.create",
                "quota_request.submit",
                "quota_request.approve",
                "quota_request.reject",
                "quota_request.withdraw",
                "api_token.create",
                "api_token.revoke",
                "join_token.create",
                "join_token.revoke",
                "host.enroll",
                "host.reenroll",
                "host.first_report",
                "host.cordon",
                "host.drain",
                "host.maintenance",
                "host.resume",
                "host.decommission",
                "gpu.cordon",
                "gpu.drain",
                "gpu.maintenance",
                "gpu.resume",
                "gpu.health",
                "tenant.create",
                "tenant.update",
                "pool.create",
                "pool.update",
                "pool.plan_change",
                "pool.cancel_change",
                "pool.set_price",
                "user.login",
                "user.roles_change",
                "user.sign_out_everywhere",
                "user.deactivate",
                "user.reactivate",
                "webhook.set",
                "webhook.delete",
                "webhook.test",
                "audit.prune",
                "budget.set",
                "budget.delete",
                "budget.threshold",
                "budget_request.create",
                "budget_request.decide",
            ]
        );
        let targets: Vec<&str> = AuditTarget::ALL.iter().map(|t| t.as_str()).collect();
        assert_eq!(
            targets,
            [
                "allocation",
                "quota",
                "quota_grant",
                "quota_request",
                "api_token",
                "join_token",
                "host",
                "gpu",
                "tenant",
                "pool",
                "user",
                "webhook",
                "audit",
                "budget",
                "budget_request",
            ]
        );
        for a in AuditAction::ALL {
            assert_eq!(AuditAction::parse(a.as_str()), Some(*a));
            let json = serde_json::to_string(a).unwrap_or_default();
            assert_eq!(json, format!("\"{a}\""));
            // Every action names its target kind before the dot.
            let target = a.as_str().split('.').next().unwrap_or_default();
            assert!(AuditTarget::parse(target).is_some(), "{a}");
        }
        for t in AuditTarget::ALL {
            assert_eq!(AuditTarget::parse(t.as_str()), Some(*t));
        }
        assert_eq!(AuditAction::parse("allocation"), None);
        assert_eq!(AuditTarget::parse("printer"), None);
    }
}
