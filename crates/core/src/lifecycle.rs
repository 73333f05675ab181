//! Lifecycles of allocations and quota requests as pure transition functions.
//!
//! Allocation:
//!
//! ```text
//! requested ──place──▶ placed ──start_provisioning──▶ provisioning ──provisioned──▶ active
//!   │    ▲              ▲  │                              │                          │
//!   │  no_capacity      │  └─capacity_lost─▶ queued        │ release / expire / fail  │
//!   │    │              │                                  ▼                          │
//!   └─no_capacity─▶ queued ──place──┘             releasing{outcome} ◀───────────────┘
//!                                                   │   ▲
//!                                        released   │   └─ fail (teardown failed: stays,
//!                                                   ▼        reason recorded, retried)
//!                                   released | expired | failed(reason)   (per outcome)
//!
//! release from requested / queued / placed ─▶ released
//! fail    from requested / queued / placed ─▶ failed(reason)
//! expire  from requested / queued / placed ─▶ expired
//! ```
//!
//! Nothing is on a GPU before `provisioning`, so those three end at once.
//! From `provisioning` and `active` the slice may exist on the GPU, so
//! `release`, `expire` and `fail` all go through `releasing`, which remembers
//! how the allocation will end ([`ReleaseOutcome`]) and keeps holding capacity
//! until the agent reports the slice gone (`released`). A teardown failure
//! (`fail` while `releasing`) keeps the allocation there, with the reason
//! recorded, so the agent retries and the capacity is never handed out twice.
//!
//! `released`, `failed` and `expired` are terminal. Only `placed`,
//! `provisioning`, `active` and `releasing` hold capacity.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How an allocation in [`AllocationState::Releasing`] ends once the agent
/// has torn its slice down.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ReleaseOutcome {
    /// Given back by the tenant or an admin: ends [`AllocationState::Released`].
    #[default]
    Released,
    /// Its lease ended: ends [`AllocationState::Expired`].
    Expired,
    /// It broke: ends [`AllocationState::Failed`] with this reason.
    Failed {
        /// What went wrong, for the tenant.
        reason: String,
    },
}

impl ReleaseOutcome {
    /// Snake-case name, as serialized.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Released => "released",
            Self::Expired => "expired",
            Self::Failed { .. } => "failed",
        }
    }

    /// The terminal phase this outcome finalises to.
    pub fn final_phase(&self) -> AllocationPhase {
        match self {
            Self::Released => AllocationPhase::Released,
            Self::Expired => AllocationPhase::Expired,
            Self::Failed { .. } => AllocationPhase::Failed,
        }
    }

    /// The terminal state this outcome finalises to.
    pub fn final_state(&self) -> AllocationState {
        match self {
            Self::Released => AllocationState::Released,
            Self::Expired => AllocationState::Expired,
            Self::Failed { reason } => AllocationState::Failed {
                reason: reason.clone(),
            },
        }
    }
}

/// The name of an [`AllocationState`] without its data: what the database
/// column holds and queries filter on. The names are stable (stored, and
/// shown in the API).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(
    feature = "sea-orm",
    derive(sea_orm::EnumIter, sea_orm::DeriveActiveEnum)
)]
#[cfg_attr(
    feature = "sea-orm",
    sea_orm(rs_type = "String", db_type = "Text", enum_name = "allocation_phase")
)]
pub enum AllocationPhase {
    /// See [`AllocationState::Requested`].
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "requested"))]
    Requested,
    /// See [`AllocationState::Queued`].
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "queued"))]
    Queued,
    /// See [`AllocationState::Placed`].
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "placed"))]
    Placed,
    /// See [`AllocationState::Provisioning`].
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "provisioning"))]
    Provisioning,
    /// See [`AllocationState::Active`].
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "active"))]
    Active,
    /// See [`AllocationState::Releasing`].
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "releasing"))]
    Releasing,
    /// See [`AllocationState::Released`].
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "released"))]
    Released,
    /// See [`AllocationState::Failed`].
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "failed"))]
    Failed,
    /// See [`AllocationState::Expired`].
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "expired"))]
    Expired,
}

impl AllocationPhase {
    /// Phases whose demand counts against the tenant's quota.
    pub const QUOTA: [Self; 5] = [
        Self::Requested,
        Self::Queued,
        Self::Placed,
        Self::Provisioning,
        Self::Active,
    ];
    /// Phases that occupy GPU capacity.
    pub const CAPACITY: [Self; 4] = [
        Self::Placed,
        Self::Provisioning,
        Self::Active,
        Self::Releasing,
    ];
    /// Phases that may still change.
    pub const OPEN: [Self; 6] = [
        Self::Requested,
        Self::Queued,
        Self::Placed,
        Self::Provisioning,
        Self::Active,
        Self::Releasing,
    ];
    /// Placed or beyond, not yet being torn down: holding compute for the tenant.
    pub const HOLDING: [Self; 3] = [Self::Placed, Self::Provisioning, Self::Active];

    /// Snake-case name, as stored and serialized.
    pub fn name(self) -> &'static str {
        match self {
            Self::Requested => "requested",
            Self::Queued => "queued",
            Self::Placed => "placed",
            Self::Provisioning => "provisioning",
            Self::Active => "active",
            Self::Releasing => "releasing",
            Self::Released => "released",
            Self::Failed => "failed",
            Self::Expired => "expired",
        }
    }
}

impl fmt::Display for AllocationPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where an allocation is in its life.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum AllocationState {
    /// Asked for; not yet placed.
    Requested,
    /// Waiting for capacity.
    Queued,
    /// Assigned a GPU (and MIG start / MPS limits); nothing on the GPU yet.
    Placed,
    /// The agent is creating the slice.
    Provisioning,
    /// Usable by the tenant.
    Active,
    /// The agent is tearing the slice down; capacity stays held until it
    /// reports the slice gone.
    Releasing {
        /// How the allocation ends afterwards (`released` when absent, as
        /// stored before outcomes existed).
        #[serde(default)]
        outcome: ReleaseOutcome,
        /// Why the last teardown attempt failed, if it did; the agent retries.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        teardown_error: Option<String>,
    },
    /// Gone, on request.
    Released,
    /// Could not be provisioned or broke.
    Failed {
        /// What went wrong, for the tenant.
        reason: String,
    },
    /// Its deadline passed (queued too long, or the lease ended).
    Expired,
}

impl AllocationState {
    /// `Releasing` towards `outcome`, with no teardown failure yet.
    pub fn releasing(outcome: ReleaseOutcome) -> Self {
        Self::Releasing {
            outcome,
            teardown_error: None,
        }
    }

    /// The phase: the state without its data.
    pub fn phase(&self) -> AllocationPhase {
        match self {
            Self::Requested => AllocationPhase::Requested,
            Self::Queued => AllocationPhase::Queued,
            Self::Placed => AllocationPhase::Placed,
            Self::Provisioning => AllocationPhase::Provisioning,
            Self::Active => AllocationPhase::Active,
            Self::Releasing { .. } => AllocationPhase::Releasing,
            Self::Released => AllocationPhase::Released,
            Self::Failed { .. } => AllocationPhase::Failed,
            Self::Expired => AllocationPhase::Expired,
        }
    }

    /// Snake-case name, as serialized.
    pub fn name(&self) -> &'static str {
        self.phase().name()
    }

    /// No transition leaves this state.
    pub fn is_terminal(&self) -> bool {
        matches!(self, Self::Released | Self::Failed { .. } | Self::Expired)
    }

    /// The allocation occupies GPU capacity (counts against placement and quota).
    pub fn holds_capacity(&self) -> bool {
        matches!(
            self,
            Self::Placed | Self::Provisioning | Self::Active | Self::Releasing { .. }
        )
    }
}

impl fmt::Display for AllocationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Something that happens to an allocation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum AllocationEvent {
    /// Placement found no capacity (again, when already queued).
    NoCapacity,
    /// Placement chose a GPU.
    Place,
    /// A placed allocation lost its GPU (drained, unhealthy) before provisioning.
    CapacityLost,
    /// The agent picked up the desired state.
    StartProvisioning,
    /// The agent reported the slice ready.
    Provisioned,
    /// The tenant (or an admin) gives it back.
    Release,
    /// The agent reported the slice gone (teardown done).
    Released,
    /// Something broke; while releasing, the teardown itself failed.
    Fail {
        /// What went wrong.
        reason: String,
    },
    /// The deadline passed.
    Expire,
}

impl AllocationEvent {
    /// Snake-case name, as serialized.
    pub fn name(&self) -> &'static str {
        match self {
            Self::NoCapacity => "no_capacity",
            Self::Place => "place",
            Self::CapacityLost => "capacity_lost",
            Self::StartProvisioning => "start_provisioning",
            Self::Provisioned => "provisioned",
            Self::Release => "release",
            Self::Released => "released",
            Self::Fail { .. } => "fail",
            Self::Expire => "expire",
        }
    }
}

/// An event that is not allowed in the current state.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[error("cannot {event} {subject} that is {from}")]
pub struct TransitionError {
    /// `"an allocation"` or `"a quota request"`.
    pub subject: String,
    /// The current state's name.
    pub from: String,
    /// The event's name.
    pub event: String,
}

impl TransitionError {
    fn allocation(from: &AllocationState, event: &AllocationEvent) -> Self {
        Self {
            subject: "an allocation".into(),
            from: from.name().into(),
            event: event.name().replace('_', " "),
        }
    }
}

/// The state after `event`, or a [`TransitionError`] when the event is not
/// allowed in `state`.
pub fn transition(
    state: &AllocationState,
    event: &AllocationEvent,
) -> Result<AllocationState, TransitionError> {
    use AllocationEvent as E;
    use AllocationState as S;
    use ReleaseOutcome as O;
    let next = match (state, event) {
        (S::Requested | S::Queued, E::NoCapacity) => S::Queued,
        (S::Requested | S::Queued, E::Place) => S::Placed,
        (S::Placed, E::CapacityLost) => S::Queued,
        (S::Placed, E::StartProvisioning) => S::Provisioning,
        (S::Provisioning, E::Provisioned) => S::Active,
        // Nothing is on a GPU yet: end at once.
        (S::Requested | S::Queued | S::Placed, E::Release) => S::Released,
        (S::Requested | S::Queued | S::Placed, E::Expire) => S::Expired,
        (S::Requested | S::Queued | S::Placed, E::Fail { reason }) => S::Failed {
            reason: reason.clone(),
        },
        // The slice may exist on a GPU: tear it down first.
        (S::Provisioning | S::Active, E::Release) => S::releasing(O::Released),
        (S::Provisioning | S::Active, E::Expire) => S::releasing(O::Expired),
        (S::Provisioning | S::Active, E::Fail { reason }) => S::releasing(O::Failed {
            reason: reason.clone(),
        }),
        (S::Releasing { outcome, .. }, E::Released) => outcome.final_state(),
        (S::Releasing { outcome, .. }, E::Fail { reason }) => S::Releasing {
            outcome: outcome.clone(),
            teardown_error: Some(reason.clone()),
        },
        _ => return Err(TransitionError::allocation(state, event)),
    };
    Ok(next)
}

/// The name of a [`QuotaRequestState`] without its data, as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
#[cfg_attr(
    feature = "sea-orm",
    derive(sea_orm::EnumIter, sea_orm::DeriveActiveEnum)
)]
#[cfg_attr(
    feature = "sea-orm",
    sea_orm(
        rs_type = "String",
        db_type = "Text",
        enum_name = "quota_request_phase"
    )
)]
pub enum QuotaRequestPhase {
    /// See [`QuotaRequestState::Proposed`].
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "proposed"))]
    Proposed,
    /// See [`QuotaRequestState::Pending`].
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "pending"))]
    Pending,
    /// See [`QuotaRequestState::Approved`].
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "approved"))]
    Approved,
    /// See [`QuotaRequestState::Rejected`].
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "rejected"))]
    Rejected,
    /// See [`QuotaRequestState::Withdrawn`].
    #[cfg_attr(feature = "sea-orm", sea_orm(string_value = "withdrawn"))]
    Withdrawn,
}

impl QuotaRequestPhase {
    /// Snake-case name, as stored and serialized.
    pub fn name(self) -> &'static str {
        match self {
            Self::Proposed => "proposed",
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Rejected => "rejected",
            Self::Withdrawn => "withdrawn",
        }
    }

    /// The state, given the stored rejection reason.
    pub fn with_reason(self, reason: Option<&str>) -> QuotaRequestState {
        match self {
            Self::Proposed => QuotaRequestState::Proposed,
            Self::Pending => QuotaRequestState::Pending,
            Self::Approved => QuotaRequestState::Approved,
            Self::Rejected => QuotaRequestState::Rejected {
                reason: reason.unwrap_or_default().to_owned(),
            },
            Self::Withdrawn => QuotaRequestState::Withdrawn,
        }
    }

    /// Decided (approved or rejected).
    pub fn is_decided(self) -> bool {
        matches!(self, Self::Approved | Self::Rejected)
    }
}

impl fmt::Display for QuotaRequestPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a quota request is.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum QuotaRequestState {
    /// Proposed by a tenant member; waits for a tenant admin to submit it.
    Proposed,
    /// Waiting for a platform admin.
    Pending,
    /// Granted; the quota changed.
    Approved,
    /// Refused, with the admin's reason.
    Rejected {
        /// Why, for the tenant.
        reason: String,
    },
    /// Taken back by the tenant.
    Withdrawn,
}

impl QuotaRequestState {
    /// The phase: the state without its data.
    pub fn phase(&self) -> QuotaRequestPhase {
        match self {
            Self::Proposed => QuotaRequestPhase::Proposed,
            Self::Pending => QuotaRequestPhase::Pending,
            Self::Approved => QuotaRequestPhase::Approved,
            Self::Rejected { .. } => QuotaRequestPhase::Rejected,
            Self::Withdrawn => QuotaRequestPhase::Withdrawn,
        }
    }

    /// Snake-case name, as serialized.
    pub fn name(&self) -> &'static str {
        self.phase().name()
    }

    /// Decided or withdrawn.
    pub fn is_terminal(&self) -> bool {
        !matches!(self, Self::Proposed | Self::Pending)
    }
}

/// A decision on a quota request.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum QuotaRequestEvent {
    /// A tenant admin submits a member's proposal to the platform admins.
    Submit,
    /// A platform admin grants it.
    Approve,
    /// A platform admin refuses it.
    Reject {
        /// Why (required).
        reason: String,
    },
    /// The tenant takes it back.
    Withdraw,
}

impl QuotaRequestEvent {
    /// Snake-case name, as serialized.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Submit => "submit",
            Self::Approve => "approve",
            Self::Reject { .. } => "reject",
            Self::Withdraw => "withdraw",
        }
    }
}

/// Why a quota-request event is refused.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QuotaRequestError {
    /// Not allowed in the current state.
    #[error(transparent)]
    Transition(#[from] TransitionError),
    /// A rejection needs a reason the tenant can act on.
    #[error("give a reason when rejecting a quota request")]
    ReasonRequired,
}

/// The quota request's state after `event`.
pub fn quota_request_transition(
    state: &QuotaRequestState,
    event: &QuotaRequestEvent,
) -> Result<QuotaRequestState, QuotaRequestError> {
    let refused = || -> QuotaRequestError {
        TransitionError {
            subject: "a quota request".into(),
            from: state.name().into(),
            event: event.name().into(),
        }
        .into()
    };
    if state.is_terminal() {
        return Err(refused());
    }
    // A proposal is only submitted or withdrawn; only a submitted (pending)
    // request reaches the platform admins.
    let pending = matches!(state, QuotaRequestState::Pending);
    Ok(match event {
        QuotaRequestEvent::Submit if !pending => QuotaRequestState::Pending,
        QuotaRequestEvent::Submit => return Err(refused()),
        QuotaRequestEvent::Approve | QuotaRequestEvent::Reject { .. } if !pending => {
            return Err(refused())
        }
        QuotaRequestEvent::Approve => QuotaRequestState::Approved,
        QuotaRequestEvent::Reject { reason } => {
            if reason.trim().is_empty() {
                return Err(QuotaRequestError::ReasonRequired);
            }
            QuotaRequestState::Rejected {
                reason: reason.trim().to_string(),
            }
        }
        QuotaRequestEvent::Withdraw => QuotaRequestState::Withdrawn,
    })
}

#[cfg(test)]
#[path = "lifecycle_tests.rs"]
mod tests;
