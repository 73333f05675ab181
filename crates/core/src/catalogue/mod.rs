//! The GPU catalogue: every model Tessera knows, with its MIG geometry exact to
//! the hardware.
//!
//! Sources (read 2026):
//! - NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles"
//!   (<https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html>):
//!   profile names, fractions of compute and memory, instance counts, the
//!   "a single 1g (2g on A30) profile can include media extensions" notes.
//! - `nvidia-smi mig -lgipp` output as printed in the guide's "Getting Started"
//!   section and in public transcripts: the allowed start slices and sizes.
//! - `nvidia-smi mig -lgip` output from public transcripts (and NVIDIA's
//!   `go-nvml` mock for the A100-40GB `memorySizeMB` values): the memory of each
//!   profile. `-lgip` prints GiB rounded to 1/8 GiB (two decimals, e.g. `9.62`
//!   for 9.625 GiB), so `memory_mib = GiB × 1024` reproduces what the driver
//!   reports. Values differ by a few hundred MiB between driver branches; each
//!   family file says which transcript it follows.

mod ampere;
mod hopper;
mod non_mig;

use serde::Serialize;

use crate::units::{ComputeMilli, MemMiB};

/// Clients per GPU that one MPS control daemon serves on Volta and newer
/// (NVIDIA MPS documentation, "Limitations": 48; 16 before Volta).
pub const MPS_MAX_CLIENTS_VOLTA: u32 = 48;

/// A GPU model: what Tessera knows about a kind of card.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct GpuModel {
    /// Canonical name, e.g. `"H100-80GB"`, `"A100-SXM4-40GB"`, `"L4"`;
    /// `"generic"` when the reported name was not in the catalogue.
    pub name: &'static str,
    /// Total memory in MiB as NVML reports it.
    pub memory_mib: u64,
    /// MIG geometry; `None` when the model cannot be partitioned.
    pub mig: Option<&'static MigSpec>,
    /// MPS clients per GPU (48 on Volta and newer, per the MPS docs).
    pub mps_max_clients: u32,
    /// True when the name was not in the catalogue (a generic non-MIG model).
    pub generic: bool,
    /// The GPU generation: what the driver can measure depends on it.
    pub architecture: Architecture,
}

/// A GPU generation, as NVML's `nvmlDeviceGetArchitecture` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Architecture {
    /// Not in the catalogue: assume nothing beyond what every GPU offers.
    Unknown,
    /// V100.
    Volta,
    /// T4.
    Turing,
    /// A100, A30, A10, A40, A16, RTX A-series.
    Ampere,
    /// L4, L40, L40S, RTX 6000 Ada.
    Ada,
    /// H100, H200.
    Hopper,
}

impl Architecture {
    /// GPU Performance Monitoring (`nvmlGpmQueryDeviceSupport`, and per GPU
    /// instance `nvmlGpmMigSampleGet`): "Hopper or newer fully supported
    /// devices" (nvml.h, GPM functions). The only per-MIG-instance activity
    /// figure NVML has.
    pub fn has_gpm(self) -> bool {
        self >= Self::Hopper
    }
}

/// MIG geometry of a model.
#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct MigSpec {
    /// Compute slices (GPCs available to MIG): 7 on A100/H100/H200, 4 on A30.
    pub compute_slices: u8,
    /// Memory slices: 8 on A100/H100/H200, 4 on A30.
    pub memory_slices: u8,
    /// Every GPU instance profile the driver offers, smallest first.
    pub profiles: &'static [MigProfile],
}

/// One GPU instance profile (a row of `nvidia-smi mig -lgip`).
#[derive(Debug, PartialEq, Eq, Serialize)]
pub struct MigProfile {
    /// Name without the `MIG ` prefix: `"1g.10gb"`, `"1g.10gb+me"`, `"7g.80gb"`.
    pub name: &'static str,
    /// `nvidia-smi`'s profile ID (the `ID` column of `-lgip`, `-cgi` argument).
    pub smi_id: u8,
    /// Compute slices the instance owns.
    pub compute_slices: u8,
    /// Memory slices the instance owns (the placement size).
    pub memory_slices: u8,
    /// Memory of the instance in MiB as the driver reports it.
    pub memory_mib: u64,
    /// Instances of this profile one GPU can hold.
    pub max_count: u8,
    /// True for `+me` profiles, which own the GPU's media extensions
    /// (JPEG decoder, optical-flow accelerator); at most one per GPU.
    pub media_extensions: bool,
    /// Allowed start memory-slice indices (`nvidia-smi mig -lgipp`), ascending.
    pub placements: &'static [u8],
}

impl MigSpec {
    /// The profile called `name` (exact, case-insensitive, `MIG ` prefix allowed).
    pub fn profile(&self, name: &str) -> Option<&'static MigProfile> {
        let wanted = name.trim();
        let wanted = wanted
            .strip_prefix("MIG ")
            .or_else(|| wanted.strip_prefix("mig "))
            .or_else(|| wanted.strip_prefix("mig-"))
            .unwrap_or(wanted);
        self.profiles
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(wanted))
    }

    /// Profile names, in catalogue order.
    pub fn profile_names(&self) -> Vec<&'static str> {
        self.profiles.iter().map(|p| p.name).collect()
    }
}

impl MigProfile {
    /// Compute share in thousandths of the whole GPU, rounded down
    /// (`compute_slices × 1000 / spec.compute_slices`): 1g on a 7-slice GPU is
    /// 142, 7g is exactly 1000. Rounding down keeps a whole-GPU profile at
    /// exactly one GPU-equivalent and never charges more than the share.
    pub fn compute_milli(&self, spec: &MigSpec) -> ComputeMilli {
        let total = u32::from(spec.compute_slices.max(1));
        ComputeMilli(u32::from(self.compute_slices) * 1000 / total)
    }

    /// Memory of the instance.
    pub fn memory(&self) -> MemMiB {
        MemMiB(self.memory_mib)
    }

    /// Memory-slice indices this profile occupies when started at `start`.
    pub fn span(&self, start: u8) -> std::ops::Range<u8> {
        start..start.saturating_add(self.memory_slices)
    }
}

impl GpuModel {
    /// Total memory.
    pub fn memory(&self) -> MemMiB {
        MemMiB(self.memory_mib)
    }

    /// True when the model supports MIG.
    pub fn is_mig_capable(&self) -> bool {
        self.mig.is_some()
    }

    /// A generic, non-MIG model for a card the catalogue does not know.
    pub const fn generic(reported_memory_mib: u64) -> Self {
        Self {
            name: "generic",
            memory_mib: reported_memory_mib,
            mig: None,
            mps_max_clients: MPS_MAX_CLIENTS_VOLTA,
            generic: true,
            architecture: Architecture::Unknown,
        }
    }
}

/// Every catalogue entry, MIG-capable models first (for UI pickers and
/// synthetic fleets).
pub fn all_models() -> &'static [GpuModel] {
    &ALL_MODELS
}

static ALL_MODELS: [GpuModel; 19] = [
    ampere::A30_24GB,
    ampere::A100_40GB,
    ampere::A100_80GB,
    hopper::H100_80GB,
    hopper::H100_NVL_94GB,
    hopper::H200_141GB,
    non_mig::L4,
    non_mig::L40,
    non_mig::L40S,
    non_mig::T4,
    non_mig::A10,
    non_mig::A10G,
    non_mig::A40,
    non_mig::A16,
    non_mig::V100_16GB,
    non_mig::V100_32GB,
    non_mig::RTX_6000_ADA,
    non_mig::RTX_A6000,
    non_mig::RTX_A5000,
];

/// The catalogue model for a name, tolerant of NVML's strings
/// (`"NVIDIA H100 80GB HBM3"`, `"NVIDIA A100-SXM4-40GB"`, `"Tesla T4"`, ...)
/// and of Tessera's canonical names. Case-insensitive. When the name says
/// nothing about the memory size (`"NVIDIA A100-PCIE"`, `"Tesla V100"`), the
/// reported memory decides. An unknown name yields [`GpuModel::generic`] with
/// the reported memory; this is not an error.
pub fn lookup(name: &str, reported_memory_mib: u64) -> GpuModel {
    let upper = name.to_ascii_uppercase();
    let tokens: Vec<&str> = upper
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|t| !t.is_empty() && *t != "NVIDIA" && *t != "TESLA")
        .collect();
    let has = |t: &str| tokens.contains(&t);
    let big = |threshold_gib: u64| reported_memory_mib > threshold_gib * 1024;

    let found = if has("H200") {
        Some(hopper::H200_141GB)
    } else if has("H100") {
        if has("NVL") || has("94GB") || (!has("80GB") && big(88) && !big(95)) {
            Some(hopper::H100_NVL_94GB)
        } else if has("96GB") || big(95) {
            // GH200's H100 (96 GB) has its own profile table, not modelled.
            None
        } else {
            Some(hopper::H100_80GB)
        }
    } else if has("A100") {
        if has("80GB") || (!has("40GB") && big(60)) {
            Some(ampere::A100_80GB)
        } else {
            Some(ampere::A100_40GB)
        }
    } else if has("A30") {
        Some(ampere::A30_24GB)
    } else if has("L40S") {
        Some(non_mig::L40S)
    } else if has("L40") {
        Some(non_mig::L40)
    } else if has("L4") {
        Some(non_mig::L4)
    } else if has("T4") {
        Some(non_mig::T4)
    } else if has("A10G") {
        Some(non_mig::A10G)
    } else if has("A10") {
        Some(non_mig::A10)
    } else if has("A40") {
        Some(non_mig::A40)
    } else if has("A16") {
        Some(non_mig::A16)
    } else if has("V100") || has("V100S") {
        if has("32GB") || (!has("16GB") && big(20)) {
            Some(non_mig::V100_32GB)
        } else {
            Some(non_mig::V100_16GB)
        }
    } else if has("RTX") && has("6000") && has("ADA") {
        Some(non_mig::RTX_6000_ADA)
    } else if has("RTX") && has("A6000") {
        Some(non_mig::RTX_A6000)
    } else if has("RTX") && has("A5000") {
        Some(non_mig::RTX_A5000)
    } else {
        None
    };
    found.unwrap_or(GpuModel::generic(reported_memory_mib))
}

#[cfg(test)]
mod tests;
