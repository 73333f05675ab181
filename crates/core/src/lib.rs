//! Tessera's pure domain: no I/O, no clock, no async. Builds for wasm32 so the
//! browser validates with the same rules as the server.

pub mod audit;
pub mod availability;
pub mod budget;
pub mod capacity;
pub mod catalogue;
pub mod chart;
pub mod checked;
pub mod error_code;
pub mod guide;
pub mod health;
pub mod idle;
pub mod ids;
pub mod k8s;
pub mod ledger;
pub mod lifecycle;
pub mod metering;
pub mod mig;
mod names;
pub mod notify;
pub mod placement;
pub mod plan;
pub mod pool;
pub mod quota;
pub mod rightsize;
pub mod role;
pub mod schedule;
pub mod sharing;
pub mod slice;
pub mod telemetry;
pub mod units;
