//! Applying a decision to the fleet (and undoing it), all or nothing.

use crate::mig::MigPlacement;
use crate::units::{ComputeMilli, CpuMilli, MemMiB};

use super::decision::{Decision, Slice};
use super::error::ApplyError;
use super::fleet::Fleet;
use super::index::{Slot, SlotKind};
use super::mig_table::NO_STATE;
use super::state::GpuMode;

/// Direction of a change.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Take,
    Give,
}

impl Fleet {
    /// Records `decision` in the fleet: takes its CPU, memory and GPU
    /// capacity. Fails, changing nothing, when that capacity is no longer
    /// free (e.g. the fleet changed since the decision was made).
    pub fn apply(&mut self, decision: &Decision) -> Result<(), ApplyError> {
        self.change(decision, Way::Take)
    }

    /// Gives back what [`Fleet::apply`] took for `decision` (the allocation
    /// was released). Fails, changing nothing, when it is not held.
    pub fn release(&mut self, decision: &Decision) -> Result<(), ApplyError> {
        self.change(decision, Way::Give)
    }

    fn locate(&self, decision: &Decision) -> Result<usize, ApplyError> {
        match self.hosts.get(decision.host_index) {
            Some(host) if host.id == decision.host => Ok(decision.host_index),
            _ => self
                .host_ids
                .get(&decision.host)
                .copied()
                .ok_or(ApplyError::UnknownHost {
                    host: decision.host,
                }),
        }
    }

    fn change(&mut self, decision: &Decision, way: Way) -> Result<(), ApplyError> {
        let h = self.locate(decision)?;
        let host_id = self.hosts[h].id;
        let conflict = |reason: String| ApplyError::Conflict {
            host: host_id,
            reason,
        };
        let agg = self.aggs[h];
        let (cpu, mem) = match way {
            Way::Take => {
                if agg.cpu_free < decision.cpu.0 || agg.mem_free < decision.memory.0 {
                    return Err(conflict("not enough CPU or memory free".to_string()));
                }
                (
                    agg.cpu_free - decision.cpu.0,
                    agg.mem_free - decision.memory.0,
                )
            }
            Way::Give => (
                agg.cpu_free.saturating_add(decision.cpu.0),
                agg.mem_free.saturating_add(decision.memory.0),
            ),
        };
        // Work out every new slot first, so that a failure changes nothing.
        let mut updates: Vec<(usize, Slot)> = Vec::with_capacity(decision.gpus.len());
        for device in &decision.gpus {
            let pos = self.hosts[h]
                .gpus
                .iter()
                .position(|g| g.index == *device)
                .ok_or(ApplyError::UnknownGpu {
                    host: host_id,
                    index: *device,
                })?;
            if updates.iter().any(|(p, _)| *p == pos) {
                return Err(conflict(format!("GPU {device} listed twice")));
            }
            let slot = self.slots[agg.first as usize + pos];
            if way == Way::Give && slot.allocated && matches!(decision.slice, Slice::Shared { .. })
            {
                // Keeps "allocated ⇒ no free capacity" true.
                return Err(ApplyError::HeldWhole {
                    host: host_id,
                    index: *device,
                });
            }
            let new = self
                .changed_slot(slot, &decision.slice, way)
                .map_err(&conflict)?;
            updates.push((pos, new));
        }
        let expected = match decision.slice {
            Slice::HostOnly => 0,
            Slice::Whole => updates.len().max(1),
            Slice::Shared { .. } | Slice::Mig(_) => 1,
        };
        if updates.len() != expected {
            return Err(conflict("wrong number of GPUs for the slice".to_string()));
        }
        let host = &mut self.hosts[h];
        host.cpu_free = CpuMilli(cpu);
        host.memory_free = MemMiB(mem);
        for (pos, new) in updates {
            self.slots[agg.first as usize + pos] = new;
            if let Some(gpu) = host.gpus.get_mut(pos) {
                gpu.allocated = new.allocated;
                if let Some(tenant) = &decision.tenant {
                    match way {
                        Way::Take => gpu.tenants.push(*tenant),
                        Way::Give => {
                            if let Some(at) = gpu.tenants.iter().position(|t| t == tenant) {
                                gpu.tenants.swap_remove(at);
                            }
                        }
                    }
                }
                match (&mut gpu.mode, &decision.slice) {
                    (
                        GpuMode::Shared {
                            compute_free,
                            memory_free,
                            clients,
                            ..
                        },
                        Slice::Shared { .. },
                    ) => {
                        *compute_free = ComputeMilli(new.free);
                        *memory_free = MemMiB(new.mem_free);
                        *clients = new.clients;
                    }
                    (GpuMode::Mig { layout }, Slice::Mig(placement)) => {
                        // The layout holds canonical names (see `Fleet::new`).
                        let placement = self
                            .models
                            .get(usize::from(new.model))
                            .and_then(|m| m.mig.as_ref())
                            .and_then(|t| t.canonical_name(&placement.profile))
                            .map_or_else(
                                || placement.clone(),
                                |name| MigPlacement::new(name, placement.start),
                            );
                        match way {
                            Way::Take => layout.push(placement),
                            Way::Give => layout.retain(|p| *p != placement),
                        }
                    }
                    _ => {}
                }
            }
        }
        self.refresh_host(h);
        Ok(())
    }

    /// The slot after taking or giving `slice`, or why that is impossible.
    fn changed_slot(&self, slot: Slot, slice: &Slice, way: Way) -> Result<Slot, String> {
        let mut new = slot;
        match (slice, way) {
            (Slice::HostOnly, _) => return Err("a host-only slice lists GPUs".to_string()),
            (Slice::Whole, Way::Take) => {
                if !slot.idle() {
                    return Err(format!("GPU {} is not idle", slot.device));
                }
                new.allocated = true;
                new.free = 0;
            }
            (Slice::Whole, Way::Give) => {
                if !slot.allocated {
                    return Err(format!("GPU {} is not allocated", slot.device));
                }
                new.allocated = false;
                new.free = self.free_of(&new);
            }
            (Slice::Shared { compute, memory }, Way::Take) => {
                if slot.kind != SlotKind::Shared
                    || slot.allocated
                    || slot.free < compute.0
                    || slot.mem_free < memory.0
                    || slot.clients >= slot.max_clients
                {
                    return Err(format!("GPU {} has no room for the share", slot.device));
                }
                new.free -= compute.0;
                new.mem_free -= memory.0;
                new.clients += 1;
            }
            (Slice::Shared { compute, memory }, Way::Give) => {
                if slot.kind != SlotKind::Shared || slot.clients == 0 {
                    return Err(format!("GPU {} holds no share", slot.device));
                }
                new.free = (slot.free + compute.0).min(1000);
                new.mem_free = slot.mem_free.saturating_add(memory.0);
                new.clients -= 1;
            }
            (Slice::Mig(placement), _) => {
                let table = self
                    .models
                    .get(usize::from(slot.model))
                    .and_then(|m| m.mig.as_ref())
                    .filter(|_| slot.kind == SlotKind::Mig && !slot.allocated)
                    .ok_or_else(|| format!("GPU {} is not a free MIG GPU", slot.device))?;
                let profile = table
                    .profile_index(&placement.profile)
                    .ok_or_else(|| format!("unknown MIG profile {}", placement.profile))?;
                let next = match way {
                    Way::Take => table.next(slot.layout, profile, placement.start),
                    Way::Give => table
                        .without(slot.layout, profile, placement.start)
                        .unwrap_or(NO_STATE),
                };
                if next == NO_STATE {
                    return Err(format!(
                        "{} at slice {} does not fit GPU {}",
                        placement.profile, placement.start, slot.device
                    ));
                }
                new.layout = next;
                new.free = table.free_milli(next);
            }
        }
        Ok(new)
    }

    /// Free compute of a slot that is not held whole.
    fn free_of(&self, slot: &Slot) -> u32 {
        match slot.kind {
            SlotKind::Exclusive => 1000,
            SlotKind::Shared => slot.free.max(if slot.clients == 0 { 1000 } else { 0 }),
            SlotKind::Mig => self
                .models
                .get(usize::from(slot.model))
                .and_then(|m| m.mig.as_ref())
                .map_or(0, |t| t.free_milli(slot.layout)),
        }
    }
}
