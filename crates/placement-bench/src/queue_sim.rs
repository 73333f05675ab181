//! A discrete-event replay of a pool's queue over time: jobs arrive, wait,
//! run for their duration (their lease is an over-estimate, as users give
//! them) and leave. Every scheduling decision is made by the production code,
//! `tessera_core::schedule::plan_queue`, on a `tessera_core::placement::Fleet`;
//! only the workload is generated here.
//!
//! Compares queue disciplines: strict FIFO (Tessera's queue before backfill),
//! backfill without reservations, and EASY backfill (the default: a host is
//! kept for a request that waited too long).

use serde::Serialize;
use tessera_core::ids::{AllocationId, TenantId};
use tessera_core::placement::{
    Demand, Fleet, FleetError, GpuState, HostState, PlacementRequest, PoolPlacement, SplitMix64,
    Workload,
};
use tessera_core::schedule::{
    decayed_usage, plan_queue, Discipline, Holding, QueueEntry, QueuePolicy, UseSpan, Waiting,
};
use tessera_core::units::{CpuMilli, MemMiB};

use crate::stats::percentile;

const HOUR_MS: i64 = 3_600_000;

/// A queue discipline to compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Variant {
    /// Its name in the report.
    pub name: &'static str,
    /// Strict or backfill.
    pub discipline: Discipline,
    /// When a waiting request gets a reservation (`None`: never).
    pub reserve_after_ms: Option<i64>,
    /// Fair share's usage half-life (`None`: no fair share, age decides).
    pub half_life_ms: Option<i64>,
}

/// FIFO, plain backfill, EASY backfill reserving after `reserve_after_ms`,
/// and that with fair share (equal weights, usage halving every 24 h).
pub fn variants(reserve_after_ms: i64) -> [Variant; 4] {
    [
        Variant {
            name: "fifo",
            discipline: Discipline::Fifo,
            reserve_after_ms: None,
            half_life_ms: None,
        },
        Variant {
            name: "backfill (no reservation)",
            discipline: Discipline::Backfill,
            reserve_after_ms: None,
            half_life_ms: None,
        },
        Variant {
            name: "backfill + reservation",
            discipline: Discipline::Backfill,
            reserve_after_ms: Some(reserve_after_ms),
            half_life_ms: None,
        },
        Variant {
            name: "backfill + reservation + fair share",
            discipline: Discipline::Backfill,
            reserve_after_ms: Some(reserve_after_ms),
            half_life_ms: Some(24 * HOUR_MS),
        },
    ]
}

/// The generated workload's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Params {
    /// Hosts of 8 whole GPUs.
    pub hosts: usize,
    /// Jobs to replay.
    pub jobs: usize,
    /// Offered load: GPU-hours asked for per GPU-hour of capacity.
    pub load: f64,
    /// Tenants the jobs are spread over.
    pub tenants: i64,
    /// Share of the jobs that come from tenant 0 (the rest spread evenly
    /// over the others).
    pub heavy_share: f64,
    /// The pool's placement policy.
    pub placement: PoolPlacement,
    /// Seed.
    pub seed: u64,
}

/// One job of the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// Id (also the order of arrival).
    pub id: i64,
    /// Tenant.
    pub tenant: i64,
    /// GPUs (whole).
    pub gpus: u32,
    /// Arrival (ms).
    pub arrival: i64,
    /// How long it really runs (ms).
    pub runs: i64,
    /// Lease asked for (ms, at least `runs`).
    pub lease: i64,
}

/// Job sizes, GPUs, weighted: mostly single GPUs, a tail of whole hosts.
const SIZES: [(u32, u64); 4] = [(1, 55), (2, 20), (4, 15), (8, 10)];

/// A uniform number in (0, 1).
pub(crate) fn uniform(rng: &mut SplitMix64) -> f64 {
    (rng.below(1 << 53) as f64 + 0.5) / (1u64 << 53) as f64
}

/// One value of `weighted` (value, weight), drawn by weight.
pub(crate) fn pick<T: Copy>(rng: &mut SplitMix64, weighted: &[(T, u64)]) -> T {
    let total: u64 = weighted.iter().map(|(_, w)| w).sum();
    let mut at = rng.below(total);
    for (v, w) in weighted {
        if at < *w {
            return *v;
        }
        at -= w;
    }
    weighted[0].0
}

/// An arrival as users make them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Arrival {
    /// When (ms).
    pub at: i64,
    /// Tenant.
    pub tenant: i64,
    /// Whole GPUs.
    pub gpus: u32,
    /// How long it really runs (ms).
    pub runs: i64,
    /// Lease asked for (ms, at least `runs`).
    pub lease: i64,
}

/// Seeded arrivals: Poisson at the rate that offers `load` of `hosts` × 8
/// GPUs, sizes from [`SIZES`], durations exponential around 2 h (5 min to
/// 24 h), leases 1–3 times the duration rounded up to whole hours, tenant 0
/// submitting `heavy_share` of them.
pub(crate) struct Arrivals {
    rng: SplitMix64,
    at_h: f64,
    rate_per_h: f64,
}

impl Arrivals {
    pub(crate) fn new(seed: u64, load: f64, hosts: usize) -> Self {
        let total: u64 = SIZES.iter().map(|(_, w)| w).sum();
        let mean_gpus = SIZES
            .iter()
            .map(|(g, w)| f64::from(*g) * *w as f64)
            .sum::<f64>()
            / total as f64;
        // Jobs per hour so that mean_gpus × mean_runs × rate = load × capacity.
        Self {
            rng: SplitMix64::new(seed),
            at_h: 0.0,
            rate_per_h: load * (hosts * 8) as f64 / (mean_gpus * MEAN_RUNS_H),
        }
    }

    /// The next arrival.
    pub(crate) fn next(&mut self, tenants: i64, heavy_share: f64) -> Arrival {
        let rng = &mut self.rng;
        self.at_h += -uniform(rng).ln() / self.rate_per_h;
        let gpus = pick(rng, &SIZES);
        let runs_h = (-uniform(rng).ln() * MEAN_RUNS_H).clamp(1.0 / 12.0, 24.0);
        let lease_h = (runs_h * (1.0 + 2.0 * uniform(rng))).ceil();
        let tenant = if tenants <= 1 || uniform(rng) < heavy_share {
            0
        } else {
            1 + rng.below((tenants - 1) as u64) as i64
        };
        Arrival {
            at: (self.at_h * HOUR_MS as f64) as i64,
            tenant,
            gpus,
            runs: (runs_h * HOUR_MS as f64) as i64,
            lease: (lease_h as i64) * HOUR_MS,
        }
    }

    /// The generator, for further draws about the arrival just made.
    pub(crate) fn rng(&mut self) -> &mut SplitMix64 {
        &mut self.rng
    }
}

const MEAN_RUNS_H: f64 = 2.0;

/// A seeded workload (see [`Arrivals`]).
pub fn workload(p: &Params) -> Vec<Job> {
    let mut arrivals = Arrivals::new(p.seed, p.load, p.hosts);
    (0..p.jobs)
        .map(|i| {
            let a = arrivals.next(p.tenants, p.heavy_share);
            Job {
                id: i as i64,
                tenant: a.tenant,
                gpus: a.gpus,
                arrival: a.at,
                runs: a.runs,
                lease: a.lease,
            }
        })
        .collect()
}

/// What one replay measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outcome {
    /// The discipline.
    pub variant: String,
    /// GPU-time allocated over capacity × the time until the last arrival.
    pub allocation_ratio: f64,
    /// Median wait, hours, all jobs.
    pub wait_p50_h: f64,
    /// 95th percentile wait, hours, all jobs.
    pub wait_p95_h: f64,
    /// 95th percentile wait, hours, jobs of one GPU.
    pub small_wait_p95_h: f64,
    /// 95th percentile wait, hours, jobs of a whole host (8 GPUs).
    pub large_wait_p95_h: f64,
    /// 95th percentile wait, hours, jobs of the tenant that submits most.
    pub heavy_tenant_wait_p95_h: f64,
    /// 95th percentile wait, hours, jobs of the other tenants.
    pub light_tenants_wait_p95_h: f64,
    /// Longest wait, hours (jobs still waiting at the end count until then).
    pub max_wait_h: f64,
    /// Jain's fairness index over tenants' mean bounded slowdown
    /// ((wait + run) / max(run, 10 min)); 1 = all tenants fare alike.
    pub jain_fairness: f64,
    /// Jobs that had not started when the replay ended.
    pub never_started: usize,
    /// Scheduling passes run.
    pub passes: usize,
}

/// `hosts` idle hosts of 8 whole H100s.
pub(crate) fn fleet(hosts: usize) -> Result<Fleet, FleetError> {
    let hosts = (0..hosts)
        .map(|h| HostState {
            id: tessera_core::ids::HostId::new(h as i64),
            cpu_free: CpuMilli(128_000),
            memory_free: MemMiB(1024 * 1024),
            gpus: (0..8)
                .map(|i| GpuState::exclusive(i, "H100-80GB", MemMiB(81_559)))
                .collect(),
        })
        .collect();
    Fleet::new(hosts, Workload::default())
}

/// Replays `jobs` under `variant`.
pub fn replay(p: &Params, jobs: &[Job], variant: &Variant) -> Result<Outcome, FleetError> {
    let mut fleet = fleet(p.hosts)?;
    let policy = QueuePolicy {
        placement: p.placement.policy(),
        discipline: variant.discipline,
        reserve_after_ms: variant.reserve_after_ms.unwrap_or(i64::MAX),
        estimate: false,
    };
    // Running: (decision, real end, lease end).
    let mut running: Vec<(Holding, i64)> = Vec::new();
    let mut queue: Vec<Waiting> = Vec::new();
    let mut started: Vec<Option<i64>> = vec![None; jobs.len()];
    let mut spans: Vec<Vec<UseSpan>> = vec![Vec::new(); p.tenants.max(1) as usize];
    let mut next = 0usize;
    let mut busy_gpu_ms: i128 = 0;
    let mut used_gpus: i64 = 0;
    let mut last_t = 0i64;
    let horizon = jobs.last().map_or(0, |j| j.arrival);
    let mut passes = 0;
    loop {
        let next_arrival = jobs.get(next).map(|j| j.arrival);
        let next_end = running.iter().map(|(_, end)| *end).min();
        let Some(now) = [next_arrival, next_end].into_iter().flatten().min() else {
            break;
        };
        if now > horizon && queue.is_empty() {
            break;
        }
        let until = now.min(horizon);
        if until > last_t {
            busy_gpu_ms += i128::from(used_gpus) * i128::from(until - last_t);
            last_t = until;
        }
        running.retain(|(h, end)| {
            if *end <= now {
                let _ = fleet.release(&h.decision);
                used_gpus -= h.decision.gpus.len() as i64;
                false
            } else {
                true
            }
        });
        while let Some(j) = jobs.get(next).filter(|j| j.arrival <= now) {
            queue.push(Waiting {
                entry: QueueEntry {
                    id: AllocationId::new(j.id),
                    qos: Default::default(),
                    priority: 0,
                    tenant_id: TenantId::new(j.tenant),
                    tenant_usage: 0,
                    tenant_weight: 1,
                    requested_at: j.arrival,
                },
                request: PlacementRequest::new(Demand::Whole { count: j.gpus }),
                hold_ms: j.lease,
            });
            next += 1;
        }
        if let Some(half_life) = variant.half_life_ms {
            let usage: Vec<u64> = spans
                .iter()
                .map(|s| decayed_usage(s, now, half_life))
                .collect();
            for w in &mut queue {
                w.entry.tenant_usage = usage[w.entry.tenant_id.get() as usize];
            }
        }
        let holdings: Vec<Holding> = running.iter().map(|(h, _)| h.clone()).collect();
        let plan = plan_queue(&mut fleet, &queue, &holdings, now, &policy);
        passes += 1;
        for (id, d) in plan.placed {
            let job = &jobs[id.get() as usize];
            started[id.get() as usize] = Some(now);
            used_gpus += d.gpus.len() as i64;
            spans[job.tenant as usize].push(UseSpan {
                start: now,
                end: Some(now + job.runs),
                milli: 1000 * d.gpus.len() as u64,
            });
            running.push((
                Holding {
                    decision: d,
                    until: now + job.lease,
                },
                now + job.runs,
            ));
        }
        if !queue.is_empty() {
            queue.retain(|w| started[w.entry.id.get() as usize].is_none());
        }
        if next >= jobs.len() && now >= horizon && running.is_empty() {
            break;
        }
    }
    Ok(outcome(
        p,
        jobs,
        &started,
        variant,
        busy_gpu_ms,
        horizon,
        last_t.max(horizon),
        passes,
    ))
}

#[allow(clippy::too_many_arguments)]
fn outcome(
    p: &Params,
    jobs: &[Job],
    started: &[Option<i64>],
    variant: &Variant,
    busy_gpu_ms: i128,
    horizon: i64,
    end: i64,
    passes: usize,
) -> Outcome {
    let hours = |ms: i64| ms as f64 / HOUR_MS as f64;
    let wait = |j: &Job| started[j.id as usize].unwrap_or(end) - j.arrival;
    let sorted = |filter: &dyn Fn(&Job) -> bool| {
        let mut w: Vec<f64> = jobs
            .iter()
            .filter(|j| filter(j))
            .map(|j| hours(wait(j)))
            .collect();
        w.sort_by(f64::total_cmp);
        w
    };
    let all = sorted(&|_| true);
    let mut slowdown = vec![(0.0f64, 0usize); p.tenants.max(1) as usize];
    for j in jobs {
        let s = (wait(j) + j.runs) as f64 / j.runs.max(HOUR_MS / 6) as f64;
        let t = &mut slowdown[j.tenant as usize];
        t.0 += s;
        t.1 += 1;
    }
    let means: Vec<f64> = slowdown
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| s / *n as f64)
        .collect();
    let (sum, sum_sq) = means
        .iter()
        .fold((0.0, 0.0), |(a, b), x| (a + x, b + x * x));
    Outcome {
        variant: variant.name.to_string(),
        allocation_ratio: busy_gpu_ms as f64 / ((p.hosts * 8) as f64 * horizon.max(1) as f64),
        wait_p50_h: percentile(&all, 50.0),
        wait_p95_h: percentile(&all, 95.0),
        small_wait_p95_h: percentile(&sorted(&|j| j.gpus == 1), 95.0),
        large_wait_p95_h: percentile(&sorted(&|j| j.gpus == 8), 95.0),
        heavy_tenant_wait_p95_h: percentile(&sorted(&|j| j.tenant == 0), 95.0),
        light_tenants_wait_p95_h: percentile(&sorted(&|j| j.tenant != 0), 95.0),
        max_wait_h: all.last().copied().unwrap_or(0.0),
        jain_fairness: if sum_sq > 0.0 {
            sum * sum / (means.len() as f64 * sum_sq)
        } else {
            1.0
        },
        never_started: started.iter().filter(|s| s.is_none()).count(),
        passes,
    }
}

/// Every variant on one workload.
pub fn compare(p: &Params, reserve_after_ms: i64) -> Result<Vec<Outcome>, FleetError> {
    let jobs = workload(p);
    variants(reserve_after_ms)
        .iter()
        .map(|v| replay(p, &jobs, v))
        .collect()
}

/// Every variant on `seeds` workloads (seeds `p.seed..`): the mean of each
/// figure; jobs that never started and passes are summed.
pub fn compare_seeds(
    p: &Params,
    seeds: u64,
    reserve_after_ms: i64,
) -> Result<Vec<Outcome>, FleetError> {
    let runs: Vec<Vec<Outcome>> = (0..seeds.max(1))
        .map(|i| {
            compare(
                &Params {
                    seed: p.seed + i,
                    ..*p
                },
                reserve_after_ms,
            )
        })
        .collect::<Result<_, _>>()?;
    let n = runs.len() as f64;
    let variants = runs.first().map_or(0, Vec::len);
    Ok((0..variants)
        .map(|v| {
            let mean = |f: fn(&Outcome) -> f64| runs.iter().map(|r| f(&r[v])).sum::<f64>() / n;
            Outcome {
                variant: runs[0][v].variant.clone(),
                allocation_ratio: mean(|o| o.allocation_ratio),
                wait_p50_h: mean(|o| o.wait_p50_h),
                wait_p95_h: mean(|o| o.wait_p95_h),
                small_wait_p95_h: mean(|o| o.small_wait_p95_h),
                large_wait_p95_h: mean(|o| o.large_wait_p95_h),
                heavy_tenant_wait_p95_h: mean(|o| o.heavy_tenant_wait_p95_h),
                light_tenants_wait_p95_h: mean(|o| o.light_tenants_wait_p95_h),
                max_wait_h: mean(|o| o.max_wait_h),
                jain_fairness: mean(|o| o.jain_fairness),
                never_started: runs.iter().map(|r| r[v].never_started).sum(),
                passes: runs.iter().map(|r| r[v].passes).sum(),
            }
        })
        .collect())
}

/// The outcomes as a Markdown table.
pub fn table(outcomes: &[Outcome]) -> String {
    let mut out = String::from(
        "| discipline | GPU allocation | wait p50 | wait p95 | 1-GPU wait p95 | 8-GPU wait p95 | heavy tenant p95 | other tenants p95 | longest wait | Jain (slowdown) | never started |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for o in outcomes {
        out.push_str(&format!(
            "| {} | {:.1} % | {:.2} h | {:.2} h | {:.2} h | {:.2} h | {:.2} h | {:.2} h | {:.1} h | {:.3} | {} |\n",
            o.variant,
            o.allocation_ratio * 100.0,
            o.wait_p50_h,
            o.wait_p95_h,
            o.small_wait_p95_h,
            o.large_wait_p95_h,
            o.heavy_tenant_wait_p95_h,
            o.light_tenants_wait_p95_h,
            o.max_wait_h,
            o.jain_fairness,
            o.never_started
        ));
    }
    out
}
