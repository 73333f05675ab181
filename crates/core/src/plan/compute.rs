//! Compute instances inside a GPU instance (`nvidia-smi mig -cci`): which
//! sizes and starts the driver offers (`nvidia-smi mig -lcip` / `-lcipp`).

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::state::ComputeInstance;

/// Compute-instance sizes a GPU instance with `gi_compute` slices offers:
/// 1g → 1; 2g → 1, 2; 3g → 1, 2, 3; 4g → 1, 2, 4; 7g → 1, 2, 3, 4, 7
/// (`nvidia-smi mig -lcip` on A100 / H100, NVIDIA go-nvml's DGX A100 mock,
/// mig-parted's `4c.7g.40gb`; A30's 1g, 2g and 4g match).
pub fn compute_instance_sizes(gi_compute: u8) -> &'static [u8] {
    match gi_compute {
        1 => &[1],
        2 => &[1, 2],
        3 => &[1, 2, 3],
        4 => &[1, 2, 4],
        7 => &[1, 2, 3, 4, 7],
        _ => &[],
    }
}

/// Starts (compute-slice index inside the GPU instance) for a compute
/// instance of `size` in a GPU instance of `gi_compute` slices: the whole
/// instance starts at 0, single slices anywhere, pairs on even slices, triples
/// at 0 or 4, a 4-slice instance at 0 (`-lcipp`).
pub fn compute_instance_starts(gi_compute: u8, size: u8) -> Vec<u8> {
    if !compute_instance_sizes(gi_compute).contains(&size) {
        return Vec::new();
    }
    if size == gi_compute {
        return vec![0];
    }
    let candidates: Vec<u8> = match size {
        1 => (0..gi_compute).collect(),
        2 => (0..gi_compute).step_by(2).collect(),
        3 => vec![0, 4],
        _ => vec![0],
    };
    candidates
        .into_iter()
        .filter(|s| s + size <= gi_compute)
        .collect()
}

/// Why a set of compute instances cannot exist in a GPU instance.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ComputeInstanceError {
    /// The size or start is not offered.
    #[error("a {size}-slice compute instance cannot start at slice {start} of a {gi_compute}-slice GPU instance")]
    NotAllowed {
        /// Compute slices of the GPU instance.
        gi_compute: u8,
        /// Compute-instance size.
        size: u8,
        /// Requested start.
        start: u8,
    },
    /// Two compute instances share a compute slice.
    #[error("compute instances {first:?} and {second:?} overlap")]
    Overlap {
        /// One instance.
        first: ComputeInstance,
        /// The other.
        second: ComputeInstance,
    },
}

/// Checks a GPU instance's compute instances.
pub fn validate_compute_instances(
    gi_compute: u8,
    cis: &[ComputeInstance],
) -> Result<(), ComputeInstanceError> {
    for ci in cis {
        if !compute_instance_starts(gi_compute, ci.size).contains(&ci.start) {
            return Err(ComputeInstanceError::NotAllowed {
                gi_compute,
                size: ci.size,
                start: ci.start,
            });
        }
    }
    for (i, a) in cis.iter().enumerate() {
        for b in cis.iter().skip(i + 1) {
            if a.start < b.start + b.size && b.start < a.start + a.size {
                return Err(ComputeInstanceError::Overlap {
                    first: *a,
                    second: *b,
                });
            }
        }
    }
    Ok(())
}
