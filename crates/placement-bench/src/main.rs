//! `placement-bench`: wiring only; see the library for the work.

use std::process::ExitCode;

use placement_bench::args::{parse, Command, USAGE};
use placement_bench::execute;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&args) {
        Ok(Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(Command::Run(options)) => options,
        Err(e) => {
            eprintln!("placement-bench: {e}");
            return ExitCode::from(2);
        }
    };
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
