//! Catalogue MIG profiles ↔ NVML profile constants.
//!
//! NVML names GPU instance profiles by a constant (`NVML_GPU_INSTANCE_PROFILE_*`,
//! the argument of `nvmlDeviceGetGpuInstanceProfileInfo`); the driver answers
//! with the profile's ID on this GPU (`nvidia-smi mig -lgip`'s `ID` column,
//! the catalogue's `smi_id`), which is what the create and list calls take.
//! The constant follows from the profile's shape: its compute slices, whether
//! it owns the media extensions (`+me`: `*_REV1`) and, for one-slice
//! profiles, whether it has one memory slice or two (`1g.10gb` on an A100
//! 40 GB, `1g.20gb` on an H100: `1_SLICE_REV2`). This is the same mapping
//! NVIDIA's mig-parted uses to name profiles.

use nvml_wrapper_sys::bindings as sys;
use tessera_core::catalogue::MigProfile;

/// The NVML GPU instance profile constant for a catalogue profile, or `None`
/// for a shape NVML has no constant for.
pub fn gi_profile_constant(profile: &MigProfile) -> Option<u32> {
    let c = match (
        profile.compute_slices,
        profile.memory_slices,
        profile.media_extensions,
    ) {
        (1, 1, true) => sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1,
        (2, _, true) => sys::NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1,
        (_, _, true) => return None,
        (1, 1, false) => sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE,
        (1, 2, false) => sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2,
        (1, _, false) => return None,
        (2, _, false) => sys::NVML_GPU_INSTANCE_PROFILE_2_SLICE,
        (3, _, false) => sys::NVML_GPU_INSTANCE_PROFILE_3_SLICE,
        (4, _, false) => sys::NVML_GPU_INSTANCE_PROFILE_4_SLICE,
        (6, _, false) => sys::NVML_GPU_INSTANCE_PROFILE_6_SLICE,
        (7, _, false) => sys::NVML_GPU_INSTANCE_PROFILE_7_SLICE,
        (8, _, false) => sys::NVML_GPU_INSTANCE_PROFILE_8_SLICE,
        _ => return None,
    };
    Some(c)
}

/// The NVML compute instance profile constant for a compute instance of
/// `size` compute slices.
pub fn ci_profile_constant(size: u8) -> Option<u32> {
    Some(match size {
        1 => sys::NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
        2 => sys::NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
        3 => sys::NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE,
        4 => sys::NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE,
        6 => sys::NVML_COMPUTE_INSTANCE_PROFILE_6_SLICE,
        7 => sys::NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE,
        8 => sys::NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE,
        _ => return None,
    })
}

/// Every GPU instance profile constant this build knows (to enumerate the
/// instances of a GPU: the driver lists them per profile).
pub fn all_gi_profile_constants() -> std::ops::Range<u32> {
    0..sys::NVML_GPU_INSTANCE_PROFILE_COUNT
}

/// Every compute instance profile constant this build knows.
pub fn all_ci_profile_constants() -> std::ops::Range<u32> {
    0..sys::NVML_COMPUTE_INSTANCE_PROFILE_COUNT
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tessera_core::catalogue::{self, all_models, MigSpec};

    /// The catalogue profile of `spec` that NVML calls `constant`.
    fn profile_for_constant(spec: &MigSpec, constant: u32) -> Option<&'static MigProfile> {
        spec.profiles
            .iter()
            .find(|p| gi_profile_constant(p) == Some(constant))
    }

    fn spec(model: &str) -> &'static MigSpec {
        catalogue::lookup(model, 0).mig.unwrap()
    }

    fn mapped(model: &str) -> Vec<(&'static str, u32)> {
        spec(model)
            .profiles
            .iter()
            .map(|p| (p.name, gi_profile_constant(p).unwrap()))
            .collect()
    }

    #[test]
    fn every_h100_profile_maps_to_its_nvml_constant() {
        assert_eq!(
            mapped("H100-80GB"),
            vec![
                ("1g.10gb", sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE),
                ("1g.10gb+me", sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1),
                ("1g.20gb", sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2),
                ("2g.20gb", sys::NVML_GPU_INSTANCE_PROFILE_2_SLICE),
                ("3g.40gb", sys::NVML_GPU_INSTANCE_PROFILE_3_SLICE),
                ("4g.40gb", sys::NVML_GPU_INSTANCE_PROFILE_4_SLICE),
                ("7g.80gb", sys::NVML_GPU_INSTANCE_PROFILE_7_SLICE),
            ]
        );
    }

    #[test]
    fn every_a100_40gb_profile_maps_to_its_nvml_constant() {
        assert_eq!(
            mapped("A100-SXM4-40GB"),
            vec![
                ("1g.5gb", sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE),
                ("1g.5gb+me", sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1),
                ("1g.10gb", sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2),
                ("2g.10gb", sys::NVML_GPU_INSTANCE_PROFILE_2_SLICE),
                ("3g.20gb", sys::NVML_GPU_INSTANCE_PROFILE_3_SLICE),
                ("4g.20gb", sys::NVML_GPU_INSTANCE_PROFILE_4_SLICE),
                ("7g.40gb", sys::NVML_GPU_INSTANCE_PROFILE_7_SLICE),
            ]
        );
    }

    #[test]
    fn a30_media_extension_profiles_map_to_rev1() {
        assert_eq!(
            mapped("A30-24GB"),
            vec![
                ("1g.6gb", sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE),
                ("1g.6gb+me", sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1),
                ("2g.12gb", sys::NVML_GPU_INSTANCE_PROFILE_2_SLICE),
                ("2g.12gb+me", sys::NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1),
                ("4g.24gb", sys::NVML_GPU_INSTANCE_PROFILE_4_SLICE),
            ]
        );
    }

    #[test]
    fn every_catalogue_profile_has_one_constant_and_back() {
        for model in all_models() {
            let Some(spec) = model.mig else { continue };
            let mut seen = Vec::new();
            for p in spec.profiles {
                let c = gi_profile_constant(p)
                    .unwrap_or_else(|| unreachable!("{} {} has no constant", model.name, p.name));
                assert!(
                    all_gi_profile_constants().contains(&c),
                    "{} {}",
                    model.name,
                    p.name
                );
                assert!(
                    !seen.contains(&c),
                    "{}: two profiles map to {c}",
                    model.name
                );
                seen.push(c);
                assert_eq!(profile_for_constant(spec, c).unwrap().name, p.name);
                // Its whole-instance compute instance has a constant too.
                assert!(ci_profile_constant(p.compute_slices).is_some());
            }
        }
    }

    #[test]
    fn compute_instance_sizes_map_to_constants() {
        assert_eq!(
            ci_profile_constant(1),
            Some(sys::NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE)
        );
        assert_eq!(
            ci_profile_constant(3),
            Some(sys::NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE)
        );
        assert_eq!(
            ci_profile_constant(7),
            Some(sys::NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE)
        );
        assert_eq!(ci_profile_constant(5), None);
        assert_eq!(ci_profile_constant(0), None);
    }
}
