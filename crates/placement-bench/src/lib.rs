//! Replays GPU-sharing cluster traces (or seeded synthetic ones) against
//! Tessera's placement policies and reports how much GPU each allocates.
//!
//! The binary (`main.rs`) only wires these modules together; they are a
//! library so that tests and the criterion benches can use them.

pub mod args;
pub mod csv;
pub mod error;
pub mod method;
pub mod qos_sim;
pub mod queue_sim;
pub mod report;
pub mod rightsize_sim;
pub mod run;
pub mod stats;
pub mod suite;
pub mod synthetic;
pub mod trace;

use crate::args::{Options, Source};
use crate::csv::Table;
use crate::error::BenchError;
use crate::report::Report;
use crate::run::{run_seed, Scenario};

/// Loads the scenario the options describe.
pub fn load(options: &Options) -> Result<(Scenario, String), BenchError> {
    let (hosts, requests, source) = match &options.source {
        Source::Files { fleet, requests } => (
            trace::read_hosts(&Table::read(fleet)?)?,
            trace::read_requests(&Table::read(requests)?)?,
            format!("{fleet} + {requests}"),
        ),
        Source::Suite { dir, .. } => {
            return Err(BenchError::Usage(format!(
                "{dir} is a suite: run it with suite::run"
            )))
        }
        Source::Synthetic { hosts, mix } => {
            let fleet = synthetic::fleet(*hosts, options.first_seed);
            let gpus: usize = fleet.iter().map(|h| h.gpus as usize).sum();
            // Enough distinct requests for the shape distribution; the
            // method inflates them to the target.
            let requests = synthetic::requests(gpus.max(100), options.first_seed, *mix);
            (fleet, requests, format!("synthetic:{hosts}:{mix}"))
        }
    };
    Ok((
        Scenario {
            hosts,
            requests,
            mig: options.mig,
            inflate: options.inflate,
        },
        source,
    ))
}

/// Runs the benchmark the options describe.
pub fn execute(options: &Options) -> Result<Report, BenchError> {
    let (scenario, source) = load(options)?;
    let results = (0..u64::from(options.seeds))
        .map(|i| run_seed(&scenario, options.policy, options.first_seed + i))
        .collect::<Result<Vec<_>, _>>()?;
    let gpus = scenario.hosts.iter().map(|h| h.gpus as usize).sum();
    Ok(Report::from_seeds(
        options.policy.name(),
        &source,
        options.mig,
        scenario.hosts.len(),
        gpus,
        &results,
    ))
}
