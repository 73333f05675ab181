//! Seeded synthetic fleets and request mixes, in the trace's own record
//! types so that they go through exactly the same pipeline as a real trace.

use std::fmt;
use std::str::FromStr;

use tessera_core::placement::SplitMix64;

use crate::trace::{TraceHost, TraceRequest};

/// A request mix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mix {
    /// Trace-like: a third fractional, many single GPUs, some multi-GPU and
    /// CPU-only work, a fifth pinned to model families.
    #[default]
    Default,
    /// Mostly fractional shares.
    Sharing,
    /// Many 2-, 4- and 8-GPU jobs.
    MultiGpu,
    /// Half of the GPU work pinned to a model family.
    Constrained,
}

impl Mix {
    /// Every mix, for sweeps.
    pub const ALL: [Mix; 4] = [Mix::Default, Mix::Sharing, Mix::MultiGpu, Mix::Constrained];

    /// Percent of (fractional, 1 GPU, 2, 4, 8 GPUs, CPU-only) requests, and
    /// percent of GPU requests with a model constraint.
    fn shape(self) -> ([u64; 6], u64) {
        match self {
            Mix::Default => ([32, 38, 8, 4, 3, 15], 20),
            Mix::Sharing => ([65, 20, 3, 1, 1, 10], 20),
            Mix::MultiGpu => ([20, 30, 20, 12, 8, 10], 20),
            Mix::Constrained => ([32, 38, 8, 4, 3, 15], 50),
        }
    }

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Mix::Default => "default",
            Mix::Sharing => "sharing",
            Mix::MultiGpu => "multi-gpu",
            Mix::Constrained => "constrained",
        }
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mix::ALL.into_iter().find(|m| m.name() == s).ok_or_else(|| {
            format!("unknown mix {s:?}; expected default, sharing, multi-gpu or constrained")
        })
    }
}

/// A host type: (model, GPUs, cores, GiB of memory).
type HostType = (&'static str, u32, u32, u64);

/// (weight, model, GPUs, cores, GiB of memory)
const HOST_TYPES: [(u64, &str, u32, u32, u64); 7] = [
    (20, "A100-80GB", 8, 64, 1024),
    (10, "H100-80GB", 8, 96, 2048),
    (10, "A30-24GB", 4, 32, 512),
    (15, "V100-32GB", 8, 64, 512),
    (15, "T4", 4, 32, 256),
    (15, "L4", 2, 16, 128),
    (15, "", 0, 96, 384),
];

/// Model families a constrained request may ask for.
const FAMILIES: [&[&str]; 4] = [
    &["A100-80GB", "H100-80GB"],
    &["V100-32GB"],
    &["T4", "L4"],
    &["A30-24GB", "A100-80GB"],
];

/// Fractional shares and their weights (similar to the trace's spikes at
/// common fractions).
const SHARES: [(u64, u32); 8] = [
    (10, 100),
    (15, 200),
    (15, 250),
    (10, 300),
    (25, 500),
    (10, 600),
    (10, 700),
    (5, 800),
];

fn pick<T: Copy + Default>(rng: &mut SplitMix64, items: &[(u64, T)]) -> T {
    let total: u64 = items.iter().map(|(w, _)| w).sum();
    let mut r = rng.below(total);
    for (w, item) in items {
        if r < *w {
            return *item;
        }
        r -= w;
    }
    items.last().map_or_else(T::default, |(_, item)| *item)
}

/// `hosts` hosts drawn from a mixed catalogue of host types.
pub fn fleet(hosts: usize, seed: u64) -> Vec<TraceHost> {
    let mut rng = SplitMix64::new(seed ^ 0xF1EE7);
    let types: Vec<(u64, HostType)> = HOST_TYPES
        .iter()
        .map(|&(w, m, g, c, mem)| (w, (m, g, c, mem)))
        .collect();
    (0..hosts)
        .map(|i| {
            let (model, gpus, cores, gib) = pick(&mut rng, &types);
            TraceHost {
                sn: format!("host-{i:05}"),
                cpu_milli: cores * 1000,
                memory_mib: gib * 1024,
                gpus,
                model: model.to_string(),
            }
        })
        .collect()
}

/// Hosts drawn as in [`fleet`] until they hold at least `gpus` GPUs.
pub fn fleet_with_gpus(gpus: usize, seed: u64) -> Vec<TraceHost> {
    let mut hosts = Vec::new();
    let mut count = 0usize;
    let mut n = gpus / 4 + 1;
    while count < gpus {
        hosts = fleet(n, seed);
        count = hosts.iter().map(|h| h.gpus as usize).sum();
        n += n / 8 + 1;
    }
    // Trim from the end to land close to the target.
    while let Some(last) = hosts.last() {
        let without = count - last.gpus as usize;
        if without < gpus {
            break;
        }
        count = without;
        hosts.pop();
    }
    hosts
}

/// `count` requests of `mix`.
pub fn requests(count: usize, seed: u64, mix: Mix) -> Vec<TraceRequest> {
    let mut rng = SplitMix64::new(seed ^ 0x5EED);
    let (shape, constrained) = mix.shape();
    let kinds: Vec<(u64, usize)> = shape.iter().copied().zip(0..).collect();
    (0..count)
        .map(|i| {
            let kind = pick(&mut rng, &kinds);
            let (num_gpu, gpu_milli) = match kind {
                0 => (1, pick(&mut rng, &SHARES)),
                1 => (1, 1000),
                2 => (2, 1000),
                3 => (4, 1000),
                4 => (8, 1000),
                _ => (0, 0),
            };
            // CPU is as tight as in the trace: about 8 cores per GPU on the
            // hosts, 2-8 cores per share and 4-12 per whole GPU here.
            let cores = match num_gpu {
                0 => 2 + rng.below(15) as u32,
                1 if gpu_milli < 1000 => 2 + rng.below(7) as u32,
                n => n * (4 + rng.below(9) as u32),
            };
            let gpu_spec = if num_gpu > 0 && rng.below(100) < constrained {
                FAMILIES[rng.index(FAMILIES.len())]
                    .iter()
                    .map(|s| (*s).to_string())
                    .collect()
            } else {
                Vec::new()
            };
            TraceRequest {
                name: format!("req-{i:06}"),
                cpu_milli: cores * 1000,
                memory_mib: u64::from(cores) * 4 * 1024,
                num_gpu,
                gpu_milli,
                gpu_spec,
            }
        })
        .collect()
}
