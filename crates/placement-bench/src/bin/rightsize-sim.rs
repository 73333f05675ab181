//! `rightsize-sim`: replays seeded slices running the simulator's workload
//! profiles through the right-sizing advice and prints what it would free
//! (see `placement_bench::rightsize_sim`).

use clap::Parser;
use placement_bench::rightsize_sim::{replay, Row};

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "rightsize-sim",
    about = "Replays a week of seeded slices through tessera_core::rightsize and reports the GPU-hours the advice would free"
)]
struct Cli {
    /// Slices to replay.
    #[arg(long, default_value_t = 1_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    slices: u64,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn table(rows: &[Row]) -> String {
    let mut out = format!(
        "{:<10} {:>7} {:>12} {:>12} {:>7} {:>8} {:>11}\n",
        "profile", "slices", "held GPU-h", "freed GPU-h", "freed", "smaller", "undersized"
    );
    for r in rows {
        out.push_str(&format!(
            "{:<10} {:>7} {:>12.0} {:>12.0} {:>6.1}% {:>8} {:>11}\n",
            r.variant,
            r.slices,
            r.held_gpu_hours_month,
            r.freed_gpu_hours_month,
            r.freed_ratio * 100.0,
            r.smaller,
            r.undersized_next_week
        ));
    }
    out
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let rows = replay(cli.slices, cli.seed);
    if cli.json {
        match serde_json::to_string_pretty(&rows) {
            Ok(text) => println!("{text}"),
            Err(e) => {
                eprintln!("rightsize-sim: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    } else {
        print!("{}", table(&rows));
    }
    std::process::ExitCode::SUCCESS
}
