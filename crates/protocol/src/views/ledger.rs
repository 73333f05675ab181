//! The fleet ledger: every GPU-hour of the period, billed to a tenant or
//! shown as unallocated, stranded, draining, maintenance, unhealthy or
//! silent ([`tessera_core::ledger`]).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// How long each step of the ledger is.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LedgerStep {
    /// Hours (periods of up to 7 days).
    Hour,
    /// Days (the default up to 92 days).
    #[default]
    Day,
    /// Calendar months.
    Month,
}

/// What each ledger row is for.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LedgerGrouping {
    /// The whole fleet.
    #[default]
    Fleet,
    /// Per pool (`(no pool)` for GPUs no pool selects).
    Pool,
    /// Per GPU model.
    Model,
    /// Per host.
    Host,
}

impl LedgerGrouping {
    /// All, for forms.
    pub const ALL: [Self; 4] = [Self::Fleet, Self::Pool, Self::Model, Self::Host];

    /// The name in queries.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fleet => "fleet",
            Self::Pool => "pool",
            Self::Model => "model",
            Self::Host => "host",
        }
    }

    /// Parses a query value.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|g| g.as_str() == s)
    }
}

/// `GET /api/v1/ledger`: the period is `month` (`2026-11`), or `from`/`to`
/// (RFC 3339), or else the current month.
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerQuery {
    /// A calendar month, `YYYY-MM` (UTC).
    #[serde(default)]
    pub month: Option<String>,
    /// Start (inclusive).
    #[serde(default)]
    pub from: Option<DateTime<Utc>>,
    /// End (exclusive).
    #[serde(default)]
    pub to: Option<DateTime<Utc>>,
    /// `hour` (up to 7 days), `day` (default up to 92 days) or `month`.
    #[serde(default)]
    pub step: Option<LedgerStep>,
    /// `fleet` (default), `pool`, `model` or `host`.
    #[serde(default)]
    pub group_by: Option<LedgerGrouping>,
}

/// One tenant's GPU-hours in a ledger row.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LedgerTenant {
    /// Slug.
    pub tenant: String,
    /// Display name.
    pub name: String,
    /// GPU-hours its slices held (by their share of each GPU).
    pub gpu_hours: f64,
}

/// GPU-hours by bucket; `physical` is their sum.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LedgerBuckets {
    /// Held by tenants, largest first.
    pub tenants: Vec<LedgerTenant>,
    /// All tenants together.
    pub allocated: f64,
    /// Free and schedulable, and some shape the pool offers fits.
    pub unallocated: f64,
    /// Free and schedulable, but too fragmented for any shape the pool offers.
    pub stranded: f64,
    /// Free while cordoned or draining.
    pub draining: f64,
    /// Free while in maintenance.
    pub maintenance: f64,
    /// Free while unhealthy.
    pub unhealthy: f64,
    /// Free while the host was silent.
    pub silent: f64,
    /// Every bucket: the GPUs' recorded hours.
    pub physical: f64,
}

/// One step of one group.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LedgerRow {
    /// Step start.
    pub start: DateTime<Utc>,
    /// The pool, model or host (`fleet` for the whole fleet).
    pub group: String,
    /// Its GPU-hours.
    pub buckets: LedgerBuckets,
}

/// The fleet ledger of a period.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LedgerReport {
    /// Period start.
    pub from: DateTime<Utc>,
    /// Period end (the ledger stops at now).
    pub to: DateTime<Utc>,
    /// Step of the rows.
    pub step: LedgerStep,
    /// What each row is for.
    pub group_by: LedgerGrouping,
    /// Rows in step, then group order.
    pub rows: Vec<LedgerRow>,
    /// Each step, every group together (`group`: `fleet`).
    pub steps: Vec<LedgerRow>,
    /// Each group over the whole period (`start`: the period's).
    pub groups: Vec<LedgerRow>,
    /// The whole period.
    pub totals: LedgerBuckets,
    /// GPUs with history in the period.
    pub gpus: u32,
    /// The buckets add up exactly (in integer GPU-part-milliseconds) to
    /// the GPUs' recorded time.
    pub balanced: bool,
    /// Slice time on GPUs before their history began (not in the buckets).
    pub unrecorded_gpu_hours: f64,
    /// Slice time beyond one GPU (records overlapping; not in the buckets).
    pub overbooked_gpu_hours: f64,
    /// The period priced, per currency, split by each pool's recovery
    /// policy in force at each moment.
    pub charges: Vec<LedgerCharges>,
    /// GPU-hours in pools without a price (not in `charges`).
    pub unpriced_gpu_hours: f64,
    /// Of the tenants' hours, those their slices held but telemetry found
    /// unused (time without telemetry counts as idle).
    pub idle_gpu_hours: f64,
}

/// What one tenant is billed in a period (decimal amounts).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerCharge {
    /// Slug.
    pub tenant: String,
    /// Display name.
    pub name: String,
    /// Its cost centre.
    pub cost_centre: Option<String>,
    /// For what its slices held (used-based pools: what they used).
    pub direct: String,
    /// Its share of the pools' overhead.
    pub overhead: String,
    /// Direct plus overhead.
    pub total: String,
}

/// One pool's recovery policy from a moment on, as the period used it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolRecovery {
    /// Pool.
    pub pool: String,
    /// In force from (the period's start when it began earlier).
    pub from: DateTime<Utc>,
    /// The policy.
    pub policy: tessera_core::ledger::recovery::RecoveryPolicy,
    /// The GPU-hour price (decimal).
    pub gpu_hour: String,
}

/// The period's cost in one currency, split.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerCharges {
    /// ISO 4217.
    pub currency: String,
    /// Every GPU-hour of the priced pools × its GPU-hour price.
    pub cost: String,
    /// Per tenant, largest first.
    pub tenants: Vec<LedgerCharge>,
    /// What no tenant pays (showback and used-based pools' free hours).
    pub platform: String,
    /// The policies and prices the period used.
    pub pools: Vec<PoolRecovery>,
    /// Tenants plus platform equal the cost, to the micro-unit.
    pub balanced: bool,
}
