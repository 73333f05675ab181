//! `placement-bench`: wiring only; see the library for the work.

use std::process::ExitCode;

use clap::Parser;
use placement_bench::args::{Cli, Options, Source};
use placement_bench::error::BenchError;
use placement_bench::{execute, suite};
use serde::Serialize;

/// Prints `result` as JSON or as `text` renders it; errors go to stderr.
fn emit<T: Serialize>(
    result: Result<T, BenchError>,
    json: bool,
    text: impl Fn(&T) -> String,
) -> ExitCode {
    let out = result.map_err(|e| e.to_string()).and_then(|value| {
        if json {
            serde_json::to_string(&value)
                .map(|s| s + "\n")
                .map_err(|e| e.to_string())
        } else {
            Ok(text(&value))
        }
    });
    match out {
        Ok(out) => {
            print!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("placement-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    // Help exits 0, bad usage 2 (clap).
    let options = Options::from(Cli::parse());
    match &options.source {
        Source::Suite { dir, policies } => emit(
            suite::run(
                dir,
                policies,
                options.seeds,
                options.first_seed,
                options.inflate,
                options.mig,
            ),
            options.json,
            |rows| suite::table(rows),
        ),
        _ => emit(execute(&options), options.json, |report| report.text()),
    }
}
