//! Dynamic MIG: new instances go into free slices; running ones stay put.

use crate::mig::{validate, MigPlacement};

use super::super::mig_table::MigTable;
use super::super::{Fleet, GpuMode, PlacementError, Policy, Slice, Workload};
use super::{class, frac, gpu, host, mig, whole, A100};

fn mig_gpu(index: u32, layout: &[(&str, u8)]) -> crate::placement::GpuState {
    let mut g = gpu(index, A100).mig_enabled();
    g.mode = GpuMode::Mig {
        layout: layout
            .iter()
            .map(|(p, s)| MigPlacement::new(*p, *s))
            .collect(),
    };
    g
}

#[test]
fn every_enumerated_layout_is_valid() {
    let model = crate::catalogue::lookup(A100, 0);
    let table = MigTable::build(&model).unwrap().unwrap();
    assert!(table.len() > 50, "only {} layouts", table.len());
    let spec = table.spec();
    for p in 0..spec.profiles.len() as u8 {
        let mask = table.free_mask(0, p);
        assert_ne!(mask, 0, "profile {p} must fit an empty GPU");
    }
    // Walk a few transitions and check validity with the catalogue rules.
    let mut state = 0;
    let mut layout = Vec::new();
    for (name, start) in [("3g.40gb", 4), ("2g.20gb", 0), ("1g.10gb", 2)] {
        let p = table.profile_index(name).unwrap();
        state = table.next(state, p, start);
        layout.push(MigPlacement::new(name, start));
        assert!(validate(&model, &layout).is_ok());
        assert_eq!(table.state_of(&model, &layout), Ok(state));
    }
}

#[test]
fn fraction_becomes_covering_profile_in_free_slices() {
    let mut f = Fleet::new(
        vec![host("h", vec![mig_gpu(0, &[("3g.40gb", 0)])])],
        Workload::default(),
    )
    .unwrap();
    let d = f.place(&frac(250), Policy::Pack).unwrap();
    assert_eq!(d.slice, Slice::Mig(MigPlacement::new("2g.20gb", 4)));
    assert_eq!(d.profile(), Some("2g.20gb"));
    assert_eq!(d.mig_start(), Some(4));
    f.apply(&d).unwrap();
    let GpuMode::Mig { layout } = &f.hosts()[0].gpus[0].mode else {
        panic!("mode changed");
    };
    assert_eq!(
        layout,
        &vec![
            MigPlacement::new("3g.40gb", 0),
            MigPlacement::new("2g.20gb", 4)
        ]
    );
}

#[test]
fn small_shares_fill_a_gpu_one_slice_each() {
    let mut f = Fleet::new(vec![host("h", vec![mig_gpu(0, &[])])], Workload::default()).unwrap();
    for _ in 0..7 {
        let d = f.place(&frac(100), Policy::Pack).unwrap();
        assert_eq!(d.profile(), Some("1g.10gb"));
        f.apply(&d).unwrap();
    }
    assert_eq!(
        f.place(&frac(100), Policy::Pack),
        Err(PlacementError::InsufficientCapacity)
    );
    assert_eq!(f.free_gpu_milli(), 0);
}

#[test]
fn named_profiles_and_unknown_ones() {
    let f = Fleet::new(vec![host("h", vec![mig_gpu(0, &[])])], Workload::default()).unwrap();
    let d = f.place(&mig("4g.40gb"), Policy::Pack).unwrap();
    assert_eq!(d.slice, Slice::Mig(MigPlacement::new("4g.40gb", 0)));
    assert!(matches!(
        f.place(&mig("1g.5gb"), Policy::Pack),
        Err(PlacementError::UnknownProfile { .. })
    ));
}

#[test]
fn pack_keeps_room_for_the_large_profiles_the_workload_needs() {
    let workload = Workload::new(vec![class(&mig("4g.40gb"), 5), class(&mig("1g.10gb"), 5)]);
    let f = Fleet::new(vec![host("h", vec![mig_gpu(0, &[])])], workload).unwrap();
    let first = f.place(&mig("1g.10gb"), Policy::FirstFit).unwrap();
    assert_eq!(first.mig_start(), Some(0));
    let packed = f.place(&mig("1g.10gb"), Policy::Pack).unwrap();
    assert!(packed.mig_start().unwrap() >= 4, "{packed:?}");
    // ... and so a 4g instance still fits after it.
    let mut f = f;
    f.apply(&packed).unwrap();
    assert!(f.place(&mig("4g.40gb"), Policy::Pack).is_ok());
}

#[test]
fn whole_gpu_only_on_an_empty_mig_gpu() {
    // The decision on an idle MIG GPU means "leave MIG mode"; a GPU with a
    // running instance is never taken whole.
    let f = Fleet::new(
        vec![host(
            "h",
            vec![mig_gpu(0, &[("1g.10gb", 0)]), mig_gpu(1, &[])],
        )],
        Workload::default(),
    )
    .unwrap();
    let d = f.place(&whole(1), Policy::Pack).unwrap();
    assert_eq!(d.gpus, vec![1]);
    assert!(f.place(&whole(2), Policy::Pack).is_err());
}

#[test]
fn profile_names_are_matched_like_the_catalogue_does() {
    let mut f = Fleet::new(
        vec![host(
            "h",
            vec![mig_gpu(0, &[("MIG 3g.40gb", 0), ("mig-1G.10GB", 4)])],
        )],
        Workload::default(),
    )
    .unwrap();
    let GpuMode::Mig { layout } = &f.hosts()[0].gpus[0].mode else {
        panic!("mode changed");
    };
    assert_eq!(
        layout,
        &vec![
            MigPlacement::new("3g.40gb", 0),
            MigPlacement::new("1g.10gb", 4)
        ]
    );
    let d = f.place(&mig("1G.10GB"), Policy::FirstFit).unwrap();
    assert_eq!(d.profile(), Some("1g.10gb"));
    f.apply(&d).unwrap();
    let spelled = crate::placement::Decision {
        slice: Slice::Mig(MigPlacement::new("MIG 1g.10gb", d.mig_start().unwrap())),
        ..d.clone()
    };
    f.release(&spelled).unwrap();
    let GpuMode::Mig { layout } = &f.hosts()[0].gpus[0].mode else {
        panic!("mode changed");
    };
    assert_eq!(layout.len(), 2, "{layout:?}");
}

#[test]
fn release_destroys_only_that_instance() {
    let mut f = Fleet::new(
        vec![host("h", vec![mig_gpu(0, &[("3g.40gb", 0)])])],
        Workload::default(),
    )
    .unwrap();
    let d = f.place(&mig("1g.10gb"), Policy::Pack).unwrap();
    f.apply(&d).unwrap();
    f.release(&d).unwrap();
    let GpuMode::Mig { layout } = &f.hosts()[0].gpus[0].mode else {
        panic!("mode changed");
    };
    assert_eq!(layout, &vec![MigPlacement::new("3g.40gb", 0)]);
}
