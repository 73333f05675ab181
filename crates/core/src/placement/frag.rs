//! The fragmentation measure of Weng et al. (USENIX ATC '23), kept per host
//! and workload class so that the change a candidate causes is computed in
//! O(classes × GPUs changed).
//!
//! For a host `n` and a class `m`: if `m` cannot run on `n` at all (CPU,
//! memory, or no GPU it fits), every free GPU share that `m` could in
//! principle use is fragmented; otherwise the free shares of those GPUs that
//! cannot host `m` are. The host's fragmentation is the weighted sum over
//! classes; `pack` picks the candidate whose placement grows it least.

use super::index::{ModelEntry, Slot};
use super::shape::Shape;

/// Fragmentation bookkeeping for one (host, class) pair. Quantities are GPU
/// compute in thousandths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cell {
    /// Free compute on GPUs the class could use at all.
    pub eligible_free: u32,
    /// Part of `eligible_free` on GPUs where the class does not fit now.
    pub unhostable_free: u32,
    /// GPUs where the class fits now (idle GPUs for whole-GPU classes).
    pub hostable: u32,
    /// The class's fragmentation of the host now.
    pub frag: u32,
}

/// One GPU as it is and as a candidate would leave it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Change {
    pub old: Slot,
    pub new: Slot,
}

#[inline]
fn frag_of(
    shape: &Shape,
    cpu: u32,
    mem: u64,
    eligible: i64,
    unhostable: i64,
    hostable: i64,
) -> i64 {
    let runs = cpu >= shape.cpu && mem >= shape.mem && hostable >= i64::from(shape.gpus_needed());
    if runs {
        unhostable
    } else {
        eligible
    }
}

/// The cell of `shape` on a host with these GPUs and free CPU and memory.
pub(crate) fn cell_for(
    shape: &Shape,
    slots: &[Slot],
    cpu_free: u32,
    mem_free: u64,
    models: &[ModelEntry],
) -> Cell {
    let mut cell = Cell::default();
    for slot in slots {
        match shape.can_host(slot, models) {
            None => {}
            Some(true) => {
                cell.eligible_free += slot.free;
                cell.hostable += 1;
            }
            Some(false) => {
                cell.eligible_free += slot.free;
                cell.unhostable_free += slot.free;
            }
        }
    }
    let frag = frag_of(
        shape,
        cpu_free,
        mem_free,
        i64::from(cell.eligible_free),
        i64::from(cell.unhostable_free),
        i64::from(cell.hostable),
    );
    cell.frag = u32::try_from(frag).unwrap_or(u32::MAX);
    cell
}

/// Weighted change of the host's fragmentation if `changes` were made and
/// the host were left with `cpu_after` and `mem_after`.
#[inline]
pub(crate) fn delta(
    classes: &[Shape],
    cells: &[Cell],
    changes: &[Change],
    cpu_after: u32,
    mem_after: u64,
    models: &[ModelEntry],
) -> i64 {
    let mut sum = 0i64;
    for (class, cell) in classes.iter().zip(cells) {
        let mut eligible = i64::from(cell.eligible_free);
        let mut unhostable = i64::from(cell.unhostable_free);
        let mut hostable = i64::from(cell.hostable);
        for change in changes {
            let Some(before) = class.can_host(&change.old, models) else {
                continue;
            };
            let after = class.can_host(&change.new, models).unwrap_or(false);
            let old_free = i64::from(change.old.free);
            let new_free = i64::from(change.new.free);
            eligible += new_free - old_free;
            if before {
                hostable -= 1;
            } else {
                unhostable -= old_free;
            }
            if after {
                hostable += 1;
            } else {
                unhostable += new_free;
            }
        }
        let after = frag_of(class, cpu_after, mem_after, eligible, unhostable, hostable);
        sum += class.weight * (after - i64::from(cell.frag));
    }
    sum
}
