//! Who is told about each event, and what: one notification per recipient
//! and, for a tenant's events, one webhook event.

use super::{AllocationRef, DomainEvent, QuotaRequestRef};
use serde_json::{json, Value};
use tessera_core::ids::{AllocationId, TenantId, UserId};
use tessera_core::lifecycle::QuotaRequestState;
use tessera_core::notify::NotificationKind;

/// Who receives a notice (resolved against the database at commit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Recipients {
    /// These users.
    Users(Vec<UserId>),
    /// The tenant's admins.
    TenantAdmins(TenantId),
    /// The platform admins, and these users too.
    PlatformAdminsAnd(Vec<UserId>),
}

/// A notice before its recipients are looked up.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NoticeDraft {
    /// Kind.
    pub kind: NotificationKind,
    /// The tenant concerned (its webhook gets the event).
    pub tenant_id: Option<TenantId>,
    /// Who is told.
    pub to: Recipients,
    /// The person who acted is not told about their own action.
    pub spare_actor: bool,
    /// One line.
    pub title: String,
    /// Detail.
    pub body: String,
    /// Where to look: a path, or (for allocations) filled in with the
    /// tenant's slug at commit.
    pub link: Link,
    /// Extra fields for the webhook payload.
    pub data: Value,
}

/// Where a notice points.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Link {
    /// A path in the portal.
    Path(String),
    /// The allocation's page (`/t/<slug>/a/<id>`).
    Allocation(AllocationId),
}

fn about_allocation(
    alloc: &AllocationRef,
    kind: NotificationKind,
    title: String,
    body: String,
) -> NoticeDraft {
    NoticeDraft {
        kind,
        tenant_id: Some(alloc.tenant_id),
        to: Recipients::Users(alloc.requested_by_user_id.into_iter().collect()),
        spare_actor: false,
        title,
        body,
        link: Link::Allocation(alloc.id),
        data: json!({
            "allocation": alloc.id,
            "pool": alloc.pool,
            "shape": alloc.shape_label,
            "requested_by": alloc.requested_by,
        }),
    }
}

fn about_request(
    r: &QuotaRequestRef,
    kind: NotificationKind,
    to: Recipients,
    title: String,
) -> NoticeDraft {
    NoticeDraft {
        kind,
        tenant_id: Some(r.tenant.id),
        to,
        spare_actor: true,
        title,
        body: format!("Pool {}: {}", r.pool, r.justification),
        link: Link::Path(format!("/t/{}/quota#request-{}", r.tenant.slug, r.id)),
        data: json!({"quota_request": r.id, "pool": r.pool}),
    }
}

fn until(ends_at: Option<chrono::DateTime<chrono::Utc>>) -> String {
    ends_at
        .map(|e| format!(" until {}", e.format("%Y-%m-%d %H:%M UTC")))
        .unwrap_or_default()
}

impl DomainEvent {
    /// What people are told about this event, if anything.
    pub(crate) fn notice(&self) -> Option<NoticeDraft> {
        use NotificationKind as K;
        Some(match self {
            Self::AllocationActivated {
                alloc,
                hostname,
                lease_hours,
                ..
            } => about_allocation(
                alloc,
                K::AllocationActive,
                format!("Slice #{} ({}) is active", alloc.id, alloc.shape_label),
                format!(
                    "It runs on {hostname} for {lease_hours} h; the connection details are on its page."
                ),
            ),
            Self::AllocationFailed { alloc, reason, .. } => about_allocation(
                alloc,
                K::AllocationFailed,
                format!("Slice #{} ({}) failed", alloc.id, alloc.shape_label),
                reason.clone(),
            ),
            Self::AllocationExpired { alloc, .. } => about_allocation(
                alloc,
                K::AllocationExpired,
                format!("The lease of slice #{} ({}) ended", alloc.id, alloc.shape_label),
                "Its GPU share is being released. Request a new slice if you still need one."
                    .to_owned(),
            ),
            Self::AllocationPlaced { alloc } => about_allocation(
                alloc,
                K::AllocationPlaced,
                format!("Slice #{} ({}) left the queue", alloc.id, alloc.shape_label),
                "Capacity freed up and it was placed; it becomes active in a few seconds."
                    .to_owned(),
            ),
            Self::AllocationLeaseEnding {
                alloc,
                minutes_left,
            } => about_allocation(
                alloc,
                K::AllocationLeaseEnding,
                format!("The lease of slice #{} ends in {minutes_left} min", alloc.id),
                format!(
                    "{} in pool {} is released when the lease ends; extend it on its page if you still need it.",
                    alloc.shape_label, alloc.pool
                ),
            ),
            Self::AllocationDraining {
                alloc,
                hostname,
                deadline,
                reason,
            } => about_allocation(
                alloc,
                K::AllocationDraining,
                format!(
                    "Slice #{} ends at {} UTC: {hostname} is being drained",
                    alloc.id,
                    deadline.format("%Y-%m-%d %H:%M")
                ),
                format!(
                    "{} in pool {}: {reason}. Save your work; request it again to run elsewhere.",
                    alloc.shape_label, alloc.pool
                ),
            ),
            Self::AllocationCapacityLost {
                alloc,
                state,
                reason,
                ..
            } => about_allocation(
                alloc,
                K::AllocationCapacityLost,
                if *state == tessera_core::lifecycle::AllocationState::Queued {
                    format!("Slice #{} went back to the queue", alloc.id)
                } else {
                    format!("Slice #{} lost its GPU", alloc.id)
                },
                if *state == tessera_core::lifecycle::AllocationState::Queued {
                    format!("{reason}. It is placed again as soon as there is room.")
                } else {
                    format!(
                        "{reason}. It no longer counts against your quota: request it again elsewhere in one step on its page."
                    )
                },
            ),
            Self::AllocationIdle {
                alloc,
                idle_minutes,
                below_pct,
                deadline,
            } => about_allocation(
                alloc,
                K::AllocationIdle,
                format!("Slice #{} ({}) is idle", alloc.id, alloc.shape_label),
                format!(
                    "It has been below {below_pct} % busy for {idle_minutes} min. Pool {} reclaims idle slices: it is released at {} UTC unless you keep it on its page or it gets busy.",
                    alloc.pool,
                    deadline.format("%Y-%m-%d %H:%M")
                ),
            ),
            Self::AllocationReclaimed {
                alloc,
                idle_minutes,
                ..
            } => about_allocation(
                alloc,
                K::AllocationReclaimed,
                format!("Idle slice #{} ({}) was reclaimed", alloc.id, alloc.shape_label),
                format!(
                    "It stayed idle for {idle_minutes} min and past its deadline, so it was released and its quota returned. Request a new slice when you need one."
                ),
            ),
            Self::AllocationPreempting {
                alloc,
                deadline,
                reason,
                ..
            } => about_allocation(
                alloc,
                K::AllocationPreempting,
                format!("Slice #{} ({}) will be preempted", alloc.id, alloc.shape_label),
                format!(
                    "{reason}. It is released at {} UTC: save your work before then. Guaranteed slices are never preempted.",
                    deadline.format("%Y-%m-%d %H:%M")
                ),
            ),
            Self::AllocationPreempted { alloc, reason, .. } => about_allocation(
                alloc,
                K::AllocationPreempted,
                format!("Slice #{} ({}) was preempted", alloc.id, alloc.shape_label),
                format!("{reason}. Its notice ran out, so it was released. Request it again when there is room, or as guaranteed within your quota."),
            ),
            Self::AllocationCapacityRestored { alloc, lost } => about_allocation(
                alloc,
                K::AllocationCapacityRestored,
                format!("Slice #{} is back", alloc.id),
                format!("What it had lost is back: {lost}."),
            ),
            Self::GpuHealthChanged {
                hostname,
                index,
                uuid,
                after,
                ..
            } => NoticeDraft {
                kind: K::GpuHealthChanged,
                tenant_id: None,
                to: Recipients::PlatformAdminsAnd(Vec::new()),
                spare_actor: false,
                title: format!("GPU {index} on {hostname} is {}", after.verdict),
                body: after.summary(),
                link: Link::Path("/fleet".to_owned()),
                data: json!({"gpu": uuid, "health": after.verdict}),
            },
            Self::WaitingSliceRefused {
                request_id,
                tenant,
                user_id,
                error,
            } => NoticeDraft {
                kind: K::AllocationFailed,
                tenant_id: Some(tenant.id),
                to: Recipients::Users(user_id.iter().copied().collect()),
                spare_actor: false,
                title: "Your waiting slice still does not fit".to_owned(),
                body: error.clone(),
                link: Link::Path(format!("/t/{}/request", tenant.slug)),
                data: json!({"quota_request": request_id}),
            },
            Self::QuotaSet {
                tenant,
                pool,
                before,
                after,
                by: Some(by),
            } => NoticeDraft {
                kind: K::QuotaChanged,
                tenant_id: Some(tenant.id),
                to: Recipients::TenantAdmins(tenant.id),
                spare_actor: false,
                title: format!("Quota in {pool} is now {}", after.1),
                body: format!(
                    "{by} set the permanent quota of {} in pool {pool} to {} (was {}).",
                    tenant.name,
                    after.0,
                    before.as_ref().map(|b| b.0).unwrap_or_default()
                ),
                link: Link::Path(format!("/t/{}/quota", tenant.slug)),
                data: json!({"pool": pool, "quota": after.1}),
            },
            Self::QuotaGranted {
                tenant,
                pool,
                extra,
                ends_at,
                by,
                ..
            } => NoticeDraft {
                kind: K::QuotaChanged,
                tenant_id: Some(tenant.id),
                to: Recipients::TenantAdmins(tenant.id),
                spare_actor: false,
                title: format!("Temporary quota in {pool}: +{extra}"),
                body: format!(
                    "{by} granted {} {extra} extra in pool {pool} until {}.",
                    tenant.name,
                    ends_at.format("%Y-%m-%d %H:%M UTC")
                ),
                link: Link::Path(format!("/t/{}/quota", tenant.slug)),
                data: json!({"pool": pool, "extra": extra, "ends_at": ends_at}),
            },
            Self::QuotaRequestFiled {
                request: r,
                state,
                amount,
                by,
                ..
            } => {
                if *state == QuotaRequestState::Pending {
                    about_request(
                        r,
                        K::QuotaRequestCreated,
                        Recipients::PlatformAdminsAnd(Vec::new()),
                        format!("{} asks for +{amount} in {}", r.tenant.name, r.pool),
                    )
                } else {
                    about_request(
                        r,
                        K::QuotaRequestCreated,
                        Recipients::TenantAdmins(r.tenant.id),
                        format!("{by} proposes a quota request: +{amount} in {}", r.pool),
                    )
                }
            }
            Self::QuotaRequestSubmitted {
                request: r,
                amount,
                requested_by_user_id,
            } => about_request(
                r,
                K::QuotaRequestSubmitted,
                Recipients::PlatformAdminsAnd(requested_by_user_id.iter().copied().collect()),
                format!("{} asks for +{amount} in {}", r.tenant.name, r.pool),
            ),
            Self::QuotaRequestWithdrawn {
                request: r,
                requested_by_user_id,
                by,
                ..
            } => about_request(
                r,
                K::QuotaRequestWithdrawn,
                Recipients::Users(requested_by_user_id.iter().copied().collect()),
                format!("Quota request #{} was withdrawn by {by}", r.id),
            ),
            Self::QuotaRequestApproved {
                request: r,
                asked,
                granted,
                ends_at,
                after,
                by,
                people,
                ..
            } => NoticeDraft {
                body: format!(
                    "{by} approved +{granted}{} for {} in pool {} (asked: +{asked}). The quota is now {after}.",
                    until(*ends_at),
                    r.tenant.name,
                    r.pool,
                ),
                data: json!({"quota_request": r.id, "pool": r.pool, "quota": after}),
                ..about_request(
                    r,
                    K::QuotaRequestApproved,
                    Recipients::Users(people.clone()),
                    format!("Quota request approved: +{granted} in {}", r.pool),
                )
            },
            Self::QuotaRequestRejected {
                request: r,
                asked,
                reason,
                quota,
                by,
                people,
            } => NoticeDraft {
                body: format!("{by} rejected the request: {reason}"),
                data: json!({"quota_request": r.id, "pool": r.pool, "quota": quota}),
                ..about_request(
                    r,
                    K::QuotaRequestRejected,
                    Recipients::Users(people.clone()),
                    format!("Quota request rejected: +{asked} in {}", r.pool),
                )
            },
            Self::WebhookTested { tenant, by } => NoticeDraft {
                kind: K::WebhookTest,
                tenant_id: Some(tenant.id),
                to: Recipients::Users(Vec::new()),
                spare_actor: false,
                title: format!("Test event for {}", tenant.name),
                body: format!("{by} sent a test event from Tessera."),
                link: Link::Path(format!("/t/{}/webhook", tenant.slug)),
                data: json!({}),
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
                blocks,
            } => {
                let whose = match tenant {
                    Some(t) => t.name.clone(),
                    None => format!("Cost centre {}", target.trim_start_matches("cost_centre:")),
                };
                let pct = alert.percent();
                let (title, mut body) = if alert.is_forecast() {
                    (
                        format!("{whose} is on course for {pct} % of its budget"),
                        format!(
                            "If the slices running now keep running, {month} ends at {forecast} {currency} of the {amount} {currency} budget ({spent} {currency} spent so far)."
                        ),
                    )
                } else {
                    (
                        format!("{whose} has spent {pct} % of its budget"),
                        format!("{spent} {currency} of the {amount} {currency} budget for {month} is spent."),
                    )
                };
                if *blocks && !alert.is_forecast() && pct >= 100 {
                    body.push_str(" New burstable and best-effort requests are turned away until the month ends or the budget is raised; guaranteed requests still go through.");
                } else if *blocks {
                    body.push_str(" At 100 % the budget turns away new burstable and best-effort requests.");
                }
                NoticeDraft {
                    kind: K::BudgetThreshold,
                    tenant_id: tenant.as_ref().map(|t| t.id),
                    to: match tenant {
                        Some(t) => Recipients::TenantAdmins(t.id),
                        None => Recipients::PlatformAdminsAnd(Vec::new()),
                    },
                    spare_actor: false,
                    title,
                    body,
                    link: Link::Path(match tenant {
                        Some(t) => format!("/t/{}/budget", t.slug),
                        None => "/usage".to_owned(),
                    }),
                    data: json!({
                        "alert": alert,
                        "month": month,
                        "spent": spent,
                        "forecast": forecast,
                        "amount": amount,
                        "currency": currency,
                    }),
                }
            }
            Self::BudgetRequested {
                request_id,
                tenant,
                current,
                amount,
                currency,
                reason,
                by,
                ..
            } => NoticeDraft {
                kind: K::BudgetRequestCreated,
                tenant_id: None,
                to: Recipients::PlatformAdminsAnd(Vec::new()),
                spare_actor: true,
                title: format!("{} asks for a budget of {amount} {currency}", tenant.name),
                body: format!(
                    "{by} asks to raise the monthly budget of {} from {current} to {amount} {currency}: {reason}",
                    tenant.name
                ),
                link: Link::Path("/usage#budgets".to_owned()),
                data: json!({"budget_request": request_id, "amount": amount, "currency": currency}),
            },
            Self::BudgetRequestDecided {
                request_id,
                tenant,
                approved,
                amount,
                currency,
                note,
                by,
                ..
            } => NoticeDraft {
                kind: K::BudgetRequestDecided,
                tenant_id: Some(tenant.id),
                to: Recipients::TenantAdmins(tenant.id),
                spare_actor: false,
                title: if *approved {
                    format!("Budget raised to {amount} {currency}")
                } else {
                    format!("Budget of {amount} {currency} turned down")
                },
                body: format!(
                    "{by} {} the request to raise the monthly budget of {} to {amount} {currency}.{}",
                    if *approved { "approved" } else { "rejected" },
                    tenant.name,
                    if note.is_empty() { String::new() } else { format!(" Note: {note}") }
                ),
                link: Link::Path(format!("/t/{}/budget", tenant.slug)),
                data: json!({"budget_request": request_id, "approved": approved}),
            },
            Self::QuotaSet { by: None, .. }
            | Self::BudgetSet { .. }
            | Self::BudgetDeleted { .. }
            | Self::AllocationRequested { .. }
            | Self::AllocationProvisioning { .. }
            | Self::AllocationTeardownFailed { .. }
            | Self::AllocationEnded { .. }
            | Self::AllocationReleased { .. }
            | Self::AllocationExtended { .. }
            | Self::AllocationIdleCleared { .. }
            | Self::AllocationKept { .. }
            | Self::AllocationPreemptLifted { .. }
            | Self::QuotaGrantEnded { .. }
            | Self::ApiTokenCreated { .. }
            | Self::ApiTokenRevoked { .. }
            | Self::JoinTokenCreated { .. }
            | Self::JoinTokenRevoked { .. }
            | Self::HostEnrolled { .. }
            | Self::FleetOperated { .. }
            | Self::HostFirstReport { .. }
            | Self::TenantCreated { .. }
            | Self::TenantUpdated { .. }
            | Self::PoolCreated { .. }
            | Self::PoolChanged { .. }
            | Self::PoolChangePlanned { .. }
            | Self::PoolChangeCancelled { .. }
            | Self::PriceSet { .. }
            | Self::UserLoggedIn { .. }
            | Self::UserRolesChanged { .. }
            | Self::UserAccessChanged { .. }
            | Self::AuditPruned { .. }
            | Self::WebhookSet { .. }
            | Self::WebhookDeleted { .. } => return None,
        })
    }
}
