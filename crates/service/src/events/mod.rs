//! Domain events: what a change did, as typed values.
//!
//! A use-case opens a [`Write`](crate::write::Write), changes rows, and
//! [`emit`](crate::write::Write::emit)s one [`DomainEvent`] per thing that
//! happened. Committing derives everything else from the events, in the same
//! transaction: the audit row ([`DomainEvent::audit`]), the notifications and
//! the webhook outbox ([`DomainEvent::notice`]); after the commit, the agents'
//! wake-ups and the queue retry ([`DomainEvent::after_commit`]). A new kind of event is one more variant:
//! each of those matches is exhaustive, so the compiler lists every place
//! that must decide about it.

pub(crate) mod audit_entry;
mod effects;
mod notice;
mod refs;

pub use effects::{AfterCommit, CapacityEffect};
pub use refs::{AccessChange, AllocationRef, QuotaRequestRef, Roles, TenantFields, TenantRef};

pub(crate) use notice::{Link, NoticeDraft, Recipients};

use chrono::{DateTime, Utc};
use tessera_core::availability::{OpsAction, OpsMode};
use tessera_core::health::{GpuHealth, HealthVerdict};
use tessera_core::ids::{
    AllocationId, ApiTokenId, HostId, JoinTokenId, QuotaGrantId, QuotaRequestId, TenantId, UserId,
};
use tessera_core::lifecycle::{AllocationPhase, AllocationState, QuotaRequestState};
use tessera_core::pool::{GpuMove, PoolSpec};
use tessera_core::quota::Quota;
use tessera_core::sharing::SliceShape;
/// Something that happened, with what the audit log, the notifications and
/// the agents need to know about it.
#[derive(Debug, Clone, PartialEq)]
pub enum DomainEvent {
    /// A tenant asked for a slice; it was placed at once or queued.
    AllocationRequested {
        /// The allocation.
        alloc: AllocationRef,
        /// What was asked for.
        shape: SliceShape,
        /// Lease asked for.
        lease_hours: u32,
        /// Priority class asked for (or the default).
        priority_class: String,
        /// Where it is now (placed or queued).
        state: AllocationState,
        /// The slice it asks for again (after its GPU or host was lost, or
        /// it was drained).
        requeue_of: Option<AllocationId>,
    },
    /// A queued slice was placed.
    AllocationPlaced {
        /// The allocation (with its host).
        alloc: AllocationRef,
    },
    /// The agent took a placed slice to create it.
    AllocationProvisioning {
        /// The allocation.
        alloc: AllocationRef,
        /// The new state.
        state: AllocationState,
    },
    /// The agent reported the slice created: it is usable.
    AllocationActivated {
        /// The allocation.
        alloc: AllocationRef,
        /// The state it left.
        before: AllocationPhase,
        /// The new state.
        state: AllocationState,
        /// The host it runs on.
        hostname: tessera_core::checked::Hostname,
        /// Its lease.
        lease_hours: i32,
    },
    /// The slice could not be provided or broke (reported by the agent, or
    /// never confirmed in time).
    AllocationFailed {
        /// The allocation.
        alloc: AllocationRef,
        /// The state it left.
        before: AllocationPhase,
        /// The new state.
        state: AllocationState,
        /// What went wrong, for the tenant.
        reason: String,
    },
    /// Tearing the slice down failed; the agent retries.
    AllocationTeardownFailed {
        /// The allocation.
        alloc: AllocationRef,
        /// The new state (still releasing, with the error).
        state: AllocationState,
    },
    /// The agent reported the slice gone.
    AllocationEnded {
        /// The allocation.
        alloc: AllocationRef,
        /// The state it left.
        before: AllocationPhase,
        /// The new state.
        state: AllocationState,
        /// What the host stopped, when it was releasing and said.
        processes_stopped: Option<tessera_protocol::views::ProcessesStoppedView>,
    },
    /// Its lease ended.
    AllocationExpired {
        /// The allocation.
        alloc: AllocationRef,
        /// The state it left.
        before: AllocationPhase,
        /// The new state.
        state: AllocationState,
    },
    /// The tenant gave the slice back.
    AllocationReleased {
        /// The allocation.
        alloc: AllocationRef,
        /// The state it left.
        before: AllocationPhase,
        /// The new state.
        after: AllocationPhase,
    },
    /// The lease was extended.
    AllocationExtended {
        /// The allocation.
        alloc: AllocationRef,
        /// The old end.
        before_end: DateTime<Utc>,
        /// The new end.
        after_end: DateTime<Utc>,
    },
    /// The lease ends soon (told once per lease).
    AllocationLeaseEnding {
        /// The allocation.
        alloc: AllocationRef,
        /// Minutes left.
        minutes_left: i64,
    },
    /// The slice was measured idle: reclaimed at `deadline` unless kept.
    AllocationIdle {
        /// The allocation.
        alloc: AllocationRef,
        /// Minutes it has been idle.
        idle_minutes: u32,
        /// Below this mean utilisation (%).
        below_pct: u8,
        /// When it is reclaimed.
        deadline: DateTime<Utc>,
    },
    /// A warned slice turned busy again before its deadline.
    AllocationIdleCleared {
        /// The allocation.
        alloc: AllocationRef,
    },
    /// Its owner kept a warned slice.
    AllocationKept {
        /// The allocation.
        alloc: AllocationRef,
        /// Why, in the owner's words.
        reason: String,
        /// Keeps so far, this one included.
        keeps: u32,
    },
    /// An idle slice was released at its deadline.
    AllocationReclaimed {
        /// The allocation.
        alloc: AllocationRef,
        /// The state it left.
        before: AllocationPhase,
        /// The new state.
        state: AllocationState,
        /// Minutes it had been idle.
        idle_minutes: u32,
    },
    /// The slice must give way to a waiting request: preempted at `deadline`
    /// unless that request stops waiting first.
    AllocationPreempting {
        /// The allocation.
        alloc: AllocationRef,
        /// The waiting request.
        for_id: AllocationId,
        /// When it is preempted.
        deadline: DateTime<Utc>,
        /// Why, for its owner.
        reason: String,
    },
    /// The request a slice was to give way to stopped waiting.
    AllocationPreemptLifted {
        /// The allocation.
        alloc: AllocationRef,
        /// The request.
        for_id: AllocationId,
    },
    /// The slice was preempted at the end of its notice.
    AllocationPreempted {
        /// The allocation.
        alloc: AllocationRef,
        /// The state it left.
        before: AllocationPhase,
        /// The new state.
        state: AllocationState,
        /// The request it gave way to.
        for_id: AllocationId,
        /// Why.
        reason: String,
    },
    /// The slice that waited for an approved quota request still does not fit.
    WaitingSliceRefused {
        /// The quota request.
        request_id: QuotaRequestId,
        /// Its tenant.
        tenant: TenantRef,
        /// Who wanted the slice.
        user_id: Option<UserId>,
        /// Why it was refused.
        error: String,
    },
    /// A tenant's permanent quota in a pool was set.
    QuotaSet {
        /// The tenant.
        tenant: TenantRef,
        /// The pool.
        pool: tessera_core::checked::PoolName,
        /// Permanent quota and quota in force before (`None`: it had none).
        before: Option<(Quota, Quota)>,
        /// Permanent quota and quota in force after.
        after: (Quota, Quota),
        /// The admin who set it (`None`: seeded from the configuration).
        by: Option<String>,
    },
    /// Temporary extra quota was granted.
    QuotaGranted {
        /// The grant's id.
        grant_id: QuotaGrantId,
        /// The tenant.
        tenant: TenantRef,
        /// The pool.
        pool: tessera_core::checked::PoolName,
        /// What was granted.
        extra: Quota,
        /// Until when.
        ends_at: DateTime<Utc>,
        /// Why.
        reason: String,
        /// Quota in force before.
        before: Quota,
        /// Quota in force after.
        after: Quota,
        /// The admin who granted it.
        by: String,
    },
    /// A temporary grant was ended early.
    QuotaGrantEnded {
        /// The grant's id.
        grant_id: QuotaGrantId,
        /// The tenant's id.
        tenant_id: TenantId,
        /// The pool.
        pool: tessera_core::checked::PoolName,
    },
    /// A quota request was filed: proposed by a member, or sent to the
    /// platform admins by a tenant admin.
    QuotaRequestFiled {
        /// The request.
        request: QuotaRequestRef,
        /// Its state (proposed or pending).
        state: QuotaRequestState,
        /// What it asks for.
        amount: Quota,
        /// Until when (`None`: permanent).
        ends_at: Option<DateTime<Utc>>,
        /// The slice that waits for it, as people read it.
        slice: Option<String>,
        /// Who filed it (display name).
        by: String,
    },
    /// A tenant admin submitted a member's proposal.
    QuotaRequestSubmitted {
        /// The request.
        request: QuotaRequestRef,
        /// What it asks for.
        amount: Quota,
        /// The member who proposed it.
        requested_by_user_id: Option<UserId>,
    },
    /// A quota request was taken back.
    QuotaRequestWithdrawn {
        /// The request.
        request: QuotaRequestRef,
        /// The state it left.
        before: QuotaRequestState,
        /// The member who filed it.
        requested_by_user_id: Option<UserId>,
        /// Who withdrew it (display name).
        by: String,
    },
    /// A platform admin approved a quota request; the quota changed.
    QuotaRequestApproved {
        /// The request.
        request: QuotaRequestRef,
        /// What was asked for.
        asked: Quota,
        /// What was granted.
        granted: Quota,
        /// Until when (`None`: permanent).
        ends_at: Option<DateTime<Utc>>,
        /// Quota in force before.
        before: Quota,
        /// Quota in force after.
        after: Quota,
        /// The admin (display name).
        by: String,
        /// Who filed, submitted or waits for it.
        people: Vec<UserId>,
    },
    /// A platform admin rejected a quota request.
    QuotaRequestRejected {
        /// The request.
        request: QuotaRequestRef,
        /// What was asked for.
        asked: Quota,
        /// Why.
        reason: String,
        /// Quota in force (unchanged).
        quota: Quota,
        /// The admin (display name).
        by: String,
        /// Who filed, submitted or waits for it.
        people: Vec<UserId>,
    },
    /// A tenant API token was created.
    ApiTokenCreated {
        /// Tenant id.
        tenant_id: TenantId,
        /// Token id.
        token_id: ApiTokenId,
        /// Its name.
        name: String,
        /// Its visible prefix.
        prefix: String,
        /// When it stops working.
        expires_at: DateTime<Utc>,
        /// What it may do.
        scope: tessera_core::role::TokenScope,
    },
    /// A tenant API token was revoked.
    ApiTokenRevoked {
        /// Tenant id.
        tenant_id: TenantId,
        /// Token id.
        token_id: ApiTokenId,
        /// Its name.
        name: String,
    },
    /// A host join token was created.
    JoinTokenCreated {
        /// Token id.
        token_id: JoinTokenId,
        /// What it is for.
        description: String,
        /// When it stops working.
        expires_at: DateTime<Utc>,
        /// The existing host it re-enrols, if it is a re-enrolment token.
        for_host: Option<String>,
    },
    /// An unused host join token was revoked.
    JoinTokenRevoked {
        /// Token id.
        token_id: JoinTokenId,
        /// Its status before (`active`).
        status_before: tessera_protocol::views::JoinTokenStatus,
    },
    /// A host enrolled with a join token (again, when `reenrolled`).
    HostEnrolled {
        /// Host id.
        host_id: HostId,
        /// Its name.
        hostname: tessera_core::checked::Hostname,
        /// It had enrolled before under this name.
        reenrolled: bool,
    },
    /// A host's agent reported for the first time.
    HostFirstReport {
        /// Host id.
        host_id: HostId,
        /// GPUs reported.
        gpus: usize,
        /// The agent's GPU backend.
        backend: String,
    },
    /// A platform admin cordoned, drained, put into maintenance, resumed
    /// or decommissioned a host or one of its GPUs.
    FleetOperated {
        /// The host.
        host_id: HostId,
        /// Its name.
        hostname: tessera_core::checked::Hostname,
        /// The GPU (index, UUID) when the action was on one GPU.
        gpu: Option<(u32, String)>,
        /// What was done.
        action: OpsAction,
        /// The mode before.
        before: OpsMode,
        /// The mode after (`None`: the host was removed).
        after: Option<OpsMode>,
        /// Why.
        reason: String,
        /// When a drain ends the slices still there.
        drain_deadline: Option<DateTime<Utc>>,
    },
    /// The host or GPU under a slice is being drained: the slice ends at
    /// the deadline.
    AllocationDraining {
        /// The allocation.
        alloc: AllocationRef,
        /// Its host.
        hostname: tessera_core::checked::Hostname,
        /// When it ends.
        deadline: DateTime<Utc>,
        /// The admin's reason.
        reason: String,
    },
    /// A slice's GPU turned unhealthy or went missing, or its host stayed
    /// offline: a placed one went back to the queue, a running one is
    /// marked (and no longer counts against the quota).
    AllocationCapacityLost {
        /// The allocation.
        alloc: AllocationRef,
        /// The state it was in.
        before: AllocationPhase,
        /// The state it is in now.
        state: AllocationState,
        /// What was lost.
        reason: String,
    },
    /// A slice's lost GPU or host came back.
    AllocationCapacityRestored {
        /// The allocation.
        alloc: AllocationRef,
        /// What had been lost.
        lost: String,
    },
    /// A GPU's health verdict changed.
    GpuHealthChanged {
        /// Its host.
        host_id: HostId,
        /// The host's name.
        hostname: tessera_core::checked::Hostname,
        /// Index on the host.
        index: u32,
        /// UUID.
        uuid: String,
        /// The verdict before.
        before: HealthVerdict,
        /// The verdict now, with its reasons.
        after: GpuHealth,
    },
    /// A tenant was created (seeded from the configuration, or by a
    /// platform admin).
    TenantCreated {
        /// The tenant.
        tenant: TenantRef,
        /// What it was created with.
        fields: TenantFields,
    },
    /// A platform admin changed a tenant.
    TenantUpdated {
        /// The tenant (new name).
        tenant: TenantRef,
        /// Before.
        before: TenantFields,
        /// After.
        after: TenantFields,
    },
    /// A pool was created (seeded from the configuration, or by a
    /// platform admin).
    PoolCreated {
        /// Its definition.
        spec: PoolSpec,
    },
    /// A change to a pool took effect: at once, or once the GPUs it moves
    /// were empty (`planned_by`: who planned it).
    PoolChanged {
        /// Before.
        before: PoolSpec,
        /// After.
        after: PoolSpec,
        /// Who planned a change that waited for GPUs to empty.
        planned_by: Option<String>,
    },
    /// A change to a pool waits for GPUs with slices on them, which are
    /// being drained.
    PoolChangePlanned {
        /// Before.
        before: PoolSpec,
        /// What it will be.
        after: PoolSpec,
        /// The GPUs being drained for it.
        moves: Vec<GpuMove>,
        /// Why.
        reason: String,
        /// When the slices still there end.
        drain_deadline: DateTime<Utc>,
    },
    /// A platform admin set a pool's price from a moment on.
    PriceSet {
        /// The price.
        price: tessera_protocol::views::PriceView,
    },
    /// A planned change to a pool was called off (its GPUs resume).
    PoolChangeCancelled {
        /// The definition that stays.
        spec: PoolSpec,
        /// The one that was planned.
        planned: PoolSpec,
    },
    /// A user signed in.
    UserLoggedIn {
        /// The user.
        user_id: UserId,
    },
    /// A user's roles changed at sign-in (or were first recorded).
    UserRolesChanged {
        /// The user.
        user_id: UserId,
        /// Roles before (`None`: a new user).
        before: Option<Roles>,
        /// Roles now.
        after: Roles,
    },
    /// A person's access changed outside sign-in: their sessions were ended,
    /// or a platform admin deactivated or reactivated them.
    UserAccessChanged {
        /// The person.
        user_id: UserId,
        /// How they are named.
        name: String,
        /// What changed.
        change: AccessChange,
        /// Their API tokens this revoked.
        tokens_revoked: u64,
    },
    /// Retention deleted the oldest audit rows.
    AuditPruned {
        /// How many rows.
        rows: u64,
        /// The id of the last of them.
        through: i64,
        /// The hash the rows kept chain on from ("" when the last deleted
        /// row was written before the chain began).
        anchor: String,
        /// The retention, in days.
        keep_days: u32,
    },
    /// A tenant's webhook was set (or replaced).
    WebhookSet {
        /// The tenant.
        tenant: TenantRef,
        /// The URL it replaced.
        before_url: Option<String>,
        /// The new URL.
        url: String,
    },
    /// A tenant's webhook was removed.
    WebhookDeleted {
        /// The tenant.
        tenant: TenantRef,
        /// Its URL.
        url: String,
    },
    /// A tenant admin sent a test event to the webhook.
    WebhookTested {
        /// The tenant.
        tenant: TenantRef,
        /// Who (display name).
        by: String,
    },
    /// A budget was set or changed.
    BudgetSet {
        /// What it covers (`tenant:<slug>`, `cost_centre:<name>`).
        target: String,
        /// The tenant of a tenant's budget.
        tenant: Option<TenantRef>,
        /// Before (`None`: new).
        before: Option<serde_json::Value>,
        /// After.
        after: serde_json::Value,
    },
    /// A budget was removed.
    BudgetDeleted {
        /// What it covered.
        target: String,
        /// The tenant of a tenant's budget.
        tenant: Option<TenantRef>,
        /// What it was.
        before: serde_json::Value,
    },
    /// A budget's month crossed a threshold.
    BudgetThresholdCrossed {
        /// What it covers (`tenant:<slug>`, `cost_centre:<name>`).
        target: String,
        /// The tenant of a tenant's budget (its admins and webhook are
        /// told; the platform admins are for a cost centre's).
        tenant: Option<TenantRef>,
        /// The threshold.
        alert: tessera_core::budget::BudgetAlert,
        /// `YYYY-MM`.
        month: String,
        /// Spent so far (decimal).
        spent: String,
        /// Forecast for the month (decimal).
        forecast: String,
        /// The budget (decimal).
        amount: String,
        /// ISO 4217.
        currency: String,
        /// The budget turns away all but guaranteed requests once spent.
        blocks: bool,
    },
    /// A tenant admin asked for a larger budget.
    BudgetRequested {
        /// The request.
        request_id: i64,
        /// The budget (`tenant:<slug>`).
        target: String,
        /// The tenant.
        tenant: TenantRef,
        /// Per month now (decimal).
        current: String,
        /// Asked for (decimal).
        amount: String,
        /// ISO 4217.
        currency: String,
        /// Why.
        reason: String,
        /// Who asked (display name).
        by: String,
    },
    /// A platform admin decided a request for a larger budget.
    BudgetRequestDecided {
        /// The request.
        request_id: i64,
        /// The budget.
        target: String,
        /// The tenant.
        tenant: TenantRef,
        /// Raised, or not.
        approved: bool,
        /// Asked for (decimal).
        amount: String,
        /// ISO 4217.
        currency: String,
        /// The decider's note.
        note: String,
        /// Who decided (display name).
        by: String,
    },
}

#[cfg(test)]
mod tests;
