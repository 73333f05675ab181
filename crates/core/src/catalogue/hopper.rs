//! Hopper MIG models: H100 80 GB (SXM5 and PCIe), H100 NVL 94 GB, H200 141 GB.
//!
//! Profiles, counts and fractions: MIG User Guide, "H100 MIG Profiles" (80 GB
//! and 94 GB tables) and "H200 MIG Profiles". Placements: `nvidia-smi mig
//! -lgipp` on H100 80 GB and H100 NVL, identical to A100 (`{0..6}:1`,
//! `{0,2,4,6}:2`, `{0,2,4}:2`, `{0,4}:4`, `{0}:4`, `{0}:8`); H200 uses the same
//! 7 × 8 geometry and the guide's identical placement diagram.
//! Memory (`-lgip` GiB × 1024): H100 80 GB 9.75 / 19.62 / 39.50 / 79.25 GiB;
//! H100 NVL 10.75 / 21.62 / 46.38 / 93.12 GiB. H200: only the 1g.18gb value
//! (16.00 GiB) was found in a public `-lgip` transcript; the other H200 values
//! are scaled from the H100 NVL ratios and rounded to 1/8 GiB (not verified
//! against hardware).

use super::ampere::profile;
use super::{Architecture, GpuModel, MigProfile, MigSpec, MPS_MAX_CLIENTS_VOLTA};

const ONE_SLICE_STARTS_7: &[u8] = &[0, 1, 2, 3, 4, 5, 6];
const TWO_SLICE_1G_STARTS: &[u8] = &[0, 2, 4, 6];
const TWO_SLICE_2G_STARTS: &[u8] = &[0, 2, 4];
const HALF_STARTS: &[u8] = &[0, 4];
const FIRST_ONLY: &[u8] = &[0];

/// The seven Hopper GPU instance profiles with the given memory sizes (MiB)
/// for the 1-slice, 2-slice and 4-slice memory sizes and the whole GPU.
const fn hopper_profiles(
    names: [&'static str; 7],
    one: u64,
    two: u64,
    four: u64,
    whole: u64,
) -> [MigProfile; 7] {
    [
        profile(names[0], 19, 1, 1, one, 7, false, ONE_SLICE_STARTS_7),
        profile(names[1], 20, 1, 1, one, 1, true, ONE_SLICE_STARTS_7),
        profile(names[2], 15, 1, 2, two, 4, false, TWO_SLICE_1G_STARTS),
        profile(names[3], 14, 2, 2, two, 3, false, TWO_SLICE_2G_STARTS),
        profile(names[4], 9, 3, 4, four, 2, false, HALF_STARTS),
        profile(names[5], 5, 4, 4, four, 1, false, FIRST_ONLY),
        profile(names[6], 0, 7, 8, whole, 1, false, FIRST_ONLY),
    ]
}

static H100_80GB_PROFILES: [MigProfile; 7] = hopper_profiles(
    [
        "1g.10gb",
        "1g.10gb+me",
        "1g.20gb",
        "2g.20gb",
        "3g.40gb",
        "4g.40gb",
        "7g.80gb",
    ],
    9984,
    20096,
    40448,
    81152,
);

static H100_94GB_PROFILES: [MigProfile; 7] = hopper_profiles(
    [
        "1g.12gb",
        "1g.12gb+me",
        "1g.24gb",
        "2g.24gb",
        "3g.47gb",
        "4g.47gb",
        "7g.94gb",
    ],
    11008,
    22144,
    47488,
    95360,
);

static H200_PROFILES: [MigProfile; 7] = hopper_profiles(
    [
        "1g.18gb",
        "1g.18gb+me",
        "1g.35gb",
        "2g.35gb",
        "3g.71gb",
        "4g.71gb",
        "7g.141gb",
    ],
    16384,
    33152,
    71168,
    142848,
);

static H100_80GB_MIG: MigSpec = MigSpec {
    compute_slices: 7,
    memory_slices: 8,
    profiles: &H100_80GB_PROFILES,
};

static H100_94GB_MIG: MigSpec = MigSpec {
    compute_slices: 7,
    memory_slices: 8,
    profiles: &H100_94GB_PROFILES,
};

static H200_MIG: MigSpec = MigSpec {
    compute_slices: 7,
    memory_slices: 8,
    profiles: &H200_PROFILES,
};

/// NVIDIA H100 80 GB (SXM5 "H100 80GB HBM3" and "H100 PCIe").
pub(super) const H100_80GB: GpuModel = GpuModel {
    name: "H100-80GB",
    memory_mib: 81559,
    mig: Some(&H100_80GB_MIG),
    mps_max_clients: MPS_MAX_CLIENTS_VOLTA,
    generic: false,
    architecture: Architecture::Hopper,
};

/// NVIDIA H100 NVL (94 GB HBM3).
pub(super) const H100_NVL_94GB: GpuModel = GpuModel {
    name: "H100-NVL-94GB",
    memory_mib: 95830,
    mig: Some(&H100_94GB_MIG),
    mps_max_clients: MPS_MAX_CLIENTS_VOLTA,
    generic: false,
    architecture: Architecture::Hopper,
};

/// NVIDIA H200 (SXM5 and NVL, 141 GB HBM3e).
pub(super) const H200_141GB: GpuModel = GpuModel {
    name: "H200-141GB",
    memory_mib: 143771,
    mig: Some(&H200_MIG),
    mps_max_clients: MPS_MAX_CLIENTS_VOLTA,
    generic: false,
    architecture: Architecture::Hopper,
};
