//! Compact, flattened copies of the fleet that the hot path scans: one `Slot`
//! per GPU, one `HostAgg` per host, models and pools interned to small ids.

use crate::catalogue::GpuModel;

use super::mig_table::{MigTable, EMPTY_STATE};

/// Most distinct models or pools the bit masks can hold.
pub(crate) const MAX_IDS: usize = 128;
/// `Slot::nvlink` when the GPU is in no NVLink group.
pub(crate) const NO_GROUP: u32 = u32::MAX;

/// An interned GPU model.
#[derive(Clone, Debug)]
pub(crate) struct ModelEntry {
    /// Name used for matching `allowed_models` (canonical, or as reported
    /// for models the catalogue does not know).
    pub name: String,
    pub model: GpuModel,
    pub mig: Option<std::sync::Arc<MigTable>>,
}

/// How a slot is shared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlotKind {
    Exclusive,
    Shared,
    Mig,
}

/// One GPU, as the placer sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub model: u8,
    pub pool: u8,
    pub kind: SlotKind,
    pub allocated: bool,
    pub device: u32,
    pub nvlink: u32,
    /// Free compute in thousandths (the "R" of the fragmentation measure).
    pub free: u32,
    /// Shared only: memory not promised.
    pub mem_free: u64,
    pub clients: u32,
    pub max_clients: u32,
    /// MIG only: state in the model's [`MigTable`].
    pub layout: u32,
}

impl Slot {
    /// Nothing runs on it: it can be handed out whole.
    #[inline]
    pub fn idle(&self) -> bool {
        !self.allocated
            && match self.kind {
                SlotKind::Exclusive => true,
                SlotKind::Shared => self.clients == 0,
                SlotKind::Mig => self.layout == EMPTY_STATE,
            }
    }

    /// Hash of everything [`Slot::same_state`] compares, plus the NVLink group.
    #[inline]
    pub fn state_hash(&self) -> u64 {
        let a = u64::from(self.model)
            | u64::from(self.pool) << 8
            | (self.kind as u64) << 16
            | u64::from(self.allocated) << 20
            | u64::from(self.free) << 32;
        let b = u64::from(self.clients) | u64::from(self.max_clients) << 32;
        mix(
            mix(mix(mix(a, b), self.mem_free), u64::from(self.layout)),
            u64::from(self.nvlink),
        )
    }

    /// Same placement-relevant state (ignores identity and NVLink group).
    #[inline]
    pub fn same_state(&self, other: &Slot) -> bool {
        self.model == other.model
            && self.pool == other.pool
            && self.kind == other.kind
            && self.allocated == other.allocated
            && self.free == other.free
            && self.mem_free == other.mem_free
            && self.clients == other.clients
            && self.max_clients == other.max_clients
            && self.layout == other.layout
    }
}

/// Per-host aggregates for quick rejection.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HostAgg {
    pub cpu_free: u32,
    pub mem_free: u64,
    /// First slot of the host in `Fleet::slots`.
    pub first: u32,
    pub len: u32,
    pub idle: u32,
    /// Sum of free compute over the host's GPUs.
    pub free_total: u32,
    /// Largest free compute of any shared or MIG GPU.
    pub max_share_free: u32,
    pub models: u128,
    pub pools: u128,
    pub has_mig: bool,
    /// Hash of the placement-relevant state of the host (CPU, memory, every
    /// GPU), so that identical hosts are evaluated once per decision.
    pub signature: u64,
}

/// SplitMix64's finaliser, as a cheap deterministic hash step.
#[inline]
fn mix(h: u64, v: u64) -> u64 {
    let mut z = (h ^ v).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl HostAgg {
    /// Recomputes the GPU aggregates from the host's slots.
    pub fn refresh(&mut self, slots: &[Slot]) {
        self.idle = 0;
        self.free_total = 0;
        self.max_share_free = 0;
        self.models = 0;
        self.pools = 0;
        self.has_mig = false;
        let mut sig = mix(u64::from(self.cpu_free), self.mem_free);
        for slot in slots {
            sig = mix(sig, slot.state_hash());
            self.models |= 1u128 << slot.model;
            self.pools |= 1u128 << slot.pool;
            self.free_total += slot.free;
            if slot.idle() {
                self.idle += 1;
            }
            if slot.kind != SlotKind::Exclusive && !slot.allocated {
                self.max_share_free = self.max_share_free.max(slot.free);
            }
            self.has_mig |= slot.kind == SlotKind::Mig;
        }
        self.signature = sig;
    }
}
