//! Command-line options (clap).

use clap::Parser;
use tessera_core::placement::Policy;

use crate::synthetic::Mix;

/// The command line as clap parses it.
#[derive(Debug, Parser)]
#[command(
    name = "placement-bench",
    about = "Replays a GPU-sharing cluster trace (or a seeded synthetic one) against a placement policy"
)]
pub struct Cli {
    /// Hosts CSV: sn,cpu_milli,memory_mib,gpu,model.
    #[arg(
        long,
        value_name = "FILE",
        requires = "requests",
        conflicts_with_all = ["synthetic", "suite", "policies"]
    )]
    fleet: Option<String>,
    /// Requests CSV: name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec.
    #[arg(
        long,
        value_name = "FILE",
        requires = "fleet",
        conflicts_with_all = ["synthetic", "suite"]
    )]
    requests: Option<String>,
    /// Every `openb_pod_list_*.csv` in DIR on DIR's
    /// `openb_node_list_gpu_node.csv` (the FGD paper's fleet), for every
    /// policy in `--policies`: one table.
    #[arg(long, value_name = "DIR", conflicts_with = "synthetic")]
    suite: Option<String>,
    /// Policies of a `--suite` run, comma-separated [default: all six].
    #[arg(long, value_delimiter = ',', requires = "suite")]
    policies: Vec<Policy>,
    /// A generated mixed fleet of HOSTS hosts and a seeded request mix.
    #[arg(
        long,
        value_name = "HOSTS",
        required_unless_present_any = ["fleet", "suite"],
        conflicts_with = "policies",
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    synthetic: Option<u64>,
    /// Synthetic request mix: default, sharing, multi-gpu, constrained.
    #[arg(long, default_value_t = Mix::Default, requires = "synthetic")]
    mix: Mix,
    /// pack, spread, fgd, best-fit, first-fit or random.
    #[arg(long, default_value_t = Policy::Pack, conflicts_with = "suite")]
    policy: Policy,
    /// Number of seeds; mean and standard deviation are reported.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    seeds: u32,
    /// First seed; seeds S..S+N.
    #[arg(long = "seed", value_name = "S", default_value_t = 1)]
    first_seed: u64,
    /// Requested GPU total relative to capacity.
    #[arg(long, default_value_t = 1.3, value_parser = positive)]
    inflate: f64,
    /// MIG-capable GPUs start with MIG enabled; shares become MIG profiles.
    #[arg(long)]
    mig: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

fn positive(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{text:?} is not a positive number")),
    }
}

/// What a `--suite` run compares when `--policies` is not given.
pub const SUITE_POLICIES: [Policy; 6] = [
    Policy::Pack,
    Policy::Fgd,
    Policy::BestFit,
    Policy::Spread,
    Policy::FirstFit,
    Policy::Random { seed: 0 },
];

/// Where the fleet and requests come from.
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    /// CSV files.
    Files {
        /// Hosts CSV.
        fleet: String,
        /// Requests CSV.
        requests: String,
    },
    /// Every trace in a folder, for several policies.
    Suite {
        /// The folder.
        dir: String,
        /// Policies to compare.
        policies: Vec<Policy>,
    },
    /// Generated.
    Synthetic {
        /// Number of hosts.
        hosts: usize,
        /// Request mix.
        mix: Mix,
    },
}

/// Parsed options.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Input.
    pub source: Source,
    /// Policy.
    pub policy: Policy,
    /// Number of seeds.
    pub seeds: u32,
    /// First seed.
    pub first_seed: u64,
    /// Inflation factor.
    pub inflate: f64,
    /// MIG mode.
    pub mig: bool,
    /// JSON output.
    pub json: bool,
}

impl From<Cli> for Options {
    fn from(cli: Cli) -> Self {
        let source = match (cli.fleet, cli.requests, cli.synthetic) {
            _ if cli.suite.is_some() => Source::Suite {
                dir: cli.suite.unwrap_or_default(),
                policies: if cli.policies.is_empty() {
                    SUITE_POLICIES.to_vec()
                } else {
                    cli.policies
                },
            },
            (Some(fleet), Some(requests), _) => Source::Files { fleet, requests },
            // clap requires one of the two forms.
            (_, _, hosts) => Source::Synthetic {
                hosts: usize::try_from(hosts.unwrap_or(1)).unwrap_or(usize::MAX),
                mix: cli.mix,
            },
        };
        Options {
            source,
            policy: cli.policy,
            seeds: cli.seeds,
            first_seed: cli.first_seed,
            inflate: cli.inflate,
            mig: cli.mig,
            json: cli.json,
        }
    }
}

/// Parses the arguments after the program name (for tests and library users;
/// the binary uses [`Cli::parse`], which prints help and usage errors itself).
pub fn parse<I, T>(args: I) -> Result<Options, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let argv = std::iter::once(std::ffi::OsString::from("placement-bench"))
        .chain(args.into_iter().map(Into::into));
    Cli::try_parse_from(argv).map(Options::from)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use clap::CommandFactory;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_a_synthetic_run() {
        let o = parse(args(
            "--synthetic 10 --mix sharing --policy best-fit --seeds 3 --mig --json",
        ))
        .unwrap();
        assert_eq!(
            o.source,
            Source::Synthetic {
                hosts: 10,
                mix: Mix::Sharing
            }
        );
        assert_eq!(o.policy, Policy::BestFit);
        assert_eq!((o.seeds, o.mig, o.json), (3, true, true));
        assert_eq!((o.first_seed, o.inflate), (1, 1.3));
    }

    #[test]
    fn parses_a_trace_run() {
        let o = parse(args(
            "--fleet f.csv --requests r.csv --seed 7 --inflate 1.1",
        ))
        .unwrap();
        assert_eq!(
            o.source,
            Source::Files {
                fleet: "f.csv".into(),
                requests: "r.csv".into()
            }
        );
        assert_eq!((o.first_seed, o.inflate), (7, 1.1));
    }

    #[test]
    fn parses_a_suite_run() {
        let o = parse(args("--suite traces --seeds 10 --seed 42")).unwrap();
        assert_eq!(
            o.source,
            Source::Suite {
                dir: "traces".into(),
                policies: vec![
                    Policy::Pack,
                    Policy::Fgd,
                    Policy::BestFit,
                    Policy::Spread,
                    Policy::FirstFit,
                    Policy::Random { seed: 0 }
                ]
            }
        );
        let o = parse(args("--suite t --policies fgd,pack")).unwrap();
        assert!(
            matches!(o.source, Source::Suite { policies, .. } if policies == vec![Policy::Fgd, Policy::Pack])
        );
    }

    #[test]
    fn rejects_bad_usage() {
        for bad in [
            "",
            "--fleet a.csv",
            "--requests r.csv --synthetic 5",
            "--fleet a.csv --requests r.csv --synthetic 5",
            "--synthetic x",
            "--synthetic 0",
            "--synthetic 5 --policy worst",
            "--synthetic 5 --mix odd",
            "--synthetic 5 --seeds 0",
            "--synthetic 5 --inflate -1",
            "--synthetic 5 --inflate nan",
            "--synthetic 5 --bogus",
            "--suite d --synthetic 5",
            "--suite d --fleet f.csv --requests r.csv",
            "--suite d --policy pack",
            "--suite d --policies pack,worst",
            "--synthetic 5 --policies pack",
        ] {
            assert!(parse(args(bad)).is_err(), "{bad}");
        }
        let help = parse(args("--help")).unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
    }
}
