//! Command-line options (parsed by hand to keep the crate graph small).

use tessera_core::placement::Policy;

use crate::error::BenchError;
use crate::synthetic::Mix;

/// Help text.
pub const USAGE: &str = "\
usage: placement-bench (--fleet FILE --requests FILE | --synthetic HOSTS [--mix MIX]) [options]

  --fleet FILE        hosts CSV: sn,cpu_milli,memory_mib,gpu,model
  --requests FILE     requests CSV: name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec
  --synthetic HOSTS   generated mixed fleet of HOSTS hosts and a seeded request mix
  --mix MIX           synthetic request mix: default, sharing, multi-gpu, constrained
  --policy POLICY     pack (default), spread, best-fit, first-fit, random
  --seeds N           number of seeds (default 1); mean and standard deviation reported
  --seed S            first seed (default 1); seeds S..S+N
  --inflate X         requested GPU total relative to capacity (default 1.3)
  --mig               MIG-capable GPUs start with MIG enabled; shares become MIG profiles
  --json              print one JSON object
  -h, --help          this text";

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

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Print the help text.
    Help,
    /// Run the benchmark.
    Run(Options),
}

fn usage(message: impl Into<String>) -> BenchError {
    BenchError::Usage(message.into())
}

fn value<'a, I: Iterator<Item = &'a String>>(
    args: &mut I,
    flag: &str,
) -> Result<&'a str, BenchError> {
    args.next()
        .map(String::as_str)
        .ok_or_else(|| usage(format!("{flag} needs a value")))
}

fn number<T: std::str::FromStr>(text: &str, flag: &str) -> Result<T, BenchError> {
    text.parse()
        .map_err(|_| usage(format!("{flag}: {text:?} is not a valid number")))
}

/// Parses the arguments after the program name.
pub fn parse(args: &[String]) -> Result<Command, BenchError> {
    let mut fleet = None;
    let mut requests = None;
    let mut synthetic = None;
    let mut mix = Mix::Default;
    let mut options = Options {
        source: Source::Synthetic { hosts: 0, mix },
        policy: Policy::Pack,
        seeds: 1,
        first_seed: 1,
        inflate: 1.3,
        mig: false,
        json: false,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--fleet" => fleet = Some(value(&mut it, arg)?.to_string()),
            "--requests" => requests = Some(value(&mut it, arg)?.to_string()),
            "--synthetic" => synthetic = Some(number::<usize>(value(&mut it, arg)?, arg)?),
            "--mix" => mix = value(&mut it, arg)?.parse().map_err(usage)?,
            "--policy" => {
                options.policy = value(&mut it, arg)?
                    .parse()
                    .map_err(|e: tessera_core::placement::UnknownPolicy| usage(e.to_string()))?;
            }
            "--seeds" => options.seeds = number(value(&mut it, arg)?, arg)?,
            "--seed" => options.first_seed = number(value(&mut it, arg)?, arg)?,
            "--inflate" => options.inflate = number(value(&mut it, arg)?, arg)?,
            "--mig" => options.mig = true,
            "--json" => options.json = true,
            other => return Err(usage(format!("unknown option {other:?}"))),
        }
    }
    if options.seeds == 0 {
        return Err(usage("--seeds must be at least 1"));
    }
    if !(options.inflate.is_finite() && options.inflate > 0.0) {
        return Err(usage("--inflate must be a positive number"));
    }
    options.source = match (fleet, requests, synthetic) {
        (Some(fleet), Some(requests), None) => Source::Files { fleet, requests },
        (None, None, Some(hosts)) if hosts > 0 => Source::Synthetic { hosts, mix },
        (None, None, Some(_)) => return Err(usage("--synthetic needs at least one host")),
        _ => {
            return Err(usage(
                "give either --fleet and --requests, or --synthetic HOSTS",
            ))
        }
    };
    Ok(Command::Run(options))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn parses_a_synthetic_run() {
        let Command::Run(o) = parse(&args(
            "--synthetic 10 --mix sharing --policy best-fit --seeds 3 --mig --json",
        ))
        .unwrap() else {
            panic!("help");
        };
        assert_eq!(
            o.source,
            Source::Synthetic {
                hosts: 10,
                mix: Mix::Sharing
            }
        );
        assert_eq!(o.policy, Policy::BestFit);
        assert_eq!((o.seeds, o.mig, o.json), (3, true, true));
    }

    #[test]
    fn rejects_bad_usage() {
        for bad in [
            "",
            "--fleet a.csv",
            "--synthetic x",
            "--synthetic 5 --policy worst",
            "--synthetic 5 --seeds 0",
            "--synthetic 5 --bogus",
        ] {
            assert!(parse(&args(bad)).is_err(), "{bad}");
        }
        assert_eq!(parse(&args("--help")).unwrap(), Command::Help);
    }
}
