//! The entry point: place one request, explain the choice, or say why not.

use crate::mig::MigPlacement;
use crate::units::{ComputeMilli, CpuMilli, MemMiB};

use super::decision::{Decision, RankedPlace, ScoreBreakdown, Slice};
use super::error::PlacementError;
use super::fleet::Fleet;
use super::frag::delta;
use super::index::SlotKind;
use super::policy::Policy;
use super::request::{Demand, PlacementRequest};
use super::search::{Best, Passed, Ranked, Search};
use super::shape::{Shape, ShapeKind, ShapeSpec, NO_PROFILE};

impl Fleet {
    /// Chooses where `request` goes under `policy`. Deterministic: the same
    /// fleet, request and policy (including the random seed) give the same
    /// decision. The fleet is not changed; call [`Fleet::apply`] to commit.
    pub fn place(
        &self,
        request: &PlacementRequest,
        policy: Policy,
    ) -> Result<Decision, PlacementError> {
        self.place_avoiding(request, policy, None)
    }

    /// [`Fleet::place`], keeping off the host with id `avoid` (one held for
    /// another request); an unknown id avoids nothing.
    pub fn place_avoiding(
        &self,
        request: &PlacementRequest,
        policy: Policy,
        avoid: Option<crate::ids::HostId>,
    ) -> Result<Decision, PlacementError> {
        let shape = self.resolve(request)?;
        let exclusive = request.tenant.filter(|_| request.tenant_exclusive);
        let avoid = avoid.and_then(|id| self.host_ids.get(&id).copied());
        let mut search = Search::new(self, &shape, policy)
            .exclusive_for(exclusive)
            .for_tenant(request.tenant)
            .avoiding(avoid)
            .explained();
        search.run();
        let found = Found {
            candidates: search.candidates,
            ranked: std::mem::take(&mut search.ranked),
            passed: search.passed,
        };
        match search.best {
            Some(best) => Ok(self.decide(request, &shape, policy, &best, found)),
            None => Err(self.diagnose(request, &shape)),
        }
    }

    fn resolve(&self, request: &PlacementRequest) -> Result<Shape, PlacementError> {
        let spec = ShapeSpec {
            demand: &request.demand,
            cpu: request.cpu.0,
            mem: request.memory.0,
            allowed_models: &request.allowed_models,
            pool: request.pool.as_deref(),
            nvlink: request.nvlink_local,
            weight: 1,
        };
        Shape::resolve(&spec, &self.models, &self.pools)
    }

    fn decide(
        &self,
        request: &PlacementRequest,
        shape: &Shape,
        policy: Policy,
        best: &Best,
        found: Found,
    ) -> Decision {
        let h = best.host;
        let agg = &self.aggs[h];
        let host = &self.hosts[h];
        let cpu_after = agg.cpu_free - shape.cpu;
        let mem_after = agg.mem_free - shape.mem;
        let weighted_delta = best.delta.unwrap_or_else(|| {
            delta(
                &self.classes,
                self.host_cells(h),
                &best.changes,
                cpu_after,
                mem_after,
                &self.models,
            )
        });
        let to_gpus = |weighted: i64| {
            if self.total_weight > 0 {
                weighted as f64 / self.total_weight as f64 / 1000.0
            } else {
                0.0
            }
        };
        let before = to_gpus(self.host_frag_weighted(h));
        let frag_delta = to_gpus(weighted_delta);
        let leftover: u32 = best.changes.iter().map(|c| c.new.free).sum();
        let consumed: u32 = best
            .changes
            .iter()
            .map(|c| c.old.free.saturating_sub(c.new.free))
            .sum();
        let gpus: Vec<u32> = best
            .positions
            .iter()
            .filter_map(|&p| host.gpus.get(p).map(|g| g.index))
            .collect();
        let slice = match (shape.kind, best.changes.first()) {
            (ShapeKind::None, _) | (_, None) => Slice::HostOnly,
            (ShapeKind::Whole(_), _) => Slice::Whole,
            (_, Some(change)) if change.old.kind == SlotKind::Mig => {
                let m = usize::from(change.old.model);
                let name = shape
                    .profile
                    .get(m)
                    .filter(|p| **p != NO_PROFILE)
                    .and_then(|&p| {
                        self.models[m]
                            .mig
                            .as_ref()
                            .and_then(|t| t.spec().profiles.get(usize::from(p)))
                    })
                    .map_or_else(String::new, |p| p.name.to_string());
                Slice::Mig(MigPlacement {
                    profile: name,
                    start: best.mig_start.unwrap_or(0),
                })
            }
            (_, Some(change)) => Slice::Shared {
                compute: shape.compute(),
                memory: MemMiB(
                    shape
                        .gpu_mem
                        .get(usize::from(change.old.model))
                        .copied()
                        .unwrap_or(0),
                ),
            },
        };
        Decision {
            host: host.id,
            host_index: h,
            gpus,
            slice,
            cpu: request.cpu,
            memory: request.memory,
            tenant: request.tenant,
            score: ScoreBreakdown {
                policy: policy.name().to_string(),
                candidates: found.candidates,
                fragmentation_before: before,
                fragmentation_after: before + frag_delta,
                fragmentation_delta: frag_delta,
                gpu_waste: ComputeMilli(match shape.kind {
                    ShapeKind::Frac(compute) => consumed.saturating_sub(compute),
                    _ => 0,
                }),
                gpu_leftover: ComputeMilli(leftover),
                host_gpu_free_after: ComputeMilli(agg.free_total - consumed),
                host_cpu_free_after: CpuMilli(cpu_after),
                host_memory_free_after: MemMiB(mem_after),
                ranking: ranking(policy, shape.kind == ShapeKind::None)
                    .iter()
                    .map(|s| (*s).to_string())
                    .collect(),
                ranked: found
                    .ranked
                    .iter()
                    .map(|r| self.ranked_place(r, policy, shape.kind == ShapeKind::None))
                    .collect(),
                hosts_scanned: found.passed.hosts_scanned,
                hosts_short: found.passed.hosts_short,
                gpus_kept_apart: found.passed.gpus_kept_apart,
            },
        }
    }

    /// A ranked place as the explanation shows it: GPU indices, and the
    /// key in the units [`ranking`] names.
    fn ranked_place(&self, r: &Ranked, policy: Policy, host_only: bool) -> RankedPlace {
        let host = &self.hosts[r.host];
        let gpus = r
            .positions
            .iter()
            .filter_map(|&p| host.gpus.get(p).map(|g| g.index))
            .collect();
        let milli = |v: i64| v as f64 / 1000.0;
        let [a, b, c] = r.key;
        let scores = match policy {
            Policy::Pack if host_only => vec![milli(a), milli(b)],
            Policy::Pack => {
                let weight = self.total_weight.max(1) as f64;
                vec![a as f64 / weight / 1000.0, milli(b), milli(c)]
            }
            Policy::Fgd => vec![-a as f64],
            Policy::BestFit => vec![milli(a), milli(b), milli(c)],
            Policy::Spread => vec![a as f64, -milli(b), -milli(c)],
            Policy::FirstFit | Policy::Random { .. } => Vec::new(),
        };
        RankedPlace {
            host: host.id,
            gpus,
            mig_start: r.mig_start,
            scores,
        }
    }

    fn fits(&self, shape: &Shape) -> bool {
        let mut search = Search::new(self, shape, Policy::FirstFit);
        search.run();
        search.best.is_some()
    }

    /// Names the constraint that blocks `request`.
    fn diagnose(&self, request: &PlacementRequest, shape: &Shape) -> PlacementError {
        let host_short = PlacementError::InsufficientHostResources {
            cpu_milli: request.cpu.0,
            memory_mib: request.memory.0,
        };
        if shape.kind == ShapeKind::None {
            return host_short;
        }
        if !self
            .slots
            .iter()
            .any(|slot| shape.can_host(slot, &self.models).is_some())
        {
            if let Demand::Mig { profile } = &request.demand {
                return PlacementError::UnknownProfile {
                    profile: profile.clone(),
                };
            }
            let models = if request.allowed_models.is_empty() {
                "any".to_string()
            } else {
                request.allowed_models.join("|")
            };
            return PlacementError::NoMatchingGpu {
                models,
                pool: request.pool.clone().unwrap_or_else(|| "any".to_string()),
            };
        }
        let mut relaxed = shape.clone();
        relaxed.cpu = 0;
        relaxed.mem = 0;
        if let ShapeKind::Whole(count) = shape.kind {
            if shape.nvlink && count > 1 {
                let mut no_link = shape.clone();
                no_link.nvlink = false;
                if self.fits(&no_link) {
                    return PlacementError::NoNvlinkGroup { count };
                }
            }
        }
        // `fits` ignores the tenant rule: room that only it rules out.
        if request.tenant_exclusive && request.tenant.is_some() && self.fits(shape) {
            return PlacementError::TenantIsolation;
        }
        if self.fits(&relaxed) {
            return host_short;
        }
        PlacementError::InsufficientCapacity
    }
}

/// What a search found besides the winner.
struct Found {
    candidates: u32,
    ranked: Vec<Ranked>,
    passed: Passed,
}

/// What `policy` ranks places by, most important first (the names of
/// [`RankedPlace::scores`]); `host_only` for requests without GPU.
fn ranking(policy: Policy, host_only: bool) -> &'static [&'static str] {
    match policy {
        Policy::Pack if host_only => &[
            "GPU left free on the host (GPUs; least first: no GPU stranded)",
            "CPU left on the host (cores; least first)",
        ],
        Policy::Pack => &[
            "fragmentation added, with compute wasted, GPU stranded without CPU or memory, and gap balance (GPUs; least first)",
            "compute left on its GPUs (GPUs; least first)",
            "compute left on the host (GPUs; least first)",
        ],
        Policy::Fgd => &["FGD score (highest first)"],
        Policy::BestFit => &[
            "compute left on its GPUs (GPUs; least first)",
            "compute left on the host (GPUs; least first)",
            "CPU left on the host (cores; least first)",
        ],
        Policy::Spread => &[
            "the tenant's slices already on the host (fewest first)",
            "compute free on the host after (GPUs; most first)",
            "compute free on its GPUs after (GPUs; most first)",
        ],
        Policy::FirstFit => &["the first place in fleet order with room"],
        Policy::Random { .. } => &["chosen at random among every place with room"],
    }
}
