//! The fleet's insights for platform admins: a utilisation heat map, each
//! pool's allocation against its capacity with the trend and the day it
//! would fill, and the queue (waits, queued and refused requests) per day.

use crate::query::{FleetFilter, HostFilter};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tessera_core::checked::Hostname;

/// Days of history the insights may cover.
pub const INSIGHT_DAYS: [u32; 3] = [7, 30, 90];

/// `GET /api/v1/fleet/insights`: how many days back (7, 30 or 90; default
/// 30), and which hosts the heat map shows (the fleet listing's filters,
/// 50 hosts a page).
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InsightsQuery {
    /// Days of history, today included.
    #[serde(default)]
    pub days: Option<u32>,
    /// Heat map: part of the host name (case-insensitive).
    #[serde(default)]
    pub q: Option<String>,
    /// Heat map: hosts with a GPU in this pool.
    #[serde(default)]
    pub pool: Option<String>,
    /// Heat map: online, offline or attention.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(inline))]
    pub status: Option<HostFilter>,
    /// Heat map: page, from 1 (hosts by name, 50 a page).
    #[serde(default)]
    pub page: Option<u32>,
}

impl InsightsQuery {
    /// Which hosts the heat map shows.
    pub fn heat(&self) -> FleetFilter {
        FleetFilter {
            q: self.q.clone(),
            pool: self.pool.clone(),
            status: self.status,
            page: self.page,
        }
    }
}

/// The fleet's insights over the last `days` days.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetInsights {
    /// Start of the first day covered (UTC midnight).
    pub from: DateTime<Utc>,
    /// When it was computed.
    pub as_of: DateTime<Utc>,
    /// Days covered (7, 30 or 90).
    pub days: u32,
    /// One page of the hosts the heat map's filters match, with their
    /// GPUs' latest utilisation.
    pub heat: Vec<HeatHost>,
    /// Hosts the heat map's filters match.
    pub heat_matching: u32,
    /// The page shown, from 1.
    pub heat_page: u32,
    /// Pages of matching hosts (at least 1).
    pub heat_pages: u32,
    /// Each pool's allocation against its capacity.
    pub pools: Vec<PoolCapacity>,
    /// The queue, day by day.
    pub queue: Vec<QueueDay>,
}

/// A host's row of the heat map.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeatHost {
    /// Host name.
    pub hostname: Hostname,
    /// Its GPUs, by index.
    pub gpus: Vec<HeatCell>,
}

/// One GPU of the heat map: its latest telemetry (within three minutes).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeatCell {
    /// Index on the host.
    pub index: i32,
    /// Catalogue model.
    pub model: String,
    /// Its pool.
    pub pool: Option<String>,
    /// Busy, percent: the GPU's utilisation, or for a MIG GPU its
    /// instances' activity weighted by their compute slices (`None`: no
    /// recent telemetry, or a MIG GPU whose driver cannot measure instances).
    pub util_pct: Option<u8>,
    /// Memory used, percent of the GPU's memory.
    pub mem_pct: Option<u8>,
    /// Tenants holding slices of it.
    pub holders: Vec<String>,
}

/// A pool's allocation against its capacity, per day.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolCapacity {
    /// Pool name.
    pub pool: String,
    /// GPUs in the pool now.
    pub capacity_gpus: u32,
    /// Per day: the GPUs allocated on average (shares of a GPU add up).
    pub days: Vec<CapacityDay>,
    /// Least-squares trend, GPUs per day (`None`: under two days of history).
    pub trend_gpus_per_day: Option<f64>,
    /// The trend's value on the first and on the last day (to draw it).
    pub trend_ends: Option<(f64, f64)>,
    /// When the trend reaches the capacity.
    pub full: FullProjection,
}

/// One day of a pool's allocation.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityDay {
    /// The day (UTC midnight).
    pub day: DateTime<Utc>,
    /// GPUs allocated on average over the day (today: so far).
    pub allocated_gpus: f64,
}

/// When a pool fills up if its trend goes on.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FullProjection {
    /// Under two days of history.
    Unknown,
    /// The trend is at or above the capacity already.
    FullNow,
    /// Flat or falling.
    Never,
    /// On this day.
    FullOn {
        /// The day (UTC midnight).
        day: DateTime<Utc>,
    },
    /// Later than a year from now.
    BeyondYear,
}

/// One day of the queue: requests for slices created that day.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QueueDay {
    /// The day (UTC midnight).
    pub day: DateTime<Utc>,
    /// Requests admitted (placed at once or queued).
    pub requests: u32,
    /// Of those, how many had to wait for capacity.
    pub queued: u32,
    /// Requests refused for want of quota (nothing was stored for them).
    pub refused: u32,
    /// Median wait of those placed, seconds (0 when placed at once).
    pub wait_p50_s: Option<f64>,
    /// 95th percentile wait of those placed, seconds.
    pub wait_p95_s: Option<f64>,
}
