//! The public Alibaba traces (openb, from the `data/csv` folder of
//! hkust-adsl/kubernetes-scheduler-simulator; see docs/placement.md),
//! replayed every time: FGD reproduces its paper's figure on the default
//! trace, `pack` beats it there and reaches its target, and on every other
//! trace FGD's paper publishes `pack` reaches at least that figure.
//!
//! The traces are read from `TESSERA_OPENB_DIR`, or else from
//! `../shared/openb` beside the workspace (where CI has them). Without
//! them these tests fail: a replay that is skipped checks nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use placement_bench::suite::{self, SuiteRow};
use tessera_core::placement::Policy;

/// The FGD paper's figures by trace (`docs/benchmarks/fgd-paper.json`: GPU
/// allocation ratio at 130 % inflation, mean of its 10 seeds), as fractions.
fn published() -> BTreeMap<String, f64> {
    let file = workspace().join("docs/benchmarks/fgd-paper.json");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let percent: BTreeMap<String, f64> = serde_json::from_value(doc["figures"].clone()).unwrap();
    percent.into_iter().map(|(t, v)| (t, v / 100.0)).collect()
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The folder holding the traces; fails the test when there is none.
fn openb() -> String {
    let dir = std::env::var("TESSERA_OPENB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| workspace().join("../shared/openb"));
    for file in [suite::FLEET_FILE, "openb_pod_list_default.csv"] {
        assert!(
            dir.join(file).is_file(),
            "{} has no {file}: put the openb traces (all 26 CSVs of \
             hkust-adsl/kubernetes-scheduler-simulator's data/csv) there or set TESSERA_OPENB_DIR",
            dir.display()
        );
    }
    dir.display().to_string()
}

fn ratio(rows: &[SuiteRow], trace: &str, policy: &str) -> f64 {
    rows.iter()
        .find(|r| r.trace == trace && r.report.policy == policy)
        .unwrap()
        .report
        .gpu_allocation_ratio
}

/// FGD on `openb_pod_list_default`, 130 % inflation, mean of the paper's
/// 10 seeds (42–51), against our FGD, pack and best-fit on the same seeds.
#[test]
fn fgd_reproduces_the_paper_and_pack_beats_it_on_the_default_trace() {
    let rows = suite::run_only(
        &openb(),
        Some(&["default"]),
        &[Policy::Fgd, Policy::Pack, Policy::BestFit],
        10,
        42,
        1.3,
        false,
    )
    .unwrap();
    let (fgd, pack, best_fit) = (
        ratio(&rows, "default", "fgd"),
        ratio(&rows, "default", "pack"),
        ratio(&rows, "default", "best-fit"),
    );
    let published = published()["default"];
    eprintln!(
        "default trace: fgd {fgd:.4} (paper {published}), pack {pack:.4}, best-fit {best_fit:.4}"
    );
    assert!(
        (fgd - published).abs() <= 0.003,
        "fgd {fgd:.4} is not within 0.3 points of the paper's {published}"
    );
    assert!(pack > fgd && pack > best_fit, "pack {pack:.4}");
    assert!(
        pack >= PACK_DEFAULT_TARGET,
        "pack {pack:.4} fell below the target {PACK_DEFAULT_TARGET}"
    );
}

/// Pack's floor on the default trace (10 seeds): it reaches 96.19 %, and
/// docs/placement.md ("How far the default trace can go") says why 96.5 %
/// is out of reach for placement alone.
const PACK_DEFAULT_TARGET: f64 = 0.9615;

/// Every other trace FGD's paper publishes a figure for, with pack on the
/// paper's first three seeds (42–44; `make bench-traces` runs all ten and
/// every policy). Pack must reach the paper's FGD figure on each: the
/// smallest lead in the 10-seed table (docs/benchmarks.md) is 0.46 points
/// (multigpu40), several times the spread between seeds, so three seeds
/// decide it.
#[test]
fn pack_reaches_fgds_published_figure_on_every_published_trace() {
    let published = published();
    let others: Vec<&str> = published
        .keys()
        .map(String::as_str)
        .filter(|t| *t != "default")
        .collect();
    assert_eq!(
        others.len(),
        16,
        "the paper publishes 17 traces: {published:?}"
    );
    let rows =
        suite::run_only(&openb(), Some(&others), &[Policy::Pack], 3, 42, 1.3, false).unwrap();
    let mut short = Vec::new();
    for trace in &others {
        let pack = ratio(&rows, trace, "pack");
        let fgd = published[*trace];
        eprintln!("{trace}: pack {pack:.4}, FGD (paper) {fgd:.4}");
        if pack < fgd {
            short.push(format!("{trace}: pack {pack:.4} < FGD's {fgd:.4}"));
        }
    }
    assert!(
        short.is_empty(),
        "pack fell below FGD's published figure: {short:?}"
    );
}
