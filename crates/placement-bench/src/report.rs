//! Aggregating seeds into the report (JSON or text).

use serde::Serialize;

use crate::run::SeedResult;
use crate::stats::{mean, percentile, std_dev};

/// Standard deviations across seeds of the reported means.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    /// Of `gpu_allocation_ratio`.
    pub gpu_allocation_ratio: f64,
    /// Of `allocated_gpu_milli`.
    pub allocated_gpu_milli: f64,
    /// Of `failed`.
    pub failed: f64,
    /// Of `fragmentation`.
    pub fragmentation: f64,
    /// Of `placements_per_s`.
    pub placements_per_s: f64,
    /// Of `decision_us_p50`.
    pub decision_us_p50: f64,
    /// Of `decision_us_p99`.
    pub decision_us_p99: f64,
}

/// The benchmark's result: means over seeds, and their standard deviations
/// under `std`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Report {
    /// Policy name.
    pub policy: String,
    /// Number of seeds.
    pub seeds: u32,
    /// Where the fleet and requests came from.
    pub source: String,
    /// MIG-capable GPUs started with MIG enabled.
    pub mig: bool,
    /// Hosts in the fleet.
    pub hosts: usize,
    /// GPUs in the fleet.
    pub gpus: usize,
    /// Mean number of arrivals per seed.
    pub arrivals: f64,
    /// Allocated share of the fleet's GPU capacity.
    pub gpu_allocation_ratio: f64,
    /// GPU allocated, in thousandths of a GPU.
    pub allocated_gpu_milli: f64,
    /// Fleet GPU capacity, in thousandths.
    pub total_gpu_milli: u64,
    /// Requests that did not fit.
    pub failed: f64,
    /// Workload-weighted fragmented share of the GPU capacity at the end.
    pub fragmentation: f64,
    /// Decisions per second (place + apply, one core).
    pub placements_per_s: f64,
    /// Median duration of one decision, microseconds.
    pub decision_us_p50: f64,
    /// 99th percentile duration of one decision, microseconds.
    pub decision_us_p99: f64,
    /// Standard deviations across seeds.
    pub std: Spread,
}

impl Report {
    /// Aggregates per-seed results.
    pub fn from_seeds(
        policy: &str,
        source: &str,
        mig: bool,
        hosts: usize,
        gpus: usize,
        results: &[SeedResult],
    ) -> Self {
        let col = |f: &dyn Fn(&SeedResult) -> f64| results.iter().map(f).collect::<Vec<f64>>();
        let ratio = col(&|r| r.gpu_allocation_ratio());
        let allocated = col(&|r| r.allocated_gpu_milli as f64);
        let failed = col(&|r| r.failed as f64);
        let frag = col(&|r| r.fragmentation);
        let rate = col(&|r| r.placements_per_s);
        let p50 = col(&|r| percentile(&r.decision_us, 50.0));
        let p99 = col(&|r| percentile(&r.decision_us, 99.0));
        Report {
            policy: policy.to_string(),
            seeds: results.len() as u32,
            source: source.to_string(),
            mig,
            hosts,
            gpus,
            arrivals: mean(&col(&|r| r.arrivals as f64)),
            gpu_allocation_ratio: mean(&ratio),
            allocated_gpu_milli: mean(&allocated),
            total_gpu_milli: results.first().map_or(0, |r| r.total_gpu_milli),
            failed: mean(&failed),
            fragmentation: mean(&frag),
            placements_per_s: mean(&rate),
            decision_us_p50: mean(&p50),
            decision_us_p99: mean(&p99),
            std: Spread {
                gpu_allocation_ratio: std_dev(&ratio),
                allocated_gpu_milli: std_dev(&allocated),
                failed: std_dev(&failed),
                fragmentation: std_dev(&frag),
                placements_per_s: std_dev(&rate),
                decision_us_p50: std_dev(&p50),
                decision_us_p99: std_dev(&p99),
            },
        }
    }

    /// A human-readable summary.
    pub fn text(&self) -> String {
        format!(
            "policy {policy} ({source}{mig}), {seeds} seed(s), {hosts} hosts, {gpus} GPUs, {arrivals:.0} arrivals\n\
             GPU allocation ratio  {ratio:.4} ± {ratio_sd:.4}\n\
             allocated GPU         {alloc:.0} / {total} milli\n\
             failed requests       {failed:.1} ± {failed_sd:.1}\n\
             fragmentation         {frag:.4} ± {frag_sd:.4}\n\
             placements per s      {rate:.0}\n\
             decision p50 / p99    {p50:.1} / {p99:.1} µs\n",
            policy = self.policy,
            source = self.source,
            mig = if self.mig { ", MIG" } else { "" },
            seeds = self.seeds,
            hosts = self.hosts,
            gpus = self.gpus,
            arrivals = self.arrivals,
            ratio = self.gpu_allocation_ratio,
            ratio_sd = self.std.gpu_allocation_ratio,
            alloc = self.allocated_gpu_milli,
            total = self.total_gpu_milli,
            failed = self.failed,
            failed_sd = self.std.failed,
            frag = self.fragmentation,
            frag_sd = self.std.fragmentation,
            rate = self.placements_per_s,
            p50 = self.decision_us_p50,
            p99 = self.decision_us_p99,
        )
    }
}
