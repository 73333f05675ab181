//! What an event sets off beyond its own rows: the placer's view of the
//! pools it changes ([`DomainEvent::capacity`]) and what happens after the
//! commit ([`DomainEvent::after_commit`]).

use super::DomainEvent;
use tessera_core::availability::OpsMode;
use tessera_core::ids::{ApiTokenId, HostId};

/// What happens after a write commits, because of one of its events. (The
/// agents a write wakes follow from the desired generations it bumped, see
/// [`crate::write`].)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AfterCommit {
    /// The quota in force grew: requests waiting in the queues are tried
    /// again at once, not at the next tick.
    pub retries_queue: bool,
    /// A revoked API token: this process forgets its check at once (see
    /// [`crate::token_auth`]).
    pub forgets_token: Option<ApiTokenId>,
    /// A host whose credential stopped working (re-enrolled or
    /// decommissioned): every replica forgets it at once.
    pub forgets_host_credential: Option<HostId>,
}

/// What an event changes in the placer's view of the pools (see
/// `allocations::fleet_index`: a commit writes a new capacity epoch for
/// each pool named, so indexes built before it are no longer trusted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapacityEffect {
    /// Nothing the placer sees.
    Unchanged,
    /// A slice was requested or placed in the pool: the admission or queue
    /// pass that wrote it may carry the pool's index forward itself.
    Placed(tessera_core::checked::PoolName),
    /// What the pool holds changed otherwise (a slice ended, lost or got
    /// back its capacity).
    Pool(tessera_core::checked::PoolName),
    /// Hosts, GPUs or pools changed: every pool.
    All,
}

impl DomainEvent {
    /// What this event changes in the placer's view of the pools.
    pub fn capacity(&self) -> CapacityEffect {
        use CapacityEffect::{All, Placed, Pool, Unchanged};
        match self {
            Self::AllocationRequested { alloc, .. } | Self::AllocationPlaced { alloc } => {
                Placed(alloc.pool.clone())
            }
            Self::AllocationFailed { alloc, .. }
            | Self::AllocationTeardownFailed { alloc, .. }
            | Self::AllocationEnded { alloc, .. }
            | Self::AllocationExpired { alloc, .. }
            | Self::AllocationReleased { alloc, .. }
            | Self::AllocationReclaimed { alloc, .. }
            | Self::AllocationPreempted { alloc, .. }
            | Self::AllocationDraining { alloc, .. }
            | Self::AllocationCapacityLost { alloc, .. }
            | Self::AllocationCapacityRestored { alloc, .. } => Pool(alloc.pool.clone()),
            Self::HostEnrolled { .. }
            | Self::HostFirstReport { .. }
            | Self::FleetOperated { .. }
            | Self::GpuHealthChanged { .. }
            | Self::PoolCreated { .. }
            | Self::PoolChanged { .. }
            | Self::PoolChangePlanned { .. }
            | Self::PoolChangeCancelled { .. } => All,
            // The lease's end moves (the queue re-reads ends when it plans
            // with a queue), or nothing the placer sees changes.
            Self::AllocationProvisioning { .. }
            | Self::AllocationActivated { .. }
            | Self::AllocationExtended { .. }
            | Self::AllocationLeaseEnding { .. }
            | Self::AllocationIdle { .. }
            | Self::AllocationIdleCleared { .. }
            | Self::AllocationKept { .. }
            | Self::AllocationPreempting { .. }
            | Self::AllocationPreemptLifted { .. }
            | Self::WaitingSliceRefused { .. }
            | Self::QuotaSet { .. }
            | Self::QuotaGranted { .. }
            | Self::QuotaGrantEnded { .. }
            | Self::QuotaRequestFiled { .. }
            | Self::QuotaRequestSubmitted { .. }
            | Self::QuotaRequestWithdrawn { .. }
            | Self::QuotaRequestApproved { .. }
            | Self::QuotaRequestRejected { .. }
            | Self::ApiTokenCreated { .. }
            | Self::ApiTokenRevoked { .. }
            | Self::JoinTokenCreated { .. }
            | Self::JoinTokenRevoked { .. }
            | Self::TenantCreated { .. }
            | Self::TenantUpdated { .. }
            | Self::PriceSet { .. }
            | Self::BudgetSet { .. }
            | Self::BudgetDeleted { .. }
            | Self::BudgetThresholdCrossed { .. }
            | Self::BudgetRequested { .. }
            | Self::BudgetRequestDecided { .. }
            | Self::UserLoggedIn { .. }
            | Self::UserRolesChanged { .. }
            | Self::UserAccessChanged { .. }
            | Self::AuditPruned { .. }
            | Self::WebhookSet { .. }
            | Self::WebhookDeleted { .. }
            | Self::WebhookTested { .. } => Unchanged,
        }
    }
}

impl DomainEvent {
    /// What the commit of this event sets off.
    pub fn after_commit(&self) -> AfterCommit {
        let grows = AfterCommit {
            retries_queue: true,
            ..AfterCommit::default()
        };
        match self {
            // An admin raised it; a quota seeded from the configuration at
            // start-up has nothing waiting for it yet.
            Self::QuotaSet { by, .. } => AfterCommit {
                retries_queue: by.is_some(),
                ..AfterCommit::default()
            },
            Self::QuotaGranted { .. } | Self::QuotaRequestApproved { .. } => grows,
            // A placed slice went back to the queue (its host's desired
            // state loses it), or a running one stopped counting against
            // the quota: either way the queue may move.
            Self::AllocationCapacityLost { .. } => grows,
            // Capacity came back into service.
            Self::FleetOperated {
                after: Some(OpsMode::Available),
                ..
            } => grows,
            Self::GpuHealthChanged { after, .. } if after.verdict.takes_placements() => grows,
            // What a pool offers or holds changed: the queue may move.
            Self::PoolChanged { .. } | Self::PoolChangeCancelled { .. } => grows,
            Self::ApiTokenRevoked { token_id, .. } => AfterCommit {
                forgets_token: Some(*token_id),
                ..AfterCommit::default()
            },
            Self::HostEnrolled {
                host_id,
                reenrolled: true,
                ..
            }
            | Self::FleetOperated {
                host_id,
                gpu: None,
                after: None,
                ..
            } => AfterCommit {
                forgets_host_credential: Some(*host_id),
                ..AfterCommit::default()
            },
            Self::AllocationRequested { .. }
            | Self::AllocationPlaced { .. }
            | Self::AllocationFailed { .. }
            | Self::AllocationExpired { .. }
            | Self::AllocationReclaimed { .. }
            | Self::AllocationPreempted { .. }
            | Self::AllocationReleased { .. }
            | Self::AllocationProvisioning { .. }
            | Self::AllocationActivated { .. }
            | Self::AllocationTeardownFailed { .. }
            | Self::AllocationEnded { .. }
            | Self::AllocationExtended { .. }
            | Self::AllocationLeaseEnding { .. }
            | Self::AllocationIdle { .. }
            | Self::AllocationIdleCleared { .. }
            | Self::AllocationKept { .. }
            | Self::AllocationPreempting { .. }
            | Self::AllocationPreemptLifted { .. }
            | Self::WaitingSliceRefused { .. }
            | Self::QuotaGrantEnded { .. }
            | Self::QuotaRequestFiled { .. }
            | Self::QuotaRequestSubmitted { .. }
            | Self::QuotaRequestWithdrawn { .. }
            | Self::QuotaRequestRejected { .. }
            | Self::ApiTokenCreated { .. }
            | Self::JoinTokenCreated { .. }
            | Self::JoinTokenRevoked { .. }
            | Self::HostEnrolled { .. }
            | Self::HostFirstReport { .. }
            | Self::FleetOperated { .. }
            | Self::AllocationDraining { .. }
            | Self::AllocationCapacityRestored { .. }
            | Self::GpuHealthChanged { .. }
            | Self::TenantCreated { .. }
            | Self::TenantUpdated { .. }
            | Self::PoolCreated { .. }
            | Self::PoolChangePlanned { .. }
            | Self::PriceSet { .. }
            | Self::BudgetSet { .. }
            | Self::BudgetDeleted { .. }
            | Self::BudgetThresholdCrossed { .. }
            | Self::BudgetRequested { .. }
            | Self::BudgetRequestDecided { .. }
            | Self::UserLoggedIn { .. }
            | Self::UserRolesChanged { .. }
            | Self::UserAccessChanged { .. }
            | Self::AuditPruned { .. }
            | Self::WebhookSet { .. }
            | Self::WebhookDeleted { .. }
            | Self::WebhookTested { .. } => AfterCommit::default(),
        }
    }
}
