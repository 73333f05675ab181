//! Property tests: plans applied to the simulated GPU always reach the desired
//! state through states the hardware accepts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use proptest::prelude::*;

use super::*;
use crate::catalogue::{all_models, GpuModel};
use crate::mig::{free_starts, maximal_layouts_with, validate, MigPlacement};
use crate::units::MemMiB;

/// xorshift64*: the test derives a whole scenario from one proptest seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn models() -> Vec<GpuModel> {
    let mut v: Vec<GpuModel> = all_models()
        .iter()
        .filter(|m| m.mig.is_some())
        .copied()
        .collect();
    v.push(crate::catalogue::lookup("NVIDIA L4", 23034));
    v.push(GpuModel::generic(12_000));
    v
}

fn compute_of(model: &GpuModel, profile: &str) -> u8 {
    model.mig.unwrap().profile(profile).unwrap().compute_slices
}

/// Compute instances for a desired GPU instance: never empty.
fn random_desired_cis(rng: &mut Rng, gi_compute: u8) -> Vec<ComputeInstance> {
    let cis = random_cis(rng, gi_compute);
    if cis.is_empty() {
        vec![ComputeInstance::whole(gi_compute)]
    } else {
        cis
    }
}

fn random_cis(rng: &mut Rng, gi_compute: u8) -> Vec<ComputeInstance> {
    match rng.below(5) {
        0 => Vec::new(),
        1 => (0..gi_compute)
            .map(|start| ComputeInstance { start, size: 1 })
            .collect(),
        _ => vec![ComputeInstance::whole(gi_compute)],
    }
}

/// Maximal layouts (with `+me` variants) per model name, computed once.
fn layouts_of(model: &GpuModel) -> Vec<Vec<MigPlacement>> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    type Cache = Mutex<HashMap<&'static str, Vec<Vec<MigPlacement>>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut map = cache.lock().unwrap();
    map.entry(model.name)
        .or_insert_with(|| maximal_layouts_with(model, |_| true))
        .clone()
}

fn random_layout(rng: &mut Rng, model: &GpuModel) -> Vec<MigPlacement> {
    let layouts = layouts_of(model);
    let chosen = &layouts[rng.below(layouts.len())];
    chosen.iter().filter(|_| rng.chance(70)).cloned().collect()
}

/// Adds random instances to `layout` where they fit.
fn grow(rng: &mut Rng, model: &GpuModel, layout: &mut Vec<MigPlacement>) {
    let spec = model.mig.unwrap();
    for _ in 0..4 {
        let profile = &spec.profiles[rng.below(spec.profiles.len())];
        let starts = free_starts(model, layout, profile.name);
        if !starts.is_empty() && rng.chance(60) {
            layout.push(MigPlacement::new(
                profile.name,
                starts[rng.below(starts.len())],
            ));
        }
    }
}

fn random_mps(rng: &mut Rng) -> Option<MpsSettings> {
    rng.chance(40).then(|| MpsSettings {
        default_active_thread_percentage: 1 + rng.below(100) as u8,
        default_pinned_mem_limit: rng
            .chance(50)
            .then(|| MemMiB(1024 * (1 + rng.below(8) as u64))),
    })
}

fn random_replicas(rng: &mut Rng) -> u32 {
    [1, 1, 2, 4, 7, 64][rng.below(6)]
}

fn random_observed(rng: &mut Rng, model: &GpuModel) -> GpuObserved {
    if model.mig.is_some() && rng.chance(60) {
        let instances = random_layout(rng, model)
            .into_iter()
            .map(|placement| {
                let cis = random_cis(rng, compute_of(model, &placement.profile));
                let in_use = !cis.is_empty() && rng.chance(40);
                ObservedInstance {
                    placement,
                    compute_instances: cis,
                    in_use,
                }
            })
            .collect();
        GpuObserved {
            mig_enabled: true,
            instances,
            processes_running: false,
            allocations_running: Vec::new(),
            mps: None,
            mps_servers: Vec::new(),
            mps_strays: Vec::new(),
            time_slice_replicas: random_replicas(rng),
        }
    } else {
        let processes_running = rng.chance(50);
        let mps = random_mps(rng);
        GpuObserved {
            mig_enabled: false,
            instances: Vec::new(),
            processes_running,
            allocations_running: (0..3)
                .filter(|_| processes_running && rng.chance(50))
                .map(crate::ids::AllocationId::new)
                .collect(),
            mps,
            mps_servers: match mps {
                Some(m) if rng.chance(50) => vec![crate::plan::MpsServer {
                    pid: 100,
                    active_thread_percentage: m.default_active_thread_percentage,
                    pinned_mem_limit: None,
                }],
                _ => Vec::new(),
            },
            mps_strays: Vec::new(),
            time_slice_replicas: random_replicas(rng),
        }
    }
}

fn random_desired(rng: &mut Rng, model: &GpuModel, observed: &GpuObserved) -> GpuDesired {
    let released = Released {
        instances: observed
            .instances
            .iter()
            .map(|i| i.placement.start)
            .filter(|_| rng.chance(50))
            .collect(),
        whole_gpu: rng.chance(30),
        allocations: (0..3)
            .filter(|_| rng.chance(30))
            .map(crate::ids::AllocationId::new)
            .collect(),
    };
    if model.mig.is_some() && rng.chance(60) {
        let mut layout: Vec<MigPlacement> = if observed.mig_enabled && rng.chance(60) {
            observed
                .instances
                .iter()
                .map(|i| i.placement.clone())
                .filter(|_| rng.chance(70))
                .collect()
        } else {
            random_layout(rng, model)
        };
        grow(rng, model, &mut layout);
        let instances = layout
            .into_iter()
            .map(|placement| {
                let kept = observed
                    .instances
                    .iter()
                    .find(|o| o.placement == placement && rng.chance(70));
                let compute_instances = match kept {
                    Some(o) if !o.compute_instances.is_empty() => o.compute_instances.clone(),
                    _ => random_desired_cis(rng, compute_of(model, &placement.profile)),
                };
                DesiredInstance {
                    placement,
                    compute_instances,
                }
            })
            .collect();
        GpuDesired {
            mig_enabled: true,
            instances,
            mps: None,
            time_slice_replicas: random_replicas(rng),
            released,
            mps_clients: Vec::new(),
            mps_strays: Default::default(),
        }
    } else {
        let mps = random_mps(rng);
        let mps_clients = match mps {
            Some(_) => (0..rng.below(3) as i64)
                .map(|id| crate::plan::MpsGrant {
                    allocation: crate::ids::AllocationId::new(id),
                    active_thread_percentage: 1 + rng.below(100) as u8,
                    pinned_mem_limit: MemMiB(1024 * (1 + rng.below(8) as u64)),
                })
                .collect(),
            None => Vec::new(),
        };
        GpuDesired {
            mig_enabled: false,
            instances: Vec::new(),
            mps,
            time_slice_replicas: random_replicas(rng),
            released,
            mps_clients,
            mps_strays: Default::default(),
        }
    }
}

fn unchanged(observed: &ObservedInstance, desired: &GpuDesired) -> bool {
    desired.mig_enabled
        && desired.instances.iter().any(|d| {
            let mut a = d.compute_instances.clone();
            let mut b = observed.compute_instances.clone();
            a.sort_unstable();
            b.sort_unstable();
            d.placement == observed.placement && a == b
        })
}

#[test]
fn generated_scenarios_mostly_have_plans() {
    // Guards against a vacuous property: most scenarios must reach the Ok path.
    let models = models();
    let (mut ok, mut busy, mut ops_total, mut stop_only) = (0, 0, 0, 0);
    for seed in 1..600u64 {
        let model = models[(seed as usize) % models.len()];
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let observed = random_observed(&mut rng, &model);
        let desired = random_desired(&mut rng, &model, &observed);
        let same_mode = observed.mig_enabled == desired.mig_enabled
            && observed.mps.is_some() == desired.mps.is_some();
        if same_mode && observed.processes_running && desired.released.whole_gpu {
            stop_only += 1;
        }
        match plan(&model, &observed, &desired) {
            Ok(ops) => {
                ok += 1;
                ops_total += ops.len();
            }
            Err(PlanError::InUse { .. } | PlanError::GpuInUse) => busy += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert!(ok > 300, "ok {ok} busy {busy}");
    assert!(busy > 30, "ok {ok} busy {busy}");
    assert!(ops_total > ok * 2, "plans are not trivial: {ops_total} ops");
    // A released whole GPU with processes and no mode change is generated.
    assert!(
        stop_only > 5,
        "only {stop_only} released busy GPUs without mode change"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(768))]

    #[test]
    fn plans_reach_the_desired_state_safely(seed in any::<u64>(), which in 0usize..8) {
        let models = models();
        let model = models[which % models.len()];
        let mut rng = Rng(seed | 1);
        let observed = random_observed(&mut rng, &model);
        let desired = random_desired(&mut rng, &model, &observed);
        let start = SimGpu::from_observed(model, observed.clone()).unwrap();
        prop_assert_eq!(start.observed(), &observed);

        match plan(&model, &observed, &desired) {
            Ok(ops) => {
                let mut sim = start.clone();
                for (i, op) in ops.iter().enumerate() {
                    let applied = sim.apply(op);
                    prop_assert!(applied.is_ok(), "op {} {:?} refused: {:?}\n{:#?}", i, op, applied, ops);
                    if sim.observed().mig_enabled {
                        prop_assert!(validate(&model, &sim.layout()).is_ok());
                    }
                }
                prop_assert!(sim.satisfies(&desired), "{:#?}\n{:#?}", ops, sim.observed());
                for a in &desired.released.allocations {
                    prop_assert!(!sim.observed().allocations_running.contains(a), "{:?} still runs", a);
                }
                if observed.processes_running && desired.released.whole_gpu {
                    prop_assert!(ops.contains(&Op::StopProcesses { gi_start: None }), "{:#?}", ops);
                    prop_assert!(!sim.observed().processes_running);
                }
                prop_assert_eq!(plan(&model, sim.observed(), &desired), Ok(vec![]));

                for op in &ops {
                    let touched = match op {
                        Op::DestroyGpuInstance { start }
                        | Op::DestroyComputeInstance { gi_start: start, .. }
                        | Op::StopProcesses { gi_start: Some(start) } => Some(*start),
                        _ => None,
                    };
                    if let Some(start) = touched {
                        let o = observed.instances.iter().find(|o| o.placement.start == start).unwrap();
                        if o.in_use {
                            prop_assert!(desired.released.covers(start), "destroyed busy {}", o.placement);
                        }
                        if unchanged(o, &desired) {
                            prop_assert!(
                                matches!(op, Op::StopProcesses { .. }) && desired.released.covers(start),
                                "touched kept instance {} with {:?}", o.placement, op
                            );
                        }
                    }
                    if let Op::StopProcesses { gi_start: None } = op {
                        prop_assert!(desired.released.whole_gpu);
                    }
                }
            }
            Err(PlanError::InUse { placement }) => {
                let o = observed.instances.iter().find(|o| o.placement == placement).unwrap();
                prop_assert!(o.in_use && !desired.released.covers(placement.start));
            }
            Err(PlanError::GpuInUse) => {
                prop_assert!(observed.processes_running && !desired.released.whole_gpu);
            }
            Err(other) => prop_assert!(false, "unexpected error {}", other),
        }
    }

    #[test]
    fn keeping_the_observed_state_plans_nothing(seed in any::<u64>(), which in 0usize..8) {
        let models = models();
        let model = models[which % models.len()];
        let mut rng = Rng(seed | 1);
        let observed = random_observed(&mut rng, &model);
        let keep = GpuDesired::keep(&observed);
        match observed.instances.iter().find(|i| i.compute_instances.is_empty()) {
            // A GPU instance without compute instances is never a valid target.
            Some(bare) => prop_assert_eq!(
                plan(&model, &observed, &keep),
                Err(PlanError::NoComputeInstances { gi_start: bare.placement.start })
            ),
            None => prop_assert_eq!(plan(&model, &observed, &keep), Ok(vec![])),
        }
    }
}
