//! Hosts and GPUs: join tokens, enrolment, reports, admins' decisions
//! (cordon, drain, maintenance), the fleet view and the fleet's counts for
//! metrics, one module each.

mod enrol;
mod heartbeat;
mod join_tokens;
mod metrics;
mod ops;
mod report;
mod view;

pub use enrol::AuthenticatedHost;
pub use heartbeat::REPORT_FULL_EVERY;
pub(crate) use heartbeat::{beat_hold, HostChecks};
pub use join_tokens::{NewJoinToken, MAX_JOIN_TOKEN_TTL};
pub use metrics::FleetCounts;
pub(crate) use ops::{gpu_ops, gpu_takes_placements, host_ops, takes_placements};
pub use report::validate_report;
