//! Enumeration of maximal MIG layouts (the partitionings NVIDIA draws in the
//! guide's "valid combinations" figures).

use std::collections::{BTreeMap, BTreeSet};

use crate::catalogue::{GpuModel, MigProfile};

use super::layout::{validate, MigPlacement};

/// A layout's profiles with their counts, e.g. `{"1g.5gb": 3, "4g.20gb": 1}`.
pub type ProfileMultiset = BTreeMap<String, u8>;

/// Every maximal layout of `model` built from its profiles without media
/// extensions: valid layouts to which no such profile can be added. Each layout
/// is sorted by start; the list is in lexicographic order of starts. Empty for
/// models without MIG.
///
/// `+me` profiles are left out because they share the geometry of their plain
/// twin (`1g.5gb+me` sits exactly where `1g.5gb` can), so including them only
/// duplicates layouts; use [`maximal_layouts_with`] to include them.
pub fn maximal_layouts(model: &GpuModel) -> Vec<Vec<MigPlacement>> {
    maximal_layouts_with(model, |p| !p.media_extensions)
}

/// Like [`maximal_layouts`], restricted to the profiles `include` accepts
/// (maximality is judged against those profiles only).
pub fn maximal_layouts_with(
    model: &GpuModel,
    include: impl Fn(&MigProfile) -> bool,
) -> Vec<Vec<MigPlacement>> {
    let Some(spec) = model.mig else {
        return Vec::new();
    };
    let profiles: Vec<&'static MigProfile> = spec.profiles.iter().filter(|p| include(p)).collect();
    let mut out = Vec::new();
    let mut current = Vec::new();
    search(
        model,
        &profiles,
        spec.memory_slices,
        0,
        &mut current,
        &mut out,
    );
    out
}

/// Depth-first search: at memory slice `slice`, either start an instance there
/// or leave the slice empty; canonical (ascending) order avoids duplicates.
fn search(
    model: &GpuModel,
    profiles: &[&'static MigProfile],
    slices: u8,
    slice: u8,
    current: &mut Vec<MigPlacement>,
    out: &mut Vec<Vec<MigPlacement>>,
) {
    if slice >= slices {
        if !current.is_empty() && is_maximal(model, profiles, current) {
            out.push(current.clone());
        }
        return;
    }
    for profile in profiles {
        if !profile.placements.contains(&slice) {
            continue;
        }
        current.push(MigPlacement::new(profile.name, slice));
        if validate(model, current).is_ok() {
            search(
                model,
                profiles,
                slices,
                slice.saturating_add(profile.memory_slices),
                current,
                out,
            );
        }
        current.pop();
    }
    search(model, profiles, slices, slice + 1, current, out);
}

fn is_maximal(model: &GpuModel, profiles: &[&'static MigProfile], layout: &[MigPlacement]) -> bool {
    let mut candidate = layout.to_vec();
    for profile in profiles {
        for &start in profile.placements {
            candidate.push(MigPlacement::new(profile.name, start));
            let fits = validate(model, &candidate).is_ok();
            candidate.pop();
            if fits {
                return false;
            }
        }
    }
    true
}

/// The distinct profile multisets of `layouts` (what mig-parted's
/// `mig-devices:` maps express), sorted.
pub fn profile_multisets(layouts: &[Vec<MigPlacement>]) -> Vec<ProfileMultiset> {
    let set: BTreeSet<ProfileMultiset> = layouts
        .iter()
        .map(|layout| {
            let mut counts = ProfileMultiset::new();
            for placement in layout {
                let entry = counts.entry(placement.profile.clone()).or_insert(0);
                *entry = entry.saturating_add(1);
            }
            counts
        })
        .collect();
    set.into_iter().collect()
}
