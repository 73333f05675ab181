//! A discrete-event replay of one shared pool under quota: tenants with equal
//! quotas, jobs in three priority classes, and some jobs (notebooks) that sit
//! idle after their work until their lease ends. Every decision is the
//! production code's: `plan_queue` places, `plan_preemption` picks victims,
//! `QosClass::check_quota` decides what a job may borrow; only the workload
//! and the clock are here.
//!
//! Compares:
//! - **hard quota** (Tessera before QoS): a job beyond its tenant's quota
//!   waits until the tenant's own slices end, even while others' quota idles;
//! - **QoS + preemption**: beyond the quota a job runs as burstable on quota
//!   the pool's other tenants leave unused (else best-effort), and gives way,
//!   after notice, when a guaranteed request needs the room (it restarts,
//!   and the lost work is counted);
//! - **QoS + preemption + idle reclaim**: idle slices are also reclaimed
//!   after an idle time and a notice.

use serde::Serialize;
use tessera_core::ids::{AllocationId, TenantId};
use tessera_core::placement::{Decision, Demand, FleetError, PlacementRequest, PoolPlacement};
use tessera_core::quota::{headroom, Demand as QuotaDemand, Quota, Usage};
use tessera_core::schedule::{
    plan_preemption, plan_queue, Claimant, Discipline, Holding, QosClass, QueueEntry, QueuePolicy,
    Running, Wait, Waiting,
};
use tessera_core::units::{ComputeMilli, MemMiB};

use crate::queue_sim::{fleet, pick, uniform, Arrivals};
use crate::stats::percentile;

const HOUR_MS: i64 = 3_600_000;
const MINUTE_MS: i64 = 60_000;

/// Priority classes of the replay: (name, value, share of jobs).
pub const CLASSES: [(&str, i32, u64); 3] = [
    ("production", 1000, 15),
    ("interactive", 100, 35),
    ("batch", -100, 50),
];

/// The replay's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Params {
    /// Hosts of 8 whole GPUs.
    pub hosts: usize,
    /// Jobs.
    pub jobs: usize,
    /// Offered load: GPU-hours of work asked per GPU-hour of capacity.
    pub load: f64,
    /// Tenants; each has an equal share of the pool as quota.
    pub tenants: i64,
    /// Share of the jobs from tenant 0 (the others share the rest).
    pub heavy_share: f64,
    /// Share of the jobs that stay idle after their work until the lease ends.
    pub idle_share: f64,
    /// Idle time before an idle slice is warned, and the notice after it.
    pub idle_reclaim_ms: i64,
    /// Preemption notice.
    pub grace_ms: i64,
    /// The pool's placement policy.
    pub placement: PoolPlacement,
    /// Seed.
    pub seed: u64,
}

/// One job.
#[derive(Clone, Debug, PartialEq)]
pub struct Job {
    /// Id, in order of arrival.
    pub id: i64,
    /// Tenant.
    pub tenant: i64,
    /// Whole GPUs.
    pub gpus: u32,
    /// Index into [`CLASSES`].
    pub class: usize,
    /// Arrival (ms).
    pub arrival: i64,
    /// Work (ms).
    pub runs: i64,
    /// Lease (ms, at least `runs`).
    pub lease: i64,
    /// Holds its GPUs idle after the work until the lease ends.
    pub idles: bool,
}

/// A seeded workload: the queue replay's arrivals
/// ([`Arrivals`](crate::queue_sim::Arrivals)), each with a priority class
/// drawn by [`CLASSES`]' shares and a chance `idle_share` of idling.
pub fn workload(p: &Params) -> Vec<Job> {
    let mut arrivals = Arrivals::new(p.seed, p.load, p.hosts);
    let classes: Vec<(usize, u64)> = CLASSES.iter().enumerate().map(|(i, c)| (i, c.2)).collect();
    (0..p.jobs)
        .map(|i| {
            let a = arrivals.next(p.tenants, p.heavy_share);
            Job {
                id: i as i64,
                tenant: a.tenant,
                gpus: a.gpus,
                class: pick(arrivals.rng(), &classes),
                arrival: a.at,
                runs: a.runs,
                lease: a.lease,
                idles: uniform(arrivals.rng()) < p.idle_share,
            }
        })
        .collect()
}

/// A policy to compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Variant {
    /// Its name in the report.
    pub name: &'static str,
    /// Beyond-quota jobs run as burstable / best-effort, with preemption.
    pub qos: bool,
    /// Idle slices are reclaimed.
    pub idle_reclaim: bool,
}

/// The three policies.
pub const VARIANTS: [Variant; 3] = [
    Variant {
        name: "hard quota (FIFO within quota)",
        qos: false,
        idle_reclaim: false,
    },
    Variant {
        name: "QoS + preemption",
        qos: true,
        idle_reclaim: false,
    },
    Variant {
        name: "QoS + preemption + idle reclaim",
        qos: true,
        idle_reclaim: true,
    },
];

/// What one replay measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Outcome {
    /// The policy.
    pub variant: String,
    /// GPU-time held over capacity × time until the last arrival.
    pub allocation_ratio: f64,
    /// GPU-time doing work over the same (idle holding excluded).
    pub busy_ratio: f64,
    /// Median and 95th-percentile wait per class of [`CLASSES`], hours.
    pub wait_h: Vec<(String, f64, f64)>,
    /// Jain's fairness index over tenants' mean bounded slowdown.
    pub jain_fairness: f64,
    /// Slices preempted.
    pub preemptions: usize,
    /// Work thrown away by preemption, GPU-hours.
    pub lost_gpu_hours: f64,
    /// Idle GPU-hours given back before the lease ended.
    pub reclaimed_gpu_hours: f64,
    /// Jobs that had not started when the replay ended.
    pub never_started: usize,
}

struct Run {
    job: usize,
    decision: Decision,
    qos: QosClass,
    since: i64,
    work_end: i64,
    hold_end: i64,
    preempt_at: Option<i64>,
    reclaim_at: Option<i64>,
}

fn gpus(n: u32) -> QuotaDemand {
    QuotaDemand {
        compute: ComputeMilli(n * 1000),
        memory: MemMiB(0),
        slices: 0,
    }
}

/// Replays `jobs` under `v`.
pub fn replay(p: &Params, jobs: &[Job], v: &Variant) -> Result<Outcome, FleetError> {
    let tenants = p.tenants.max(1);
    let mut fleet = fleet(p.hosts)?;
    let capacity = (p.hosts * 8) as u32;
    let quota = Quota {
        compute: ComputeMilli(capacity * 1000 / tenants as u32),
        memory: MemMiB(0),
        max_slices: 0,
    };
    let pool_quota = Quota {
        compute: ComputeMilli(quota.compute.0 * tenants as u32),
        ..quota
    };
    let policy = QueuePolicy {
        placement: p.placement.policy(),
        discipline: Discipline::Backfill,
        reserve_after_ms: 30 * MINUTE_MS,
        estimate: false,
    };
    let mut running: Vec<Run> = Vec::new();
    // Queued: (job, its QoS class, when it (re)entered).
    let mut queue: Vec<(usize, QosClass, i64)> = Vec::new();
    // Hard quota: jobs waiting for their tenant's quota.
    let mut backlog: Vec<usize> = Vec::new();
    let mut first_start: Vec<Option<i64>> = vec![None; jobs.len()];
    let mut done_at: Vec<Option<i64>> = vec![None; jobs.len()];
    let (mut held_ms, mut busy_ms) = (0i128, 0i128);
    let (mut preemptions, mut lost_ms, mut reclaimed_ms) = (0usize, 0i128, 0i128);
    let horizon = jobs.last().map_or(0, |j| j.arrival);
    let mut next = 0usize;
    let mut last_t = 0i64;

    // Guaranteed use per tenant, and guaranteed + burstable in the pool,
    // queued requests included (they hold quota, as in the service).
    let quota_use = |running: &[Run], queue: &[(usize, QosClass, i64)], t: Option<i64>| {
        let mut u = 0u32;
        for (job, qos) in running
            .iter()
            .map(|r| (r.job, r.qos))
            .chain(queue.iter().map(|(j, q, _)| (*j, *q)))
        {
            let counts = match t {
                Some(t) => qos == QosClass::Guaranteed && jobs[job].tenant == t,
                None => qos != QosClass::BestEffort,
            };
            if counts {
                u += jobs[job].gpus;
            }
        }
        Usage {
            compute: ComputeMilli(u * 1000),
            memory: MemMiB(0),
            slices: 0,
        }
    };

    loop {
        let events = [
            jobs.get(next).map(|j| j.arrival),
            running.iter().map(|r| r.hold_end).min(),
            running.iter().filter_map(|r| r.preempt_at).min(),
            running.iter().filter_map(|r| r.reclaim_at).min(),
        ];
        let Some(now) = events.into_iter().flatten().min() else {
            break;
        };
        // Past the last arrival, until the queue drains (a month at most:
        // what has not started by then counts as never started).
        if now > horizon
            && ((queue.is_empty() && backlog.is_empty()) || now > horizon + 30 * 24 * HOUR_MS)
        {
            break;
        }
        let until = now.min(horizon);
        if until > last_t {
            for r in &running {
                let n = i128::from(r.decision.gpus.len() as u32);
                held_ms += n * i128::from(until - last_t);
                let work_until = r.work_end.min(until);
                if work_until > last_t {
                    busy_ms += n * i128::from(work_until - last_t);
                }
            }
            last_t = until;
        }
        // Ends: leases (or work, for jobs that do not idle), preemptions,
        // idle reclaims.
        let mut keep = Vec::with_capacity(running.len());
        for r in running.drain(..) {
            let due = r.preempt_at.is_some_and(|t| t <= now);
            // A slice preempted once its work is done loses nothing.
            let preempted = due && now < r.work_end;
            let reclaimed = r.reclaim_at.is_some_and(|t| t <= now);
            if r.hold_end <= now || due || reclaimed {
                let _ = fleet.release(&r.decision);
                let n = i128::from(r.decision.gpus.len() as u32);
                if preempted {
                    preemptions += 1;
                    lost_ms += n * i128::from(now - r.since);
                    let qos = r.qos;
                    queue.push((r.job, qos, now));
                } else {
                    if reclaimed && r.hold_end > now {
                        reclaimed_ms += n * i128::from(r.hold_end - now);
                    }
                    done_at[r.job] = Some(now);
                }
            } else {
                keep.push(r);
            }
        }
        running = keep;
        while let Some(j) = jobs.get(next).filter(|j| j.arrival <= now) {
            let i = next;
            next += 1;
            if v.qos {
                let own = quota_use(&running, &queue, Some(j.tenant));
                let lendable = headroom(&pool_quota, &quota_use(&running, &queue, None));
                let qos = [
                    QosClass::Guaranteed,
                    QosClass::Burstable,
                    QosClass::BestEffort,
                ]
                .into_iter()
                .find(|q| {
                    q.check_quota((&quota, &own), &lendable, &gpus(j.gpus))
                        .is_ok()
                })
                .unwrap_or(QosClass::BestEffort);
                queue.push((i, qos, now));
            } else {
                backlog.push(i);
            }
        }
        // Hard quota: jobs enter the queue in arrival order as their
        // tenant's quota allows.
        let mut still = Vec::new();
        for i in backlog.drain(..) {
            let own = quota_use(&running, &queue, Some(jobs[i].tenant));
            if QosClass::Guaranteed
                .check_quota((&quota, &own), &QuotaDemand::default(), &gpus(jobs[i].gpus))
                .is_ok()
            {
                queue.push((i, QosClass::Guaranteed, now));
            } else {
                still.push(i);
            }
        }
        backlog = still;

        let waiting: Vec<Waiting> = queue
            .iter()
            .map(|(i, qos, at)| Waiting {
                entry: QueueEntry {
                    id: AllocationId::new(*i as i64),
                    qos: *qos,
                    priority: CLASSES[jobs[*i].class].1,
                    tenant_id: TenantId::new(jobs[*i].tenant),
                    tenant_usage: 0,
                    tenant_weight: 1,
                    requested_at: *at,
                },
                request: PlacementRequest::new(Demand::Whole {
                    count: jobs[*i].gpus,
                }),
                hold_ms: jobs[*i].lease,
            })
            .collect();
        let holdings: Vec<Holding> = running
            .iter()
            .map(|r| Holding {
                decision: r.decision.clone(),
                until: r.hold_end,
            })
            .collect();
        let plan = plan_queue(&mut fleet, &waiting, &holdings, now, &policy);
        for (id, d) in plan.placed {
            let i = id.get() as usize;
            let Some(pos) = queue.iter().position(|(j, _, _)| *j == i) else {
                continue;
            };
            let (_, qos, _) = queue.remove(pos);
            first_start[i].get_or_insert(now);
            let job = &jobs[i];
            let work_end = now + job.runs;
            let hold_end = if job.idles { now + job.lease } else { work_end };
            running.push(Run {
                job: i,
                decision: d,
                qos,
                since: now,
                work_end,
                hold_end,
                preempt_at: None,
                reclaim_at: (v.idle_reclaim
                    && job.idles
                    && hold_end > work_end + p.idle_reclaim_ms)
                    .then_some(work_end + p.idle_reclaim_ms),
            });
        }
        if v.qos {
            let claimants: Vec<Claimant> = plan
                .waiting
                .iter()
                .filter(
                    |w| matches!(&w.why, Wait::NoRoom { error } if error.clears_with_capacity()),
                )
                .filter_map(|w| {
                    let (i, qos, _) = queue.iter().find(|(j, _, _)| *j as i64 == w.id.get())?;
                    Some(Claimant {
                        id: w.id,
                        priority: CLASSES[jobs[*i].class].1,
                        qos: *qos,
                        request: PlacementRequest::new(Demand::Whole {
                            count: jobs[*i].gpus,
                        }),
                    })
                })
                .collect();
            let candidates: Vec<Running> = running
                .iter()
                .map(|r| Running {
                    id: AllocationId::new(r.job as i64),
                    priority: CLASSES[jobs[r.job].class].1,
                    qos: r.qos,
                    since: r.since,
                    decision: r.decision.clone(),
                    notified: r.preempt_at.is_some(),
                })
                .collect();
            if !claimants.is_empty() {
                for pre in plan_preemption(&fleet, &claimants, &candidates, p.placement.policy()) {
                    for victim in pre.victims {
                        if let Some(r) = running.iter_mut().find(|r| r.job as i64 == victim.get()) {
                            r.preempt_at = Some(now + p.grace_ms);
                        }
                    }
                }
            }
        }
        if next >= jobs.len() && now >= horizon && running.is_empty() && queue.is_empty() {
            break;
        }
    }
    Ok(outcome(
        p,
        jobs,
        v,
        &first_start,
        &done_at,
        last_t.max(horizon),
        (held_ms, busy_ms),
        (preemptions, lost_ms, reclaimed_ms),
        horizon,
    ))
}

#[allow(clippy::too_many_arguments)]
fn outcome(
    p: &Params,
    jobs: &[Job],
    v: &Variant,
    first_start: &[Option<i64>],
    done_at: &[Option<i64>],
    end: i64,
    (held_ms, busy_ms): (i128, i128),
    (preemptions, lost_ms, reclaimed_ms): (usize, i128, i128),
    horizon: i64,
) -> Outcome {
    let hours = |ms: i64| ms as f64 / HOUR_MS as f64;
    let wait = |j: &Job| first_start[j.id as usize].unwrap_or(end) - j.arrival;
    let wait_h = CLASSES
        .iter()
        .enumerate()
        .map(|(c, (name, ..))| {
            let mut w: Vec<f64> = jobs
                .iter()
                .filter(|j| j.class == c)
                .map(|j| hours(wait(j)))
                .collect();
            w.sort_by(f64::total_cmp);
            (
                (*name).to_owned(),
                percentile(&w, 50.0),
                percentile(&w, 95.0),
            )
        })
        .collect();
    // Slowdown: (time to finish, or until the end) over the work.
    let mut slow = vec![(0.0f64, 0usize); p.tenants.max(1) as usize];
    for j in jobs {
        let finished = done_at[j.id as usize].unwrap_or(end.max(j.arrival + j.runs));
        let s = (finished - j.arrival).max(j.runs) as f64 / j.runs.max(HOUR_MS / 6) as f64;
        let t = &mut slow[j.tenant as usize];
        t.0 += s;
        t.1 += 1;
    }
    let means: Vec<f64> = slow
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(s, n)| s / *n as f64)
        .collect();
    let (sum, sum_sq) = means
        .iter()
        .fold((0.0, 0.0), |(a, b), x| (a + x, b + x * x));
    let capacity_ms = (p.hosts * 8) as f64 * horizon.max(1) as f64;
    Outcome {
        variant: v.name.to_owned(),
        allocation_ratio: held_ms as f64 / capacity_ms,
        busy_ratio: busy_ms as f64 / capacity_ms,
        wait_h,
        jain_fairness: if sum_sq > 0.0 {
            sum * sum / (means.len() as f64 * sum_sq)
        } else {
            1.0
        },
        preemptions,
        lost_gpu_hours: lost_ms as f64 / HOUR_MS as f64,
        reclaimed_gpu_hours: reclaimed_ms as f64 / HOUR_MS as f64,
        never_started: first_start.iter().filter(|s| s.is_none()).count(),
    }
}

/// Every policy on `seeds` workloads (seeds `p.seed..`): means of each
/// figure; counts are summed.
pub fn compare_seeds(p: &Params, seeds: u64) -> Result<Vec<Outcome>, FleetError> {
    let runs: Vec<Vec<Outcome>> = (0..seeds.max(1))
        .map(|i| {
            let p = Params {
                seed: p.seed + i,
                ..*p
            };
            let jobs = workload(&p);
            VARIANTS.iter().map(|v| replay(&p, &jobs, v)).collect()
        })
        .collect::<Result<_, _>>()?;
    let n = runs.len() as f64;
    Ok((0..VARIANTS.len())
        .map(|v| {
            let mean = |f: &dyn Fn(&Outcome) -> f64| runs.iter().map(|r| f(&r[v])).sum::<f64>() / n;
            Outcome {
                variant: runs[0][v].variant.clone(),
                allocation_ratio: mean(&|o| o.allocation_ratio),
                busy_ratio: mean(&|o| o.busy_ratio),
                wait_h: (0..CLASSES.len())
                    .map(|c| {
                        (
                            CLASSES[c].0.to_owned(),
                            mean(&|o| o.wait_h[c].1),
                            mean(&|o| o.wait_h[c].2),
                        )
                    })
                    .collect(),
                jain_fairness: mean(&|o| o.jain_fairness),
                preemptions: runs.iter().map(|r| r[v].preemptions).sum(),
                lost_gpu_hours: mean(&|o| o.lost_gpu_hours),
                reclaimed_gpu_hours: mean(&|o| o.reclaimed_gpu_hours),
                never_started: runs.iter().map(|r| r[v].never_started).sum(),
            }
        })
        .collect())
}

/// The outcomes as a Markdown table.
pub fn table(outcomes: &[Outcome]) -> String {
    let mut out = String::from("| policy | GPU allocation | GPU busy |");
    for (name, ..) in CLASSES {
        out.push_str(&format!(" {name} wait p50 / p95 |"));
    }
    out.push_str(" Jain (slowdown) | preemptions | lost GPU-h | reclaimed GPU-h | never started |\n|---|---|---|");
    out.push_str(&"---|".repeat(CLASSES.len() + 5));
    out.push('\n');
    for o in outcomes {
        out.push_str(&format!(
            "| {} | {:.1} % | {:.1} % |",
            o.variant,
            o.allocation_ratio * 100.0,
            o.busy_ratio * 100.0
        ));
        for (_, p50, p95) in &o.wait_h {
            out.push_str(&format!(" {p50:.2} h / {p95:.2} h |"));
        }
        out.push_str(&format!(
            " {:.3} | {} | {:.0} | {:.0} | {} |\n",
            o.jain_fairness,
            o.preemptions,
            o.lost_gpu_hours,
            o.reclaimed_gpu_hours,
            o.never_started
        ));
    }
    out
}

#[cfg(test)]
mod tests;
