//! The pools' rules, forms and changes.

use super::*;

fn gpu(host: &str, index: u32, model: &str, live: u32) -> FleetGpu {
    FleetGpu {
        host: host.into(),
        index,
        model: model.into(),
        live_slices: live,
    }
}

#[test]
fn membership_by_model_then_host_first_match_wins() {
    let mut special = PoolSpec::new(
        "a100-lab".parse().unwrap(),
        SharingMode::Exclusive,
        &["A100-SXM4-80GB"],
    );
    special.hosts = vec!["lab-*".into(), "gpu-7".into()];
    let pools = vec![
        special,
        PoolSpec::new(
            "a100-mig".parse().unwrap(),
            SharingMode::Mig,
            &["A100-SXM4-80GB"],
        ),
        PoolSpec::new(
            "inference".parse().unwrap(),
            SharingMode::TimeSlicing,
            &["L4", "T4"],
        ),
    ];
    validate_pools(&pools).unwrap();
    let name = |h: &str, m: &str| pool_of(&pools, h, m).map(|p| p.name.as_str());
    assert_eq!(name("lab-01", "A100-SXM4-80GB"), Some("a100-lab"));
    assert_eq!(name("gpu-7", "A100-SXM4-80GB"), Some("a100-lab"));
    assert_eq!(name("gpu-70", "A100-SXM4-80GB"), Some("a100-mig"));
    assert_eq!(name("x", "T4"), Some("inference"));
    assert_eq!(name("lab-01", "H100-80GB"), None);
}

#[test]
fn mistakes_name_the_field() {
    let err = validate_pools(&[PoolSpec::new(
        "l4-mig".parse().unwrap(),
        SharingMode::Mig,
        &["L4"],
    )])
    .unwrap_err();
    assert!(err.to_string().starts_with("pools[0].sharing: L4"), "{err}");
    let err = PoolSpec::new(
        "x".parse().unwrap(),
        SharingMode::Exclusive,
        &["Mystery9000"],
    )
    .validate()
    .unwrap_err();
    assert_eq!(err.field, "models");
    let twice = vec![
        PoolSpec::new("a".parse().unwrap(), SharingMode::Exclusive, &["L4"]),
        PoolSpec::new("a".parse().unwrap(), SharingMode::Mps, &["T4"]),
    ];
    assert_eq!(validate_pools(&twice).unwrap_err().field, "pools[1].name");
    let mut replicas = PoolSpec::new("ts".parse().unwrap(), SharingMode::TimeSlicing, &["L4"]);
    replicas.time_slice_replicas = 0;
    assert_eq!(replicas.validate().unwrap_err().field, "sharing");
    let mut profile = PoolSpec::new("m".parse().unwrap(), SharingMode::Mig, &["A100-SXM4-40GB"]);
    profile.allowed_mig_profiles = vec!["9g.99gb".into()];
    assert_eq!(profile.validate().unwrap_err().field, "sharing");
    let mut hosts = PoolSpec::new("h".parse().unwrap(), SharingMode::Exclusive, &["L4"]);
    hosts.hosts = vec!["a*b".into()];
    assert_eq!(hosts.validate().unwrap_err().field, "hosts");
    hosts.hosts = vec![String::new()];
    assert_eq!(hosts.validate().unwrap_err().field, "hosts");
    assert!(
        "Big Pool".parse::<PoolName>().is_err(),
        "a pool name is a slug"
    );
    let mut name = PoolSpec::new("big-pool".parse().unwrap(), SharingMode::Exclusive, &["L4"]);
    name.max_lease_hours = MAX_LEASE_HOURS + 1;
    assert_eq!(name.validate().unwrap_err().field, "max_lease_hours");
    let dup = PoolSpec::new("d".parse().unwrap(), SharingMode::Exclusive, &["L4", "L4"]);
    assert_eq!(dup.validate().unwrap_err().field, "models");
}

#[test]
fn stopping_mps_strays_is_an_mps_pool_setting() {
    let mut mps = PoolSpec::new("l4-mps".parse().unwrap(), SharingMode::Mps, &["L4"]);
    mps.mps_strays = MpsStrayPolicy::Stop;
    mps.validate().unwrap();
    let form = PoolForm::of(&mps);
    assert_eq!(form.mps_strays, "stop");
    assert_eq!(form.spec(), Ok(mps.clone()));
    // A form that leaves it out reports; one that misspells it is refused.
    let blank = PoolForm {
        mps_strays: String::new(),
        ..form.clone()
    };
    assert_eq!(blank.spec().unwrap().mps_strays, MpsStrayPolicy::Report);
    let bad = PoolForm {
        mps_strays: "kill".into(),
        ..form.clone()
    };
    assert_eq!(bad.spec().unwrap_err().field, "mps_strays");
    let changes = mps.differences(&PoolSpec::new(
        "l4-mps".parse().unwrap(),
        SharingMode::Mps,
        &["L4"],
    ));
    assert_eq!(changes.len(), 1);
    assert_eq!(
        (
            changes[0].field.as_str(),
            changes[0].before.as_str(),
            changes[0].after.as_str()
        ),
        ("mps_strays", "report", "stop")
    );
    // Elsewhere there are no MPS clients to stop.
    let mut ts = PoolSpec::new("ts".parse().unwrap(), SharingMode::TimeSlicing, &["L4"]);
    ts.time_slice_replicas = 4;
    ts.mps_strays = MpsStrayPolicy::Stop;
    assert_eq!(ts.validate().unwrap_err().field, "mps_strays");
}

#[test]
fn a_form_round_trips_and_names_its_mistakes() {
    let mut spec = PoolSpec::new(
        "ts".parse().unwrap(),
        SharingMode::TimeSlicing,
        &["L4", "T4"],
    );
    spec.hosts = vec!["edge-*".into()];
    spec.time_slice_replicas = 4;
    spec.fair_share_weights = BTreeMap::from([("nlp".parse().unwrap(), 3)]);
    spec.on_release = ReleasePolicy::Refuse;
    spec.idle_reclaim = Some(IdlePolicy::new(10, 240));
    let form = PoolForm::of(&spec);
    assert_eq!(form.models, "L4, T4");
    assert_eq!(form.spec(), Ok(spec.clone()));
    // Idle reclaim off: 0 minutes.
    let off = PoolForm {
        idle_minutes: 0,
        ..form.clone()
    };
    assert_eq!(off.spec().unwrap().idle_reclaim, None);
    let bad = PoolForm {
        idle_below_pct: 0,
        ..form.clone()
    };
    assert_eq!(bad.spec().unwrap_err().field, "idle_reclaim.below_pct");
    let changes = spec.differences(&PoolSpec {
        idle_reclaim: None,
        ..spec.clone()
    });
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].field, "idle_reclaim");
    assert_eq!(changes[0].before, "off");
    assert_eq!(
        changes[0].after,
        "below 10 % for 240 min, 60 min notice, 2 keeps"
    );
    let bad = PoolForm {
        sharing: "mig-ish".into(),
        ..form.clone()
    };
    assert_eq!(bad.spec().unwrap_err().field, "sharing");
    // The placement policy: by name, empty is pack, and every change shows.
    assert_eq!(form.placement, "pack");
    for choice in PoolPlacement::ALL {
        let chosen = PoolForm {
            placement: choice.as_str().into(),
            ..form.clone()
        }
        .spec()
        .unwrap();
        assert_eq!(chosen.placement, choice);
        assert_eq!(PoolForm::of(&chosen).spec(), Ok(chosen.clone()));
        let changes = spec.differences(&chosen);
        assert_eq!(
            changes.len(),
            usize::from(choice != PoolPlacement::Pack),
            "{choice}"
        );
        if let Some(change) = changes.first() {
            assert_eq!(
                (change.field.as_str(), change.before.as_str()),
                ("placement", choice.as_str())
            );
            assert_eq!(change.after, "pack");
        }
    }
    let blank = PoolForm {
        placement: " ".into(),
        ..form.clone()
    };
    assert_eq!(blank.spec().unwrap().placement, PoolPlacement::Pack);
    let bad = PoolForm {
        placement: "fgd".into(),
        ..form.clone()
    };
    let err = bad.spec().unwrap_err();
    assert_eq!(err.field, "placement");
    assert!(
        err.reason.contains("pack, spread, best-fit, first-fit"),
        "{}",
        err.reason
    );
    let bad = PoolForm {
        fair_share_weights: "nlp=0".into(),
        ..form.clone()
    };
    assert_eq!(bad.spec().unwrap_err().field, "fair_share_weights");
    let bad = PoolForm {
        models: " , ".into(),
        ..form
    };
    assert_eq!(bad.spec().unwrap_err().field, "models");
    assert_eq!(split_list("a,\n b ,,c"), ["a", "b", "c"]);
}

#[test]
fn a_mode_change_moves_every_gpu_and_only_busy_ones_need_a_drain() {
    let before = vec![PoolSpec::new(
        "a30".parse().unwrap(),
        SharingMode::Mig,
        &["A30"],
    )];
    let mut after = before.clone();
    after[0].sharing = SharingMode::Mps;
    let fleet = vec![
        gpu("h1", 0, "A30", 2),
        gpu("h1", 1, "A30", 0),
        gpu("h2", 0, "L4", 1),
    ];
    let m = moves(&before, &after, &fleet);
    assert_eq!(m.len(), 2, "{m:?}");
    assert!(m[0].needs_drain() && !m[1].needs_drain());
    assert_eq!(m[0].from_mode, Some(SharingMode::Mig));
    assert_eq!(m[0].to_mode, Some(SharingMode::Mps));
    assert_eq!(m[0].to_string(), "h1 GPU 0: a30 (mig) → a30 (mps)");
    // Other fields move nothing.
    let mut lease = before.clone();
    lease[0].max_lease_hours = 1;
    lease[0].description = "short".into();
    assert!(moves(&before, &lease, &fleet).is_empty());
    assert_eq!(lease[0].differences(&before[0]).len(), 2);
}

#[test]
fn a_host_selector_moves_that_hosts_gpus_between_pools() {
    let shared = PoolSpec::new(
        "l4-shared".parse().unwrap(),
        SharingMode::TimeSlicing,
        &["L4"],
    );
    let mut dedicated = PoolSpec::new("l4-whole".parse().unwrap(), SharingMode::Exclusive, &["L4"]);
    dedicated.hosts = vec!["h9".into()];
    let before = vec![shared.clone(), dedicated.clone()];
    let mut narrowed = shared.clone();
    narrowed.hosts = vec!["h1".into()];
    let after = vec![narrowed, dedicated];
    let fleet = vec![
        gpu("h1", 0, "L4", 1),
        gpu("h9", 0, "L4", 1),
        gpu("h9", 1, "L4", 0),
    ];
    let m = moves(&before, &after, &fleet);
    let moved: Vec<String> = m.iter().map(|m| m.to_string()).collect();
    assert_eq!(
        moved,
        [
            "h9 GPU 0: l4-shared (time-slicing) → l4-whole (exclusive)",
            "h9 GPU 1: l4-shared (time-slicing) → l4-whole (exclusive)",
        ]
    );
    // A GPU that leaves every pool moves too.
    let m = moves(&before, &[], &fleet);
    assert_eq!(m.len(), 3);
    assert_eq!(m[0].to_pool, None);
    assert_eq!(
        m[0].to_string(),
        "h1 GPU 0: l4-shared (time-slicing) → no pool"
    );
}
