//! `queue-sim`: replays a generated job stream through Tessera's queue
//! planner under each queue discipline and prints one table (or JSON).

use clap::Parser;
use placement_bench::qos_sim;
use placement_bench::queue_sim::{compare_seeds, table, Params};
use tessera_core::placement::PoolPlacement;

/// The command line.
#[derive(Debug, Parser)]
#[command(
    name = "queue-sim",
    about = "Replays a seeded job stream through tessera_core::schedule under FIFO, backfill and backfill with reservations"
)]
struct Cli {
    /// Hosts of 8 GPUs.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    hosts: u64,
    /// Jobs to replay.
    #[arg(long, default_value_t = 3_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    jobs: u64,
    /// Offered load (GPU-hours asked per GPU-hour of capacity).
    #[arg(long, default_value_t = 0.9)]
    load: f64,
    /// Tenants.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(i64).range(1..=1_000))]
    tenants: i64,
    /// Share of the jobs submitted by tenant 0 (the others share the rest).
    #[arg(long, default_value_t = 0.5)]
    heavy_share: f64,
    /// Minutes before a waiting request gets a reservation.
    #[arg(long, default_value_t = 30)]
    reserve_after_minutes: i64,
    /// The pool's placement policy.
    #[arg(long, default_value = "pack", value_parser = placement)]
    placement: PoolPlacement,
    /// First seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Workloads (seeds S..S+N); figures are their means.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=1_000))]
    seeds: u64,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Compare quota policies instead: hard quota, QoS classes with
    /// preemption, and that with idle reclaim (tenants get equal quotas).
    #[arg(long)]
    qos: bool,
    /// With --qos: share of the jobs that sit idle after their work until
    /// their lease ends.
    #[arg(long, default_value_t = 0.3)]
    idle_share: f64,
    /// With --qos: minutes idle before reclaim (warning plus notice).
    #[arg(long, default_value_t = 60)]
    idle_reclaim_minutes: i64,
    /// With --qos: preemption notice, minutes.
    #[arg(long, default_value_t = 5)]
    grace_minutes: i64,
}

/// A pool placement policy by name.
fn placement(name: &str) -> Result<PoolPlacement, String> {
    PoolPlacement::ALL
        .into_iter()
        .find(|p| p.as_str() == name)
        .ok_or_else(|| format!("'{name}' is not one of pack, spread, best-fit, first-fit"))
}

/// Prints `outcomes` as JSON or with `table`.
fn print<T: serde::Serialize>(
    outcomes: &T,
    json: bool,
    table: impl Fn(&T) -> String,
) -> std::process::ExitCode {
    if json {
        match serde_json::to_string(outcomes) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("queue-sim: {e}");
                return std::process::ExitCode::FAILURE;
            }
        }
    } else {
        print!("{}", table(outcomes));
    }
    std::process::ExitCode::SUCCESS
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    if !(cli.load.is_finite() && cli.load > 0.0) {
        eprintln!("queue-sim: --load must be a positive number");
        return std::process::ExitCode::from(2);
    }
    if !(0.0..=1.0).contains(&cli.heavy_share) {
        eprintln!("queue-sim: --heavy-share must be between 0 and 1");
        return std::process::ExitCode::from(2);
    }
    if !(0.0..=1.0).contains(&cli.idle_share) {
        eprintln!("queue-sim: --idle-share must be between 0 and 1");
        return std::process::ExitCode::from(2);
    }
    let placement = cli.placement;
    if cli.qos {
        let params = qos_sim::Params {
            hosts: cli.hosts as usize,
            jobs: cli.jobs as usize,
            load: cli.load,
            tenants: cli.tenants,
            heavy_share: cli.heavy_share,
            idle_share: cli.idle_share,
            idle_reclaim_ms: cli.idle_reclaim_minutes.max(0) * 60_000,
            grace_ms: cli.grace_minutes.max(0) * 60_000,
            placement,
            seed: cli.seed,
        };
        return match qos_sim::compare_seeds(&params, cli.seeds) {
            Ok(o) => print(&o, cli.json, |o| qos_sim::table(o)),
            Err(e) => {
                eprintln!("queue-sim: {e}");
                std::process::ExitCode::FAILURE
            }
        };
    }
    let params = Params {
        hosts: cli.hosts as usize,
        jobs: cli.jobs as usize,
        load: cli.load,
        tenants: cli.tenants,
        heavy_share: cli.heavy_share,
        placement,
        seed: cli.seed,
    };
    let reserve_after_ms = cli.reserve_after_minutes.max(0) * 60_000;
    let outcomes = match compare_seeds(&params, cli.seeds, reserve_after_ms) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("queue-sim: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    print(&outcomes, cli.json, |o| table(o))
}
