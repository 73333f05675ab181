//! Whether a host or GPU takes new slices, as platform admins decide it:
//! cordon, drain, maintenance, back in service, decommission.
//!
//! ```text
//!            cordon                    drain (deadline)
//! available ───────▶ cordoned ◀──────────────────────▶ draining
//!     ▲  └──────────── drain ─────────────────────────────▲   │
//!     │                                                       │ (no slices left)
//!     └──── resume ──── maintenance ◀──── maintenance ────────┘
//! ```
//!
//! Anything but `available` takes no new slices. `draining` ends the slices
//! still there at its deadline (their owners are told when the drain
//! starts). `maintenance` and decommissioning need the host or GPU empty, so
//! nobody's work is cut off by a click: drain first. `resume` brings it
//! back from any mode. A host's mode applies to all its GPUs.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::names::stable_names;

/// The longest drain deadline, in minutes (a week).
pub const MAX_DRAIN_MINUTES: u32 = 7 * 24 * 60;

/// The longest reason an admin may give, in characters.
pub const MAX_REASON_CHARS: usize = 500;

stable_names! {
    /// What a platform admin decided about a host or GPU.
    pub enum OpsMode ("ops_mode") {
        /// Takes new slices.
        Available = "available",
        /// Takes no new slices; the ones there keep running.
        Cordoned = "cordoned",
        /// Takes no new slices; the ones there end at the drain deadline.
        Draining = "draining",
        /// Empty and taken out of service for work on it.
        Maintenance = "maintenance",
    }
}

impl OpsMode {
    /// Whether new slices may be placed there.
    pub fn takes_placements(self) -> bool {
        self == Self::Available
    }

    /// The mode a GPU is effectively in, given its host's: the host's
    /// decision wins unless the host is available.
    pub fn effective(host: Self, gpu: Self) -> Self {
        if host == Self::Available {
            gpu
        } else {
            host
        }
    }
}

/// What a platform admin does to a host or GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum OpsAction {
    /// No new slices.
    Cordon,
    /// No new slices, and the ones there end after `deadline_minutes`.
    Drain {
        /// Minutes the owners have before their slices end (0 to a week).
        deadline_minutes: u32,
    },
    /// Take it out of service (it must be empty).
    Maintenance,
    /// Back in service.
    Resume,
    /// Remove the host for good (it must be empty and not available);
    /// its agent's credential stops working.
    Decommission,
}

impl OpsAction {
    /// The action's name, as in the API.
    pub fn name(self) -> &'static str {
        match self {
            Self::Cordon => "cordon",
            Self::Drain { .. } => "drain",
            Self::Maintenance => "maintenance",
            Self::Resume => "resume",
            Self::Decommission => "decommission",
        }
    }
}

impl OpsAction {
    /// The action called `name` (`cordon`, `drain`, `maintenance`,
    /// `resume`, `decommission`), with the drain deadline a form gives.
    pub fn from_form(name: &str, deadline_minutes: Option<u32>) -> Result<Self, String> {
        Ok(match name {
            "cordon" => Self::Cordon,
            "drain" => Self::Drain {
                deadline_minutes: deadline_minutes
                    .ok_or("a drain needs deadline_minutes: how long owners have")?,
            },
            "maintenance" => Self::Maintenance,
            "resume" => Self::Resume,
            "decommission" => Self::Decommission,
            other => {
                return Err(format!(
                    "'{other}' is not an action: use cordon, drain, maintenance, resume or decommission"
                ))
            }
        })
    }
}

/// What an action leads to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpsOutcome {
    /// The new mode.
    Mode(OpsMode),
    /// The host is removed.
    Removed,
}

/// What it is applied to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpsTarget {
    /// A whole host.
    Host,
    /// One GPU.
    Gpu,
}

/// Why an action is refused.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum OpsError {
    /// The action would change nothing.
    #[error("it is already {0}")]
    Already(OpsMode),
    /// Slices still run there.
    #[error("{count} slice{} still run{} there: drain it first", if *count == 1 { "" } else { "s" }, if *count == 1 { "s" } else { "" })]
    NotEmpty {
        /// How many.
        count: usize,
    },
    /// Decommissioning a host that still takes slices.
    #[error("cordon or drain the host before decommissioning it")]
    StillAvailable,
    /// Nothing runs in maintenance, so there is nothing to drain.
    #[error("it is in maintenance, so nothing runs there to drain; resume it first")]
    NothingToDrain,
    /// Only hosts are decommissioned.
    #[error(
        "a single GPU cannot be decommissioned: put it in maintenance, or decommission its host"
    )]
    GpuDecommission,
    /// The deadline is too far out.
    #[error("deadline_minutes must be at most {MAX_DRAIN_MINUTES} (a week)")]
    DeadlineTooFar,
    /// The reason is missing or too long.
    #[error(
        "reason must be 1-{MAX_REASON_CHARS} characters: say why, for the owners and the audit log"
    )]
    Reason,
}

/// The outcome of `action` on a host or GPU in mode `current` with `live`
/// slices holding capacity there, or why it is refused.
pub fn apply(
    target: OpsTarget,
    current: OpsMode,
    action: OpsAction,
    live: usize,
    reason: &str,
) -> Result<OpsOutcome, OpsError> {
    use OpsMode as M;
    let reason = reason.trim();
    if reason.is_empty() || reason.chars().count() > MAX_REASON_CHARS {
        return Err(OpsError::Reason);
    }
    let mode = match action {
        OpsAction::Cordon if current == M::Cordoned => return Err(OpsError::Already(current)),
        OpsAction::Cordon => M::Cordoned,
        OpsAction::Drain { deadline_minutes } => {
            if deadline_minutes > MAX_DRAIN_MINUTES {
                return Err(OpsError::DeadlineTooFar);
            }
            if current == M::Maintenance {
                return Err(OpsError::NothingToDrain);
            }
            // Draining again sets a new deadline.
            M::Draining
        }
        OpsAction::Maintenance if current == M::Maintenance => {
            return Err(OpsError::Already(current))
        }
        OpsAction::Maintenance if live > 0 => return Err(OpsError::NotEmpty { count: live }),
        OpsAction::Maintenance => M::Maintenance,
        OpsAction::Resume if current == M::Available => return Err(OpsError::Already(current)),
        OpsAction::Resume => M::Available,
        OpsAction::Decommission => {
            if target == OpsTarget::Gpu {
                return Err(OpsError::GpuDecommission);
            }
            if current == M::Available {
                return Err(OpsError::StillAvailable);
            }
            if live > 0 {
                return Err(OpsError::NotEmpty { count: live });
            }
            return Ok(OpsOutcome::Removed);
        }
    };
    Ok(OpsOutcome::Mode(mode))
}

#[cfg(test)]
mod tests {
    use super::*;
    use OpsAction as A;
    use OpsMode as M;

    fn host(current: M, action: A, live: usize) -> Result<OpsOutcome, OpsError> {
        apply(OpsTarget::Host, current, action, live, "rack 4 power work")
    }

    #[test]
    fn only_available_takes_placements_and_the_host_wins() {
        for m in M::ALL {
            assert_eq!(m.takes_placements(), *m == M::Available);
            assert_eq!(M::effective(M::Available, *m), *m);
            assert_eq!(M::effective(*m, M::Available), *m);
        }
        assert_eq!(M::effective(M::Cordoned, M::Maintenance), M::Cordoned);
    }

    #[test]
    fn the_usual_path_cordon_drain_maintenance_resume() {
        assert_eq!(
            host(M::Available, A::Cordon, 3),
            Ok(OpsOutcome::Mode(M::Cordoned))
        );
        let drain = A::Drain {
            deadline_minutes: 30,
        };
        assert_eq!(
            host(M::Cordoned, drain, 3),
            Ok(OpsOutcome::Mode(M::Draining))
        );
        assert_eq!(
            host(M::Draining, drain, 3),
            Ok(OpsOutcome::Mode(M::Draining))
        );
        assert_eq!(
            host(M::Draining, A::Maintenance, 3),
            Err(OpsError::NotEmpty { count: 3 })
        );
        assert_eq!(
            host(M::Draining, A::Maintenance, 0),
            Ok(OpsOutcome::Mode(M::Maintenance))
        );
        assert_eq!(
            host(M::Maintenance, A::Resume, 0),
            Ok(OpsOutcome::Mode(M::Available))
        );
    }

    #[test]
    fn refusals_say_what_to_do() {
        assert_eq!(
            host(M::Cordoned, A::Cordon, 0),
            Err(OpsError::Already(M::Cordoned))
        );
        assert_eq!(
            host(M::Available, A::Resume, 0),
            Err(OpsError::Already(M::Available))
        );
        assert_eq!(
            host(
                M::Maintenance,
                A::Drain {
                    deadline_minutes: 5
                },
                0
            ),
            Err(OpsError::NothingToDrain)
        );
        assert_eq!(
            host(
                M::Available,
                A::Drain {
                    deadline_minutes: MAX_DRAIN_MINUTES + 1
                },
                0
            ),
            Err(OpsError::DeadlineTooFar)
        );
        assert_eq!(
            apply(OpsTarget::Host, M::Available, A::Cordon, 0, "  "),
            Err(OpsError::Reason)
        );
        let long = "x".repeat(MAX_REASON_CHARS + 1);
        assert_eq!(
            apply(OpsTarget::Host, M::Available, A::Cordon, 0, &long),
            Err(OpsError::Reason)
        );
        assert_eq!(
            OpsError::NotEmpty { count: 1 }.to_string(),
            "1 slice still runs there: drain it first"
        );
        assert_eq!(
            OpsError::NotEmpty { count: 2 }.to_string(),
            "2 slices still run there: drain it first"
        );
    }

    #[test]
    fn decommission_needs_an_empty_host_taken_out_of_service() {
        assert_eq!(
            host(M::Available, A::Decommission, 0),
            Err(OpsError::StillAvailable)
        );
        assert_eq!(
            host(M::Draining, A::Decommission, 1),
            Err(OpsError::NotEmpty { count: 1 })
        );
        for m in [M::Cordoned, M::Draining, M::Maintenance] {
            assert_eq!(host(m, A::Decommission, 0), Ok(OpsOutcome::Removed));
        }
        assert_eq!(
            apply(OpsTarget::Gpu, M::Maintenance, A::Decommission, 0, "dead"),
            Err(OpsError::GpuDecommission)
        );
    }

    #[test]
    fn actions_read_from_the_api_shape() {
        let a: OpsAction =
            serde_json::from_str(r#"{"action":"drain","deadline_minutes":45}"#).unwrap();
        assert_eq!(
            a,
            A::Drain {
                deadline_minutes: 45
            }
        );
        assert_eq!(a.name(), "drain");
        assert!(serde_json::from_str::<OpsAction>(r#"{"action":"reboot"}"#).is_err());
        assert_eq!(OpsAction::from_form("drain", Some(45)), Ok(a));
        assert!(OpsAction::from_form("drain", None)
            .unwrap_err()
            .contains("deadline_minutes"));
        assert_eq!(OpsAction::from_form("cordon", Some(5)), Ok(A::Cordon));
        assert!(OpsAction::from_form("reboot", None)
            .unwrap_err()
            .contains("not an action"));
    }
}
