//! A GPU's MIG layout as a map of its memory slices, for people: which
//! instance sits where and how wide it is, which slices are free, and where
//! each profile could still start (the same rules as placement).

use serde::{Deserialize, Serialize};

use super::layout::{free_starts, MigPlacement};
use crate::catalogue::GpuModel;

/// One GPU instance on the map.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MapInstance {
    /// Profile, e.g. `3g.40gb`.
    pub profile: String,
    /// First memory slice.
    pub start: u8,
    /// Memory slices it owns.
    pub size: u8,
}

/// Where a profile could still start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProfileStarts {
    /// Profile.
    pub profile: String,
    /// Start slices where adding it keeps the layout valid (empty: nowhere).
    pub starts: Vec<u8>,
}

/// The map of one MIG GPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MigMap {
    /// Memory slices of the GPU (8 on A100/H100, 4 on A30).
    pub memory_slices: u8,
    /// Instances, by start.
    pub instances: Vec<MapInstance>,
    /// Memory slices no instance owns.
    pub free: Vec<u8>,
    /// Each profile (without `+me` variants), smallest first, and where it could start.
    pub can_start: Vec<ProfileStarts>,
}

/// The map of `layout` on `model`; `None` when the model has no MIG.
/// Instances whose profile the model lacks are left out (the layout came
/// from a driver the catalogue does not know).
pub fn mig_map(model: &GpuModel, layout: &[MigPlacement]) -> Option<MigMap> {
    let spec = model.mig?;
    let mut instances: Vec<MapInstance> = layout
        .iter()
        .filter_map(|p| {
            spec.profile(&p.profile).map(|found| MapInstance {
                profile: found.name.to_owned(),
                start: p.start,
                size: found.memory_slices,
            })
        })
        .collect();
    instances.sort_by_key(|i| i.start);
    let free = (0..spec.memory_slices)
        .filter(|s| {
            !instances
                .iter()
                .any(|i| (i.start..i.start.saturating_add(i.size)).contains(s))
        })
        .collect();
    let can_start = spec
        .profiles
        .iter()
        .filter(|p| !p.media_extensions)
        .map(|p| ProfileStarts {
            profile: p.name.to_owned(),
            starts: free_starts(model, layout, p.name),
        })
        .collect();
    Some(MigMap {
        memory_slices: spec.memory_slices,
        instances,
        free,
        can_start,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue;

    #[test]
    fn an_h100_with_a_3g_and_a_1g_shows_what_is_left_and_where_it_fits() {
        let h100 = catalogue::lookup("H100-80GB", 0);
        let layout = [
            MigPlacement::new("3g.40gb", 4),
            MigPlacement::new("1g.10gb", 0),
        ];
        let map = mig_map(&h100, &layout).unwrap();
        assert_eq!(map.memory_slices, 8);
        assert_eq!(
            map.instances,
            vec![
                MapInstance {
                    profile: "1g.10gb".into(),
                    start: 0,
                    size: 1
                },
                MapInstance {
                    profile: "3g.40gb".into(),
                    start: 4,
                    size: 4
                },
            ]
        );
        assert_eq!(map.free, vec![1, 2, 3]);
        let starts = |p: &str| {
            map.can_start
                .iter()
                .find(|s| s.profile == p)
                .map(|s| s.starts.clone())
                .unwrap()
        };
        assert_eq!(starts("1g.10gb"), vec![1, 2, 3]);
        assert_eq!(starts("2g.20gb"), vec![2]);
        assert!(starts("7g.80gb").is_empty());
        assert!(map.can_start.iter().all(|s| !s.profile.contains("+me")));
    }

    #[test]
    fn an_empty_gpu_is_all_free_and_a_gpu_without_mig_has_no_map() {
        let a100 = catalogue::lookup("A100-SXM4-40GB", 0);
        let map = mig_map(&a100, &[]).unwrap();
        assert_eq!(map.free, (0..8).collect::<Vec<u8>>());
        assert!(map.instances.is_empty());
        assert_eq!(
            map.can_start
                .iter()
                .find(|s| s.profile == "7g.40gb")
                .map(|s| s.starts.clone()),
            Some(vec![0])
        );
        assert_eq!(mig_map(&catalogue::lookup("L4", 0), &[]), None);
    }
}
