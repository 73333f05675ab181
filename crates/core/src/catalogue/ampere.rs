//! Ampere MIG models: A30, A100 40 GB, A100 80 GB.
//!
//! Profiles, counts and fractions: MIG User Guide, "A30 MIG Profiles" and
//! "A100 MIG Profiles" tables. Placements: `nvidia-smi mig -lgipp` on A100
//! (`{0,1,2,3,4,5,6}:1`, `{0,2,4,6}:2`, `{0,2,4}:2`, `{0,4}:4`, `{0}:4`,
//! `{0}:8`) and on A30 (`{0,1,2,3}:1`, `{0,2}:2`, `{0}:4`).
//! Memory: `nvidia-smi mig -lgip` GiB × 1024 — A100-40GB 4.75 / 9.62 / 19.50 /
//! 39.25 GiB (matches `memorySizeMB` in NVIDIA's go-nvml DGX A100 mock:
//! 4864 / 9856 / 19968 / 40192); A100-80GB (R515) 9.50 / 19.50 / 39.25 /
//! 79.00 GiB; A30 (R470+) 5.81 / 11.69 / 23.50 GiB.

use super::{Architecture, GpuModel, MigProfile, MigSpec, MPS_MAX_CLIENTS_VOLTA};

const ONE_SLICE_STARTS_7: &[u8] = &[0, 1, 2, 3, 4, 5, 6];
const TWO_SLICE_1G_STARTS: &[u8] = &[0, 2, 4, 6];
const TWO_SLICE_2G_STARTS: &[u8] = &[0, 2, 4];
const HALF_STARTS: &[u8] = &[0, 4];
const FIRST_ONLY: &[u8] = &[0];

/// One GPU instance profile row; `const` so tables stay static.
#[allow(clippy::too_many_arguments)]
pub(super) const fn profile(
    name: &'static str,
    smi_id: u8,
    compute_slices: u8,
    memory_slices: u8,
    memory_mib: u64,
    max_count: u8,
    media_extensions: bool,
    placements: &'static [u8],
) -> MigProfile {
    MigProfile {
        name,
        smi_id,
        compute_slices,
        memory_slices,
        memory_mib,
        max_count,
        media_extensions,
        placements,
    }
}

static A100_40GB_MIG: MigSpec = MigSpec {
    compute_slices: 7,
    memory_slices: 8,
    profiles: &[
        profile("1g.5gb", 19, 1, 1, 4864, 7, false, ONE_SLICE_STARTS_7),
        profile("1g.5gb+me", 20, 1, 1, 4864, 1, true, ONE_SLICE_STARTS_7),
        profile("1g.10gb", 15, 1, 2, 9856, 4, false, TWO_SLICE_1G_STARTS),
        profile("2g.10gb", 14, 2, 2, 9856, 3, false, TWO_SLICE_2G_STARTS),
        profile("3g.20gb", 9, 3, 4, 19968, 2, false, HALF_STARTS),
        profile("4g.20gb", 5, 4, 4, 19968, 1, false, FIRST_ONLY),
        profile("7g.40gb", 0, 7, 8, 40192, 1, false, FIRST_ONLY),
    ],
};

static A100_80GB_MIG: MigSpec = MigSpec {
    compute_slices: 7,
    memory_slices: 8,
    profiles: &[
        profile("1g.10gb", 19, 1, 1, 9728, 7, false, ONE_SLICE_STARTS_7),
        profile("1g.10gb+me", 20, 1, 1, 9728, 1, true, ONE_SLICE_STARTS_7),
        profile("1g.20gb", 15, 1, 2, 19968, 4, false, TWO_SLICE_1G_STARTS),
        profile("2g.20gb", 14, 2, 2, 19968, 3, false, TWO_SLICE_2G_STARTS),
        profile("3g.40gb", 9, 3, 4, 40192, 2, false, HALF_STARTS),
        profile("4g.40gb", 5, 4, 4, 40192, 1, false, FIRST_ONLY),
        profile("7g.80gb", 0, 7, 8, 80896, 1, false, FIRST_ONLY),
    ],
};

static A30_MIG: MigSpec = MigSpec {
    compute_slices: 4,
    memory_slices: 4,
    profiles: &[
        profile("1g.6gb", 14, 1, 1, 5952, 4, false, &[0, 1, 2, 3]),
        // R470 and later.
        profile("1g.6gb+me", 21, 1, 1, 5952, 1, true, &[0, 1, 2, 3]),
        profile("2g.12gb", 5, 2, 2, 11968, 2, false, &[0, 2]),
        // R525 and later.
        profile("2g.12gb+me", 6, 2, 2, 11968, 1, true, &[0, 2]),
        profile("4g.24gb", 0, 4, 4, 24064, 1, false, FIRST_ONLY),
    ],
};

/// NVIDIA A30 (24 GB HBM2), 4 compute and 4 memory slices.
pub(super) const A30_24GB: GpuModel = GpuModel {
    name: "A30-24GB",
    memory_mib: 24576,
    mig: Some(&A30_MIG),
    mps_max_clients: MPS_MAX_CLIENTS_VOLTA,
    generic: false,
    architecture: Architecture::Ampere,
};

/// NVIDIA A100 40 GB (SXM4 and PCIe share the profile table).
pub(super) const A100_40GB: GpuModel = GpuModel {
    name: "A100-SXM4-40GB",
    memory_mib: 40960,
    mig: Some(&A100_40GB_MIG),
    mps_max_clients: MPS_MAX_CLIENTS_VOLTA,
    generic: false,
    architecture: Architecture::Ampere,
};

/// NVIDIA A100 80 GB (SXM4 and PCIe share the profile table).
pub(super) const A100_80GB: GpuModel = GpuModel {
    name: "A100-80GB",
    memory_mib: 81920,
    mig: Some(&A100_80GB_MIG),
    mps_max_clients: MPS_MAX_CLIENTS_VOLTA,
    generic: false,
    architecture: Architecture::Ampere,
};
