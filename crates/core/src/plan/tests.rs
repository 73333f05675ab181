//! Named planning scenarios.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::catalogue::{lookup, GpuModel};
use crate::mig::{LayoutError, MigPlacement};
use crate::units::MemMiB;

fn a100() -> GpuModel {
    lookup("NVIDIA A100-SXM4-40GB", 40960)
}

fn gi(profile: &str, start: u8, compute: u8) -> DesiredInstance {
    DesiredInstance {
        placement: MigPlacement::new(profile, start),
        compute_instances: vec![ComputeInstance::whole(compute)],
    }
}

fn obs(profile: &str, start: u8, compute: u8, in_use: bool) -> ObservedInstance {
    ObservedInstance {
        placement: MigPlacement::new(profile, start),
        compute_instances: vec![ComputeInstance::whole(compute)],
        in_use,
    }
}

fn mig_on(instances: Vec<ObservedInstance>) -> GpuObserved {
    GpuObserved {
        mig_enabled: true,
        instances,
        ..GpuObserved::default()
    }
}

fn want(instances: Vec<DesiredInstance>) -> GpuDesired {
    GpuDesired {
        mig_enabled: true,
        instances,
        ..GpuDesired::default()
    }
}

fn run(model: GpuModel, observed: &GpuObserved, desired: &GpuDesired) -> Vec<Op> {
    let ops = plan(&model, observed, desired).unwrap();
    let mut sim = SimGpu::from_observed(model, observed.clone()).unwrap();
    sim.apply_all(&ops).unwrap();
    assert!(sim.satisfies(desired), "{ops:#?}");
    assert_eq!(plan(&model, sim.observed(), desired), Ok(vec![]));
    ops
}

#[test]
fn keeping_the_state_is_a_no_op() {
    let observed = mig_on(vec![
        obs("3g.20gb", 0, 3, true),
        obs("2g.10gb", 4, 2, false),
    ]);
    assert_eq!(
        plan(&a100(), &observed, &GpuDesired::keep(&observed)),
        Ok(vec![])
    );
    let plain = GpuObserved::default();
    assert_eq!(plan(&a100(), &plain, &GpuDesired::keep(&plain)), Ok(vec![]));
}

#[test]
fn enabling_mig_and_partitioning_a_fresh_gpu() {
    let ops = run(
        a100(),
        &GpuObserved::default(),
        &want(vec![gi("3g.20gb", 4, 3), gi("4g.20gb", 0, 4)]),
    );
    assert_eq!(
        ops,
        vec![
            Op::EnableMig,
            Op::CreateGpuInstance {
                profile: "4g.20gb".into(),
                start: 0
            },
            Op::CreateComputeInstance {
                gi_start: 0,
                ci: ComputeInstance { start: 0, size: 4 }
            },
            Op::CreateGpuInstance {
                profile: "3g.20gb".into(),
                start: 4
            },
            Op::CreateComputeInstance {
                gi_start: 4,
                ci: ComputeInstance { start: 0, size: 3 }
            },
        ]
    );
}

#[test]
fn repartitioning_destroys_before_creating_and_leaves_the_rest_alone() {
    let observed = mig_on(vec![
        obs("1g.5gb", 0, 1, false),
        obs("1g.5gb", 1, 1, false),
        obs("2g.10gb", 2, 2, false),
        obs("3g.20gb", 4, 3, true),
    ]);
    let desired = want(vec![gi("4g.20gb", 0, 4), gi("3g.20gb", 4, 3)]);
    let ops = run(a100(), &observed, &desired);
    let first_create = ops
        .iter()
        .position(|o| matches!(o, Op::CreateGpuInstance { .. }))
        .unwrap();
    assert!(ops[..first_create].iter().all(|o| matches!(
        o,
        Op::DestroyComputeInstance { .. } | Op::DestroyGpuInstance { .. }
    )));
    // The busy 3g.20gb at 4 stays untouched.
    assert!(!ops.iter().any(|o| matches!(
        o,
        Op::DestroyGpuInstance { start: 4 }
            | Op::DestroyComputeInstance { gi_start: 4, .. }
            | Op::StopProcesses { .. }
    )));
}

#[test]
fn in_use_instances_are_only_destroyed_when_released() {
    let observed = mig_on(vec![obs("7g.40gb", 0, 7, true)]);
    let mut desired = want(vec![gi("3g.20gb", 0, 3), gi("3g.20gb", 4, 3)]);
    assert_eq!(
        plan(&a100(), &observed, &desired),
        Err(PlanError::InUse {
            placement: MigPlacement::new("7g.40gb", 0)
        })
    );
    desired.released.instances = vec![0];
    let ops = run(a100(), &observed, &desired);
    assert_eq!(ops[0], Op::StopProcesses { gi_start: Some(0) });
}

#[test]
fn disabling_mig_needs_no_instances_and_no_processes() {
    let observed = mig_on(vec![
        obs("3g.20gb", 0, 3, false),
        obs("3g.20gb", 4, 3, true),
    ]);
    let mut desired = GpuDesired {
        time_slice_replicas: 4,
        ..GpuDesired::default()
    };
    assert!(matches!(
        plan(&a100(), &observed, &desired),
        Err(PlanError::InUse { .. })
    ));
    desired.released.whole_gpu = true;
    let ops = run(a100(), &observed, &desired);
    assert_eq!(ops.last(), Some(&Op::SetReplicas { replicas: 4 }));
    assert!(ops.contains(&Op::DisableMig));
    let mut sim = SimGpu::from_observed(a100(), observed).unwrap();
    assert_eq!(sim.apply(&Op::DisableMig), Err(SimError::InstancesPresent));
}

#[test]
fn mode_changes_with_processes_need_the_whole_gpu_released() {
    let busy = GpuObserved {
        processes_running: true,
        ..GpuObserved::default()
    };
    let mut desired = want(vec![gi("7g.40gb", 0, 7)]);
    assert_eq!(plan(&a100(), &busy, &desired), Err(PlanError::GpuInUse));
    desired.released.whole_gpu = true;
    let ops = run(a100(), &busy, &desired);
    assert_eq!(
        ops[..2],
        [Op::StopProcesses { gi_start: None }, Op::EnableMig]
    );
    let mut sim = SimGpu::from_observed(a100(), busy).unwrap();
    assert!(matches!(
        sim.apply(&Op::EnableMig),
        Err(SimError::ProcessesRunning { .. })
    ));
}

#[test]
fn mps_is_started_reconfigured_and_stopped() {
    let l4 = lookup("NVIDIA L4", 23034);
    let settings = MpsSettings {
        default_active_thread_percentage: 50,
        default_pinned_mem_limit: Some(MemMiB(4096)),
    };
    let on = GpuDesired {
        mps: Some(settings),
        ..GpuDesired::default()
    };
    assert_eq!(
        run(l4, &GpuObserved::default(), &on),
        vec![Op::SetMps {
            settings: Some(settings)
        }]
    );
    // Changing defaults while clients run is fine; stopping the daemon is not.
    let running = GpuObserved {
        mps: Some(settings),
        processes_running: true,
        ..GpuObserved::default()
    };
    let retuned = GpuDesired {
        mps: Some(MpsSettings {
            default_active_thread_percentage: 25,
            ..settings
        }),
        ..GpuDesired::default()
    };
    assert_eq!(run(l4, &running, &retuned).len(), 1);
    assert_eq!(
        plan(&l4, &running, &GpuDesired::default()),
        Err(PlanError::GpuInUse)
    );
}

#[test]
fn running_mps_servers_are_raised_to_the_largest_grant() {
    use crate::ids::AllocationId;
    use crate::plan::{MpsGrant, SimGpu};
    let l4 = lookup("NVIDIA L4", 23034);
    let grant = |id, pct, mib| MpsGrant {
        allocation: AllocationId::new(id),
        active_thread_percentage: pct,
        pinned_mem_limit: MemMiB(mib),
    };
    let grants = vec![grant(1, 25, 6144), grant(2, 40, 4096)];
    let shares: Vec<(u8, MemMiB)> = grants
        .iter()
        .map(|g| (g.active_thread_percentage, g.pinned_mem_limit))
        .collect();
    let desired = GpuDesired {
        mps: Some(MpsSettings::for_clients(&shares)),
        mps_clients: grants,
        ..GpuDesired::default()
    };
    // The daemon starts at the smallest grant; no server runs yet.
    let ops = run(l4, &GpuObserved::default(), &desired);
    assert_eq!(ops.len(), 1, "{ops:?}");
    let mut sim = SimGpu::from_observed(l4, GpuObserved::default()).unwrap();
    sim.apply_all(&ops).unwrap();
    // A client's server starts at the defaults: 25 %, which would cap the
    // 40 % client (its variables only lower the server's limit).
    sim.start_mps_server(4242).unwrap();
    assert_eq!(sim.observed().mps_servers[0].active_thread_percentage, 25);
    let ops = run(l4, sim.observed(), &desired);
    assert_eq!(
        ops,
        vec![Op::SetMpsServerLimits {
            active_thread_percentage: 40,
            pinned_mem_limit: MemMiB(6144)
        }]
    );
    sim.apply_all(&ops).unwrap();
    assert_eq!(plan(&l4, sim.observed(), &desired), Ok(vec![]));
    // Stopping the daemon ends its servers.
    sim.apply(&Op::SetMps { settings: None }).unwrap();
    assert!(sim.observed().mps_servers.is_empty());
    assert_eq!(sim.apply(&ops[0]), Err(crate::plan::SimError::NoMpsDaemon));
}

#[test]
fn mps_to_mig_stops_the_daemon_first() {
    let observed = GpuObserved {
        mps: Some(MpsSettings {
            default_active_thread_percentage: 100,
            default_pinned_mem_limit: None,
        }),
        ..GpuObserved::default()
    };
    let ops = run(a100(), &observed, &want(vec![gi("7g.40gb", 0, 7)]));
    assert_eq!(ops[..2], [Op::SetMps { settings: None }, Op::EnableMig]);
}

#[test]
fn compute_instances_change_inside_a_kept_instance() {
    let observed = mig_on(vec![obs("3g.20gb", 0, 3, false)]);
    let desired = want(vec![DesiredInstance {
        placement: MigPlacement::new("3g.20gb", 0),
        compute_instances: vec![
            ComputeInstance { start: 0, size: 1 },
            ComputeInstance { start: 1, size: 1 },
            ComputeInstance { start: 2, size: 1 },
        ],
    }]);
    let ops = run(a100(), &observed, &desired);
    assert_eq!(
        ops[0],
        Op::DestroyComputeInstance {
            gi_start: 0,
            ci: ComputeInstance { start: 0, size: 3 }
        }
    );
    assert_eq!(ops.len(), 4);
    assert!(!ops
        .iter()
        .any(|o| matches!(o, Op::DestroyGpuInstance { .. })));
}

#[test]
fn invalid_desired_states_are_refused() {
    let fresh = GpuObserved::default();
    assert!(matches!(
        plan(
            &a100(),
            &fresh,
            &want(vec![gi("3g.20gb", 0, 3), gi("4g.20gb", 0, 4)])
        ),
        Err(PlanError::InvalidLayout(LayoutError::Overlap { .. }))
    ));
    assert!(matches!(
        plan(&lookup("Tesla T4", 15360), &fresh, &want(vec![])),
        Err(PlanError::InvalidLayout(LayoutError::NotMigCapable { .. }))
    ));
    let no_mig = GpuDesired {
        instances: vec![gi("7g.40gb", 0, 7)],
        ..GpuDesired::default()
    };
    assert_eq!(
        plan(&a100(), &fresh, &no_mig),
        Err(PlanError::InstancesWithoutMig)
    );
    let mut mps_mig = want(vec![]);
    mps_mig.mps = Some(MpsSettings {
        default_active_thread_percentage: 10,
        default_pinned_mem_limit: None,
    });
    assert_eq!(plan(&a100(), &fresh, &mps_mig), Err(PlanError::MpsWithMig));
    let bad_ci = want(vec![DesiredInstance {
        placement: MigPlacement::new("4g.20gb", 0),
        compute_instances: vec![ComputeInstance { start: 0, size: 3 }],
    }]);
    assert!(matches!(
        plan(&a100(), &fresh, &bad_ci),
        Err(PlanError::InvalidComputeInstances { gi_start: 0, .. })
    ));
    let replicas = GpuDesired {
        time_slice_replicas: 0,
        ..GpuDesired::default()
    };
    assert!(matches!(
        plan(&a100(), &fresh, &replicas),
        Err(PlanError::ReplicasOutOfRange { .. })
    ));
}

#[test]
fn compute_instance_tables() {
    assert_eq!(compute_instance_starts(7, 3), vec![0, 4]);
    assert_eq!(compute_instance_starts(7, 2), vec![0, 2, 4]);
    assert_eq!(compute_instance_starts(7, 4), vec![0]);
    assert_eq!(compute_instance_starts(4, 3), Vec::<u8>::new());
    assert_eq!(compute_instance_starts(4, 2), vec![0, 2]);
    assert_eq!(compute_instance_starts(3, 2), vec![0]);
    assert_eq!(compute_instance_starts(2, 1), vec![0, 1]);
    assert_eq!(compute_instance_starts(1, 1), vec![0]);
}

#[test]
fn sim_rejects_what_the_driver_rejects() {
    let mut sim = SimGpu::new(a100());
    let create = |p: &str, s: u8| Op::CreateGpuInstance {
        profile: p.into(),
        start: s,
    };
    assert_eq!(sim.apply(&create("1g.5gb", 0)), Err(SimError::MigDisabled));
    sim.apply(&Op::EnableMig).unwrap();
    sim.apply(&create("4g.20gb", 0)).unwrap();
    assert!(matches!(
        sim.apply(&create("3g.20gb", 0)),
        Err(SimError::Layout(LayoutError::Overlap { .. }))
    ));
    assert!(matches!(
        sim.apply(&create("1g.20gb", 4)),
        Err(SimError::Layout(LayoutError::UnknownProfile { .. }))
    ));
    sim.apply(&create("1g.5gb+me", 4)).unwrap();
    assert!(matches!(
        sim.apply(&create("1g.5gb+me", 5)),
        Err(SimError::Layout(LayoutError::TooMany { .. }))
    ));
    sim.apply(&Op::CreateComputeInstance {
        gi_start: 0,
        ci: ComputeInstance::whole(4),
    })
    .unwrap();
    sim.start_process(Some(0)).unwrap();
    assert!(matches!(
        sim.apply(&Op::DestroyComputeInstance {
            gi_start: 0,
            ci: ComputeInstance::whole(4)
        }),
        Err(SimError::ProcessesRunning { .. })
    ));
    sim.apply(&Op::StopProcesses { gi_start: Some(0) }).unwrap();
    assert_eq!(
        sim.apply(&Op::DestroyGpuInstance { start: 0 }),
        Err(SimError::ComputeInstancesPresent { start: 0 })
    );
    assert_eq!(
        sim.apply(&Op::DestroyGpuInstance { start: 2 }),
        Err(SimError::NoSuchInstance { start: 2 })
    );
    assert_eq!(sim.apply(&Op::DisableMig), Err(SimError::InstancesPresent));
    assert_eq!(
        sim.apply(&Op::SetMps {
            settings: Some(MpsSettings {
                default_active_thread_percentage: 50,
                default_pinned_mem_limit: None
            })
        }),
        Err(SimError::MpsWithMig)
    );
    let mut t4 = SimGpu::new(lookup("Tesla T4", 15360));
    assert!(matches!(
        t4.apply(&Op::EnableMig),
        Err(SimError::NotMigCapable { .. })
    ));
    assert_eq!(
        t4.apply(&Op::SetReplicas { replicas: 65 }),
        Err(SimError::ReplicasOutOfRange)
    );
}

#[test]
fn ops_serialize_for_the_wire() {
    let op = Op::CreateGpuInstance {
        profile: "1g.10gb".into(),
        start: 6,
    };
    assert_eq!(
        serde_json::to_string(&op).unwrap(),
        r#"{"op":"create_gpu_instance","profile":"1g.10gb","start":6}"#
    );
    let desired: GpuDesired = serde_json::from_str(
        r#"{"mig_enabled":true,"instances":[],"mps":null,"time_slice_replicas":1}"#,
    )
    .unwrap();
    assert_eq!(desired.released, Released::default());
}

#[test]
fn whole_gpu_released_without_mode_change_stops_processes() {
    let l4 = lookup("NVIDIA L4", 23034);
    for replicas in [1, 4] {
        let busy = GpuObserved {
            processes_running: true,
            time_slice_replicas: replicas,
            ..GpuObserved::default()
        };
        let mut desired = GpuDesired::keep(&busy);
        desired.released.whole_gpu = true;
        let ops = run(l4, &busy, &desired);
        assert_eq!(ops, vec![Op::StopProcesses { gi_start: None }]);
        // Nothing released: nothing stopped, and no error without a mode change.
        assert_eq!(plan(&l4, &busy, &GpuDesired::keep(&busy)), Ok(vec![]));
    }
}

#[test]
fn a_released_shared_slice_stops_only_its_own_processes() {
    use crate::ids::AllocationId;
    let l4 = lookup("NVIDIA L4", 23034);
    let busy = GpuObserved {
        processes_running: true,
        allocations_running: vec![
            AllocationId::new(3),
            AllocationId::new(4),
            AllocationId::new(5),
        ],
        time_slice_replicas: 4,
        ..GpuObserved::default()
    };
    let mut desired = GpuDesired::keep(&busy);
    // 6 was released with nothing running.
    desired.released.allocations = vec![
        AllocationId::new(3),
        AllocationId::new(5),
        AllocationId::new(6),
    ];
    assert_eq!(
        run(l4, &busy, &desired),
        vec![
            Op::StopAllocation {
                allocation: AllocationId::new(3)
            },
            Op::StopAllocation {
                allocation: AllocationId::new(5)
            }
        ]
    );
    // None of theirs runs: nothing to stop.
    let idle = GpuObserved {
        allocations_running: vec![AllocationId::new(4)],
        ..busy.clone()
    };
    assert_eq!(plan(&l4, &idle, &desired), Ok(vec![]));
    // The whole GPU released stops everything once, not slice by slice.
    desired.released.whole_gpu = true;
    assert_eq!(
        run(l4, &busy, &desired),
        vec![Op::StopProcesses { gi_start: None }]
    );
}

#[test]
fn mig_profile_names_are_compared_canonically() {
    let observed = mig_on(vec![obs("1g.5gb", 0, 1, false), obs("3g.20gb", 4, 3, true)]);
    let desired = want(vec![gi("MIG 1g.5gb", 0, 1), gi("mig-3G.20GB", 4, 3)]);
    assert_eq!(plan(&a100(), &observed, &desired), Ok(vec![]));
    let ops = run(
        a100(),
        &GpuObserved::default(),
        &want(vec![gi("MIG 1G.5GB", 6, 1)]),
    );
    assert_eq!(
        ops[1],
        Op::CreateGpuInstance {
            profile: "1g.5gb".into(),
            start: 6
        }
    );
}

#[test]
fn a_7g_instance_holds_a_4c_and_a_3c_compute_instance() {
    assert_eq!(compute_instance_sizes(7), &[1, 2, 3, 4, 7]);
    let desired = want(vec![DesiredInstance {
        placement: MigPlacement::new("7g.40gb", 0),
        compute_instances: vec![
            ComputeInstance { start: 0, size: 4 },
            ComputeInstance { start: 4, size: 3 },
        ],
    }]);
    let ops = run(a100(), &GpuObserved::default(), &desired);
    assert_eq!(ops.len(), 4);
}

#[test]
fn a_desired_gpu_instance_needs_a_compute_instance() {
    let bare = want(vec![
        gi("4g.20gb", 0, 4),
        DesiredInstance {
            placement: MigPlacement::new("3g.20gb", 4),
            compute_instances: vec![],
        },
    ]);
    let err = plan(&a100(), &GpuObserved::default(), &bare).unwrap_err();
    assert_eq!(err, PlanError::NoComputeInstances { gi_start: 4 });
    assert!(
        err.to_string().contains("at least one compute instance"),
        "{err}"
    );
}

#[test]
fn mps_defaults_are_the_smallest_grant_and_servers_get_the_largest() {
    use crate::ids::AllocationId;
    use crate::plan::MpsGrant;
    let none = MpsSettings::for_clients(&[]);
    assert_eq!(none.default_active_thread_percentage, 100);
    assert_eq!(none.default_pinned_mem_limit, None);
    let two = MpsSettings::for_clients(&[(25, MemMiB(6144)), (40, MemMiB(4096))]);
    assert_eq!(two.default_active_thread_percentage, 25);
    assert_eq!(two.default_pinned_mem_limit, Some(MemMiB(4096)));
    assert_eq!(
        MpsSettings::for_clients(&[(0, MemMiB(1))]).default_active_thread_percentage,
        1,
        "never 0"
    );
    let grant = |id, pct, mib| MpsGrant {
        allocation: AllocationId::new(id),
        active_thread_percentage: pct,
        pinned_mem_limit: MemMiB(mib),
    };
    assert_eq!(MpsGrant::ceiling(&[]), None);
    assert_eq!(
        MpsGrant::ceiling(&[grant(1, 25, 6144), grant(2, 40, 4096)]),
        Some((40, MemMiB(6144)))
    );
}

#[test]
fn an_mps_client_that_does_not_keep_to_its_grant_is_a_stray() {
    use crate::ids::AllocationId;
    use crate::plan::{MpsClient, MpsGrant};
    let grants = [MpsGrant {
        allocation: AllocationId::new(7),
        active_thread_percentage: 25,
        pinned_mem_limit: MemMiB(4096),
    }];
    let client = |allocation: Option<i64>, pct: Option<u8>, mib: Option<u64>| MpsClient {
        pid: 99,
        server: 5_000_000,
        allocation: allocation.map(AllocationId::new),
        active_thread_percentage: pct,
        pinned_mem_limit: mib.map(MemMiB),
    };
    let problem = |c: MpsClient| c.stray(&grants).map(|s| s.problem);
    assert_eq!(problem(client(Some(7), Some(25), Some(4096))), None);
    assert_eq!(
        problem(client(Some(7), Some(10), Some(1024))),
        None,
        "less is fine"
    );
    for (c, says) in [
        (
            client(None, Some(25), Some(4096)),
            "without TESSERA_ALLOCATION",
        ),
        (client(Some(8), Some(25), Some(4096)), "names slice 8"),
        (
            client(Some(7), None, Some(4096)),
            "sets no CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
        ),
        (
            client(Some(7), Some(50), Some(4096)),
            "asks for 50% of the SMs; slice 7 has 25%",
        ),
        (
            client(Some(7), Some(25), None),
            "sets no CUDA_MPS_PINNED_DEVICE_MEM_LIMIT",
        ),
        (
            client(Some(7), Some(25), Some(8192)),
            "limits itself to 8 GiB of memory; slice 7 has 4 GiB",
        ),
    ] {
        let p = problem(c).unwrap_or_default();
        assert!(p.contains(says), "{c:?}: {p}");
    }
}
