//! GPU telemetry: agents' sample batches stored idempotently and attributed
//! to the slices holding each device ([`ingest`]), rolled up per minute and
//! per hour and expired by a retention policy ([`rollup`]). Metering reads
//! the rollups for used GPU-hours ([`crate::usage`]).

mod activity;
mod gauges;
mod ingest;
mod pairs;
mod rollup;

pub use gauges::DeviceGauges;
pub use ingest::validate_batch;
pub use rollup::RollupReport;
pub(crate) use rollup::{rollup_of, sample_of};

/// How long telemetry is kept (the server's `[telemetry]` section).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelemetryPolicy {
    /// Raw samples, hours (default 48).
    pub raw_hours: u32,
    /// Per-minute rollups, days (default 35: a month and its close).
    pub minute_days: u32,
    /// Per-hour rollups, days (default 400: 13 months).
    pub hour_days: u32,
}

impl Default for TelemetryPolicy {
    fn default() -> Self {
        Self {
            raw_hours: 48,
            minute_days: 35,
            hour_days: 400,
        }
    }
}

impl TelemetryPolicy {
    /// Checks the policy: every window at least one unit, the rollups kept
    /// at least as long as what they are made from.
    pub fn validate(&self) -> Result<(), crate::ServiceError> {
        use crate::ServiceError;
        if self.raw_hours == 0 || self.raw_hours > 24 * 31 {
            return Err(ServiceError::invalid(
                "telemetry.raw_hours",
                "must be between 1 and 744 hours",
            ));
        }
        if self.minute_days == 0 || u64::from(self.minute_days) * 24 < u64::from(self.raw_hours) {
            return Err(ServiceError::invalid(
                "telemetry.minute_days",
                "must be at least 1 day and cover raw_hours",
            ));
        }
        if self.hour_days < self.minute_days || self.hour_days > 3660 {
            return Err(ServiceError::invalid(
                "telemetry.hour_days",
                "must be at least minute_days and at most 3660",
            ));
        }
        Ok(())
    }
}
