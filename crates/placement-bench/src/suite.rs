//! `--suite DIR`: every trace of the Alibaba GPU-sharing family in a folder
//! (`openb_pod_list_*.csv`, on the folder's `openb_node_list_gpu_node.csv`,
//! the fleet the FGD paper used), for several policies, in one table.

use std::path::Path;

use serde::Serialize;
use tessera_core::placement::Policy;

use crate::csv::Table;
use crate::error::BenchError;
use crate::report::Report;
use crate::run::{run_seed, Scenario};
use crate::trace;

/// The fleet file a suite folder must hold.
pub const FLEET_FILE: &str = "openb_node_list_gpu_node.csv";
/// Request files are `PREFIX<name>.csv`.
pub const TRACE_PREFIX: &str = "openb_pod_list_";

/// One trace replayed with one policy.
#[derive(Clone, Debug, Serialize)]
pub struct SuiteRow {
    /// Trace name (`default`, `cpu050`, ...).
    pub trace: String,
    /// The policy's report over the seeds.
    pub report: Report,
    /// Allocation ratio relative to `fgd` on the same trace, when run.
    pub vs_fgd: Option<f64>,
    /// Allocation ratio relative to `best-fit` on the same trace, when run.
    pub vs_best_fit: Option<f64>,
}

/// The traces of a folder, sorted by name: (name, path).
pub fn traces(dir: &Path) -> Result<Vec<(String, String)>, BenchError> {
    let io = |source| BenchError::Io {
        file: dir.display().to_string(),
        source,
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if let Some(trace) = name
            .strip_prefix(TRACE_PREFIX)
            .and_then(|rest| rest.strip_suffix(".csv"))
        {
            found.push((trace.to_string(), path.display().to_string()));
        }
    }
    found.sort();
    if found.is_empty() {
        return Err(BenchError::Usage(format!(
            "{} holds no {TRACE_PREFIX}*.csv",
            dir.display()
        )));
    }
    Ok(found)
}

/// Runs every trace in `dir` with every policy.
pub fn run(
    dir: &str,
    policies: &[Policy],
    seeds: u32,
    first_seed: u64,
    inflate: f64,
    mig: bool,
) -> Result<Vec<SuiteRow>, BenchError> {
    run_only(dir, None, policies, seeds, first_seed, inflate, mig)
}

/// [`run`] on the traces of `dir` named in `only` (all when `None`); a
/// name that `dir` does not hold is an error, not a smaller table.
pub fn run_only(
    dir: &str,
    only: Option<&[&str]>,
    policies: &[Policy],
    seeds: u32,
    first_seed: u64,
    inflate: f64,
    mig: bool,
) -> Result<Vec<SuiteRow>, BenchError> {
    let dir = Path::new(dir);
    let fleet_path = dir.join(FLEET_FILE).display().to_string();
    let hosts = trace::read_hosts(&Table::read(&fleet_path)?)?;
    let gpus: usize = hosts.iter().map(|h| h.gpus as usize).sum();
    let mut chosen = traces(dir)?;
    if let Some(only) = only {
        if let Some(missing) = only.iter().find(|n| !chosen.iter().any(|(t, _)| t == *n)) {
            return Err(BenchError::Usage(format!(
                "{} holds no {TRACE_PREFIX}{missing}.csv",
                dir.display()
            )));
        }
        chosen.retain(|(t, _)| only.contains(&t.as_str()));
    }
    let mut rows = Vec::new();
    for (name, path) in chosen {
        let scenario = Scenario {
            hosts: hosts.clone(),
            requests: trace::read_requests(&Table::read(&path)?)?,
            mig,
            inflate,
        };
        let first = rows.len();
        for &policy in policies {
            let results = seeds_in_parallel(&scenario, policy, first_seed, seeds)?;
            let source = format!("{fleet_path} + {path}");
            rows.push(SuiteRow {
                trace: name.clone(),
                report: Report::from_seeds(
                    policy.name(),
                    &source,
                    mig,
                    hosts.len(),
                    gpus,
                    &results,
                ),
                vs_fgd: None,
                vs_best_fit: None,
            });
        }
        let ratio_of = |rows: &[SuiteRow], policy: &str| {
            rows.iter()
                .find(|r| r.report.policy == policy)
                .map(|r| r.report.gpu_allocation_ratio)
        };
        let fgd = ratio_of(&rows[first..], "fgd");
        let best_fit = ratio_of(&rows[first..], "best-fit");
        for row in &mut rows[first..] {
            let own = row.report.gpu_allocation_ratio;
            row.vs_fgd = fgd.filter(|v| *v > 0.0).map(|v| own / v);
            row.vs_best_fit = best_fit.filter(|v| *v > 0.0).map(|v| own / v);
        }
    }
    Ok(rows)
}

/// Seeds `first..first + seeds` of one policy, on every core (a suite's
/// figures are allocation ratios, not timings, so sharing cores changes
/// nothing). Results in seed order.
fn seeds_in_parallel(
    scenario: &Scenario,
    policy: Policy,
    first: u64,
    seeds: u32,
) -> Result<Vec<crate::run::SeedResult>, BenchError> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let seeds: Vec<u64> = (0..u64::from(seeds)).map(|i| first + i).collect();
    let chunk = seeds.len().div_ceil(workers).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = seeds
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|&seed| run_seed(scenario, policy, seed))
                        .collect::<Result<Vec<_>, _>>()
                })
            })
            .collect();
        let mut all = Vec::with_capacity(seeds.len());
        for handle in handles {
            match handle.join() {
                Ok(part) => all.extend(part?),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        Ok(all)
    })
}

/// The Markdown table of a suite run.
pub fn table(rows: &[SuiteRow]) -> String {
    let ratio = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.4}"));
    let mut out = String::from(
        "| trace | policy | GPU allocation % | ± | vs fgd | vs best-fit | failed | fragmented % |\n\
         |---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        let r = &row.report;
        out.push_str(&format!(
            "| {} | {} | {:.2} | {:.2} | {} | {} | {:.0} | {:.2} |\n",
            row.trace,
            r.policy,
            100.0 * r.gpu_allocation_ratio,
            100.0 * r.std.gpu_allocation_ratio,
            ratio(row.vs_fgd),
            ratio(row.vs_best_fit),
            r.failed,
            100.0 * r.fragmentation,
        ));
    }
    out
}
