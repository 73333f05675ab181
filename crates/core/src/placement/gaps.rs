//! How many shared GPUs are partly used, by the compute they have left: the
//! sum-of-squares term of `pack`.
//!
//! Sharing requests are online bin packing with a known mix of sizes. The
//! Sum-of-Squares algorithm (Csirik, Johnson, Kenyon, Orlin, Shor and
//! Weber, "On the sum-of-squares algorithm for bin packing", J. ACM 53(1),
//! 2006) packs such a stream nearly as well as an offline packer: it keeps
//! the number of bins at each gap level balanced (it minimises Σ N(g)² over
//! gaps g), so that whatever comes next finds a gap it fills well. The
//! fragmentation measure alone looks at one GPU at a time; on the Alibaba
//! traces it pairs a 320 with a lone 470 (a 210 gap that nothing common
//! fills) where opening a GPU for a later 650 would leave 30.
//!
//! Two changes to the textbook form, both measured on the Alibaba traces
//! (see `GAP_WEIGHT`):
//! - a gap no class of the workload fits is closed: nothing will use it,
//!   whatever happens next, so it is not counted (counting it makes the
//!   term avoid the near-full GPUs that good pairings leave);
//! - each level's N² is weighted by its gap in GPUs: an unfilled large gap
//!   wastes more than a small one.

use std::ops::Range;

use super::frag::Change;
use super::index::{Slot, SlotKind};
use super::shape::{Shape, ShapeKind};

/// Width of a gap level, in thousandths of a GPU.
const LEVEL_MILLI: u32 = 100;

/// Levels: free compute 0..=999 of a shared GPU in use, and one for more
/// (a GPU model with more than one GPU of compute cannot occur today).
const LEVELS: usize = (1000 / LEVEL_MILLI) as usize + 1;

/// Not counted.
const NONE: u8 = u8::MAX;

/// The counts, kept in step with the fleet's slots.
#[derive(Clone, Debug)]
pub(crate) struct GapCounts {
    counts: [i64; LEVELS],
    /// Each slot's level (`NONE`: not counted).
    of_slot: Vec<u8>,
    /// The least compute a class of the workload asks for: smaller gaps are
    /// closed.
    open_from: u32,
}

impl GapCounts {
    /// Counts the gaps of `slots` that a class of `classes` fits.
    pub fn new(slots: &[Slot], classes: &[Shape]) -> Self {
        let mut gaps = Self {
            counts: [0; LEVELS],
            of_slot: vec![NONE; slots.len()],
            open_from: open_from(classes),
        };
        gaps.update(0..slots.len(), slots);
        gaps
    }

    /// True when the counts still hold for `slots` slots judged against
    /// `classes` (they close the same gaps).
    pub fn holds_for(&self, classes: &[Shape], slots: usize) -> bool {
        self.of_slot.len() == slots && self.open_from == open_from(classes)
    }

    /// The level of `slot`'s gap, if counted: a shared GPU in use with room
    /// left that some class fits (and a client more allowed).
    fn level(&self, slot: &Slot) -> Option<usize> {
        let counted = slot.kind == SlotKind::Shared
            && !slot.allocated
            && slot.clients > 0
            && slot.clients < slot.max_clients
            && slot.free > 0
            && slot.free >= self.open_from;
        counted.then(|| ((slot.free / LEVEL_MILLI) as usize).min(LEVELS - 1))
    }

    /// Recounts `slots[range]` after they changed.
    pub fn update(&mut self, range: Range<usize>, slots: &[Slot]) {
        for i in range {
            let old = self.of_slot[i];
            if old != NONE {
                self.counts[usize::from(old)] -= 1;
            }
            self.of_slot[i] = match self.level(&slots[i]) {
                Some(level) => {
                    self.counts[level] += 1;
                    level as u8
                }
                None => NONE,
            };
        }
    }

    /// Change of Σ gap × N² (gap in GPUs, at the middle of its level) if
    /// `changes` were made.
    pub fn delta(&self, changes: &[Change]) -> f64 {
        let weight = |level: usize| (level as f64 + 0.5) * f64::from(LEVEL_MILLI) / 1000.0;
        let mut sum = 0.0;
        for change in changes {
            let left = self.level(&change.old);
            if let Some(level) = left {
                sum -= weight(level) * (2 * self.counts[level] - 1) as f64;
            }
            if let Some(level) = self.level(&change.new) {
                let n = self.counts[level] - i64::from(left == Some(level));
                sum += weight(level) * (2 * n + 1) as f64;
            }
        }
        sum
    }
}

/// The least GPU share any class asks for (`u32::MAX` without sharing
/// classes: nothing counted).
fn open_from(classes: &[Shape]) -> u32 {
    classes
        .iter()
        .filter_map(|class| match class.kind {
            ShapeKind::Frac(compute) => Some(compute),
            _ => None,
        })
        .min()
        .unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(free: u32, clients: u32) -> Slot {
        Slot {
            model: 0,
            pool: 0,
            kind: SlotKind::Shared,
            allocated: false,
            device: 0,
            nvlink: 0,
            free,
            mem_free: 1 << 20,
            clients,
            max_clients: 48,
            layout: 0,
        }
    }

    fn class(kind: ShapeKind) -> Shape {
        Shape {
            kind,
            cpu: 0,
            mem: 0,
            models: u128::MAX,
            pools: u128::MAX,
            profile: Vec::new(),
            gpu_mem: Vec::new(),
            nvlink: false,
            weight: 1,
        }
    }

    fn mix() -> Vec<Shape> {
        vec![
            class(ShapeKind::Whole(1)),
            class(ShapeKind::Frac(470)),
            class(ShapeKind::Frac(110)),
        ]
    }

    fn take(slot: Slot, compute: u32) -> Change {
        let mut new = slot;
        new.free -= compute;
        new.clients += 1;
        Change { old: slot, new }
    }

    #[test]
    fn counts_partly_used_gpus_with_a_gap_some_class_fits() {
        let mut full = shared(300, 1);
        full.max_clients = 1; // no client more: closed
        let mut slots = vec![
            shared(1000, 0), // idle: a new bin, not a gap
            shared(530, 1),
            shared(560, 1),
            shared(60, 2), // no class fits 60: closed
            shared(190, 1),
            full,
        ];
        let mut gaps = GapCounts::new(&slots, &mix());
        assert_eq!(gaps.counts[5], 2);
        assert_eq!(gaps.counts[1], 1);
        assert_eq!(gaps.counts.iter().sum::<i64>(), 3);
        // A 470 joins the first 530: it closes (60).
        slots[1].free = 60;
        slots[1].clients = 2;
        gaps.update(1..2, &slots);
        assert_eq!(gaps.counts[5], 1);
        assert_eq!(gaps.counts.iter().sum::<i64>(), 2);
        // Without sharing classes nothing counts.
        let whole = GapCounts::new(&slots, &[class(ShapeKind::Whole(1))]);
        assert_eq!(whole.counts.iter().sum::<i64>(), 0);
        assert!(!whole.holds_for(&mix(), slots.len()));
        assert!(gaps.holds_for(&mix(), slots.len()));
        assert!(!gaps.holds_for(&mix(), slots.len() + 1));
    }

    #[test]
    fn filling_a_common_gap_scores_better_than_opening_a_rare_one() {
        // Four lone 470s wait for a partner (gap 530); one GPU is idle.
        let slots = vec![shared(530, 1); 4];
        let gaps = GapCounts::new(&slots, &mix());
        let into_common = gaps.delta(&[take(shared(530, 1), 470)]);
        let onto_idle = gaps.delta(&[take(shared(1000, 0), 470)]);
        assert!(into_common < 0.0, "{into_common}");
        assert!(onto_idle > 0.0, "{onto_idle}");
        // Exactly: the 530 level loses one of four (0.55 × (16 − 9)); the
        // new 530 on an idle GPU makes five (0.55 × (25 − 16)).
        assert!((into_common + 0.55 * 7.0).abs() < 1e-9, "{into_common}");
        assert!((onto_idle - 0.55 * 9.0).abs() < 1e-9, "{onto_idle}");
        // A large gap costs more than a small one at the same count.
        let small = gaps.delta(&[take(shared(1000, 0), 810)]);
        let large = gaps.delta(&[take(shared(1000, 0), 190)]);
        assert!(small < large, "{small} {large}");
    }
}
