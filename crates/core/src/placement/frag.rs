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
use super::shape::{Shape, ShapeKind};

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

/// One class's fragmentation of a host as the FGD paper's simulator measures
/// it (`GetNodePodFrag` and `NodeGpuShareFragAmount`, all quadrants but Q3):
/// when the class runs on the host now (enough CPU and enough GPUs with
/// room; memory is not considered), the free compute of the GPUs too full
/// for it; otherwise, and always for a CPU-only class, all free GPU compute
/// of the host.
#[inline]
fn fgd_frag_of(shape: &Shape, cpu: u32, free_total: i64, unhostable: i64, hostable: i64) -> i64 {
    if shape.gpus_needed() == 0 {
        return free_total;
    }
    if cpu >= shape.cpu && hostable >= i64::from(shape.gpus_needed()) {
        unhostable
    } else {
        free_total
    }
}

/// A host's free CPU, memory and total free GPU compute (thousandths),
/// before or after a candidate.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HostFree {
    pub cpu: u32,
    pub mem: u64,
    pub gpu: i64,
}

/// How much host CPU and memory the workload pairs with each thousandth of
/// a GPU (weighted means over its GPU classes). Free GPU compute beyond what
/// a host's free CPU or memory can feed at that rate is *stranded*: no
/// typical request can use all of it, whatever the GPUs' shape. The
/// per-class measure sees this only as a cliff (a class runs or it does
/// not); this term makes `pack` keep CPU and memory where free GPU needs
/// them, which is where it loses to best-fit on CPU-heavy mixes otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Pairing {
    cpu_per_gpu: f64,
    mem_per_gpu: f64,
}

impl Pairing {
    /// The pairing of `classes` (zero when none asks for GPU: no stranding).
    pub fn of(classes: &[Shape]) -> Self {
        let (mut cpu, mut mem, mut gpu) = (0.0f64, 0.0f64, 0.0f64);
        for class in classes {
            let milli = match class.kind {
                ShapeKind::Whole(n) => 1000.0 * f64::from(n),
                ShapeKind::Frac(m) => f64::from(m),
                ShapeKind::None | ShapeKind::Mig => 0.0,
            };
            if milli > 0.0 {
                let w = class.weight as f64;
                cpu += w * f64::from(class.cpu);
                mem += w * class.mem as f64;
                gpu += w * milli;
            }
        }
        if gpu > 0.0 {
            Self {
                cpu_per_gpu: cpu / gpu,
                mem_per_gpu: mem / gpu,
            }
        } else {
            Self::default()
        }
    }

    /// Free GPU compute (thousandths) of a host that its free CPU and
    /// memory cannot feed.
    fn stranded(&self, host: HostFree) -> f64 {
        let fed = |free: f64, per_gpu: f64| {
            if per_gpu > 0.0 {
                free / per_gpu
            } else {
                f64::INFINITY
            }
        };
        let usable =
            fed(f64::from(host.cpu), self.cpu_per_gpu).min(fed(host.mem as f64, self.mem_per_gpu));
        (host.gpu as f64 - usable).max(0.0)
    }

    /// Change of the stranded GPU compute, rounded to thousandths.
    pub fn stranded_delta(&self, before: HostFree, after: HostFree) -> i64 {
        (self.stranded(after) - self.stranded(before)).round() as i64
    }
}

/// Weighted change of the host's fragmentation by FGD's measure if `changes`
/// were made (the [`Cell`] counts are reused: they do not depend on CPU).
#[inline]
pub(crate) fn fgd_delta(
    classes: &[Shape],
    cells: &[Cell],
    changes: &[Change],
    before: HostFree,
    after: HostFree,
    models: &[ModelEntry],
) -> i64 {
    let mut sum = 0i64;
    for (class, cell) in classes.iter().zip(cells) {
        let old = fgd_frag_of(
            class,
            before.cpu,
            before.gpu,
            i64::from(cell.unhostable_free),
            i64::from(cell.hostable),
        );
        let mut unhostable = i64::from(cell.unhostable_free);
        let mut hostable = i64::from(cell.hostable);
        for change in changes {
            let Some(was) = class.can_host(&change.old, models) else {
                continue;
            };
            if was {
                hostable -= 1;
            } else {
                unhostable -= i64::from(change.old.free);
            }
            if class.can_host(&change.new, models).unwrap_or(false) {
                hostable += 1;
            } else {
                unhostable += i64::from(change.new.free);
            }
        }
        let new = fgd_frag_of(class, after.cpu, after.gpu, unhostable, hostable);
        sum += class.weight * (new - old);
    }
    sum
}

/// FGD's node score: `⌊100 · sigmoid((old − new) / 1000)⌋` with the
/// fragmentation in thousandths of a GPU weighted by class frequency
/// (`weighted_delta / total_weight`). Many candidates share a score; the
/// paper's scheduler takes the first.
pub(crate) fn fgd_score(weighted_delta: i64, total_weight: i64) -> i64 {
    if total_weight <= 0 {
        return 50;
    }
    let delta = weighted_delta as f64 / total_weight as f64;
    let sigmoid = 1.0 / (1.0 + (delta / 1000.0).exp());
    (100.0 * sigmoid) as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::shape::ShapeKind;

    fn class(kind: ShapeKind, cpu: u32, mem: u64, weight: i64) -> Shape {
        Shape {
            kind,
            cpu,
            mem,
            models: u128::MAX,
            pools: u128::MAX,
            profile: Vec::new(),
            gpu_mem: Vec::new(),
            nvlink: false,
            weight,
        }
    }

    #[test]
    fn gpu_without_cpu_or_memory_to_feed_it_is_stranded() {
        // 3 × (1 GPU, 12 cores, 64 GiB) and 1 × (half a GPU, 3 cores, 16 GiB)
        // plus CPU-only work, which does not count: 10.5 cores and 56 GiB per GPU.
        let pairing = Pairing::of(&[
            class(ShapeKind::Whole(1), 12_000, 65_536, 3),
            class(ShapeKind::Frac(500), 3_000, 16_384, 1),
            class(ShapeKind::None, 50_000, 1, 5),
        ]);
        let cpu_per_gpu = (3.0 * 12_000.0 + 3_000.0) / 3_500.0;
        let host = |cpu: f64, mem: u64, gpu: i64| HostFree {
            cpu: cpu.ceil() as u32,
            mem,
            gpu,
        };
        // Enough CPU and memory for all 2 free GPUs: nothing stranded.
        assert_eq!(
            pairing.stranded(host(2000.0 * cpu_per_gpu, 1 << 20, 2000)),
            0.0
        );
        // CPU for one GPU only: the other is stranded.
        let one = host(1000.0 * cpu_per_gpu, 1 << 20, 2000);
        assert!((pairing.stranded(one) - 1000.0).abs() < 1.0);
        // Memory binds the same way.
        let mem_per_gpu = (3.0 * 65_536.0 + 16_384.0) / 3_500.0;
        let short = host(1e6, (500.0 * mem_per_gpu) as u64, 2000);
        assert!((pairing.stranded(short) - 1500.0).abs() < 1.0);
        assert_eq!(pairing.stranded_delta(one, host(0.0, 0, 0)), -1000);
        // A workload without GPU classes strands nothing.
        let none = Pairing::of(&[class(ShapeKind::None, 1, 1, 1)]);
        assert_eq!(none.stranded(host(0.0, 0, 8000)), 0.0);
    }
}
