//! Replaying one scenario with one policy and seed.

use std::time::Instant;

use tessera_core::placement::{Fleet, Policy, SplitMix64, Workload, DEFAULT_MAX_CLASSES};

use crate::error::BenchError;
use crate::method::arrival_order;
use crate::trace::{to_hosts, to_request, TraceHost, TraceRequest};

/// A fleet, a request trace and how to replay them.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Hosts.
    pub hosts: Vec<TraceHost>,
    /// Requests (each arrives at least once unless dropped by the method).
    pub requests: Vec<TraceRequest>,
    /// Start MIG-capable GPUs with MIG enabled.
    pub mig: bool,
    /// Requested GPU total relative to fleet capacity.
    pub inflate: f64,
}

/// Outcome of one seed.
#[derive(Clone, Debug, PartialEq)]
pub struct SeedResult {
    /// GPU compute of the placed requests, in thousandths.
    pub allocated_gpu_milli: u64,
    /// Fleet GPU capacity, in thousandths.
    pub total_gpu_milli: u64,
    /// Requests that arrived.
    pub arrivals: u64,
    /// Requests that did not fit.
    pub failed: u64,
    /// Workload-weighted fragmented share of the fleet's GPU capacity at the
    /// end, by Tessera's measure and class mix whatever the policy (so that
    /// policies compare).
    pub fragmentation: f64,
    /// Decisions (place + apply) per second.
    pub placements_per_s: f64,
    /// Duration of each `place` call, in microseconds, ascending.
    pub decision_us: Vec<f64>,
}

impl SeedResult {
    /// Allocated share of the fleet's GPU capacity.
    pub fn gpu_allocation_ratio(&self) -> f64 {
        if self.total_gpu_milli == 0 {
            0.0
        } else {
            self.allocated_gpu_milli as f64 / self.total_gpu_milli as f64
        }
    }
}

/// Share of requests the FGD paper's target workload covers.
pub const FGD_POPULARITY: f64 = 0.95;

/// Builds the fleet of `scenario` with the workload `policy` measures
/// fragmentation against: the FGD paper's typical pods for `fgd`, Tessera's
/// class mix for the others. The hosts are in a seeded random order, as in
/// the FGD simulator (it prefixes node names with a random permutation, and
/// its scheduler breaks ties by name), so that "the first host" of a tie is
/// not always the same kind of machine.
pub fn build_fleet(scenario: &Scenario, policy: Policy, seed: u64) -> Result<Fleet, BenchError> {
    let requests: Vec<_> = scenario.requests.iter().map(to_request).collect();
    let workload = match policy {
        Policy::Fgd => Workload::typical(&requests, FGD_POPULARITY),
        _ => Workload::from_requests(&requests, DEFAULT_MAX_CLASSES),
    };
    let mut hosts = to_hosts(&scenario.hosts, scenario.mig);
    SplitMix64::new(seed ^ HOST_ORDER_SALT).shuffle(&mut hosts);
    Ok(Fleet::new(hosts, workload)?)
}

/// Separates the host-order stream from the arrival-order stream of a seed.
const HOST_ORDER_SALT: u64 = 0x005E_ED0F_4057;

/// Replays `scenario` once: arrival order from `seed`, nothing departs, a
/// request that does not fit is counted as failed and skipped.
pub fn run_seed(scenario: &Scenario, policy: Policy, seed: u64) -> Result<SeedResult, BenchError> {
    let mut fleet = build_fleet(scenario, policy, seed)?;
    let requests: Vec<_> = scenario.requests.iter().map(to_request).collect();
    let order = arrival_order(
        &scenario.requests,
        fleet.total_gpu_milli(),
        scenario.inflate,
        seed,
    );
    let mut seeds = SplitMix64::new(seed ^ 0xD1CE);
    let mut allocated = 0u64;
    let mut failed = 0u64;
    let mut decision_us = Vec::with_capacity(order.len());
    let started = Instant::now();
    for &i in &order {
        let this_policy = match policy {
            Policy::Random { .. } => Policy::Random {
                seed: seeds.next_u64(),
            },
            other => other,
        };
        let t = Instant::now();
        let outcome = fleet.place(&requests[i], this_policy);
        decision_us.push(t.elapsed().as_secs_f64() * 1e6);
        match outcome.map(|d| fleet.apply(&d)) {
            Ok(Ok(())) => allocated += scenario.requests[i].gpu_requested(),
            _ => failed += 1,
        }
    }
    let elapsed = started.elapsed().as_secs_f64();
    if policy == Policy::Fgd {
        fleet.set_workload(Workload::from_requests(&requests, DEFAULT_MAX_CLASSES));
    }
    decision_us.sort_by(f64::total_cmp);
    Ok(SeedResult {
        allocated_gpu_milli: allocated,
        total_gpu_milli: fleet.total_gpu_milli(),
        arrivals: order.len() as u64,
        failed,
        fragmentation: fleet.fragmentation().of_total(),
        placements_per_s: if elapsed > 0.0 {
            order.len() as f64 / elapsed
        } else {
            0.0
        },
        decision_us,
    })
}

/// A fleet of about `gpus` GPUs filled by `policy` with synthetic requests
/// until `fill` of its GPU capacity is requested, plus the request mix to
/// time decisions with. Used by the criterion benches.
pub fn prefilled(
    gpus: usize,
    fill: f64,
    mix: crate::synthetic::Mix,
    mig: bool,
    policy: Policy,
    seed: u64,
) -> Result<(Fleet, Vec<tessera_core::placement::PlacementRequest>), BenchError> {
    let hosts = crate::synthetic::fleet_with_gpus(gpus, seed);
    let requests = crate::synthetic::requests(gpus.max(100), seed, mix);
    let scenario = Scenario {
        hosts,
        requests,
        mig,
        inflate: fill,
    };
    let mut fleet = build_fleet(&scenario, policy, seed)?;
    let order = arrival_order(&scenario.requests, fleet.total_gpu_milli(), fill, seed);
    let requests: Vec<_> = scenario.requests.iter().map(to_request).collect();
    for &i in &order {
        if let Ok(decision) = fleet.place(&requests[i], policy) {
            // A fresh decision applies; ignoring the impossible failure
            // only leaves the fleet a little emptier.
            let _ = fleet.apply(&decision);
        }
    }
    Ok((fleet, requests))
}
