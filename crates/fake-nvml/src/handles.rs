//! Handles as NVML hands them out: opaque pointers. Here they encode what
//! they name (kind, GPU, GPU instance, compute instance); nothing ever
//! dereferences them.

use nvml_wrapper_sys::bindings::{nvmlComputeInstance_t, nvmlDevice_t, nvmlGpuInstance_t};

const GPU: usize = 1;
const MIG_DEVICE: usize = 2;
const GPU_INSTANCE: usize = 3;
const COMPUTE_INSTANCE: usize = 4;

/// What a handle names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handle {
    /// A physical GPU by index.
    Gpu(u32),
    /// The MIG device of the GPU instance `gi` on GPU `gpu`.
    MigDevice { gpu: u32, gi: u32 },
    /// A GPU instance by ID.
    GpuInstance { gpu: u32, gi: u32 },
    /// A compute instance by ID inside a GPU instance.
    ComputeInstance { gpu: u32, gi: u32, ci: u32 },
}

fn pack(kind: usize, gpu: u32, gi: u32, ci: u32) -> usize {
    (kind << 28)
        | ((gpu as usize & 0xff) << 16)
        | ((gi as usize & 0xff) << 8)
        | (ci as usize & 0xff)
}

impl Handle {
    fn raw(self) -> usize {
        match self {
            Self::Gpu(gpu) => pack(GPU, gpu, 0, 0),
            Self::MigDevice { gpu, gi } => pack(MIG_DEVICE, gpu, gi, 0),
            Self::GpuInstance { gpu, gi } => pack(GPU_INSTANCE, gpu, gi, 0),
            Self::ComputeInstance { gpu, gi, ci } => pack(COMPUTE_INSTANCE, gpu, gi, ci),
        }
    }

    fn of(raw: usize) -> Option<Self> {
        let gpu = ((raw >> 16) & 0xff) as u32;
        let gi = ((raw >> 8) & 0xff) as u32;
        let ci = (raw & 0xff) as u32;
        Some(match raw >> 28 {
            GPU => Self::Gpu(gpu),
            MIG_DEVICE => Self::MigDevice { gpu, gi },
            GPU_INSTANCE => Self::GpuInstance { gpu, gi },
            COMPUTE_INSTANCE => Self::ComputeInstance { gpu, gi, ci },
            _ => return None,
        })
    }

    /// As a device handle.
    pub fn device(self) -> nvmlDevice_t {
        self.raw() as nvmlDevice_t
    }

    /// As a GPU-instance handle.
    pub fn gpu_instance(self) -> nvmlGpuInstance_t {
        self.raw() as nvmlGpuInstance_t
    }

    /// As a compute-instance handle.
    pub fn compute_instance(self) -> nvmlComputeInstance_t {
        self.raw() as nvmlComputeInstance_t
    }

    /// What a device handle names (a GPU or a MIG device).
    pub fn from_device(h: nvmlDevice_t) -> Option<Self> {
        Self::of(h as usize).filter(|h| matches!(h, Self::Gpu(_) | Self::MigDevice { .. }))
    }

    /// What a GPU-instance handle names.
    pub fn from_gpu_instance(h: nvmlGpuInstance_t) -> Option<(u32, u32)> {
        match Self::of(h as usize)? {
            Self::GpuInstance { gpu, gi } => Some((gpu, gi)),
            _ => None,
        }
    }

    /// What a compute-instance handle names.
    pub fn from_compute_instance(h: nvmlComputeInstance_t) -> Option<(u32, u32, u32)> {
        match Self::of(h as usize)? {
            Self::ComputeInstance { gpu, gi, ci } => Some((gpu, gi, ci)),
            _ => None,
        }
    }
}
