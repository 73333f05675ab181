//! Validation of one MIG layout and the queries built on it.

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::catalogue::{GpuModel, MigProfile, MigSpec};
use crate::units::{ComputeMilli, MemMiB};

/// One GPU instance: a profile started at a memory-slice index.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MigPlacement {
    /// Profile name as in the catalogue, e.g. `"3g.40gb"`.
    pub profile: String,
    /// First memory slice (the `Start` of `nvidia-smi mig -lgi`'s `Start:Size`).
    pub start: u8,
}

impl MigPlacement {
    /// `profile` at `start`.
    pub fn new(profile: impl Into<String>, start: u8) -> Self {
        Self {
            profile: profile.into(),
            start,
        }
    }
}

impl fmt::Display for MigPlacement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.profile, self.start)
    }
}

/// Why a MIG layout cannot exist on a GPU.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LayoutError {
    /// Two instances claim the same memory slice.
    #[error(
        "{first} and {second} overlap: they share memory slices; move one of them to a free start"
    )]
    Overlap {
        /// The earlier instance in the layout.
        first: MigPlacement,
        /// The instance that collides with it.
        second: MigPlacement,
    },
    /// The profile cannot start at that memory slice.
    #[error("{profile} cannot start at memory slice {start}; allowed starts are {allowed:?}")]
    StartNotAllowed {
        /// Profile name.
        profile: String,
        /// Requested start.
        start: u8,
        /// Starts the hardware allows for the profile.
        allowed: Vec<u8>,
    },
    /// The model has no such profile.
    #[error("{model} has no MIG profile {profile}; choose one of {available:?}")]
    UnknownProfile {
        /// Requested profile.
        profile: String,
        /// Model name.
        model: String,
        /// Profiles the model offers.
        available: Vec<String>,
    },
    /// More instances of a profile than the GPU supports.
    #[error("{model} holds at most {max} instance(s) of {profile}, the layout has {count}")]
    TooMany {
        /// Profile name.
        profile: String,
        /// Model name.
        model: String,
        /// Instances in the layout.
        count: u32,
        /// The hardware limit.
        max: u8,
    },
    /// Two `+me` instances: a GPU has one set of media extensions.
    #[error("only one media-extension (+me) instance fits on a GPU; use the plain profile for the others")]
    MoreThanOneMediaExtension,
    /// The instances need more compute slices than the GPU has.
    #[error("the layout needs {used} compute slices but {model} has {available}")]
    ComputeExhausted {
        /// Model name.
        model: String,
        /// Compute slices the layout needs.
        used: u32,
        /// Compute slices on the GPU.
        available: u8,
    },
    /// The model cannot be partitioned.
    #[error("{model} does not support MIG; use MPS, time-slicing or whole GPUs on it")]
    NotMigCapable {
        /// Model name.
        model: String,
    },
}

/// The MIG spec of `model`, or [`LayoutError::NotMigCapable`].
pub(crate) fn spec_of(model: &GpuModel) -> Result<&'static MigSpec, LayoutError> {
    model.mig.ok_or_else(|| LayoutError::NotMigCapable {
        model: model.name.to_string(),
    })
}

/// The profile `name` on `model`, or [`LayoutError::UnknownProfile`].
pub(crate) fn profile_of(
    model: &GpuModel,
    spec: &'static MigSpec,
    name: &str,
) -> Result<&'static MigProfile, LayoutError> {
    spec.profile(name)
        .ok_or_else(|| LayoutError::UnknownProfile {
            profile: name.to_string(),
            model: model.name.to_string(),
            available: spec.profiles.iter().map(|p| p.name.to_string()).collect(),
        })
}

/// Checks that `layout` can exist on one GPU of `model`. An empty layout is
/// valid on a MIG-capable model. Errors name the first rule broken, in this
/// order: MIG capability, unknown profile / start not allowed (per instance),
/// too many of a profile, media extensions, overlap, compute slices.
pub fn validate(model: &GpuModel, layout: &[MigPlacement]) -> Result<(), LayoutError> {
    let spec = spec_of(model)?;
    let mut resolved: Vec<(&MigPlacement, &'static MigProfile)> = Vec::with_capacity(layout.len());
    for placement in layout {
        let profile = profile_of(model, spec, &placement.profile)?;
        if !profile.placements.contains(&placement.start) {
            return Err(LayoutError::StartNotAllowed {
                profile: profile.name.to_string(),
                start: placement.start,
                allowed: profile.placements.to_vec(),
            });
        }
        resolved.push((placement, profile));
    }

    for profile in spec.profiles {
        let count = resolved
            .iter()
            .filter(|(_, p)| std::ptr::eq(*p, profile))
            .count();
        if count > usize::from(profile.max_count) {
            return Err(LayoutError::TooMany {
                profile: profile.name.to_string(),
                model: model.name.to_string(),
                count: u32::try_from(count).unwrap_or(u32::MAX),
                max: profile.max_count,
            });
        }
    }

    if resolved.iter().filter(|(_, p)| p.media_extensions).count() > 1 {
        return Err(LayoutError::MoreThanOneMediaExtension);
    }

    for (i, (a, pa)) in resolved.iter().enumerate() {
        for (b, pb) in resolved.iter().skip(i + 1) {
            let (ra, rb) = (pa.span(a.start), pb.span(b.start));
            if ra.start < rb.end && rb.start < ra.end {
                return Err(LayoutError::Overlap {
                    first: (*a).clone(),
                    second: (*b).clone(),
                });
            }
        }
    }

    let used: u32 = resolved
        .iter()
        .map(|(_, p)| u32::from(p.compute_slices))
        .sum();
    if used > u32::from(spec.compute_slices) {
        return Err(LayoutError::ComputeExhausted {
            model: model.name.to_string(),
            used,
            available: spec.compute_slices,
        });
    }
    Ok(())
}

/// Start slices at which `profile` can be added to `layout` keeping it valid,
/// ascending. Empty when the model lacks MIG or the profile, or when `layout`
/// itself is invalid.
pub fn free_starts(model: &GpuModel, layout: &[MigPlacement], profile: &str) -> Vec<u8> {
    let Some(spec) = model.mig else {
        return Vec::new();
    };
    let Some(found) = spec.profile(profile) else {
        return Vec::new();
    };
    let mut candidate = layout.to_vec();
    candidate.push(MigPlacement::new(found.name, 0));
    let mut starts = Vec::new();
    for &start in found.placements {
        if let Some(last) = candidate.last_mut() {
            last.start = start;
        }
        if validate(model, &candidate).is_ok() {
            starts.push(start);
        }
    }
    starts
}

/// Smallest profile (fewest memory slices, then fewest compute slices, then
/// least memory; never a `+me` profile) whose compute share is at least
/// `compute` and whose memory is at least `mem`. `None` when nothing on the
/// model is big enough or the model lacks MIG.
pub fn smallest_covering_profile(
    model: &GpuModel,
    compute: ComputeMilli,
    mem: MemMiB,
) -> Option<&'static MigProfile> {
    let spec = model.mig?;
    spec.profiles
        .iter()
        .filter(|p| !p.media_extensions)
        .filter(|p| p.compute_milli(spec) >= compute && p.memory() >= mem)
        .min_by_key(|p| (p.memory_slices, p.compute_slices, p.memory_mib))
}
