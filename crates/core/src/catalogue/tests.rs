#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

fn mig_models() -> Vec<&'static GpuModel> {
    all_models().iter().filter(|m| m.mig.is_some()).collect()
}

fn spec(name: &str) -> &'static MigSpec {
    lookup(name, 0).mig.expect("MIG-capable")
}

#[test]
fn catalogue_has_the_six_mig_models_and_unique_names() {
    let names: Vec<_> = mig_models().iter().map(|m| m.name).collect();
    assert_eq!(
        names,
        [
            "A30-24GB",
            "A100-SXM4-40GB",
            "A100-80GB",
            "H100-80GB",
            "H100-NVL-94GB",
            "H200-141GB"
        ]
    );
    let mut all: Vec<_> = all_models().iter().map(|m| m.name).collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), all_models().len());
    assert!(all_models()
        .iter()
        .all(|m| !m.generic && m.mps_max_clients == 48));
}

#[test]
fn every_placement_fits_inside_the_memory_slices() {
    for model in mig_models() {
        let spec = model.mig.unwrap();
        for p in spec.profiles {
            assert!(!p.placements.is_empty(), "{} {}", model.name, p.name);
            assert!(
                p.placements.windows(2).all(|w| w[0] < w[1]),
                "{} {} ascending",
                model.name,
                p.name
            );
            for &start in p.placements {
                assert!(
                    start + p.memory_slices <= spec.memory_slices,
                    "{} {} at {start} overflows",
                    model.name,
                    p.name
                );
                assert_eq!(
                    start % p.memory_slices.min(4),
                    0,
                    "{} {} aligned",
                    model.name,
                    p.name
                );
            }
            assert!(p.compute_slices <= spec.compute_slices);
            assert!(
                p.memory_mib <= model.memory_mib,
                "{} {}",
                model.name,
                p.name
            );
        }
    }
}

#[test]
fn max_counts_agree_with_placements() {
    for model in mig_models() {
        let spec = model.mig.unwrap();
        for p in spec.profiles {
            // Non-overlapping placements available for the profile alone.
            let mut free_until = 0u8;
            let mut disjoint = 0u8;
            for &start in p.placements {
                if start >= free_until {
                    disjoint += 1;
                    free_until = start + p.memory_slices;
                }
            }
            let by_compute = spec.compute_slices / p.compute_slices;
            let expected = if p.media_extensions {
                1
            } else {
                disjoint.min(by_compute)
            };
            assert_eq!(p.max_count, expected, "{} {}", model.name, p.name);
        }
    }
}

#[test]
fn profile_names_encode_compute_slices_and_memory() {
    for model in mig_models() {
        let spec = model.mig.unwrap();
        for p in spec.profiles {
            let (g, rest) = p.name.split_once("g.").unwrap();
            assert_eq!(g.parse::<u8>().unwrap(), p.compute_slices, "{}", p.name);
            let gb: u64 = rest
                .trim_end_matches("+me")
                .trim_end_matches("gb")
                .parse()
                .unwrap();
            assert_eq!(p.media_extensions, p.name.ends_with("+me"));
            // The driver's size is within 15 % below the marketing size.
            let nominal = gb * 1024;
            assert!(
                p.memory_mib <= nominal + 512,
                "{} {} {}",
                model.name,
                p.name,
                p.memory_mib
            );
            assert!(
                p.memory_mib * 100 >= nominal * 85,
                "{} {} {}",
                model.name,
                p.name,
                p.memory_mib
            );
            // Memory grows with memory slices.
            let whole = spec.profiles.iter().map(|q| q.memory_mib).max().unwrap();
            assert!(
                p.memory_mib * u64::from(spec.memory_slices)
                    <= whole * u64::from(p.memory_slices) + 2048
            );
        }
    }
}

#[test]
fn a100_40gb_facts_from_the_guide() {
    let s = spec("A100-SXM4-40GB");
    assert_eq!((s.compute_slices, s.memory_slices), (7, 8));
    type Fact = (&'static str, u8, u8, &'static [u8], u8, u64);
    let facts: [Fact; 7] = [
        ("7g.40gb", 7, 8, &[0], 1, 40192),
        ("4g.20gb", 4, 4, &[0], 1, 19968),
        ("3g.20gb", 3, 4, &[0, 4], 2, 19968),
        ("2g.10gb", 2, 2, &[0, 2, 4], 3, 9856),
        ("1g.10gb", 1, 2, &[0, 2, 4, 6], 4, 9856),
        ("1g.5gb", 1, 1, &[0, 1, 2, 3, 4, 5, 6], 7, 4864),
        ("1g.5gb+me", 1, 1, &[0, 1, 2, 3, 4, 5, 6], 1, 4864),
    ];
    for (name, c, m, starts, max, mib) in facts {
        let p = s.profile(name).unwrap();
        assert_eq!(
            (
                p.compute_slices,
                p.memory_slices,
                p.placements,
                p.max_count,
                p.memory_mib
            ),
            (c, m, starts, max, mib),
            "{name}"
        );
    }
    assert!(s.profile("1g.5gb+me").unwrap().media_extensions);
    assert_eq!(s.profiles.len(), 7);
}

#[test]
fn a30_facts_from_the_guide() {
    let s = spec("A30-24GB");
    assert_eq!((s.compute_slices, s.memory_slices), (4, 4));
    assert_eq!(
        s.profile_names(),
        ["1g.6gb", "1g.6gb+me", "2g.12gb", "2g.12gb+me", "4g.24gb"]
    );
    assert_eq!(s.profile("4g.24gb").unwrap().placements, &[0]);
    assert_eq!(s.profile("2g.12gb").unwrap().placements, &[0, 2]);
    assert_eq!(s.profile("2g.12gb+me").unwrap().max_count, 1);
    assert_eq!(s.profile("1g.6gb").unwrap().placements, &[0, 1, 2, 3]);
    assert_eq!(s.profile("1g.6gb").unwrap().max_count, 4);
    // The guide lists no 1g.12gb on A30.
    assert!(s.profile("1g.12gb").is_none());
}

#[test]
fn hopper_and_a100_80gb_profile_names() {
    assert_eq!(
        spec("H100-80GB").profile_names(),
        [
            "1g.10gb",
            "1g.10gb+me",
            "1g.20gb",
            "2g.20gb",
            "3g.40gb",
            "4g.40gb",
            "7g.80gb"
        ]
    );
    assert_eq!(
        spec("A100-80GB").profile_names(),
        [
            "1g.10gb",
            "1g.10gb+me",
            "1g.20gb",
            "2g.20gb",
            "3g.40gb",
            "4g.40gb",
            "7g.80gb"
        ]
    );
    assert_eq!(
        spec("H100-NVL-94GB").profile_names(),
        [
            "1g.12gb",
            "1g.12gb+me",
            "1g.24gb",
            "2g.24gb",
            "3g.47gb",
            "4g.47gb",
            "7g.94gb"
        ]
    );
    assert_eq!(
        spec("H200-141GB").profile_names(),
        [
            "1g.18gb",
            "1g.18gb+me",
            "1g.35gb",
            "2g.35gb",
            "3g.71gb",
            "4g.71gb",
            "7g.141gb"
        ]
    );
    let h100 = spec("H100-80GB");
    let one_twenty = h100.profile("1g.20gb").unwrap();
    assert_eq!(
        (one_twenty.compute_slices, one_twenty.memory_slices),
        (1, 2)
    );
    assert_eq!(one_twenty.placements, &[0, 2, 4, 6]);
    assert_eq!(h100.profile("1g.10gb").unwrap().memory_mib, 9984);
    assert_eq!(h100.profile("7g.80gb").unwrap().memory_slices, 8);
}

#[test]
fn profile_lookup_is_tolerant() {
    let s = spec("H100-80GB");
    assert_eq!(s.profile("MIG 1g.10gb").unwrap().name, "1g.10gb");
    assert_eq!(s.profile("1G.10GB+ME").unwrap().name, "1g.10gb+me");
    assert!(s.profile("1g.5gb").is_none());
}

#[test]
fn compute_milli_rounds_down_and_whole_is_1000() {
    let s = spec("A100-SXM4-40GB");
    let milli = |n: &str| s.profile(n).unwrap().compute_milli(s).0;
    assert_eq!(milli("1g.5gb"), 142);
    assert_eq!(milli("2g.10gb"), 285);
    assert_eq!(milli("3g.20gb"), 428);
    assert_eq!(milli("4g.20gb"), 571);
    assert_eq!(milli("7g.40gb"), 1000);
    let a30 = spec("A30-24GB");
    assert_eq!(a30.profile("1g.6gb").unwrap().compute_milli(a30).0, 250);
}

#[test]
fn lookup_understands_nvml_names() {
    let cases: [(&str, u64, &str); 24] = [
        ("NVIDIA H100 80GB HBM3", 81559, "H100-80GB"),
        ("NVIDIA H100 PCIe", 81559, "H100-80GB"),
        ("NVIDIA H100 NVL", 95830, "H100-NVL-94GB"),
        ("NVIDIA H200", 143771, "H200-141GB"),
        ("NVIDIA H200 NVL", 143771, "H200-141GB"),
        ("NVIDIA A100-SXM4-40GB", 40960, "A100-SXM4-40GB"),
        ("NVIDIA A100-PCIE-40GB", 40960, "A100-SXM4-40GB"),
        ("NVIDIA A100-SXM4-80GB", 81920, "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", 81920, "A100-80GB"),
        ("NVIDIA A100-PCIE", 81920, "A100-80GB"),
        ("NVIDIA A30", 24576, "A30-24GB"),
        ("NVIDIA L4", 23034, "L4"),
        ("NVIDIA L40S", 46068, "L40S"),
        ("NVIDIA L40", 46068, "L40"),
        ("Tesla T4", 15360, "T4"),
        ("NVIDIA A10", 23028, "A10"),
        ("NVIDIA A10G", 23028, "A10G"),
        ("NVIDIA A40", 46068, "A40"),
        ("Tesla V100-SXM2-16GB", 16160, "V100-16GB"),
        ("Tesla V100-PCIE-32GB", 32510, "V100-32GB"),
        ("Tesla V100S-PCIE-32GB", 32510, "V100-32GB"),
        ("NVIDIA RTX 6000 Ada Generation", 49140, "RTX-6000-Ada"),
        ("NVIDIA RTX A6000", 49140, "RTX-A6000"),
        ("h100-80gb", 0, "H100-80GB"),
    ];
    for (name, mem, expected) in cases {
        assert_eq!(lookup(name, mem).name, expected, "{name}");
    }
}

#[test]
fn canonical_names_round_trip() {
    for model in all_models() {
        assert_eq!(
            lookup(model.name, model.memory_mib),
            *model,
            "{}",
            model.name
        );
    }
}

#[test]
fn unknown_names_are_generic_with_reported_memory() {
    let m = lookup("NVIDIA GeForce RTX 4090", 24564);
    assert!(m.generic);
    assert_eq!(m.name, "generic");
    assert_eq!(m.memory_mib, 24564);
    assert!(m.mig.is_none());
    assert_eq!(m.mps_max_clients, 48);
    // GH200's 96 GB H100 has a different profile table we do not model.
    assert!(lookup("NVIDIA GH200 480GB", 97871).generic);
    assert!(lookup("", 0).generic);
}

#[test]
fn catalogue_serializes() {
    let json = serde_json::to_value(lookup("NVIDIA A30", 24576)).unwrap();
    assert_eq!(json["name"], "A30-24GB");
    assert_eq!(json["mig"]["profiles"][0]["name"], "1g.6gb");
}

#[test]
fn only_hopper_has_gpm_per_mig_instance() {
    let gpm: Vec<&str> = super::all_models()
        .iter()
        .filter(|m| m.architecture.has_gpm())
        .map(|m| m.name)
        .collect();
    assert_eq!(gpm, ["H100-80GB", "H100-NVL-94GB", "H200-141GB"]);
    assert!(!super::lookup("Mystery", 1024).architecture.has_gpm());
    assert_eq!(
        super::lookup("NVIDIA A100-SXM4-40GB", 40960).architecture,
        super::Architecture::Ampere
    );
    assert_eq!(
        super::lookup("NVIDIA L4", 23034).architecture,
        super::Architecture::Ada
    );
}
