//! The stable names: audit actions and notification kinds are stored,
//! filtered on, exported and sent to webhooks, so renaming one is a breaking
//! change. Each variant is listed once here; a new variant fails to compile
//! until it is added (the match in `index` is exhaustive).

use super::*;
use chrono::TimeZone;
use std::collections::BTreeMap;
use tessera_core::audit::AuditAction;
use tessera_core::checked::Hostname;
use tessera_core::lifecycle::{AllocationPhase, ReleaseOutcome};
use tessera_core::notify::NotificationKind;
use tessera_core::units::{ComputeMilli, MemMiB};

fn alloc() -> AllocationRef {
    AllocationRef {
        id: AllocationId::new(7),
        tenant_id: TenantId::new(3),
        pool: "h100-mig".parse().unwrap(),
        shape_label: "1g.10gb".into(),
        requested_by: "Bob <bob@example.com>".into(),
        requested_by_user_id: Some(UserId::new(11)),
        host_id: Some(HostId::new(5)),
    }
}

fn fields() -> TenantFields {
    TenantFields {
        name: "Vision".into(),
        cost_centre: Some("CC-1".into()),
        member_groups: vec!["vision".into()],
        admin_groups: vec!["vision-leads".into()],
        namespaces: Vec::new(),
    }
}

fn pool() -> tessera_core::pool::PoolSpec {
    tessera_core::pool::PoolSpec::new(
        "a30".parse().unwrap(),
        tessera_core::sharing::SharingMode::Mig,
        &["A30"],
    )
}

fn tenant() -> TenantRef {
    TenantRef {
        id: TenantId::new(3),
        slug: "vision".parse().unwrap(),
        name: "Vision".into(),
    }
}

fn request() -> QuotaRequestRef {
    QuotaRequestRef {
        id: QuotaRequestId::new(9),
        tenant: tenant(),
        pool: "h100-mig".parse().unwrap(),
        justification: "training".into(),
    }
}

fn quota() -> Quota {
    Quota {
        compute: ComputeMilli(1000),
        memory: MemMiB(10240),
        max_slices: 2,
    }
}

/// One event of each kind, with its audit action and notification kind.
fn samples() -> Vec<(DomainEvent, Option<&'static str>, Option<NotificationKind>)> {
    use NotificationKind as K;
    let at = chrono::Utc
        .with_ymd_and_hms(2026, 11, 30, 12, 0, 0)
        .single()
        .unwrap_or_default();
    let failed = AllocationState::Failed {
        reason: "Xid 79".into(),
    };
    vec![
        (
            DomainEvent::AllocationRequested {
                alloc: alloc(),
                shape: SliceShape::TimeSlice {},
                lease_hours: 8,
                priority_class: "standard".into(),
                state: AllocationState::Placed,
                requeue_of: None,
            },
            Some("allocation.create"),
            None,
        ),
        (
            DomainEvent::AllocationPlaced { alloc: alloc() },
            Some("allocation.place"),
            Some(K::AllocationPlaced),
        ),
        (
            DomainEvent::AllocationProvisioning {
                alloc: alloc(),
                state: AllocationState::Provisioning,
            },
            Some("allocation.provision"),
            None,
        ),
        (
            DomainEvent::AllocationActivated {
                alloc: alloc(),
                before: AllocationPhase::Provisioning,
                state: AllocationState::Active,
                hostname: host_named("gpu-01"),
                lease_hours: 8,
            },
            Some("allocation.activate"),
            Some(K::AllocationActive),
        ),
        (
            DomainEvent::AllocationFailed {
                alloc: alloc(),
                before: AllocationPhase::Provisioning,
                state: failed.clone(),
                reason: "Xid 79".into(),
            },
            Some("allocation.fail"),
            Some(K::AllocationFailed),
        ),
        (
            DomainEvent::AllocationTeardownFailed {
                alloc: alloc(),
                state: failed.clone(),
            },
            Some("allocation.teardown_error"),
            None,
        ),
        (
            DomainEvent::AllocationEnded {
                alloc: alloc(),
                before: AllocationPhase::Releasing,
                state: AllocationState::Released,
                processes_stopped: None,
            },
            Some("allocation.end"),
            None,
        ),
        (
            DomainEvent::AllocationExpired {
                alloc: alloc(),
                before: AllocationPhase::Active,
                state: AllocationState::Expired,
            },
            Some("allocation.expire"),
            Some(K::AllocationExpired),
        ),
        (
            DomainEvent::AllocationReleased {
                alloc: alloc(),
                before: AllocationPhase::Active,
                after: AllocationPhase::Releasing,
            },
            Some("allocation.release"),
            None,
        ),
        (
            DomainEvent::AllocationExtended {
                alloc: alloc(),
                before_end: at,
                after_end: at,
            },
            Some("allocation.extend"),
            None,
        ),
        (
            DomainEvent::AllocationLeaseEnding {
                alloc: alloc(),
                minutes_left: 30,
            },
            None,
            Some(K::AllocationLeaseEnding),
        ),
        (
            DomainEvent::WaitingSliceRefused {
                request_id: QuotaRequestId::new(9),
                tenant: tenant(),
                user_id: Some(UserId::new(11)),
                error: "no".into(),
            },
            None,
            Some(K::AllocationFailed),
        ),
        (
            DomainEvent::QuotaSet {
                tenant: tenant(),
                pool: "h100-mig".parse().unwrap(),
                before: Some((quota(), quota())),
                after: (quota(), quota()),
                by: Some("Alice".into()),
            },
            Some("quota.set"),
            Some(K::QuotaChanged),
        ),
        (
            DomainEvent::QuotaGranted {
                grant_id: QuotaGrantId::new(1),
                tenant: tenant(),
                pool: "h100-mig".parse().unwrap(),
                extra: quota(),
                ends_at: at,
                reason: "deadline".into(),
                before: quota(),
                after: quota(),
                by: "Alice".into(),
            },
            Some("quota.grant"),
            Some(K::QuotaChanged),
        ),
        (
            DomainEvent::QuotaGrantEnded {
                grant_id: QuotaGrantId::new(1),
                tenant_id: TenantId::new(3),
                pool: "h100-mig".parse().unwrap(),
            },
            Some("quota.grant_end"),
            None,
        ),
        (
            DomainEvent::QuotaRequestFiled {
                request: request(),
                state: QuotaRequestState::Proposed,
                amount: quota(),
                ends_at: None,
                slice: None,
                by: "Bob".into(),
            },
            Some("quota_request.create"),
            Some(K::QuotaRequestCreated),
        ),
        (
            DomainEvent::QuotaRequestSubmitted {
                request: request(),
                amount: quota(),
                requested_by_user_id: Some(UserId::new(11)),
            },
            Some("quota_request.submit"),
            Some(K::QuotaRequestSubmitted),
        ),
        (
            DomainEvent::QuotaRequestWithdrawn {
                request: request(),
                before: QuotaRequestState::Pending,
                requested_by_user_id: Some(UserId::new(11)),
                by: "Carol".into(),
            },
            Some("quota_request.withdraw"),
            Some(K::QuotaRequestWithdrawn),
        ),
        (
            DomainEvent::QuotaRequestApproved {
                request: request(),
                asked: quota(),
                granted: quota(),
                ends_at: None,
                before: quota(),
                after: quota(),
                by: "Alice".into(),
                people: vec![UserId::new(11)],
            },
            Some("quota_request.approve"),
            Some(K::QuotaRequestApproved),
        ),
        (
            DomainEvent::QuotaRequestRejected {
                request: request(),
                asked: quota(),
                reason: "no budget".into(),
                quota: quota(),
                by: "Alice".into(),
                people: vec![UserId::new(11)],
            },
            Some("quota_request.reject"),
            Some(K::QuotaRequestRejected),
        ),
        (
            DomainEvent::ApiTokenCreated {
                tenant_id: TenantId::new(3),
                token_id: ApiTokenId::new(1),
                name: "ci".into(),
                prefix: "tsk_abc".into(),
                expires_at: at,
                scope: tessera_core::role::TokenScope::Read,
            },
            Some("api_token.create"),
            None,
        ),
        (
            DomainEvent::ApiTokenRevoked {
                tenant_id: TenantId::new(3),
                token_id: ApiTokenId::new(1),
                name: "ci".into(),
            },
            Some("api_token.revoke"),
            None,
        ),
        (
            DomainEvent::JoinTokenCreated {
                token_id: JoinTokenId::new(1),
                description: "rack 4".into(),
                expires_at: at,
                for_host: None,
            },
            Some("join_token.create"),
            None,
        ),
        (
            DomainEvent::JoinTokenRevoked {
                token_id: JoinTokenId::new(1),
                status_before: tessera_protocol::views::JoinTokenStatus::Active,
            },
            Some("join_token.revoke"),
            None,
        ),
        (
            DomainEvent::HostEnrolled {
                host_id: HostId::new(5),
                hostname: host_named("gpu-01"),
                reenrolled: false,
            },
            Some("host.enroll"),
            None,
        ),
        (
            DomainEvent::HostFirstReport {
                host_id: HostId::new(5),
                gpus: 8,
                backend: "simulated".into(),
            },
            Some("host.first_report"),
            None,
        ),
        (
            DomainEvent::TenantCreated {
                tenant: tenant(),
                fields: fields(),
            },
            Some("tenant.create"),
            None,
        ),
        (
            DomainEvent::TenantUpdated {
                tenant: tenant(),
                before: TenantFields {
                    name: "Old".into(),
                    ..fields()
                },
                after: fields(),
            },
            Some("tenant.update"),
            None,
        ),
        (
            DomainEvent::PoolCreated { spec: pool() },
            Some("pool.create"),
            None,
        ),
        (
            DomainEvent::PoolChanged {
                before: pool(),
                after: pool(),
                planned_by: None,
            },
            Some("pool.update"),
            None,
        ),
        (
            DomainEvent::PoolChangePlanned {
                before: pool(),
                after: pool(),
                moves: vec![],
                reason: "to MPS".into(),
                drain_deadline: at,
            },
            Some("pool.plan_change"),
            None,
        ),
        (
            DomainEvent::PoolChangeCancelled {
                spec: pool(),
                planned: pool(),
            },
            Some("pool.cancel_change"),
            None,
        ),
        (
            DomainEvent::PriceSet {
                price: tessera_protocol::views::PriceView {
                    pool: "a30".into(),
                    currency: "EUR".into(),
                    gpu_hour: "2.10".into(),
                    gib_hour: "0.00".into(),
                    effective_from: at,
                    recovery: Default::default(),
                    created_by: "Alice".into(),
                },
            },
            Some("pool.set_price"),
            None,
        ),
        (
            DomainEvent::UserLoggedIn {
                user_id: UserId::new(11),
            },
            Some("user.login"),
            None,
        ),
        (
            DomainEvent::UserRolesChanged {
                user_id: UserId::new(11),
                before: None,
                after: Roles {
                    platform_admin: false,
                    memberships: BTreeMap::new(),
                },
            },
            Some("user.roles_change"),
            None,
        ),
        (
            DomainEvent::UserAccessChanged {
                user_id: UserId::new(11),
                name: "Bob".into(),
                change: AccessChange::SignedOutEverywhere,
                tokens_revoked: 1,
            },
            Some("user.sign_out_everywhere"),
            None,
        ),
        (
            DomainEvent::UserAccessChanged {
                user_id: UserId::new(11),
                name: "Bob".into(),
                change: AccessChange::Deactivated,
                tokens_revoked: 1,
            },
            Some("user.deactivate"),
            None,
        ),
        (
            DomainEvent::UserAccessChanged {
                user_id: UserId::new(11),
                name: "Bob".into(),
                change: AccessChange::Reactivated,
                tokens_revoked: 1,
            },
            Some("user.reactivate"),
            None,
        ),
        (
            DomainEvent::AuditPruned {
                rows: 40,
                through: 40,
                anchor: "ab".repeat(32),
                keep_days: 365,
            },
            Some("audit.prune"),
            None,
        ),
        (
            DomainEvent::WebhookSet {
                tenant: tenant(),
                before_url: None,
                url: "https://hooks.example.com/x".into(),
            },
            Some("webhook.set"),
            None,
        ),
        (
            DomainEvent::WebhookDeleted {
                tenant: tenant(),
                url: "https://hooks.example.com/x".into(),
            },
            Some("webhook.delete"),
            None,
        ),
        (
            DomainEvent::WebhookTested {
                tenant: tenant(),
                by: "Carol".into(),
            },
            Some("webhook.test"),
            Some(K::WebhookTest),
        ),
        (
            DomainEvent::FleetOperated {
                host_id: HostId::new(3),
                hostname: host_named("gpu-01"),
                gpu: None,
                action: OpsAction::Drain {
                    deadline_minutes: 30,
                },
                before: OpsMode::Available,
                after: Some(OpsMode::Draining),
                reason: "rack work".into(),
                drain_deadline: Some(at),
            },
            Some("host.drain"),
            None,
        ),
        (
            DomainEvent::AllocationIdle {
                alloc: alloc(),
                idle_minutes: 120,
                below_pct: 15,
                deadline: at,
            },
            Some("allocation.idle"),
            Some(K::AllocationIdle),
        ),
        (
            DomainEvent::AllocationIdleCleared { alloc: alloc() },
            Some("allocation.idle_clear"),
            None,
        ),
        (
            DomainEvent::AllocationKept {
                alloc: alloc(),
                reason: "training resumes after lunch".into(),
                keeps: 1,
            },
            Some("allocation.keep"),
            None,
        ),
        (
            DomainEvent::AllocationReclaimed {
                alloc: alloc(),
                before: AllocationPhase::Active,
                state: AllocationState::releasing(ReleaseOutcome::Released),
                idle_minutes: 120,
            },
            Some("allocation.reclaim"),
            Some(K::AllocationReclaimed),
        ),
        (
            DomainEvent::AllocationPreempting {
                alloc: alloc(),
                for_id: AllocationId::new(12),
                deadline: at,
                reason: "a guaranteed request (#12) needs its room".into(),
            },
            Some("allocation.preempt_notice"),
            Some(K::AllocationPreempting),
        ),
        (
            DomainEvent::AllocationPreemptLifted {
                alloc: alloc(),
                for_id: AllocationId::new(12),
            },
            Some("allocation.preempt_lift"),
            None,
        ),
        (
            DomainEvent::AllocationPreempted {
                alloc: alloc(),
                before: AllocationPhase::Active,
                state: AllocationState::releasing(ReleaseOutcome::Released),
                for_id: AllocationId::new(12),
                reason: "a guaranteed request (#12) needs its room".into(),
            },
            Some("allocation.preempt"),
            Some(K::AllocationPreempted),
        ),
        (
            DomainEvent::AllocationDraining {
                alloc: alloc(),
                hostname: host_named("gpu-01"),
                deadline: at,
                reason: "rack work".into(),
            },
            None,
            Some(K::AllocationDraining),
        ),
        (
            DomainEvent::AllocationCapacityLost {
                alloc: alloc(),
                before: AllocationPhase::Active,
                state: AllocationState::Active,
                reason: "GPU 0 on gpu-01 is unhealthy".into(),
            },
            Some("allocation.capacity_lost"),
            Some(K::AllocationCapacityLost),
        ),
        (
            DomainEvent::AllocationCapacityRestored {
                alloc: alloc(),
                lost: "host gpu-01 has not reported".into(),
            },
            Some("allocation.capacity_restored"),
            Some(K::AllocationCapacityRestored),
        ),
        (
            DomainEvent::GpuHealthChanged {
                host_id: HostId::new(3),
                hostname: host_named("gpu-01"),
                index: 0,
                uuid: "GPU-1".into(),
                before: HealthVerdict::Healthy,
                after: tessera_core::health::assess(&tessera_core::health::HealthSignals {
                    ecc_uncorrected: 1,
                    ..Default::default()
                }),
            },
            Some("gpu.health"),
            Some(K::GpuHealthChanged),
        ),
        (
            DomainEvent::BudgetSet {
                target: "tenant:ml-research".into(),
                tenant: Some(tenant()),
                before: None,
                after: serde_json::json!({"amount": "100.00"}),
            },
            Some("budget.set"),
            None,
        ),
        (
            DomainEvent::BudgetDeleted {
                target: "cost_centre:CC-1".into(),
                tenant: None,
                before: serde_json::json!({"amount": "100.00"}),
            },
            Some("budget.delete"),
            None,
        ),
        (
            DomainEvent::BudgetThresholdCrossed {
                target: "tenant:ml-research".into(),
                tenant: Some(tenant()),
                alert: tessera_core::budget::BudgetAlert::Actual80,
                month: "2026-12".into(),
                spent: "80.00".into(),
                forecast: "120.00".into(),
                amount: "100.00".into(),
                currency: "EUR".into(),
                blocks: true,
            },
            Some("budget.threshold"),
            Some(K::BudgetThreshold),
        ),
        (
            DomainEvent::BudgetRequested {
                request_id: 4,
                target: "tenant:vision".into(),
                tenant: tenant(),
                current: "100.00".into(),
                amount: "150.00".into(),
                currency: "EUR".into(),
                reason: "training run".into(),
                by: "Lena".into(),
            },
            Some("budget_request.create"),
            Some(K::BudgetRequestCreated),
        ),
        (
            DomainEvent::BudgetRequestDecided {
                request_id: 4,
                target: "tenant:vision".into(),
                tenant: tenant(),
                approved: true,
                amount: "150.00".into(),
                currency: "EUR".into(),
                note: String::new(),
                by: "Root".into(),
            },
            Some("budget_request.decide"),
            Some(K::BudgetRequestDecided),
        ),
    ]
}

/// Position of each variant; exhaustive, so a new variant must be listed.
fn index(e: &DomainEvent) -> usize {
    match e {
        DomainEvent::AllocationRequested { .. } => 0,
        DomainEvent::AllocationPlaced { .. } => 1,
        DomainEvent::AllocationProvisioning { .. } => 2,
        DomainEvent::AllocationActivated { .. } => 3,
        DomainEvent::AllocationFailed { .. } => 4,
        DomainEvent::AllocationTeardownFailed { .. } => 5,
        DomainEvent::AllocationEnded { .. } => 6,
        DomainEvent::AllocationExpired { .. } => 7,
        DomainEvent::AllocationReleased { .. } => 8,
        DomainEvent::AllocationExtended { .. } => 9,
        DomainEvent::AllocationLeaseEnding { .. } => 10,
        DomainEvent::WaitingSliceRefused { .. } => 11,
        DomainEvent::QuotaSet { .. } => 12,
        DomainEvent::QuotaGranted { .. } => 13,
        DomainEvent::QuotaGrantEnded { .. } => 14,
        DomainEvent::QuotaRequestFiled { .. } => 15,
        DomainEvent::QuotaRequestSubmitted { .. } => 16,
        DomainEvent::QuotaRequestWithdrawn { .. } => 17,
        DomainEvent::QuotaRequestApproved { .. } => 18,
        DomainEvent::QuotaRequestRejected { .. } => 19,
        DomainEvent::ApiTokenCreated { .. } => 20,
        DomainEvent::ApiTokenRevoked { .. } => 21,
        DomainEvent::JoinTokenCreated { .. } => 22,
        DomainEvent::JoinTokenRevoked { .. } => 23,
        DomainEvent::HostEnrolled { .. } => 24,
        DomainEvent::HostFirstReport { .. } => 25,
        DomainEvent::TenantCreated { .. } => 26,
        DomainEvent::TenantUpdated { .. } => 27,
        DomainEvent::UserLoggedIn { .. } => 28,
        DomainEvent::UserRolesChanged { .. } => 29,
        DomainEvent::WebhookSet { .. } => 30,
        DomainEvent::WebhookDeleted { .. } => 31,
        DomainEvent::WebhookTested { .. } => 32,
        DomainEvent::FleetOperated { .. } => 33,
        DomainEvent::AllocationDraining { .. } => 34,
        DomainEvent::AllocationCapacityLost { .. } => 35,
        DomainEvent::AllocationCapacityRestored { .. } => 36,
        DomainEvent::GpuHealthChanged { .. } => 37,
        DomainEvent::PoolCreated { .. } => 38,
        DomainEvent::PoolChanged { .. } => 39,
        DomainEvent::PoolChangePlanned { .. } => 40,
        DomainEvent::PoolChangeCancelled { .. } => 41,
        DomainEvent::PriceSet { .. } => 42,
        DomainEvent::AllocationIdle { .. } => 43,
        DomainEvent::AllocationIdleCleared { .. } => 44,
        DomainEvent::AllocationKept { .. } => 45,
        DomainEvent::AllocationReclaimed { .. } => 46,
        DomainEvent::AllocationPreempting { .. } => 47,
        DomainEvent::AllocationPreemptLifted { .. } => 48,
        DomainEvent::AllocationPreempted { .. } => 49,
        DomainEvent::UserAccessChanged { change, .. } => match change {
            AccessChange::SignedOutEverywhere => 50,
            AccessChange::Deactivated => 51,
            AccessChange::Reactivated => 52,
        },
        DomainEvent::AuditPruned { .. } => 53,
        DomainEvent::BudgetSet { .. } => 54,
        DomainEvent::BudgetDeleted { .. } => 55,
        DomainEvent::BudgetThresholdCrossed { .. } => 56,
        DomainEvent::BudgetRequested { .. } => 57,
        DomainEvent::BudgetRequestDecided { .. } => 58,
    }
}

#[test]
fn every_event_kind_has_its_pinned_names() {
    let samples = samples();
    let mut seen: Vec<usize> = samples.iter().map(|(e, _, _)| index(e)).collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..=58).collect::<Vec<_>>(), "one sample per variant");
    for (event, action, kind) in &samples {
        assert_eq!(
            event.action().map(AuditAction::as_str),
            *action,
            "{event:?}"
        );
        assert_eq!(event.notice().map(|n| n.kind), *kind, "{event:?}");
    }
}

#[test]
fn a_seeded_quota_tells_nobody_and_does_not_retry_the_queue() {
    let seeded = DomainEvent::QuotaSet {
        tenant: tenant(),
        pool: "h100-mig".parse().unwrap(),
        before: None,
        after: (quota(), quota()),
        by: None,
    };
    assert_eq!(seeded.action(), Some(AuditAction::QuotaSet));
    assert!(seeded.notice().is_none());
    assert!(!seeded.after_commit().retries_queue);
}

#[test]
fn quota_request_notices_spare_the_actor_and_allocation_notices_reach_the_requester() {
    let (withdrawn, ..) = &samples()[17];
    let notice = withdrawn.notice().unwrap_or_else(|| unreachable!());
    assert!(notice.spare_actor);
    assert_eq!(notice.to, Recipients::Users(vec![UserId::new(11)]));
    assert_eq!(notice.link, Link::Path("/t/vision/quota#request-9".into()));
    let (active, ..) = &samples()[3];
    let notice = active.notice().unwrap_or_else(|| unreachable!());
    assert!(!notice.spare_actor);
    assert_eq!(notice.to, Recipients::Users(vec![UserId::new(11)]));
    assert_eq!(notice.link, Link::Allocation(AllocationId::new(7)));
    assert_eq!(notice.title, "Slice #7 (1g.10gb) is active");
}

#[test]
fn quota_growth_retries_the_queue() {
    let samples = samples();
    let grows: Vec<usize> = samples
        .iter()
        .filter(|(e, _, _)| e.after_commit().retries_queue)
        .map(|(e, _, _)| index(e))
        .collect();
    assert_eq!(grows, [12, 13, 18, 39, 41, 35]);
    // A placed slice that lost its GPU goes back to the queue, and the
    // queue is tried again.
    let requeued = DomainEvent::AllocationCapacityLost {
        alloc: alloc(),
        before: AllocationPhase::Placed,
        state: AllocationState::Queued,
        reason: "GPU 0 is unhealthy".into(),
    };
    assert_eq!(
        requeued.after_commit(),
        AfterCommit {
            retries_queue: true,
            ..AfterCommit::default()
        }
    );
    // Only a revocation makes the process forget a token's check.
    let forgets: Vec<usize> = samples
        .iter()
        .filter(|(e, _, _)| e.after_commit().forgets_token.is_some())
        .map(|(e, _, _)| index(e))
        .collect();
    assert_eq!(forgets, [21]);
    // A host's credential is forgotten when it is replaced or the host is
    // gone, not when a host first enrols or a GPU is operated on.
    let enrolled = |reenrolled| DomainEvent::HostEnrolled {
        host_id: HostId::new(5),
        hostname: host_named("gpu-01"),
        reenrolled,
    };
    let operated = |gpu: Option<(u32, String)>, after| DomainEvent::FleetOperated {
        host_id: HostId::new(5),
        hostname: host_named("gpu-01"),
        gpu,
        action: OpsAction::Decommission,
        before: OpsMode::Maintenance,
        after,
        reason: "end of life".into(),
        drain_deadline: None,
    };
    let forgotten = |e: DomainEvent| e.after_commit().forgets_host_credential;
    assert_eq!(forgotten(enrolled(true)), Some(HostId::new(5)));
    assert_eq!(forgotten(enrolled(false)), None);
    assert_eq!(forgotten(operated(None, None)), Some(HostId::new(5)));
    assert_eq!(forgotten(operated(None, Some(OpsMode::Maintenance))), None);
    assert_eq!(
        forgotten(operated(
            Some((0, "GPU-1".into())),
            Some(OpsMode::Maintenance)
        )),
        None
    );
    assert!(samples.iter().all(
        |(e, _, _)| e.after_commit().forgets_host_credential.is_none()
            || matches!(
                e,
                DomainEvent::HostEnrolled { .. } | DomainEvent::FleetOperated { .. }
            )
    ));
    // Resuming a host, or a GPU turning healthy, frees capacity.
    let resumed = DomainEvent::FleetOperated {
        host_id: HostId::new(5),
        hostname: host_named("gpu-01"),
        gpu: Some((0, "GPU-1".into())),
        action: OpsAction::Resume,
        before: OpsMode::Maintenance,
        after: Some(OpsMode::Available),
        reason: "fixed".into(),
        drain_deadline: None,
    };
    assert!(resumed.after_commit().retries_queue);
    assert_eq!(resumed.action(), Some(AuditAction::GpuResume));
}

/// A host name for the samples.
fn host_named(name: &str) -> Hostname {
    Hostname::parse(name).unwrap_or_else(|e| panic!("{e}"))
}
