//! The mix of shapes the fleet sees. Fragmentation is measured against it:
//! free GPU capacity counts as fragmented for a shape when that shape cannot
//! use it (Weng et al., USENIX ATC '23).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::units::{CpuMilli, MemMiB};

use super::request::{Demand, PlacementRequest};

/// Default number of classes kept by [`Workload::from_requests`]: enough to
/// cover the common shapes, few enough to keep a decision fast.
pub const DEFAULT_MAX_CLASSES: usize = 24;

/// One shape of the workload and how often it occurs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadClass {
    /// The GPU demand of the shape ([`Demand::None`] only in a
    /// [`Workload::typical`] mix, where CPU-only work counts too).
    pub demand: Demand,
    /// Typical (median) host CPU of the shape.
    pub cpu: CpuMilli,
    /// Typical (median) host memory of the shape.
    pub memory: MemMiB,
    /// Allowed models (sorted); empty = any.
    pub allowed_models: Vec<String>,
    /// Pool constraint.
    pub pool: Option<String>,
    /// Relative frequency (e.g. a count of requests).
    pub weight: u64,
}

/// A distribution of request shapes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    classes: Vec<WorkloadClass>,
}

type ClassKey = (Demand, Vec<String>, Option<String>);

/// The requests of a workload grouped as [`Workload::from_requests`]
/// groups them, kept so that one more request costs O(log n), not a pass
/// over all of them: what an admission adds to a kept fleet's mix.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkloadTally {
    /// Per class: its requests' CPU and memory, each sorted.
    groups: BTreeMap<ClassKey, (Vec<CpuMilli>, Vec<MemMiB>)>,
}

/// The middle of the sorted `values` (the upper one of an even count).
fn median<T: Copy + Default>(values: &[T]) -> T {
    values.get(values.len() / 2).copied().unwrap_or_default()
}

/// Inserts `value` into the sorted `values`, keeping them sorted.
fn insert_sorted<T: Ord>(values: &mut Vec<T>, value: T) {
    let at = values.partition_point(|v| *v <= value);
    values.insert(at, value);
}

impl WorkloadTally {
    /// The tally of `requests`.
    pub fn from_requests<'a, I>(requests: I) -> Self
    where
        I: IntoIterator<Item = &'a PlacementRequest>,
    {
        // Appended, then sorted once: O(n log n), where inserting each in
        // order would be O(n²) for a large pool.
        let mut tally = Self::default();
        for request in requests {
            if let Some((cpus, mems)) = tally.group_of(request) {
                cpus.push(request.cpu);
                mems.push(request.memory);
            }
        }
        for (cpus, mems) in tally.groups.values_mut() {
            cpus.sort_unstable();
            mems.sort_unstable();
        }
        tally
    }

    /// Counts one more request (one without GPU demand counts for nothing).
    pub fn add(&mut self, request: &PlacementRequest) {
        if let Some((cpus, mems)) = self.group_of(request) {
            insert_sorted(cpus, request.cpu);
            insert_sorted(mems, request.memory);
        }
    }

    /// The CPU and memory lists of `request`'s class (`None` for a request
    /// without GPU demand).
    fn group_of(
        &mut self,
        request: &PlacementRequest,
    ) -> Option<&mut (Vec<CpuMilli>, Vec<MemMiB>)> {
        if request.demand == Demand::None {
            return None;
        }
        let mut models = request.allowed_models.clone();
        models.sort_unstable();
        models.dedup();
        Some(
            self.groups
                .entry((request.demand.clone(), models, request.pool.clone()))
                .or_default(),
        )
    }

    /// The workload: every class with its median CPU and memory, the
    /// `max_classes` most frequent kept (ties broken by shape).
    pub fn workload(&self, max_classes: usize) -> Workload {
        let mut classes: Vec<WorkloadClass> = self
            .groups
            .iter()
            .map(
                |((demand, allowed_models, pool), (cpus, mems))| WorkloadClass {
                    weight: cpus.len() as u64,
                    cpu: median(cpus),
                    memory: median(mems),
                    demand: demand.clone(),
                    allowed_models: allowed_models.clone(),
                    pool: pool.clone(),
                },
            )
            .collect();
        // Stable sort: equal weights keep the BTreeMap (shape) order.
        classes.sort_by_key(|c| std::cmp::Reverse(c.weight));
        classes.truncate(max_classes);
        Workload { classes }
    }
}

impl Workload {
    /// A workload from explicit classes; classes with no GPU demand or zero
    /// weight are dropped, since they cannot strand GPU capacity.
    pub fn new(classes: Vec<WorkloadClass>) -> Self {
        let classes = classes
            .into_iter()
            .filter(|c| c.weight > 0 && c.demand != Demand::None)
            .collect();
        Self { classes }
    }

    /// Groups requests by GPU demand, models and pool; each class takes the
    /// median CPU and memory of its requests. Keeps the `max_classes` most
    /// frequent classes (ties broken by shape, so the result is deterministic).
    pub fn from_requests<'a, I>(requests: I, max_classes: usize) -> Self
    where
        I: IntoIterator<Item = &'a PlacementRequest>,
    {
        WorkloadTally::from_requests(requests).workload(max_classes)
    }

    /// The target workload of the FGD paper (the simulator's
    /// `GetTypicalPods` with the paper's settings): requests grouped by exact
    /// CPU, GPU demand, models and pool, CPU-only requests included (a CPU
    /// request of 0 counts as 100 millicores, as Kubernetes scores it), most
    /// frequent first (ties: larger shape first), kept until they cover
    /// `popularity` (0..=1; the paper uses 0.95) of all requests. Memory is
    /// not part of the shape.
    pub fn typical<'a, I>(requests: I, popularity: f64) -> Self
    where
        I: IntoIterator<Item = &'a PlacementRequest>,
    {
        type TypicalKey = (CpuMilli, Demand, Vec<String>, Option<String>);
        let mut counts: BTreeMap<TypicalKey, u64> = BTreeMap::new();
        let mut total = 0u64;
        for request in requests {
            let mut models = request.allowed_models.clone();
            models.sort_unstable();
            models.dedup();
            let cpu = if request.cpu.0 == 0 {
                CpuMilli(100)
            } else {
                request.cpu
            };
            *counts
                .entry((cpu, request.demand.clone(), models, request.pool.clone()))
                .or_default() += 1;
            total += 1;
        }
        let mut ranked: Vec<(TypicalKey, u64)> = counts.into_iter().collect();
        // Count descending; among equal counts the larger key first (the
        // simulator sorts by reversed (count, cpu, gpu, ...)).
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
        let wanted = popularity.clamp(0.0, 1.0) * total as f64;
        let mut covered = 0u64;
        let mut classes = Vec::new();
        for ((cpu, demand, allowed_models, pool), count) in ranked {
            if covered as f64 >= wanted && !classes.is_empty() {
                break;
            }
            covered += count;
            classes.push(WorkloadClass {
                demand,
                cpu,
                memory: MemMiB(0),
                allowed_models,
                pool,
                weight: count,
            });
        }
        Self { classes }
    }

    /// The classes.
    pub fn classes(&self) -> &[WorkloadClass] {
        &self.classes
    }

    /// True when there is no class: `pack` then degrades to best-fit.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }

    /// Sum of all weights.
    pub fn total_weight(&self) -> u64 {
        self.classes.iter().map(|c| c.weight).sum()
    }
}
