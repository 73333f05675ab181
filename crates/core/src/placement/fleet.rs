//! The fleet the placer works on: the public host and GPU state plus the
//! indexes and fragmentation caches kept in step with it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalogue;

use super::error::FleetError;
use super::frag::{cell_for, Cell, Pairing};
use super::gaps::GapCounts;
use super::index::{HostAgg, ModelEntry, Slot, SlotKind, MAX_IDS, NO_GROUP};
use super::mig_table::{MigTable, EMPTY_STATE};
use super::shape::{Shape, ShapeSpec};
use super::state::{GpuMode, GpuState, HostState};
use super::workload::Workload;

/// Hosts, GPUs and the workload mix the fleet is judged against.
///
/// Built once from a snapshot ([`Fleet::new`]) and then kept current with
/// [`Fleet::apply`] and [`Fleet::release`], which update the per-host
/// aggregates and fragmentation caches of the one host they touch.
#[derive(Clone, Debug)]
pub struct Fleet {
    pub(crate) hosts: Vec<HostState>,
    pub(crate) host_ids: BTreeMap<crate::ids::HostId, usize>,
    pub(crate) aggs: Vec<HostAgg>,
    pub(crate) slots: Vec<Slot>,
    pub(crate) models: Vec<ModelEntry>,
    pub(crate) pools: Vec<String>,
    workload: Workload,
    pub(crate) classes: Vec<Shape>,
    pub(crate) total_weight: i64,
    /// Host-major: `cells[host * classes.len() + class]`.
    pub(crate) cells: Vec<Cell>,
    /// CPU and memory the workload pairs with GPU (for `pack`'s stranding).
    pub(crate) pairing: Pairing,
    /// Partly used shared GPUs by gap (for `pack`'s sum-of-squares term).
    pub(crate) gaps: GapCounts,
}

/// How much of the fleet's GPU capacity is free, and how much of that the
/// workload could not use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FragmentationReport {
    /// Capacity of all GPUs, in thousandths of a GPU.
    pub total_gpu_milli: u64,
    /// Free capacity.
    pub free_gpu_milli: u64,
    /// Expected free capacity that a request drawn from the workload could
    /// not use (workload-weighted), in thousandths of a GPU.
    pub fragmented_gpu_milli: f64,
}

impl FragmentationReport {
    /// Fragmented share of the whole fleet (0..=1).
    pub fn of_total(&self) -> f64 {
        if self.total_gpu_milli == 0 {
            0.0
        } else {
            self.fragmented_gpu_milli / self.total_gpu_milli as f64
        }
    }

    /// Fragmented share of the free capacity (0..=1).
    pub fn of_free(&self) -> f64 {
        if self.free_gpu_milli == 0 {
            0.0
        } else {
            self.fragmented_gpu_milli / self.free_gpu_milli as f64
        }
    }
}

fn intern(names: &mut Vec<String>, name: &str, what: &str) -> Result<u8, FleetError> {
    let id = match names.iter().position(|n| n == name) {
        Some(id) => id,
        None => {
            names.push(name.to_string());
            names.len() - 1
        }
    };
    if id >= MAX_IDS {
        return Err(FleetError::TooMany {
            what: what.to_string(),
            limit: MAX_IDS,
        });
    }
    Ok(id as u8)
}

fn intern_model(models: &mut Vec<ModelEntry>, gpu: &GpuState) -> Result<u8, FleetError> {
    let model = catalogue::lookup(&gpu.model, gpu.memory.0);
    let name = if model.generic {
        gpu.model.clone()
    } else {
        model.name.to_string()
    };
    if let Some(id) = models.iter().position(|m| m.name == name) {
        return Ok(id as u8);
    }
    if models.len() >= MAX_IDS {
        return Err(FleetError::TooMany {
            what: "models".to_string(),
            limit: MAX_IDS,
        });
    }
    let mig = MigTable::shared(&model)?;
    models.push(ModelEntry { name, model, mig });
    Ok((models.len() - 1) as u8)
}

fn slot_of(
    host: &HostState,
    gpu: &GpuState,
    model_id: u8,
    pool_id: u8,
    entry: &ModelEntry,
) -> Result<Slot, FleetError> {
    let mut slot = Slot {
        model: model_id,
        pool: pool_id,
        kind: SlotKind::Exclusive,
        allocated: gpu.allocated,
        device: gpu.index,
        nvlink: gpu.nvlink_group.unwrap_or(NO_GROUP),
        free: 1000,
        mem_free: 0,
        clients: 0,
        max_clients: 0,
        layout: EMPTY_STATE,
    };
    match &gpu.mode {
        GpuMode::Exclusive => {}
        GpuMode::Shared {
            compute_free,
            memory_free,
            clients,
            max_clients,
        } => {
            if compute_free.0 > 1000 {
                return Err(FleetError::InvalidShare {
                    host: host.id,
                    index: gpu.index,
                    reason: format!("{} thousandths of compute free", compute_free.0),
                });
            }
            slot.kind = SlotKind::Shared;
            slot.free = compute_free.0;
            slot.mem_free = memory_free.0;
            slot.clients = *clients;
            slot.max_clients = *max_clients;
        }
        GpuMode::Mig { layout } => {
            let invalid = |reason: String| FleetError::InvalidMigLayout {
                host: host.id,
                index: gpu.index,
                reason,
            };
            let table = entry
                .mig
                .as_ref()
                .ok_or_else(|| invalid(format!("{} is not MIG-capable", entry.name)))?;
            slot.kind = SlotKind::Mig;
            slot.layout = table.state_of(&entry.model, layout).map_err(invalid)?;
            slot.free = table.free_milli(slot.layout);
        }
    }
    if slot.allocated {
        slot.free = 0;
    }
    Ok(slot)
}

/// Rewrites the host's MIG layouts with the catalogue's profile names, so that
/// later comparisons (release, planning) are exact.
fn canonicalise_layouts(host: &mut HostState, models: &[ModelEntry], slots: &[Slot]) {
    for (gpu, slot) in host.gpus.iter_mut().zip(slots) {
        let (GpuMode::Mig { layout }, Some(Some(table))) = (
            &mut gpu.mode,
            models.get(usize::from(slot.model)).map(|m| m.mig.as_ref()),
        ) else {
            continue;
        };
        for placement in layout {
            if let Some(name) = table.canonical_name(&placement.profile) {
                placement.profile = name.to_string();
            }
        }
    }
}

impl Fleet {
    /// Indexes a snapshot. Fails on duplicate ids, impossible MIG layouts or
    /// shared capacities.
    /// MIG layouts are stored with the catalogue's spelling of each profile.
    pub fn new(mut hosts: Vec<HostState>, workload: Workload) -> Result<Self, FleetError> {
        let mut fleet = Fleet {
            hosts: Vec::new(),
            host_ids: BTreeMap::new(),
            aggs: Vec::with_capacity(hosts.len()),
            slots: Vec::new(),
            models: Vec::new(),
            pools: Vec::new(),
            workload: Workload::default(),
            classes: Vec::new(),
            total_weight: 0,
            cells: Vec::new(),
            pairing: Pairing::default(),
            gaps: GapCounts::new(&[], &[]),
        };
        for (h, host) in hosts.iter().enumerate() {
            if fleet.host_ids.insert(host.id, h).is_some() {
                return Err(FleetError::DuplicateHost { host: host.id });
            }
            let first = fleet.slots.len() as u32;
            for (g, gpu) in host.gpus.iter().enumerate() {
                if host.gpus[..g].iter().any(|other| other.index == gpu.index) {
                    return Err(FleetError::DuplicateGpu {
                        host: host.id,
                        index: gpu.index,
                    });
                }
                let model_id = intern_model(&mut fleet.models, gpu)?;
                let pool_id = intern(&mut fleet.pools, &gpu.pool, "pools")?;
                let entry = &fleet.models[usize::from(model_id)];
                fleet
                    .slots
                    .push(slot_of(host, gpu, model_id, pool_id, entry)?);
            }

            let mut agg = HostAgg {
                cpu_free: host.cpu_free.0,
                mem_free: host.memory_free.0,
                first,
                len: host.gpus.len() as u32,
                ..HostAgg::default()
            };
            agg.refresh(&fleet.slots[first as usize..]);
            fleet.aggs.push(agg);
        }
        for (host, agg) in hosts.iter_mut().zip(&fleet.aggs) {
            let slots = fleet.slots.get(agg.first as usize..).unwrap_or_default();
            canonicalise_layouts(host, &fleet.models, slots);
        }
        fleet.hosts = hosts;
        fleet.set_workload(workload);
        Ok(fleet)
    }

    /// The fleet reduced to the host with id `id`, its indexes and model
    /// tables reused rather than rebuilt: cheap what-if questions about one
    /// host (would this fit there if those slices left?). `None` for an
    /// unknown id.
    pub fn only_host(&self, id: crate::ids::HostId) -> Option<Fleet> {
        let &h = self.host_ids.get(&id)?;
        let mut agg = *self.aggs.get(h)?;
        let (first, len) = (agg.first as usize, agg.len as usize);
        let slots: Vec<Slot> = self.slots.get(first..first + len)?.to_vec();
        agg.first = 0;
        let n = self.classes.len();
        Some(Fleet {
            hosts: vec![self.hosts.get(h)?.clone()],
            host_ids: BTreeMap::from([(id, 0)]),
            aggs: vec![agg],
            models: self.models.clone(),
            pools: self.pools.clone(),
            workload: self.workload.clone(),
            classes: self.classes.clone(),
            total_weight: self.total_weight,
            cells: self.cells.get(h * n..(h + 1) * n)?.to_vec(),
            pairing: self.pairing,
            gaps: GapCounts::new(&slots, &self.classes),
            slots,
        })
    }

    /// Replaces the workload mix and recomputes the fragmentation caches.
    /// When only the classes' weights changed (the same shapes, more or
    /// fewer of each: what a request of a known shape does), the per-host
    /// caches still hold, since they do not depend on weights, and only the
    /// weights are replaced.
    pub fn set_workload(&mut self, workload: Workload) {
        let classes: Vec<Shape> = workload
            .classes()
            .iter()
            .filter_map(|class| {
                let spec = ShapeSpec {
                    demand: &class.demand,
                    cpu: class.cpu.0,
                    mem: class.memory.0,
                    allowed_models: &class.allowed_models,
                    pool: class.pool.as_deref(),
                    nvlink: false,
                    weight: i64::try_from(class.weight).unwrap_or(i64::MAX / 4),
                };
                Shape::resolve(&spec, &self.models, &self.pools).ok()
            })
            .collect();
        let cells_hold = classes.len() == self.classes.len()
            && self.cells.len() == self.hosts.len() * classes.len()
            && classes
                .iter()
                .zip(&self.classes)
                .all(|(new, old)| new.same_but_weight(old));
        self.classes = classes;
        self.total_weight = self.classes.iter().map(|c| c.weight).sum();
        self.pairing = Pairing::of(&self.classes);
        if !self.gaps.holds_for(&self.classes, self.slots.len()) {
            self.gaps = GapCounts::new(&self.slots, &self.classes);
        }
        self.workload = workload;
        if cells_hold {
            return;
        }
        self.cells = vec![Cell::default(); self.hosts.len() * self.classes.len()];
        for h in 0..self.hosts.len() {
            self.refresh_cells(h);
        }
    }

    pub(crate) fn host_slots(&self, h: usize) -> &[Slot] {
        let agg = &self.aggs[h];
        &self.slots[agg.first as usize..(agg.first + agg.len) as usize]
    }

    pub(crate) fn host_cells(&self, h: usize) -> &[Cell] {
        let m = self.classes.len();
        &self.cells[h * m..(h + 1) * m]
    }

    fn refresh_cells(&mut self, h: usize) {
        let m = self.classes.len();
        let agg = self.aggs[h];
        let slots = &self.slots[agg.first as usize..(agg.first + agg.len) as usize];
        for (c, class) in self.classes.iter().enumerate() {
            self.cells[h * m + c] =
                cell_for(class, slots, agg.cpu_free, agg.mem_free, &self.models);
        }
    }

    /// Re-derives aggregates and caches of host `h` after a change.
    pub(crate) fn refresh_host(&mut self, h: usize) {
        let host = &self.hosts[h];
        let agg = &mut self.aggs[h];
        agg.cpu_free = host.cpu_free.0;
        agg.mem_free = host.memory_free.0;
        let range = agg.first as usize..(agg.first + agg.len) as usize;
        agg.refresh(&self.slots[range.clone()]);
        self.gaps.update(range, &self.slots);
        self.refresh_cells(h);
    }

    /// The hosts, as last applied.
    pub fn hosts(&self) -> &[HostState] {
        &self.hosts
    }

    /// The workload mix.
    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    /// Number of GPUs.
    pub fn gpu_count(&self) -> usize {
        self.slots.len()
    }

    /// Capacity of all GPUs in thousandths of a GPU.
    pub fn total_gpu_milli(&self) -> u64 {
        self.slots.len() as u64 * 1000
    }

    /// Free GPU compute in thousandths of a GPU.
    pub fn free_gpu_milli(&self) -> u64 {
        self.aggs.iter().map(|a| u64::from(a.free_total)).sum()
    }

    /// Workload-weighted fragmented weight of host `h` (weight × milli).
    pub(crate) fn host_frag_weighted(&self, h: usize) -> i64 {
        self.classes
            .iter()
            .zip(self.host_cells(h))
            .map(|(class, cell)| class.weight * i64::from(cell.frag))
            .sum()
    }

    /// Fragmentation of the whole fleet against its workload.
    pub fn fragmentation(&self) -> FragmentationReport {
        let weighted: i128 = (0..self.hosts.len())
            .map(|h| i128::from(self.host_frag_weighted(h)))
            .sum();
        let fragmented = if self.total_weight > 0 {
            weighted as f64 / self.total_weight as f64
        } else {
            0.0
        };
        FragmentationReport {
            total_gpu_milli: self.total_gpu_milli(),
            free_gpu_milli: self.free_gpu_milli(),
            fragmented_gpu_milli: fragmented,
        }
    }
}
