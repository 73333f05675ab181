//! Typed errors of the placer. They serialise, so they can cross the wire to
//! the browser unchanged.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Why a request could not be placed.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum PlacementError {
    /// The request itself is malformed (zero GPUs, a share above one GPU, ...).
    #[error("invalid request: {reason}")]
    InvalidRequest {
        /// What to change.
        reason: String,
    },
    /// No GPU in the fleet has an allowed model, is in the requested pool and
    /// supports the requested kind of slice.
    #[error(
        "no GPU in the fleet matches the request's models ({models}), pool ({pool}) and slice kind"
    )]
    NoMatchingGpu {
        /// Allowed models, joined by `|` (`any` when unrestricted).
        models: String,
        /// Requested pool (`any` when unrestricted).
        pool: String,
    },
    /// The MIG profile is not offered by any allowed model in the fleet.
    #[error("MIG profile {profile} is not available on any allowed GPU model")]
    UnknownProfile {
        /// The profile asked for.
        profile: String,
    },
    /// No host has the requested CPU and memory free next to matching GPUs.
    #[error("no host with matching GPUs has {cpu_milli} mCPU and {memory_mib} MiB of memory free")]
    InsufficientHostResources {
        /// CPU asked for, in thousandths of a core.
        cpu_milli: u32,
        /// Host memory asked for.
        memory_mib: u64,
    },
    /// Enough GPUs exist, but not within one NVLink group on one host.
    #[error("no host has {count} free GPUs in one NVLink group")]
    NoNvlinkGroup {
        /// GPUs asked for.
        count: u32,
    },
    /// Matching GPUs exist but none has enough free capacity right now.
    #[error("no matching GPU has enough free capacity; the request can be queued")]
    InsufficientCapacity,
    /// Room exists only on GPUs that hold another tenant's slices, and the
    /// pool keeps tenants apart.
    #[error("the only room is on GPUs shared with other tenants, and this pool keeps tenants on separate GPUs; the request can be queued")]
    TenantIsolation,
}

impl PlacementError {
    /// Whether capacity that frees later can clear this error (no room now,
    /// as opposed to a request the pool can never serve as it is).
    pub fn clears_with_capacity(&self) -> bool {
        matches!(
            self,
            Self::InsufficientCapacity
                | Self::TenantIsolation
                | Self::NoNvlinkGroup { .. }
                | Self::InsufficientHostResources { .. }
        )
    }

    /// Why a request that is already queued waits, for its owner (the
    /// [`Display`](std::fmt::Display) text is written for a request being made).
    pub fn waiting_reason(&self) -> String {
        match self {
            Self::InsufficientCapacity => {
                "no GPU in the pool has room for it right now".to_string()
            }
            Self::TenantIsolation => "the only room is on GPUs that hold other tenants' slices, and this pool keeps tenants on separate GPUs".to_string(),
            Self::NoNvlinkGroup { count } => {
                format!("no host has {count} free GPUs in one NVLink group right now")
            }
            other => other.to_string(),
        }
    }
}

/// Why a fleet snapshot could not be turned into a [`crate::placement::Fleet`].
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FleetError {
    /// Two hosts share an id.
    #[error("host {host} appears twice")]
    DuplicateHost {
        /// Host id.
        host: crate::ids::HostId,
    },
    /// Two GPUs of one host share a device index.
    #[error("host {host} has two GPUs with index {index}")]
    DuplicateGpu {
        /// Host id.
        host: crate::ids::HostId,
        /// Device index.
        index: u32,
    },
    /// A GPU's MIG layout breaks the model's rules, or the model has no MIG.
    #[error("GPU {index} on host {host} has an invalid MIG layout: {reason}")]
    InvalidMigLayout {
        /// Host id.
        host: crate::ids::HostId,
        /// Device index.
        index: u32,
        /// The MIG rule that is broken.
        reason: String,
    },
    /// A shared GPU reports more free capacity than it has.
    #[error("GPU {index} on host {host} reports impossible shared capacity: {reason}")]
    InvalidShare {
        /// Host id.
        host: crate::ids::HostId,
        /// Device index.
        index: u32,
        /// What is wrong.
        reason: String,
    },
    /// The fleet has more distinct GPU models or pools than the placer indexes.
    #[error("the fleet has more than {limit} distinct {what}")]
    TooMany {
        /// `models` or `pools`.
        what: String,
        /// The limit.
        limit: usize,
    },
    /// A MIG model whose geometry the placer cannot encode.
    #[error("MIG geometry of {model} is not supported by the placer: {reason}")]
    UnsupportedMigSpec {
        /// Model name.
        model: String,
        /// What is out of range.
        reason: String,
    },
}

/// Why a decision could not be applied to (or released from) the fleet,
/// typically because the fleet changed since the decision was made.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum ApplyError {
    /// The host is not in the fleet.
    #[error("host {host} is not in the fleet")]
    UnknownHost {
        /// Host id.
        host: crate::ids::HostId,
    },
    /// The GPU is not on that host.
    #[error("host {host} has no GPU {index}")]
    UnknownGpu {
        /// Host id.
        host: crate::ids::HostId,
        /// Device index.
        index: u32,
    },
    /// A share was released from a GPU that is allocated whole: it holds no
    /// share, and an allocated GPU must keep no free capacity.
    #[error("GPU {index} on host {host} is allocated whole; it holds no share to release")]
    HeldWhole {
        /// Host id.
        host: crate::ids::HostId,
        /// Device index.
        index: u32,
    },
    /// The resources are no longer free (or, on release, not held).
    #[error("the decision no longer fits host {host}: {reason}")]
    Conflict {
        /// Host id.
        host: crate::ids::HostId,
        /// What is in the way.
        reason: String,
    },
}
