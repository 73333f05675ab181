//! `placement-bench`: wiring only; see the library for the work.

use std::process::ExitCode;

use clap::Parser;
use placement_bench::args::{Cli, Options};
use placement_bench::execute;

fn main() -> ExitCode {
    // Help exits 0, bad usage 2 (clap).
    let options = Options::from(Cli::parse());
    match execute(&options) {
        Ok(report) if options.json => match serde_json::to_string(&report) {
            Ok(json) => {
                println!("{json}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("placement-bench: {e}");
                ExitCode::FAILURE
            }
        },
        Ok(report) => {
            print!("{}", report.text());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("placement-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
