//! Tests for validation, free starts, covering profiles and enumeration.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::catalogue::{all_models, lookup, GpuModel};
use crate::units::{ComputeMilli, MemMiB};

fn model(name: &str) -> GpuModel {
    lookup(name, 0)
}

fn layout(items: &[(&str, u8)]) -> Vec<MigPlacement> {
    items
        .iter()
        .map(|(p, s)| MigPlacement::new(*p, *s))
        .collect()
}

fn names(layouts: &[Vec<MigPlacement>]) -> Vec<String> {
    layouts
        .iter()
        .map(|l| {
            l.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

#[test]
fn valid_named_layouts() {
    let cases: [(&str, &[(&str, u8)]); 14] = [
        ("A100-SXM4-40GB", &[("7g.40gb", 0)]),
        (
            "A100-SXM4-40GB",
            &[("4g.20gb", 0), ("2g.10gb", 4), ("1g.5gb", 6)],
        ),
        ("A100-SXM4-40GB", &[("4g.20gb", 0), ("3g.20gb", 4)]),
        ("A100-SXM4-40GB", &[("3g.20gb", 0), ("3g.20gb", 4)]),
        (
            "A100-SXM4-40GB",
            &[
                ("1g.10gb", 0),
                ("1g.10gb", 2),
                ("1g.10gb", 4),
                ("1g.10gb", 6),
            ],
        ),
        (
            "A100-SXM4-40GB",
            &[
                ("1g.5gb+me", 0),
                ("1g.5gb", 1),
                ("2g.10gb", 2),
                ("3g.20gb", 4),
            ],
        ),
        ("A100-SXM4-40GB", &[]),
        ("A30-24GB", &[("2g.12gb", 0), ("1g.6gb", 2), ("1g.6gb", 3)]),
        ("A30-24GB", &[("2g.12gb+me", 0), ("2g.12gb", 2)]),
        ("A30-24GB", &[("4g.24gb", 0)]),
        (
            "H100-80GB",
            &[("1g.20gb", 6), ("3g.40gb", 0), ("2g.20gb", 4)],
        ),
        (
            "H100-NVL-94GB",
            &[("4g.47gb", 0), ("1g.12gb+me", 4), ("1g.24gb", 6)],
        ),
        (
            "H200-141GB",
            &[
                ("3g.71gb", 4),
                ("1g.35gb", 0),
                ("1g.18gb", 2),
                ("1g.18gb", 3),
            ],
        ),
        (
            "A100-80GB",
            &[
                ("3g.40gb", 4),
                ("2g.20gb", 0),
                ("1g.10gb", 2),
                ("1g.10gb", 3),
            ],
        ),
    ];
    for (m, l) in cases {
        assert_eq!(validate(&model(m), &layout(l)), Ok(()), "{m} {l:?}");
    }
}

#[test]
fn invalid_named_layouts_have_typed_reasons() {
    let a100 = model("A100-SXM4-40GB");
    assert!(matches!(
        validate(&a100, &layout(&[("4g.20gb", 0), ("3g.20gb", 2)])),
        Err(LayoutError::StartNotAllowed { start: 2, .. })
    ));
    assert!(matches!(
        validate(&a100, &layout(&[("3g.20gb", 0), ("2g.10gb", 2)])),
        Err(LayoutError::Overlap { .. })
    ));
    assert!(matches!(
        validate(&a100, &layout(&[("1g.10gb", 0), ("1g.5gb", 1)])),
        Err(LayoutError::Overlap { .. })
    ));
    assert!(matches!(
        validate(&a100, &layout(&[("2g.10gb", 6)])),
        Err(LayoutError::StartNotAllowed { ref allowed, .. }) if allowed == &[0, 2, 4]
    ));
    assert!(matches!(
        validate(&a100, &layout(&[("1g.5gb", 7)])),
        Err(LayoutError::StartNotAllowed { .. })
    ));
    assert!(matches!(
        validate(
            &a100,
            &layout(&[("1g.10gb", 0)])
                .into_iter()
                .chain(layout(&[("1g.20gb", 2)]))
                .collect::<Vec<_>>()
        ),
        Err(LayoutError::UnknownProfile { .. })
    ));
    assert!(matches!(
        validate(&a100, &layout(&[("1g.5gb+me", 0), ("1g.5gb+me", 1)])),
        Err(LayoutError::TooMany {
            max: 1,
            count: 2,
            ..
        })
    ));
    let a30 = model("A30-24GB");
    assert_eq!(
        validate(&a30, &layout(&[("1g.6gb+me", 0), ("2g.12gb+me", 2)])),
        Err(LayoutError::MoreThanOneMediaExtension)
    );
    assert!(matches!(
        validate(&a30, &layout(&[("4g.24gb", 0), ("4g.24gb", 0)])),
        Err(LayoutError::TooMany { .. })
    ));
    assert!(matches!(
        validate(&model("L4"), &[]),
        Err(LayoutError::NotMigCapable { .. })
    ));
    assert!(matches!(
        validate(
            &model("H100-80GB"),
            &layout(&[("7g.80gb", 0), ("1g.10gb", 0)])
        ),
        Err(LayoutError::Overlap { .. })
    ));
}

#[test]
fn errors_tell_the_user_what_to_change() {
    let a100 = model("A100-SXM4-40GB");
    let err = validate(&a100, &layout(&[("3g.20gb", 2)])).unwrap_err();
    assert_eq!(
        err.to_string(),
        "3g.20gb cannot start at memory slice 2; allowed starts are [0, 4]"
    );
    let err = validate(&a100, &layout(&[("1g.18gb", 0)])).unwrap_err();
    assert!(err
        .to_string()
        .contains("has no MIG profile 1g.18gb; choose one of"));
    let json = serde_json::to_value(&err).unwrap();
    assert_eq!(json["kind"], "unknown_profile");
}

#[test]
fn compute_exhaustion_is_reported() {
    // No real table can exhaust compute before memory; a synthetic spec can.
    use crate::catalogue::{MigProfile, MigSpec};
    static WIDE: [MigProfile; 1] = [MigProfile {
        name: "2g.1gb",
        smi_id: 1,
        compute_slices: 2,
        memory_slices: 1,
        memory_mib: 1024,
        max_count: 4,
        media_extensions: false,
        placements: &[0, 1, 2, 3],
    }];
    static SPEC: MigSpec = MigSpec {
        compute_slices: 7,
        memory_slices: 4,
        profiles: &WIDE,
    };
    let m = GpuModel {
        name: "synthetic",
        memory_mib: 4096,
        mig: Some(&SPEC),
        mps_max_clients: 48,
        generic: false,
        architecture: crate::catalogue::Architecture::Ampere,
    };
    let l = layout(&[("2g.1gb", 0), ("2g.1gb", 1), ("2g.1gb", 2), ("2g.1gb", 3)]);
    assert_eq!(
        validate(&m, &l),
        Err(LayoutError::ComputeExhausted {
            model: "synthetic".into(),
            used: 8,
            available: 7
        })
    );
}

#[test]
fn free_starts_follow_the_rules() {
    let a100 = model("A100-SXM4-40GB");
    assert_eq!(free_starts(&a100, &[], "3g.20gb"), vec![0, 4]);
    assert_eq!(
        free_starts(&a100, &layout(&[("4g.20gb", 0)]), "3g.20gb"),
        vec![4]
    );
    assert_eq!(
        free_starts(&a100, &layout(&[("4g.20gb", 0)]), "1g.5gb"),
        vec![4, 5, 6]
    );
    assert_eq!(
        free_starts(&a100, &layout(&[("1g.5gb", 6)]), "1g.10gb"),
        vec![0, 2, 4]
    );
    assert_eq!(
        free_starts(&a100, &layout(&[("7g.40gb", 0)]), "1g.5gb"),
        Vec::<u8>::new()
    );
    assert_eq!(
        free_starts(&a100, &layout(&[("1g.5gb+me", 3)]), "1g.5gb+me"),
        Vec::<u8>::new()
    );
    assert!(free_starts(&a100, &[], "nope").is_empty());
    assert!(free_starts(&model("T4"), &[], "1g.5gb").is_empty());
    let h100 = model("H100-80GB");
    assert_eq!(free_starts(&h100, &[], "1g.20gb"), vec![0, 2, 4, 6]);
}

#[test]
fn smallest_covering_profile_prefers_fewest_slices() {
    let a100 = model("A100-SXM4-40GB");
    let pick = |c: u32, m: u64| {
        smallest_covering_profile(&a100, ComputeMilli(c), MemMiB(m)).map(|p| p.name)
    };
    assert_eq!(pick(0, 0), Some("1g.5gb"));
    assert_eq!(pick(142, 4864), Some("1g.5gb"));
    assert_eq!(pick(143, 0), Some("2g.10gb"));
    assert_eq!(pick(100, 6000), Some("1g.10gb"));
    assert_eq!(pick(300, 0), Some("3g.20gb"));
    assert_eq!(pick(500, 0), Some("4g.20gb"));
    assert_eq!(pick(600, 0), Some("7g.40gb"));
    assert_eq!(pick(0, 30_000), Some("7g.40gb"));
    assert_eq!(pick(0, 50_000), None);
    assert_eq!(
        smallest_covering_profile(&model("L4"), ComputeMilli(1), MemMiB(1)),
        None
    );
}

#[test]
fn a100_classic_profiles_give_the_guides_19_layouts() {
    // The guide's A100 "valid combinations" figure predates 1g.10gb: with the
    // five classic profiles there are 19 maximal placements.
    let a100 = model("A100-SXM4-40GB");
    let classic = ["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"];
    let layouts = maximal_layouts_with(&a100, |p| classic.contains(&p.name));
    assert_eq!(layouts.len(), 19, "{:#?}", names(&layouts));
    assert!(names(&layouts).contains(&"4g.20gb@0 2g.10gb@4 1g.5gb@6".to_string()));
    assert!(names(&layouts).contains(&"7g.40gb@0".to_string()));
    assert_eq!(profile_multisets(&layouts).len(), 14);
    for l in &layouts {
        assert_eq!(validate(&a100, l), Ok(()));
    }
}

#[test]
fn maximal_layout_counts_per_model() {
    let a30 = model("A30-24GB");
    let layouts = maximal_layouts(&a30);
    assert_eq!(
        names(&layouts),
        [
            "1g.6gb@0 1g.6gb@1 1g.6gb@2 1g.6gb@3",
            "1g.6gb@0 1g.6gb@1 2g.12gb@2",
            "2g.12gb@0 1g.6gb@2 1g.6gb@3",
            "2g.12gb@0 2g.12gb@2",
            "4g.24gb@0",
        ]
    );
    assert_eq!(profile_multisets(&layouts).len(), 4);

    // With 1g.10gb (2 memory slices) the A100-40GB has 11 ways to fill the
    // first half, 7 for the second half, plus the whole GPU.
    for name in [
        "A100-SXM4-40GB",
        "A100-80GB",
        "H100-80GB",
        "H100-NVL-94GB",
        "H200-141GB",
    ] {
        let m = model(name);
        let layouts = maximal_layouts(&m);
        assert_eq!(layouts.len(), 11 * 7 + 1, "{name}");
        assert!(layouts.iter().all(|l| validate(&m, l).is_ok()));
    }
    assert!(maximal_layouts(&model("L40S")).is_empty());
}

#[test]
fn media_extension_layouts_are_included_on_request() {
    let a30 = model("A30-24GB");
    let with_me = maximal_layouts_with(&a30, |_| true);
    // Every +me layout is a plain layout with one instance swapped.
    assert!(with_me.len() > maximal_layouts(&a30).len());
    for l in &with_me {
        assert!(l.iter().filter(|p| p.profile.ends_with("+me")).count() <= 1);
    }
}

#[test]
fn every_maximal_layout_is_maximal_and_free_starts_agree() {
    for m in all_models().iter().filter(|m| m.mig.is_some()) {
        let spec = m.mig.unwrap();
        for l in maximal_layouts(m) {
            for p in spec.profiles.iter().filter(|p| !p.media_extensions) {
                assert!(
                    free_starts(m, &l, p.name).is_empty(),
                    "{} {l:?} + {}",
                    m.name,
                    p.name
                );
            }
        }
    }
}
