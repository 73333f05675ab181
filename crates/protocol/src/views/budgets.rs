//! Monthly budgets per tenant or cost centre, with this month's spend.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tessera_core::budget::{BudgetAlert, BudgetRequestState, BudgetScope};

/// A budget and where its month stands.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BudgetView {
    /// Id.
    pub id: i64,
    /// What it covers.
    pub scope: BudgetScope,
    /// The tenant's slug (tenant budgets).
    pub tenant: Option<String>,
    /// The tenant's name (tenant budgets).
    pub tenant_name: Option<String>,
    /// The cost centre (cost-centre budgets).
    pub cost_centre: Option<String>,
    /// Per calendar month (decimal).
    pub amount: String,
    /// ISO 4217.
    pub currency: String,
    /// Once spent, only guaranteed requests go through.
    pub block_when_exceeded: bool,
    /// The month (`YYYY-MM`, UTC) the figures are for.
    pub month: String,
    /// Charged so far this month: direct plus overhead share (decimal).
    pub spent: String,
    /// Spent plus what the running slices cost until the month ends if
    /// nothing changes (decimal).
    pub forecast: String,
    /// Spent as a percentage of the amount.
    pub percent: f64,
    /// Forecast as a percentage of the amount.
    pub forecast_percent: f64,
    /// Spent reached the amount and the budget blocks: only guaranteed
    /// requests go through.
    pub blocking: bool,
    /// Thresholds this month has crossed (each was told once).
    pub alerts: Vec<BudgetAlert>,
    /// A tenant admin's request for more, waiting for a platform admin.
    pub pending_request: Option<BudgetRequestView>,
    /// Who set it last.
    pub set_by: String,
    /// When.
    pub updated_at: DateTime<Utc>,
}

/// `PUT /api/v1/budgets`: sets the budget of one tenant or one cost centre
/// (name exactly one).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewBudget {
    /// A tenant's slug.
    #[serde(default)]
    pub tenant: Option<String>,
    /// A cost centre (platform admins only).
    #[serde(default)]
    pub cost_centre: Option<String>,
    /// Per calendar month (decimal, such as 1500 or 1500.00).
    pub amount: String,
    /// ISO 4217 (`EUR`); the pools priced in it count.
    pub currency: String,
    /// Once spent, turn away all but guaranteed requests (platform admins
    /// only; default: as it was, else no).
    #[serde(default)]
    pub block_when_exceeded: Option<bool>,
}

/// `GET /api/v1/budgets`.
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetQuery {
    /// Only this tenant's budget and its cost centre's.
    #[serde(default)]
    pub tenant: Option<String>,
}

/// `GET /api/v1/statements`: a month's statement of one tenant or one
/// cost centre (name exactly one).
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatementQuery {
    /// A tenant's slug (its members and platform admins).
    #[serde(default)]
    pub tenant: Option<String>,
    /// A cost centre (platform admins).
    #[serde(default)]
    pub cost_centre: Option<String>,
    /// `YYYY-MM` (UTC; default this month, so far).
    #[serde(default)]
    pub month: Option<String>,
}

/// One tenant's charges in one pool.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatementLine {
    /// Tenant slug.
    pub tenant: String,
    /// Tenant name.
    pub tenant_name: String,
    /// Pool.
    pub pool: String,
    /// ISO 4217.
    pub currency: String,
    /// GPU-hours its slices held (by their share of each GPU).
    pub gpu_hours: f64,
    /// For what its slices held (used-based pools: what they used).
    pub direct: String,
    /// Its share of the pool's overhead.
    pub overhead: String,
    /// Direct plus overhead.
    pub total: String,
}

/// A statement's total in one currency.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatementTotal {
    /// ISO 4217.
    pub currency: String,
    /// Direct.
    pub direct: String,
    /// Overhead.
    pub overhead: String,
    /// Both.
    pub total: String,
}

/// A month's statement of a tenant or cost centre.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatementView {
    /// `YYYY-MM`.
    pub month: String,
    /// Start.
    pub from: DateTime<Utc>,
    /// End (now, for the month under way).
    pub to: DateTime<Utc>,
    /// Whom it is for (a tenant's name or `Cost centre X`).
    pub subject: String,
    /// The tenant's slug (tenant statements).
    pub tenant: Option<String>,
    /// The cost centre (the tenant's, or the one asked for).
    pub cost_centre: Option<String>,
    /// Per tenant and pool.
    pub lines: Vec<StatementLine>,
    /// Per currency.
    pub totals: Vec<StatementTotal>,
    /// The pools' recovery policies and prices in the month.
    pub terms: Vec<super::PoolRecovery>,
    /// The budgets that cover it, with the month under way's spend.
    pub budgets: Vec<BudgetView>,
    /// Each slice's allocated hours and direct cost (tenant statements).
    pub slices: Vec<super::UsageRow>,
    /// When it was made.
    pub generated_at: DateTime<Utc>,
}

/// A request for a larger budget.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetRequestView {
    /// Id.
    pub id: i64,
    /// The budget.
    pub budget_id: i64,
    /// Per month, asked for (decimal).
    pub amount: String,
    /// Why.
    pub reason: String,
    /// Where it stands.
    pub state: BudgetRequestState,
    /// Who asked.
    pub requested_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// Who decided.
    pub decided_by: Option<String>,
    /// What they said.
    pub note: Option<String>,
}

/// `POST /api/v1/budgets/{id}/requests`: ask the platform admins for a
/// larger budget (the tenant's admins).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewBudgetRequest {
    /// Per month (decimal, above the budget now).
    pub amount: String,
    /// Why (1 to 500 characters).
    pub reason: String,
}

/// `POST /api/v1/budget-requests/{id}/decision` (platform admins other
/// than the one who asked).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetDecision {
    /// Raise the budget to the amount asked for, or not.
    pub approve: bool,
    /// A note for the tenant (up to 500 characters).
    #[serde(default)]
    pub note: String,
}
