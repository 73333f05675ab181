//! Read models for pages and the REST API, one module per area.
//!
//! Every view is re-exported here (`views::AllocationView`), as are the
//! request bodies of [`crate::requests`] and the audit query of
//! [`crate::query`], so the paths callers use do not depend on the layout.

mod allocations;
mod api_tokens;
mod audit;
mod budgets;
mod fleet;
mod insights;
mod ledger;
mod people;
mod policy;
mod rightsizing;
mod tenants;
mod usage;

pub use allocations::{
    ActivityPoint, AllocatedGpu, AllocationActivity, AllocationView, CapacityLost, DrainNotice,
    IdleNotice, KeepRequest, PlacementWhy, PoolChoice, PreemptionNotice, PriorityChoice,
    ProcessesStoppedView, RankedPlaceView, RequestOptions,
};
pub use api_tokens::{ApiTokenView, CreatedApiToken};
pub use audit::{AuditChainStatus, AuditEventView, AuditPage};
pub use budgets::{
    BudgetDecision, BudgetQuery, BudgetRequestView, BudgetView, NewBudget, NewBudgetRequest,
    StatementLine, StatementQuery, StatementTotal, StatementView,
};
pub use fleet::{
    CreatedJoinToken, FleetSummary, FleetView, GpuView, HostStatus, HostView, JoinTokenStatus,
    JoinTokenView, MigInstanceView, OpsRequest, OpsView, PoolView, HOSTS_PER_PAGE,
};
pub use insights::{
    CapacityDay, FleetInsights, FullProjection, HeatCell, HeatHost, InsightsQuery, PoolCapacity,
    QueueDay, INSIGHT_DAYS,
};
pub use ledger::{
    LedgerBuckets, LedgerCharge, LedgerCharges, LedgerGrouping, LedgerQuery, LedgerReport,
    LedgerRow, LedgerStep, LedgerTenant, PoolRecovery,
};
pub use people::PersonView;
pub use policy::{
    AffectedSlice, PlannedChangeView, PoolAdminView, PoolChangePreview, PoolEdit, PoolsAdminView,
    TenantAdminView, TenantEdit,
};
pub use rightsizing::{Recommendations, SliceAdvice};
pub use tenants::{MemberView, MembershipView, QuotaView, TenantRole, TenantView, ViewerView};
pub use usage::{
    NewPrice, PriceView, ReclaimSummary, TimelineStep, UsageGrouping, UsagePoint, UsageQuery,
    UsageReport, UsageRow, UsageTotal,
};

pub use crate::query::{AuditFilter, AuditQuery, FleetFilter, FleetQuery, HostFilter};
pub use crate::requests::{ExtendLease, NewAllocation, RequestInstead};

/// The heading an error page shows for an HTTP status (shared by the server's
/// standalone error pages and the app's error panel).
pub fn error_title(status: u16) -> &'static str {
    match status {
        400 => "Check your input",
        401 => "Sign-in required",
        403 => "Not allowed",
        404 => "Not found",
        409 => "Conflict",
        _ => "Something went wrong",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_titles() {
        assert_eq!(super::error_title(403), "Not allowed");
        assert_eq!(super::error_title(400), "Check your input");
        assert_eq!(super::error_title(502), "Something went wrong");
    }
}
