//! MIG geometry: validating a layout of GPU instances against a model's
//! placement rules, finding free starts, enumerating maximal layouts.
//!
//! The rules are those the driver enforces when `nvidia-smi mig -cgi` creates a
//! GPU instance: the profile must exist on the model, the start must be one of
//! the profile's placements (`-lgipp`), instances may not share a memory slice,
//! a profile has at most `max_count` instances, only one `+me` instance can own
//! the media extensions, and the compute slices are finite.

mod enumerate;
mod layout;
mod map;

pub use enumerate::{maximal_layouts, maximal_layouts_with, profile_multisets, ProfileMultiset};
pub use layout::{free_starts, smallest_covering_profile, validate, LayoutError, MigPlacement};
pub(crate) use layout::{profile_of, spec_of};
pub use map::{mig_map, MapInstance, MigMap, ProfileStarts};

#[cfg(test)]
mod tests;
