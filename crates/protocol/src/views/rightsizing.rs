//! Right-sizing advice per slice ([`tessera_core::rightsize`]).

use serde::{Deserialize, Serialize};
use tessera_core::ids::AllocationId;
use tessera_core::rightsize::{Advice, MeasuredUse};

/// The advice for one running slice, with what it is based on.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SliceAdvice {
    /// Allocation id.
    pub allocation: AllocationId,
    /// Tenant slug.
    pub tenant: String,
    /// Its pool.
    pub pool: String,
    /// Its shape in words.
    pub shape: String,
    /// What it used.
    pub used: MeasuredUse,
    /// The advice.
    pub advice: Advice,
    /// The advice in one sentence.
    pub sentence: String,
}

/// Advice for a tenant's running slices or the fleet's, biggest savings
/// first, with the totals.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recommendations {
    /// Per slice.
    pub slices: Vec<SliceAdvice>,
    /// GPU-hours a month the smaller shapes would save.
    pub saves_gpu_hours_month: f64,
    /// Money a month they would save, millionths (slices in priced pools).
    pub saves_micros_month: i64,
    /// Slices that could be smaller.
    pub smaller: u32,
}
