//! Guards the headline result: on seeded synthetic traces, `pack` allocates
//! more GPU than the published FGD policy and than `best-fit`, with and
//! without MIG. Deterministic (seeded), not timed. 600 hosts: on small fleets
//! (300 hosts, `multi-gpu` mix) the shape statistics are thin and single
//! seeds can go either way.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use placement_bench::args::parse;
use placement_bench::execute;

fn ratio(policy: &str, mix: &str, mig: bool) -> f64 {
    let mut args: Vec<String> = [
        "--synthetic",
        "600",
        "--seeds",
        "2",
        "--policy",
        policy,
        "--mix",
        mix,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if mig {
        args.push("--mig".into());
    }
    execute(&parse(args).unwrap()).unwrap().gpu_allocation_ratio
}

#[test]
fn pack_beats_fgd_and_best_fit_on_every_mix_with_and_without_mig() {
    for mix in ["default", "sharing", "multi-gpu", "constrained"] {
        for mig in [false, true] {
            let pack = ratio("pack", mix, mig);
            let best = ratio("best-fit", mix, mig);
            let fgd = ratio("fgd", mix, mig);
            assert!(
                pack > best,
                "mix {mix}, mig {mig}: pack {pack:.4} <= best-fit {best:.4}"
            );
            assert!(
                pack > fgd,
                "mix {mix}, mig {mig}: pack {pack:.4} <= fgd {fgd:.4}"
            );
            assert!(
                pack > 0.5,
                "mix {mix}, mig {mig}: pack allocates only {pack:.4}"
            );
        }
    }
}
