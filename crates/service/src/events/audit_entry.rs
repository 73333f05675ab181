//! The audit row of each event: its action name (stable: stored, filtered
//! on and exported), target and the state before and after.

use super::{AccessChange, DomainEvent};
use serde_json::{json, Value};
use tessera_core::audit::{AuditAction, AuditTarget};
use tessera_core::ids::TenantId;
use tessera_core::lifecycle::{AllocationPhase, QuotaRequestPhase};
use tessera_core::quota::Quota;
use tessera_protocol::views::JoinTokenStatus;

/// What the audit log records about one event (the actor and time come from
/// the write that emitted it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AuditEntry {
    /// What happened, e.g. `quota_request.approve`.
    pub action: AuditAction,
    /// Tenant concerned, if any (tenant admins see their tenants' events).
    pub tenant_id: Option<TenantId>,
    /// Kind of target, e.g. `allocation`.
    pub target_type: AuditTarget,
    /// Target id.
    pub target_id: String,
    /// State before (None for creations).
    pub before: Option<Value>,
    /// State after (None for deletions).
    pub after: Option<Value>,
}

fn state_json<T: serde::Serialize>(state: &T) -> Value {
    serde_json::to_value(state).unwrap_or(Value::Null)
}

fn in_force(permanent: &Quota, in_force: &Quota) -> Value {
    json!({"permanent": permanent, "in_force": in_force})
}

impl DomainEvent {
    /// The audit action name, or `None` for events that only tell people
    /// (a lease ending soon, a waiting slice that still does not fit).
    pub fn action(&self) -> Option<AuditAction> {
        self.audit().map(|e| e.action)
    }

    /// The audit row, or `None` for events that only tell people.
    pub(crate) fn audit(&self) -> Option<AuditEntry> {
        let allocation = |alloc: &super::AllocationRef,
                          action: AuditAction,
                          before: Option<Value>,
                          after: Option<Value>| AuditEntry {
            action,
            tenant_id: Some(alloc.tenant_id),
            target_type: AuditTarget::Allocation,
            target_id: alloc.id.to_string(),
            before,
            after,
        };
        let request = |r: &super::QuotaRequestRef,
                       action: AuditAction,
                       before: Option<Value>,
                       after: Option<Value>| AuditEntry {
            action,
            tenant_id: Some(r.tenant.id),
            target_type: AuditTarget::QuotaRequest,
            target_id: r.id.to_string(),
            before,
            after,
        };
        Some(match self {
            Self::AllocationRequested {
                alloc,
                shape,
                lease_hours,
                priority_class,
                state,
                requeue_of,
            } => allocation(
                alloc,
                AuditAction::AllocationCreate,
                None,
                Some(json!({
                    "pool": alloc.pool,
                    "shape": shape,
                    "lease_hours": lease_hours,
                    "priority_class": priority_class,
                    "state": state.phase(),
                    "host_id": alloc.host_id,
                    "requeue_of": requeue_of,
                })),
            ),
            Self::AllocationCapacityLost {
                alloc,
                before,
                state,
                reason,
            } => allocation(
                alloc,
                AuditAction::AllocationCapacityLost,
                Some(json!({"state": before})),
                Some(json!({"state": state.phase(), "capacity_lost": reason})),
            ),
            Self::AllocationCapacityRestored { alloc, lost } => allocation(
                alloc,
                AuditAction::AllocationCapacityRestored,
                Some(json!({"capacity_lost": lost})),
                Some(json!({"capacity_lost": null})),
            ),
            Self::AllocationIdle {
                alloc,
                idle_minutes,
                below_pct,
                deadline,
            } => allocation(
                alloc,
                AuditAction::AllocationIdle,
                None,
                Some(
                    json!({"idle_minutes": idle_minutes, "below_pct": below_pct, "deadline": deadline}),
                ),
            ),
            Self::AllocationIdleCleared { alloc } => allocation(
                alloc,
                AuditAction::AllocationIdleClear,
                Some(json!({"idle": true})),
                Some(json!({"idle": false})),
            ),
            Self::AllocationKept {
                alloc,
                reason,
                keeps,
            } => allocation(
                alloc,
                AuditAction::AllocationKeep,
                None,
                Some(json!({"reason": reason, "keeps": keeps})),
            ),
            Self::AllocationReclaimed {
                alloc,
                before,
                state,
                idle_minutes,
            } => allocation(
                alloc,
                AuditAction::AllocationReclaim,
                Some(json!({"state": before})),
                Some(json!({"state": state.phase(), "idle_minutes": idle_minutes})),
            ),
            Self::AllocationPreempting {
                alloc,
                for_id,
                deadline,
                reason,
            } => allocation(
                alloc,
                AuditAction::AllocationPreemptNotice,
                None,
                Some(json!({"for_request": for_id, "deadline": deadline, "reason": reason})),
            ),
            Self::AllocationPreemptLifted { alloc, for_id } => allocation(
                alloc,
                AuditAction::AllocationPreemptLift,
                Some(json!({"for_request": for_id})),
                None,
            ),
            Self::AllocationPreempted {
                alloc,
                before,
                state,
                for_id,
                reason,
            } => allocation(
                alloc,
                AuditAction::AllocationPreempt,
                Some(json!({"state": before})),
                Some(json!({"state": state.phase(), "for_request": for_id, "reason": reason})),
            ),
            Self::AllocationDraining { .. } => return None,
            Self::FleetOperated {
                host_id,
                hostname,
                gpu,
                action,
                before,
                after,
                reason,
                drain_deadline,
            } => {
                use tessera_core::availability::OpsAction as A;
                let on_gpu = gpu.is_some();
                let action = match (action, on_gpu) {
                    (A::Cordon, false) => AuditAction::HostCordon,
                    (A::Drain { .. }, false) => AuditAction::HostDrain,
                    (A::Maintenance, false) => AuditAction::HostMaintenance,
                    (A::Resume, false) => AuditAction::HostResume,
                    (A::Decommission, _) => AuditAction::HostDecommission,
                    (A::Cordon, true) => AuditAction::GpuCordon,
                    (A::Drain { .. }, true) => AuditAction::GpuDrain,
                    (A::Maintenance, true) => AuditAction::GpuMaintenance,
                    (A::Resume, true) => AuditAction::GpuResume,
                };
                AuditEntry {
                    action,
                    tenant_id: None,
                    target_type: if on_gpu {
                        AuditTarget::Gpu
                    } else {
                        AuditTarget::Host
                    },
                    target_id: match gpu {
                        Some((index, _)) => format!("{host_id}/{index}"),
                        None => host_id.to_string(),
                    },
                    before: Some(json!({"mode": before, "hostname": hostname})),
                    after: after.map(|mode| {
                        json!({
                            "mode": mode,
                            "reason": reason,
                            "drain_deadline": drain_deadline,
                            "gpu_uuid": gpu.as_ref().map(|(_, uuid)| uuid),
                        })
                    }),
                }
            }
            Self::GpuHealthChanged {
                host_id,
                hostname,
                index,
                uuid,
                before,
                after,
            } => AuditEntry {
                action: AuditAction::GpuHealth,
                tenant_id: None,
                target_type: AuditTarget::Gpu,
                target_id: format!("{host_id}/{index}"),
                before: Some(json!({"health": before, "hostname": hostname, "uuid": uuid})),
                after: Some(json!({"health": after.verdict, "findings": after.findings})),
            },
            Self::AllocationPlaced { alloc } => allocation(
                alloc,
                AuditAction::AllocationPlace,
                Some(json!({"state": AllocationPhase::Queued})),
                Some(json!({"state": AllocationPhase::Placed, "host_id": alloc.host_id})),
            ),
            Self::AllocationProvisioning { alloc, state } => allocation(
                alloc,
                AuditAction::AllocationProvision,
                Some(json!({"state": AllocationPhase::Placed})),
                Some(state_json(state)),
            ),
            Self::AllocationActivated {
                alloc,
                before,
                state,
                ..
            } => allocation(
                alloc,
                AuditAction::AllocationActivate,
                Some(json!({"state": before})),
                Some(state_json(state)),
            ),
            Self::AllocationFailed {
                alloc,
                before,
                state,
                ..
            } => allocation(
                alloc,
                AuditAction::AllocationFail,
                Some(json!({"state": before})),
                Some(state_json(state)),
            ),
            Self::AllocationTeardownFailed { alloc, state } => allocation(
                alloc,
                AuditAction::AllocationTeardownError,
                Some(json!({"state": AllocationPhase::Releasing})),
                Some(state_json(state)),
            ),
            Self::AllocationEnded {
                alloc,
                before,
                state,
                processes_stopped,
            } => {
                let mut after = state_json(state);
                if let (Some(stopped), Value::Object(map)) = (processes_stopped, &mut after) {
                    map.insert("processes_stopped".to_owned(), state_json(stopped));
                }
                allocation(
                    alloc,
                    AuditAction::AllocationEnd,
                    Some(json!({"state": before})),
                    Some(after),
                )
            }
            Self::AllocationExpired {
                alloc,
                before,
                state,
            } => allocation(
                alloc,
                AuditAction::AllocationExpire,
                Some(json!({"state": before})),
                Some(state_json(state)),
            ),
            Self::AllocationReleased {
                alloc,
                before,
                after,
            } => allocation(
                alloc,
                AuditAction::AllocationRelease,
                Some(json!({"state": before})),
                Some(json!({"state": after})),
            ),
            Self::AllocationExtended {
                alloc,
                before_end,
                after_end,
            } => allocation(
                alloc,
                AuditAction::AllocationExtend,
                Some(json!({"lease_ends_at": before_end})),
                Some(json!({"lease_ends_at": after_end})),
            ),
            Self::AllocationLeaseEnding { .. } | Self::WaitingSliceRefused { .. } => return None,
            Self::QuotaSet {
                tenant,
                pool,
                before,
                after,
                ..
            } => AuditEntry {
                action: AuditAction::QuotaSet,
                tenant_id: Some(tenant.id),
                target_type: AuditTarget::Quota,
                target_id: format!("{}/{pool}", tenant.slug),
                before: before.as_ref().map(|(p, f)| in_force(p, f)),
                after: Some(in_force(&after.0, &after.1)),
            },
            Self::QuotaGranted {
                grant_id,
                tenant,
                pool,
                extra,
                ends_at,
                reason,
                before,
                after,
                ..
            } => AuditEntry {
                action: AuditAction::QuotaGrant,
                tenant_id: Some(tenant.id),
                target_type: AuditTarget::QuotaGrant,
                target_id: grant_id.to_string(),
                before: Some(json!({"in_force": before})),
                after: Some(json!({
                    "pool": pool, "extra": extra, "ends_at": ends_at,
                    "reason": reason, "in_force": after,
                })),
            },
            Self::QuotaGrantEnded {
                grant_id,
                tenant_id,
                pool,
            } => AuditEntry {
                action: AuditAction::QuotaGrantEnd,
                tenant_id: Some(*tenant_id),
                target_type: AuditTarget::QuotaGrant,
                target_id: grant_id.to_string(),
                before: Some(json!({"pool": pool, "revoked": false})),
                after: Some(json!({"pool": pool, "revoked": true})),
            },
            Self::QuotaRequestFiled {
                request: r,
                state,
                amount,
                ends_at,
                slice,
                ..
            } => request(
                r,
                AuditAction::QuotaRequestCreate,
                None,
                Some(json!({
                    "state": state.phase(), "pool": r.pool, "amount": amount,
                    "ends_at": ends_at, "justification": r.justification,
                    "slice": slice,
                })),
            ),
            Self::QuotaRequestSubmitted { request: r, .. } => request(
                r,
                AuditAction::QuotaRequestSubmit,
                Some(json!({"state": QuotaRequestPhase::Proposed})),
                Some(json!({"state": QuotaRequestPhase::Pending})),
            ),
            Self::QuotaRequestWithdrawn {
                request: r, before, ..
            } => request(
                r,
                AuditAction::QuotaRequestWithdraw,
                Some(json!({"state": before.phase()})),
                Some(json!({"state": QuotaRequestPhase::Withdrawn})),
            ),
            Self::QuotaRequestApproved {
                request: r,
                granted,
                ends_at,
                before,
                after,
                ..
            } => request(
                r,
                AuditAction::QuotaRequestApprove,
                Some(json!({"state": QuotaRequestPhase::Pending, "quota": before})),
                Some(json!({
                    "state": QuotaRequestPhase::Approved, "granted": granted, "ends_at": ends_at,
                    "reason": Value::Null, "quota": after,
                })),
            ),
            Self::QuotaRequestRejected {
                request: r,
                reason,
                quota,
                ..
            } => request(
                r,
                AuditAction::QuotaRequestReject,
                Some(json!({"state": QuotaRequestPhase::Pending, "quota": quota})),
                Some(json!({
                    "state": QuotaRequestPhase::Rejected, "granted": Value::Null, "ends_at": Value::Null,
                    "reason": reason, "quota": quota,
                })),
            ),
            Self::ApiTokenCreated {
                tenant_id,
                token_id,
                name,
                prefix,
                expires_at,
                scope,
            } => AuditEntry {
                action: AuditAction::ApiTokenCreate,
                tenant_id: Some(*tenant_id),
                target_type: AuditTarget::ApiToken,
                target_id: token_id.to_string(),
                before: None,
                after: Some(
                    json!({"name": name, "prefix": prefix, "expires_at": expires_at, "scope": scope}),
                ),
            },
            Self::ApiTokenRevoked {
                tenant_id,
                token_id,
                name,
            } => AuditEntry {
                action: AuditAction::ApiTokenRevoke,
                tenant_id: Some(*tenant_id),
                target_type: AuditTarget::ApiToken,
                target_id: token_id.to_string(),
                before: None,
                after: Some(json!({"name": name})),
            },
            Self::JoinTokenCreated {
                token_id,
                description,
                expires_at,
                for_host,
            } => AuditEntry {
                action: AuditAction::JoinTokenCreate,
                tenant_id: None,
                target_type: AuditTarget::JoinToken,
                target_id: token_id.to_string(),
                before: None,
                after: Some(match for_host {
                    Some(h) => {
                        json!({"description": description, "expires_at": expires_at, "for_host": h})
                    }
                    None => json!({"description": description, "expires_at": expires_at}),
                }),
            },
            Self::JoinTokenRevoked {
                token_id,
                status_before,
            } => AuditEntry {
                action: AuditAction::JoinTokenRevoke,
                tenant_id: None,
                target_type: AuditTarget::JoinToken,
                target_id: token_id.to_string(),
                before: Some(json!({"status": status_before})),
                after: Some(json!({"status": JoinTokenStatus::Revoked})),
            },
            Self::HostEnrolled {
                host_id,
                hostname,
                reenrolled,
            } => AuditEntry {
                action: if *reenrolled {
                    AuditAction::HostReenroll
                } else {
                    AuditAction::HostEnroll
                },
                tenant_id: None,
                target_type: AuditTarget::Host,
                target_id: host_id.to_string(),
                before: None,
                after: Some(json!({"hostname": hostname})),
            },
            Self::HostFirstReport {
                host_id,
                gpus,
                backend,
            } => AuditEntry {
                action: AuditAction::HostFirstReport,
                tenant_id: None,
                target_type: AuditTarget::Host,
                target_id: host_id.to_string(),
                before: None,
                after: Some(json!({"gpus": gpus, "backend": backend})),
            },
            Self::TenantCreated { tenant, fields } => AuditEntry {
                action: AuditAction::TenantCreate,
                tenant_id: Some(tenant.id),
                target_type: AuditTarget::Tenant,
                target_id: tenant.slug.to_string(),
                before: None,
                after: Some(state_json(fields)),
            },
            Self::TenantUpdated {
                tenant,
                before,
                after,
            } => AuditEntry {
                action: AuditAction::TenantUpdate,
                tenant_id: Some(tenant.id),
                target_type: AuditTarget::Tenant,
                target_id: tenant.slug.to_string(),
                before: Some(state_json(before)),
                after: Some(state_json(after)),
            },
            Self::PoolCreated { spec } => AuditEntry {
                action: AuditAction::PoolCreate,
                tenant_id: None,
                target_type: AuditTarget::Pool,
                target_id: spec.name.to_string(),
                before: None,
                after: Some(state_json(spec)),
            },
            Self::PoolChanged {
                before,
                after,
                planned_by,
            } => AuditEntry {
                action: AuditAction::PoolUpdate,
                tenant_id: None,
                target_type: AuditTarget::Pool,
                target_id: after.name.to_string(),
                before: Some(state_json(before)),
                after: Some(match planned_by {
                    Some(by) => json!({"spec": after, "planned_by": by}),
                    None => state_json(after),
                }),
            },
            Self::PoolChangePlanned {
                before,
                after,
                moves,
                reason,
                drain_deadline,
            } => AuditEntry {
                action: AuditAction::PoolPlanChange,
                tenant_id: None,
                target_type: AuditTarget::Pool,
                target_id: after.name.to_string(),
                before: Some(state_json(before)),
                after: Some(json!({
                    "spec": after,
                    "moves": moves,
                    "reason": reason,
                    "drain_deadline": drain_deadline,
                })),
            },
            Self::PriceSet { price } => AuditEntry {
                action: AuditAction::PoolSetPrice,
                tenant_id: None,
                target_type: AuditTarget::Pool,
                target_id: price.pool.clone(),
                before: None,
                after: Some(state_json(price)),
            },
            Self::PoolChangeCancelled { spec, planned } => AuditEntry {
                action: AuditAction::PoolCancelChange,
                tenant_id: None,
                target_type: AuditTarget::Pool,
                target_id: spec.name.to_string(),
                before: Some(json!({"planned": planned})),
                after: Some(state_json(spec)),
            },
            Self::UserLoggedIn { user_id } => AuditEntry {
                action: AuditAction::UserLogin,
                tenant_id: None,
                target_type: AuditTarget::User,
                target_id: user_id.to_string(),
                before: None,
                after: None,
            },
            Self::UserRolesChanged {
                user_id,
                before,
                after,
            } => AuditEntry {
                action: AuditAction::UserRolesChange,
                tenant_id: None,
                target_type: AuditTarget::User,
                target_id: user_id.to_string(),
                before: before.as_ref().map(state_json),
                after: Some(state_json(after)),
            },
            Self::UserAccessChanged {
                user_id,
                name,
                change,
                tokens_revoked,
            } => AuditEntry {
                action: match change {
                    AccessChange::SignedOutEverywhere => AuditAction::UserSignOutEverywhere,
                    AccessChange::Deactivated => AuditAction::UserDeactivate,
                    AccessChange::Reactivated => AuditAction::UserReactivate,
                },
                tenant_id: None,
                target_type: AuditTarget::User,
                target_id: user_id.to_string(),
                before: None,
                after: Some(json!({"name": name, "api_tokens_revoked": tokens_revoked})),
            },
            Self::AuditPruned {
                rows,
                through,
                anchor,
                keep_days,
            } => AuditEntry {
                action: AuditAction::AuditPrune,
                tenant_id: None,
                target_type: AuditTarget::AuditLog,
                target_id: through.to_string(),
                before: None,
                after: Some(
                    json!({"rows": rows, "through": through, "anchor": anchor, "keep_days": keep_days}),
                ),
            },
            Self::WebhookSet {
                tenant,
                before_url,
                url,
            } => AuditEntry {
                action: AuditAction::WebhookSet,
                tenant_id: Some(tenant.id),
                target_type: AuditTarget::Webhook,
                target_id: tenant.slug.to_string(),
                before: before_url.as_ref().map(|u| json!({"url": u})),
                after: Some(json!({"url": url})),
            },
            Self::WebhookDeleted { tenant, url } => AuditEntry {
                action: AuditAction::WebhookDelete,
                tenant_id: Some(tenant.id),
                target_type: AuditTarget::Webhook,
                target_id: tenant.slug.to_string(),
                before: Some(json!({"url": url})),
                after: None,
            },
            Self::WebhookTested { tenant, .. } => AuditEntry {
                action: AuditAction::WebhookTest,
                tenant_id: Some(tenant.id),
                target_type: AuditTarget::Webhook,
                target_id: tenant.slug.to_string(),
                before: None,
                after: None,
            },
            Self::BudgetSet {
                target,
                tenant,
                before,
                after,
            } => AuditEntry {
                action: AuditAction::BudgetSet,
                tenant_id: tenant.as_ref().map(|t| t.id),
                target_type: AuditTarget::Budget,
                target_id: target.clone(),
                before: before.clone(),
                after: Some(after.clone()),
            },
            Self::BudgetDeleted {
                target,
                tenant,
                before,
            } => AuditEntry {
                action: AuditAction::BudgetDelete,
                tenant_id: tenant.as_ref().map(|t| t.id),
                target_type: AuditTarget::Budget,
                target_id: target.clone(),
                before: Some(before.clone()),
                after: None,
            },
            Self::BudgetRequested {
                request_id,
                target,
                tenant,
                current,
                amount,
                currency,
                reason,
                ..
            } => AuditEntry {
                action: AuditAction::BudgetRequestCreate,
                tenant_id: Some(tenant.id),
                target_type: AuditTarget::BudgetRequest,
                target_id: request_id.to_string(),
                before: Some(json!({"budget": target, "amount": current, "currency": currency})),
                after: Some(json!({"amount": amount, "currency": currency, "reason": reason})),
            },
            Self::BudgetRequestDecided {
                request_id,
                target,
                tenant,
                approved,
                amount,
                note,
                ..
            } => AuditEntry {
                action: AuditAction::BudgetRequestDecide,
                tenant_id: Some(tenant.id),
                target_type: AuditTarget::BudgetRequest,
                target_id: request_id.to_string(),
                before: Some(json!({"state": "pending"})),
                after: Some(json!({
                    "budget": target,
                    "state": if *approved { "approved" } else { "rejected" },
                    "amount": amount,
                    "note": note,
                })),
            },
            Self::BudgetThresholdCrossed {
                target,
                tenant,
                alert,
                month,
                spent,
                forecast,
                amount,
                currency,
                ..
            } => AuditEntry {
                action: AuditAction::BudgetThreshold,
                tenant_id: tenant.as_ref().map(|t| t.id),
                target_type: AuditTarget::Budget,
                target_id: target.clone(),
                before: None,
                after: Some(json!({
                    "alert": alert,
                    "month": month,
                    "spent": spent,
                    "forecast": forecast,
                    "amount": amount,
                    "currency": currency,
                })),
            },
        })
    }
}
