//! The replay method used in published work on the Alibaba GPU-sharing
//! trace: every request once, then (seeded) random copies added while the
//! requested GPU total stays within `inflate` × the fleet's capacity, or
//! random requests dropped while it is above; then a seeded shuffle.

use tessera_core::placement::SplitMix64;

use crate::trace::TraceRequest;

/// The order in which requests arrive: indices into `requests`, with
/// repeats for the added copies.
pub fn arrival_order(
    requests: &[TraceRequest],
    capacity_milli: u64,
    inflate: f64,
    seed: u64,
) -> Vec<usize> {
    let mut rng = SplitMix64::new(seed);
    let target = (capacity_milli as f64 * inflate).max(0.0) as u64;
    let mut order: Vec<usize> = (0..requests.len()).collect();
    let mut total: u64 = requests.iter().map(TraceRequest::gpu_requested).sum();
    if !requests.is_empty() && total > 0 {
        if total <= target {
            // Bounded so that a mix of mostly CPU-only requests cannot spin.
            let limit = requests.len().saturating_mul(1000).max(1_000_000);
            for _ in 0..limit {
                let i = rng.index(requests.len());
                let add = requests[i].gpu_requested();
                if total + add > target {
                    break;
                }
                total += add;
                order.push(i);
            }
        } else {
            while total > target && !order.is_empty() {
                let at = rng.index(order.len());
                total -= requests[order[at]].gpu_requested();
                order.swap_remove(at);
            }
        }
    }
    rng.shuffle(&mut order);
    order
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    fn req(num_gpu: u32, gpu_milli: u32) -> TraceRequest {
        TraceRequest {
            name: String::new(),
            cpu_milli: 0,
            memory_mib: 0,
            num_gpu,
            gpu_milli,
            gpu_spec: Vec::new(),
        }
    }

    fn total(requests: &[TraceRequest], order: &[usize]) -> u64 {
        order.iter().map(|&i| requests[i].gpu_requested()).sum()
    }

    #[test]
    fn inflates_up_to_the_target_keeping_every_request() {
        let requests = vec![req(1, 500), req(1, 1000), req(0, 0), req(2, 1000)];
        let order = arrival_order(&requests, 10_000, 1.3, 1);
        let t = total(&requests, &order);
        assert!(t <= 13_000, "{t}");
        assert!(t > 13_000 - 2000, "stopped early: {t}");
        for i in 0..requests.len() {
            assert!(order.contains(&i));
        }
    }

    #[test]
    fn drops_down_to_the_target() {
        let requests: Vec<_> = (0..100).map(|_| req(1, 1000)).collect();
        let order = arrival_order(&requests, 50_000, 1.0, 2);
        assert_eq!(total(&requests, &order), 50_000);
        assert_eq!(order.len(), 50);
    }

    #[test]
    fn same_seed_same_order_and_shuffled() {
        let requests: Vec<_> = (0..50).map(|i| req(1, 100 + i)).collect();
        let a = arrival_order(&requests, 100_000, 1.3, 7);
        assert_eq!(a, arrival_order(&requests, 100_000, 1.3, 7));
        assert_ne!(a, arrival_order(&requests, 100_000, 1.3, 8));
        assert_ne!(&a[..50], &(0..50).collect::<Vec<_>>()[..]);
    }

    #[test]
    fn gpu_free_traces_are_left_alone() {
        let requests = vec![req(0, 0), req(0, 0)];
        assert_eq!(arrival_order(&requests, 1000, 1.3, 1).len(), 2);
        assert!(arrival_order(&[], 1000, 1.3, 1).is_empty());
    }
}
