//! Every decision explains itself: what the policy ranks by, the chosen
//! place and the next best with their scores, and what was passed over.

use super::super::{PlacementRequest, Policy};
use super::{fleet, frac, host, shared, whole, L4};
use crate::ids::named::{hid, tid};
use crate::units::{CpuMilli, MemMiB};

#[test]
fn the_winner_is_ranked_first_and_the_runners_up_score_no_better() {
    let f = fleet(vec![
        host("busy", vec![shared(0, L4, 700), shared(1, L4, 300)]),
        host("half", vec![shared(0, L4, 500), shared(1, L4, 0)]),
        host("idle", vec![shared(0, L4, 0), shared(1, L4, 0)]),
    ]);
    for policy in [Policy::Pack, Policy::BestFit, Policy::Spread, Policy::Fgd] {
        let d = f.place(&frac(200), policy).unwrap();
        let why = &d.score;
        assert_eq!(why.policy, policy.name());
        assert!(why.ranked.len() >= 2, "{policy}: {why:?}");
        assert!(why.ranked.len() <= 4);
        assert_eq!(
            (why.ranked[0].host, &why.ranked[0].gpus),
            (d.host, &d.gpus),
            "{policy}"
        );
        let terms = why.ranking.len();
        for r in &why.ranked {
            assert_eq!(r.scores.len(), terms, "{policy}: one score per term");
        }
        assert_eq!(why.hosts_scanned, 3, "{policy}");
        assert!(why.candidates >= why.ranked.len() as u32);
        // In rank order: each place is no better than the one before,
        // term by term in the direction the ranking names.
        let order = |scores: &[f64]| -> Vec<f64> {
            scores
                .iter()
                .zip(&why.ranking)
                .map(|(v, name)| {
                    if name.contains("most first") || name.contains("highest first") {
                        -v
                    } else {
                        *v
                    }
                })
                .collect()
        };
        for pair in why.ranked.windows(2) {
            let (a, b) = (order(&pair[0].scores), order(&pair[1].scores));
            assert!(
                a.partial_cmp(&b) != Some(std::cmp::Ordering::Greater),
                "{policy}: {a:?} before {b:?}"
            );
        }
    }
    // Best-fit's first term is the compute left on the chosen GPU: the
    // busy host's GPU 0 keeps 0.1, the next best (half's GPU 0) 0.3.
    let d = f.place(&frac(200), Policy::BestFit).unwrap();
    assert_eq!(d.score.ranked[0].scores[0], 0.1);
    assert_eq!(d.score.ranked[1].scores[0], 0.3);
    assert_eq!(
        (d.score.ranked[1].host, d.score.ranked[1].gpus.as_slice()),
        (hid("half"), &[0][..])
    );
    // First-fit ranks nothing beyond its pick.
    let d = f.place(&frac(200), Policy::FirstFit).unwrap();
    assert_eq!(d.score.ranked.len(), 1);
    assert!(d.score.ranked[0].scores.is_empty());
}

#[test]
fn what_was_passed_over_is_counted() {
    let mut small = host("small", vec![shared(0, L4, 0)]);
    small.cpu_free = CpuMilli(1_000);
    small.memory_free = MemMiB(1_024);
    let f = fleet(vec![
        small,
        host(
            "red",
            vec![shared(0, L4, 200).held_by(tid("red")), shared(1, L4, 600)],
        ),
    ]);
    let mut request: PlacementRequest = frac(300).for_tenant(tid("blue"), true);
    request.cpu = CpuMilli(4_000);
    request.memory = MemMiB(8_192);
    let d = f.place(&request, Policy::Pack).unwrap();
    assert_eq!((d.host, d.gpus.as_slice()), (hid("red"), &[1][..]));
    assert_eq!(
        d.score.hosts_short, 1,
        "the small host lacks CPU and memory"
    );
    assert_eq!(d.score.hosts_scanned, 1);
    assert_eq!(d.score.gpus_kept_apart, 1, "red's GPU 0 is kept apart");
    // Whole GPUs: an idle GPU holding no one's slice is not kept apart.
    let f = fleet(vec![host("h", vec![super::gpu(0, L4), super::gpu(1, L4)])]);
    let d = f
        .place(&whole(1).for_tenant(tid("blue"), true), Policy::Pack)
        .unwrap();
    assert_eq!(d.score.gpus_kept_apart, 0);
    assert_eq!(d.score.ranking.len(), 3);
}

#[test]
fn hosts_without_the_gpus_asked_for_are_not_counted_short() {
    use super::{gpu, A100};
    let mut small = host("a100", vec![gpu(0, A100)]);
    small.cpu_free = CpuMilli(1_000);
    let f = fleet(vec![small, host("l4", vec![gpu(0, L4)])]);
    let mut request = whole(1);
    request.allowed_models = vec![L4.to_string()];
    request.cpu = CpuMilli(4_000);
    let d = f.place(&request, Policy::Pack).unwrap();
    assert_eq!((d.score.hosts_short, d.score.hosts_scanned), (0, 1));
}
