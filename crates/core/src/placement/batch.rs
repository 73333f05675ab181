//! Placing a queue of waiting requests.

use serde::{Deserialize, Serialize};

use super::decision::Decision;
use super::error::PlacementError;
use super::fleet::Fleet;
use super::policy::Policy;
use super::request::PlacementRequest;
use super::rng::SplitMix64;

/// In which order a batch is tried.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BatchOrder {
    /// Queue order. A request that does not fit does not block later ones.
    #[default]
    Arrival,
    /// Largest GPU demand first (then host CPU, then queue order): packs
    /// better when the whole queue is known.
    LargestFirst,
}

impl Fleet {
    /// Places `requests` one after another, applying each decision before
    /// the next request is tried. Results come back in the order of
    /// `requests`. With [`Policy::Random`], request `i` is placed with a seed
    /// derived from the policy's seed and `i`, so the batch is reproducible.
    pub fn place_batch(
        &mut self,
        requests: &[PlacementRequest],
        policy: Policy,
        order: BatchOrder,
    ) -> Vec<Result<Decision, PlacementError>> {
        let mut sequence: Vec<usize> = (0..requests.len()).collect();
        if order == BatchOrder::LargestFirst {
            sequence.sort_by_key(|&i| {
                let r = &requests[i];
                (
                    std::cmp::Reverse(r.gpu_milli()),
                    std::cmp::Reverse(r.cpu),
                    i,
                )
            });
        }
        let mut seeds = match policy {
            Policy::Random { seed } => SplitMix64::new(seed),
            _ => SplitMix64::new(0),
        };
        let mut results: Vec<Option<Result<Decision, PlacementError>>> = vec![None; requests.len()];
        for i in sequence {
            let this_policy = match policy {
                Policy::Random { .. } => Policy::Random {
                    seed: seeds.next_u64(),
                },
                other => other,
            };
            let outcome = self.place(&requests[i], this_policy).and_then(|decision| {
                // A fresh decision always applies; a failure here would mean
                // the caches disagree with the state, reported as no capacity.
                self.apply(&decision)
                    .map(|()| decision)
                    .map_err(|_| PlacementError::InsufficientCapacity)
            });
            results[i] = Some(outcome);
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or(Err(PlacementError::InsufficientCapacity)))
            .collect()
    }
}
