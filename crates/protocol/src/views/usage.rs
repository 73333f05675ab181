//! Usage and cost: allocated GPU-hours and memory-GiB-hours per period,
//! priced with each pool's price in force at the time.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tessera_core::ids::AllocationId;

/// What a usage report adds up by (besides the calendar month).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageGrouping {
    /// Per tenant and pool.
    #[default]
    Tenant,
    /// Per cost centre (a monthly statement per cost centre).
    CostCentre,
    /// Per pool.
    Pool,
    /// Per slice (the drill-down).
    Allocation,
}

impl UsageGrouping {
    /// All, for forms.
    pub const ALL: [Self; 4] = [Self::Tenant, Self::CostCentre, Self::Pool, Self::Allocation];

    /// The name in queries.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tenant => "tenant",
            Self::CostCentre => "cost_centre",
            Self::Pool => "pool",
            Self::Allocation => "allocation",
        }
    }

    /// Parses a query value.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|g| g.as_str() == s)
    }
}

/// `GET /api/v1/usage` (and `.csv`): the period is `month` (`2026-11`), or
/// `from`/`to` (RFC 3339), or else the current month.
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageQuery {
    /// A calendar month, `YYYY-MM` (UTC).
    #[serde(default)]
    pub month: Option<String>,
    /// Start (inclusive).
    #[serde(default)]
    pub from: Option<DateTime<Utc>>,
    /// End (exclusive).
    #[serde(default)]
    pub to: Option<DateTime<Utc>>,
    /// Only this tenant (required unless you are a platform admin).
    #[serde(default)]
    pub tenant: Option<tessera_core::checked::TenantSlug>,
    /// Only this pool.
    #[serde(default)]
    pub pool: Option<tessera_core::checked::PoolName>,
    /// `tenant` (default), `cost_centre`, `pool` or `allocation`.
    #[serde(default)]
    pub group_by: Option<UsageGrouping>,
}

/// A usage report.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UsageReport {
    /// Period start.
    pub from: DateTime<Utc>,
    /// Period end.
    pub to: DateTime<Utc>,
    /// How the rows add up.
    pub group_by: UsageGrouping,
    /// The rows, by month then group.
    pub rows: Vec<UsageRow>,
    /// Totals per currency (`None`: use in pools without a price).
    pub totals: Vec<UsageTotal>,
    /// Allocated and used GPU-hours per pool over time (for the chart).
    #[serde(default)]
    pub timeline: Vec<UsagePoint>,
    /// The timeline's step: a day for periods up to 92 days, else a month.
    #[serde(default)]
    pub timeline_step: TimelineStep,
    /// Slices released in the period for being idle, and the GPU-hours
    /// their leases still had (what idle reclaim gave back).
    #[serde(default)]
    pub reclaimed: ReclaimSummary,
}

/// What idle reclaim gave back in a period.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReclaimSummary {
    /// Slices reclaimed.
    pub slices: u32,
    /// GPU-hours their leases still had when reclaimed.
    pub gpu_hours: f64,
}

/// The step of a usage timeline.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimelineStep {
    /// Calendar days (UTC).
    #[default]
    Day,
    /// Calendar months.
    Month,
}

/// One pool's GPU-hours in one step of the timeline (steps without use
/// are left out).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UsagePoint {
    /// Start of the step (UTC).
    pub start: DateTime<Utc>,
    /// Pool.
    pub pool: String,
    /// Allocated GPU-hours.
    pub gpu_hours: f64,
    /// Used GPU-hours (`None`: no telemetry covered it).
    pub used_gpu_hours: Option<f64>,
}

/// One month of one group.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UsageRow {
    /// The calendar month (its first moment, UTC).
    pub month: DateTime<Utc>,
    /// Tenant slug (by tenant or slice).
    pub tenant: Option<String>,
    /// Tenant name.
    pub tenant_name: Option<String>,
    /// Cost centre (by tenant, cost centre or slice).
    pub cost_centre: Option<String>,
    /// Pool (by tenant, pool or slice).
    pub pool: Option<String>,
    /// Allocation id (by slice).
    pub allocation: Option<AllocationId>,
    /// Its shape (by slice).
    pub shape: Option<String>,
    /// Allocated GPU-hours (the slice's share of a GPU × hours held).
    pub gpu_hours: f64,
    /// Allocated GPU-memory GiB-hours.
    pub gib_hours: f64,
    /// Used GPU-hours: busy time from telemetry × the slice's share
    /// (`None`: no telemetry covered it).
    pub used_gpu_hours: Option<f64>,
    /// Used / allocated over the time telemetry covered, percent.
    pub efficiency_pct: Option<f64>,
    /// Cost (decimal, in `currency`).
    pub cost: String,
    /// ISO 4217 (`None`: the pool had no price).
    pub currency: Option<String>,
}

impl UsageRow {
    /// Allocated GPU-hours that sat idle: the allocated hours times the
    /// share telemetry found unused (extrapolated to any time it did not
    /// cover); `None` without telemetry.
    pub fn idle_gpu_hours(&self) -> Option<f64> {
        self.efficiency_pct
            .map(|e| self.gpu_hours * (100.0 - e.clamp(0.0, 100.0)) / 100.0)
    }
}

#[cfg(test)]
mod idle_tests {
    use super::*;

    #[test]
    fn idle_hours_are_the_unused_share_of_the_allocated_ones() {
        let row = |efficiency_pct: Option<f64>| UsageRow {
            month: DateTime::<Utc>::UNIX_EPOCH,
            tenant: None,
            tenant_name: None,
            cost_centre: None,
            pool: None,
            allocation: None,
            shape: None,
            gpu_hours: 8.0,
            gib_hours: 0.0,
            used_gpu_hours: efficiency_pct.map(|e| 8.0 * e / 100.0),
            efficiency_pct,
            cost: "0".into(),
            currency: None,
        };
        assert_eq!(row(Some(25.0)).idle_gpu_hours(), Some(6.0));
        assert_eq!(row(Some(100.0)).idle_gpu_hours(), Some(0.0));
        assert_eq!(row(None).idle_gpu_hours(), None);
    }
}

/// A total in one currency.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UsageTotal {
    /// ISO 4217 (`None`: unpriced use).
    pub currency: Option<String>,
    /// Allocated GPU-hours.
    pub gpu_hours: f64,
    /// Allocated GiB-hours.
    pub gib_hours: f64,
    /// Used GPU-hours (`None`: no telemetry).
    pub used_gpu_hours: Option<f64>,
    /// Used / allocated over the time telemetry covered, percent.
    pub efficiency_pct: Option<f64>,
    /// Cost.
    pub cost: String,
}

/// A pool's price from a moment on.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriceView {
    /// Pool.
    pub pool: String,
    /// ISO 4217.
    pub currency: String,
    /// Per GPU-hour (decimal).
    pub gpu_hour: String,
    /// Per GiB-hour of GPU memory (decimal).
    pub gib_hour: String,
    /// In force from.
    pub effective_from: DateTime<Utc>,
    /// Who pays for the pool's overhead from then on.
    pub recovery: tessera_core::ledger::recovery::RecoveryPolicy,
    /// Who set it.
    pub created_by: String,
}

/// A new price (`POST /api/v1/prices`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewPrice {
    /// Pool.
    pub pool: tessera_core::checked::PoolName,
    /// ISO 4217 (`EUR`).
    pub currency: String,
    /// Per GPU-hour (decimal, up to 6 places).
    pub gpu_hour: String,
    /// Per GiB-hour (decimal; default 0).
    #[serde(default)]
    pub gib_hour: String,
    /// From when (now or later; default now): past periods keep their price.
    #[serde(default)]
    pub effective_from: Option<DateTime<Utc>>,
    /// Who pays for the pool's overhead (default: the pool's policy until
    /// now, else `showback`).
    #[serde(default)]
    pub recovery: Option<tessera_core::ledger::recovery::RecoveryPolicy>,
}
