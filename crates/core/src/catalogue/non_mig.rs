//! Models without MIG: shared through MPS, time-slicing or used whole.
//! Memory is the total NVML reports (`nvidia-smi --query-gpu=memory.total`).
//! All are Volta or newer, so MPS serves 48 clients per GPU.

use super::{Architecture, GpuModel, MPS_MAX_CLIENTS_VOLTA};

const fn plain(name: &'static str, memory_mib: u64, architecture: Architecture) -> GpuModel {
    GpuModel {
        name,
        memory_mib,
        mig: None,
        mps_max_clients: MPS_MAX_CLIENTS_VOLTA,
        generic: false,
        architecture,
    }
}

/// NVIDIA L4 (24 GB GDDR6).
pub(super) const L4: GpuModel = plain("L4", 23034, Architecture::Ada);
/// NVIDIA L40 (48 GB GDDR6).
pub(super) const L40: GpuModel = plain("L40", 46068, Architecture::Ada);
/// NVIDIA L40S (48 GB GDDR6).
pub(super) const L40S: GpuModel = plain("L40S", 46068, Architecture::Ada);
/// NVIDIA T4 (16 GB GDDR6), reported as "Tesla T4".
pub(super) const T4: GpuModel = plain("T4", 15360, Architecture::Turing);
/// NVIDIA A10 (24 GB GDDR6).
pub(super) const A10: GpuModel = plain("A10", 23028, Architecture::Ampere);
/// NVIDIA A10G (24 GB GDDR6, AWS).
pub(super) const A10G: GpuModel = plain("A10G", 23028, Architecture::Ampere);
/// NVIDIA A40 (48 GB GDDR6).
pub(super) const A40: GpuModel = plain("A40", 46068, Architecture::Ampere);
/// NVIDIA A16 (16 GB per GPU, four GPUs per board).
pub(super) const A16: GpuModel = plain("A16", 15356, Architecture::Ampere);
/// NVIDIA V100 16 GB (SXM2 / PCIe).
pub(super) const V100_16GB: GpuModel = plain("V100-16GB", 16384, Architecture::Volta);
/// NVIDIA V100 32 GB (SXM2 / PCIe / V100S).
pub(super) const V100_32GB: GpuModel = plain("V100-32GB", 32768, Architecture::Volta);
/// NVIDIA RTX 6000 Ada Generation (48 GB).
pub(super) const RTX_6000_ADA: GpuModel = plain("RTX-6000-Ada", 49140, Architecture::Ada);
/// NVIDIA RTX A6000 (48 GB).
pub(super) const RTX_A6000: GpuModel = plain("RTX-A6000", 49140, Architecture::Ampere);
/// NVIDIA RTX A5000 (24 GB).
pub(super) const RTX_A5000: GpuModel = plain("RTX-A5000", 24564, Architecture::Ampere);
