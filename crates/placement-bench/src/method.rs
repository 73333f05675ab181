//! The replay method of the FGD paper's simulator (Weng et al., USENIX
//! ATC '23; `SortClusterPods` then `TunePodsByNodeTotalResource`): the
//! trace's requests arrive in a seeded random order; when they ask for less
//! GPU than `inflate` × the fleet's capacity, seeded random copies arrive
//! after them until the next copy would pass the target; when they ask for
//! more, seeded random requests are dropped (keeping the order of the rest)
//! until they no longer do.

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
    rng.shuffle(&mut order);
    let mut total: u64 = requests.iter().map(TraceRequest::gpu_requested).sum();
    if requests.is_empty() || total == 0 {
        return order;
    }
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
            order.remove(at);
        }
    }
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
    fn the_trace_arrives_first_and_copies_after_it() {
        let requests: Vec<_> = (0..40).map(|i| req(1, 100 + i)).collect();
        let order = arrival_order(&requests, 100_000, 1.3, 3);
        let mut first: Vec<usize> = order[..40].to_vec();
        first.sort_unstable();
        assert_eq!(first, (0..40).collect::<Vec<_>>());
        assert!(order.len() > 40);
    }

    #[test]
    fn dropping_keeps_the_order_of_the_rest() {
        let requests: Vec<_> = (0..100).map(|_| req(1, 1000)).collect();
        let full = arrival_order(&requests, 1_000_000, 1.0, 4);
        let cut = arrival_order(&requests, 50_000, 1.0, 4);
        let mut rest = full.iter().filter(|i| cut.contains(i));
        assert!(cut.iter().all(|i| rest.next() == Some(i)));
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
