//! Hosts and GPUs: join tokens, enrolment, reports, the fleet view and the
//! fleet's counts for metrics, one module each.

mod enrol;
mod join_tokens;
mod metrics;
mod report;
mod view;

pub use enrol::{validate_hostname, AuthenticatedHost};
pub use join_tokens::{NewJoinToken, MAX_JOIN_TOKEN_TTL};
pub use metrics::FleetCounts;
pub use report::validate_report;
