//! The NVML backend's logic without a GPU: a fake MIG driver that answers as
//! NVML does (driver profile IDs, instance IDs, placements), a recording
//! command runner for MPS and a temporary device plugin config, driven
//! through the same `reconcile_gpu` pass the agent runs.
#![allow(clippy::unwrap_used, clippy::panic)]

use super::mig::{Busy, CiInfo, GiInfo, MigDeviceInfo, MigDriver};
use super::mps::tests::{temp_root, Recorder};
use super::*;
use crate::reconcile::reconcile_gpu;
use nvml_wrapper_sys::bindings as sys;
use std::sync::Mutex;
use tessera_core::mig::MigPlacement;
use tessera_core::plan::{ComputeInstance, DesiredInstance, GpuDesired, MpsSettings};
use tessera_core::units::MemMiB;

/// H100 80 GB profile IDs as `nvidia-smi mig -lgip` shows them, by NVML constant.
const H100_IDS: [(u32, u32); 7] = [
    (sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE, 19),
    (sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20),
    (sys::NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2, 15),
    (sys::NVML_GPU_INSTANCE_PROFILE_2_SLICE, 14),
    (sys::NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9),
    (sys::NVML_GPU_INSTANCE_PROFILE_4_SLICE, 5),
    (sys::NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0),
];

#[derive(Default)]
struct FakeState {
    mig: bool,
    /// MIG mode changes stay pending (the GPU needs a reset).
    pending: bool,
    gis: Vec<(GiInfo, Vec<CiInfo>)>,
    next_id: u32,
    busy: Busy,
    /// Processes by GPU instance ID (`None`: outside any instance).
    pids: Vec<(Option<u32>, u32)>,
    calls: Vec<String>,
}

/// A fake MIG driver for one H100.
#[derive(Default)]
struct FakeMig(Mutex<FakeState>);

fn nvml_error(call: &'static str, detail: &str) -> BackendError {
    BackendError::Nvml {
        call,
        detail: detail.to_owned(),
    }
}

impl FakeMig {
    fn calls(&self) -> Vec<String> {
        std::mem::take(&mut self.0.lock().unwrap().calls)
    }
}

impl MigDriver for FakeMig {
    fn mig_enabled(&self) -> Result<bool, BackendError> {
        Ok(self.0.lock().unwrap().mig)
    }

    fn set_mig_enabled(&self, on: bool) -> Result<(), BackendError> {
        let mut s = self.0.lock().unwrap();
        s.calls.push(format!("set_mig {on}"));
        if !s.pending {
            s.mig = on;
        }
        Ok(())
    }

    fn gi_profile_id(&self, constant: u32) -> Result<Option<u32>, BackendError> {
        Ok(H100_IDS
            .iter()
            .find(|(c, _)| *c == constant)
            .map(|(_, id)| *id))
    }

    fn gpu_instances(&self) -> Result<Vec<GiInfo>, BackendError> {
        let s = self.0.lock().unwrap();
        if !s.mig {
            return Err(nvml_error("nvmlDeviceGetGpuInstances", "Not Supported"));
        }
        Ok(s.gis.iter().map(|(g, _)| *g).collect())
    }

    fn create_gpu_instance(
        &self,
        profile_id: u32,
        start: u32,
        size: u32,
    ) -> Result<(), BackendError> {
        let mut s = self.0.lock().unwrap();
        s.calls
            .push(format!("create_gi {profile_id} {start}:{size}"));
        if !s.mig {
            return Err(nvml_error(
                "nvmlDeviceCreateGpuInstanceWithPlacement",
                "Not Supported",
            ));
        }
        if s.gis
            .iter()
            .any(|(g, _)| start < g.start + g.size && g.start < start + size)
        {
            return Err(nvml_error(
                "nvmlDeviceCreateGpuInstanceWithPlacement",
                "Insufficient Resources",
            ));
        }
        s.next_id += 1;
        let id = s.next_id;
        s.gis.push((
            GiInfo {
                id,
                profile_id,
                start,
                size,
            },
            Vec::new(),
        ));
        Ok(())
    }

    fn destroy_gpu_instance(&self, gi_id: u32) -> Result<(), BackendError> {
        let mut s = self.0.lock().unwrap();
        s.calls.push(format!("destroy_gi {gi_id}"));
        s.gis.retain(|(g, _)| g.id != gi_id);
        Ok(())
    }

    fn compute_instances(&self, gi_id: u32) -> Result<Vec<CiInfo>, BackendError> {
        let s = self.0.lock().unwrap();
        Ok(s.gis
            .iter()
            .find(|(g, _)| g.id == gi_id)
            .map(|(_, cis)| cis.clone())
            .unwrap_or_default())
    }

    fn create_compute_instance(
        &self,
        gi_id: u32,
        constant: u32,
        start: u32,
        size: u32,
    ) -> Result<(), BackendError> {
        let mut s = self.0.lock().unwrap();
        s.calls.push(format!(
            "create_ci gi{gi_id} profile{constant} {start}:{size}"
        ));
        s.next_id += 1;
        let id = s.next_id;
        let (_, cis) = s.gis.iter_mut().find(|(g, _)| g.id == gi_id).unwrap();
        cis.push(CiInfo { id, start, size });
        Ok(())
    }

    fn destroy_compute_instance(&self, gi_id: u32, ci_id: u32) -> Result<(), BackendError> {
        let mut s = self.0.lock().unwrap();
        s.calls.push(format!("destroy_ci gi{gi_id} ci{ci_id}"));
        let (_, cis) = s.gis.iter_mut().find(|(g, _)| g.id == gi_id).unwrap();
        cis.retain(|c| c.id != ci_id);
        Ok(())
    }

    fn busy(&self) -> Result<Busy, BackendError> {
        Ok(self.0.lock().unwrap().busy.clone())
    }

    fn processes(&self, gi_id: Option<u32>) -> Result<Vec<u32>, BackendError> {
        let s = self.0.lock().unwrap();
        Ok(s.pids
            .iter()
            .filter(|(gi, _)| gi_id.is_none() || *gi == gi_id)
            .map(|(_, pid)| *pid)
            .collect())
    }

    fn mig_devices(&self) -> Result<Vec<MigDeviceInfo>, BackendError> {
        let s = self.0.lock().unwrap();
        Ok(s.gis
            .iter()
            .filter(|(_, cis)| !cis.is_empty())
            .map(|(g, _)| MigDeviceInfo {
                gi_id: g.id,
                uuid: format!("MIG-fake-{}", g.id),
                busy: false,
            })
            .collect())
    }
}

/// One fake H100 behind the NVML backend's logic.
struct FakeHost {
    sharing: Sharing,
    mig: FakeMig,
    facts: GpuFacts,
}

impl GpuBackend for FakeHost {
    fn name(&self) -> &'static str {
        "nvml (fake driver)"
    }
    fn hostname(&self) -> String {
        "fake".into()
    }
    fn inventory(&self) -> Result<Inventory, BackendError> {
        Err(BackendError::NvmlUnavailable("fake".into()))
    }
    fn observe(&self, index: u32) -> Result<GpuObserved, BackendError> {
        if index != 0 {
            return Err(BackendError::NoSuchGpu(index));
        }
        Ok(self.sharing.observe(&self.mig, &self.facts)?.0)
    }
    fn apply(
        &self,
        index: u32,
        op: &Op,
    ) -> Result<Option<tessera_protocol::agent::ProcessesStopped>, BackendError> {
        if index != 0 {
            return Err(BackendError::NoSuchGpu(index));
        }
        self.sharing.apply(&self.mig, &self.facts, index, op)
    }
    fn sample(
        &self,
        _at_ms: i64,
        _held: &std::collections::BTreeSet<u32>,
    ) -> Result<Vec<tessera_protocol::agent::GpuSample>, BackendError> {
        Ok(Vec::new())
    }
}

const UUID: &str = "GPU-fake-h100";

fn host(name: &str, device_plugin_config: bool) -> (FakeHost, Recorder, PathBuf) {
    host_with_plugin(name, device_plugin_config, "tessera-no-such-plugin")
}

fn host_with_plugin(
    name: &str,
    device_plugin_config: bool,
    plugin_process: &str,
) -> (FakeHost, Recorder, PathBuf) {
    let root = temp_root(name);
    let rec = Recorder::default();
    let config = device_plugin_config.then(|| root.join("device-plugin/config.yaml"));
    let host = FakeHost {
        sharing: Sharing::new(
            Box::new(rec.clone()),
            root.join("run"),
            root.join("log"),
            config,
            super::time_slicing::DevicePlugin::new(
                plugin_process.to_owned(),
                Box::new(super::mps::SystemRunner::default()),
            ),
            super::stop::ProcessStopper::new(
                Box::new(super::mps::SystemRunner::default()),
                std::time::Duration::from_millis(300),
            ),
        ),
        mig: FakeMig::default(),
        facts: GpuFacts {
            uuid: UUID.into(),
            model: catalogue::lookup("NVIDIA H100 80GB HBM3", 81559),
            memory_mib: 81559,
        },
    };
    (host, rec, root)
}

fn instance(profile: &str, start: u8, compute: u8) -> DesiredInstance {
    DesiredInstance {
        placement: MigPlacement::new(profile, start),
        compute_instances: vec![ComputeInstance::whole(compute)],
    }
}

fn mig_layout() -> GpuDesired {
    GpuDesired {
        mig_enabled: true,
        instances: vec![
            instance("3g.40gb", 0, 3),
            instance("2g.20gb", 4, 2),
            instance("1g.10gb", 6, 1),
        ],
        ..GpuDesired::default()
    }
}

#[test]
fn reconciles_a_mig_layout_through_nvml_calls() {
    let (h, _, root) = host("nvml-mig", false);
    let model = h.facts.model;
    let out = reconcile_gpu(&h, 0, &model, &mig_layout()).unwrap();
    assert_eq!(out.applied.first(), Some(&Op::EnableMig));
    let mut calls = h.mig.calls();
    calls.sort();
    assert_eq!(
        calls,
        vec![
            // Driver profile IDs (3g = 9, 2g = 14, 1g = 19), memory-slice placements.
            "create_ci gi1 profile2 0:3",
            "create_ci gi3 profile1 0:2",
            "create_ci gi5 profile0 0:1",
            "create_gi 14 4:2",
            "create_gi 19 6:1",
            "create_gi 9 0:4",
            "set_mig true",
        ],
        "NVML compute-instance constants: 3-slice = {}, 2-slice = {}, 1-slice = {}",
        sys::NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE,
        sys::NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
        sys::NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
    );
    let observed = &out.observed;
    assert!(observed.mig_enabled);
    let layout: Vec<(String, u8, Vec<ComputeInstance>)> = observed
        .instances
        .iter()
        .map(|i| {
            (
                i.placement.profile.clone(),
                i.placement.start,
                i.compute_instances.clone(),
            )
        })
        .collect();
    assert_eq!(
        layout,
        vec![
            ("3g.40gb".into(), 0, vec![ComputeInstance::whole(3)]),
            ("2g.20gb".into(), 4, vec![ComputeInstance::whole(2)]),
            ("1g.10gb".into(), 6, vec![ComputeInstance::whole(1)]),
        ]
    );
    // The MIG devices, with the profile and start of their GPU instance.
    let (_, devices) = h.sharing.observe(&h.mig, &h.facts).unwrap();
    assert_eq!(
        devices
            .iter()
            .map(|d| (d.gi_start, d.profile.as_str(), d.uuid.as_str()))
            .collect::<Vec<_>>(),
        vec![
            (0, "3g.40gb", "MIG-fake-1"),
            (4, "2g.20gb", "MIG-fake-3"),
            (6, "1g.10gb", "MIG-fake-5")
        ]
    );

    // Nothing to do the second time.
    let again = reconcile_gpu(&h, 0, &model, &mig_layout()).unwrap();
    assert!(again.applied.is_empty(), "{:?}", again.applied);
    assert!(h.mig.calls().is_empty());

    // And back to a whole GPU: each compute instance before its GPU
    // instance, then MIG off.
    let out = reconcile_gpu(&h, 0, &model, &GpuDesired::default()).unwrap();
    assert_eq!(out.applied.last(), Some(&Op::DisableMig));
    assert_eq!(out.observed, GpuObserved::default());
    let calls = h.mig.calls();
    assert_eq!(calls.len(), 7, "{calls:?}");
    for gi in [1, 3, 5] {
        let ci = calls
            .iter()
            .position(|c| c.starts_with(&format!("destroy_ci gi{gi} ")));
        let gi = calls.iter().position(|c| *c == format!("destroy_gi {gi}"));
        assert!(ci.unwrap() < gi.unwrap(), "{calls:?}");
    }
    assert_eq!(calls[6], "set_mig false");
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn observed_instances_keep_the_catalogue_names_and_flag_busy_ones() {
    let (h, _, root) = host("nvml-names", false);
    {
        let mut s = h.mig.0.lock().unwrap();
        s.mig = true;
        s.gis = vec![
            (
                GiInfo {
                    id: 7,
                    profile_id: 20,
                    start: 3,
                    size: 1,
                },
                vec![CiInfo {
                    id: 0,
                    start: 0,
                    size: 1,
                }],
            ),
            (
                GiInfo {
                    id: 2,
                    profile_id: 15,
                    start: 0,
                    size: 2,
                },
                vec![],
            ),
            // A profile the catalogue does not know.
            (
                GiInfo {
                    id: 9,
                    profile_id: 47,
                    start: 6,
                    size: 1,
                },
                vec![],
            ),
        ];
        s.busy.gpu_instances.insert(7);
    }
    let (observed, devices) = h.sharing.observe(&h.mig, &h.facts).unwrap();
    let got: Vec<(&str, u8, bool)> = observed
        .instances
        .iter()
        .map(|i| (i.placement.profile.as_str(), i.placement.start, i.in_use))
        .collect();
    assert_eq!(
        got,
        vec![
            ("1g.20gb", 0, false),
            ("1g.10gb+me", 3, true),
            ("nvml-profile-47", 6, false)
        ]
    );
    // Only the instance with a compute instance is a MIG device.
    assert_eq!(devices.len(), 1);
    assert_eq!(
        (devices[0].gi_start, devices[0].uuid.as_str()),
        (3, "MIG-fake-7")
    );

    // The driver's busy instance is not destroyed.
    let err = h
        .apply(
            0,
            &Op::DestroyComputeInstance {
                gi_start: 3,
                ci: ComputeInstance::whole(1),
            },
        )
        .unwrap_err();
    assert!(
        matches!(err, BackendError::Refused { ref detail, .. } if detail.contains("processes")),
        "{err}"
    );
    // A profile the GPU does not have, or a wrong start, never reaches the driver.
    let err = h
        .apply(
            0,
            &Op::CreateGpuInstance {
                profile: "1g.5gb".into(),
                start: 7,
            },
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("has no MIG profile '1g.5gb'"), "{err}");
    let err = h
        .apply(
            0,
            &Op::CreateGpuInstance {
                profile: "3g.40gb".into(),
                start: 2,
            },
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot start at memory slice 2"), "{err}");
    assert!(h.mig.calls().is_empty());
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_pending_mig_mode_change_is_explained() {
    let (h, _, root) = host("nvml-pending", false);
    h.mig.0.lock().unwrap().pending = true;
    let err = h.apply(0, &Op::EnableMig).unwrap_err().to_string();
    assert!(err.contains("pending") && err.contains("reset"), "{err}");
    h.mig.0.lock().unwrap().busy.whole_gpu = true;
    let err = h.apply(0, &Op::EnableMig).unwrap_err().to_string();
    assert!(err.contains("processes are running"), "{err}");
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn stop_processes_ends_the_real_processes_of_the_released_instance_only() {
    let (h, _, root) = host("nvml-stop", false);
    h.apply(0, &Op::EnableMig).unwrap();
    h.apply(
        0,
        &Op::CreateGpuInstance {
            profile: "1g.10gb".into(),
            start: 0,
        },
    )
    .unwrap();
    h.apply(
        0,
        &Op::CreateGpuInstance {
            profile: "1g.10gb".into(),
            start: 1,
        },
    )
    .unwrap();
    let gis: Vec<(u32, u32)> = h
        .mig
        .gpu_instances()
        .unwrap()
        .iter()
        .map(|g| (g.start, g.id))
        .collect();
    let gi_at = |start: u32| gis.iter().find(|(s, _)| *s == start).unwrap().1;
    let spawn = |script: &str| {
        let c = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        c
    };
    // Real processes stand for the tenants' work: a polite one and one that
    // ignores SIGTERM in the released instance, a neighbour in the other.
    let mut polite = spawn("exec sleep 30");
    let mut stubborn = spawn("trap '' TERM; while true; do sleep 0.05; done");
    let mut neighbour = spawn("exec sleep 30");
    h.mig.0.lock().unwrap().pids = vec![
        (Some(gi_at(0)), polite.id()),
        (Some(gi_at(0)), stubborn.id()),
        (Some(gi_at(1)), neighbour.id()),
    ];
    h.apply(0, &Op::StopProcesses { gi_start: Some(0) })
        .unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(polite.wait().unwrap().signal(), Some(15), "SIGTERM first");
    assert_eq!(
        stubborn.wait().unwrap().signal(),
        Some(9),
        "SIGKILL after the grace period"
    );
    assert!(
        super::stop::alive(neighbour.id()),
        "the other instance is untouched"
    );
    // The whole GPU: every process goes.
    h.apply(0, &Op::StopProcesses { gi_start: None }).unwrap();
    assert_eq!(neighbour.wait().unwrap().signal(), Some(15));
    // An instance that is already gone has nothing to stop.
    h.apply(0, &Op::StopProcesses { gi_start: Some(5) })
        .unwrap();
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn reconciles_mps_through_the_control_daemon() {
    let (h, rec, root) = host("nvml-mps", false);
    let model = h.facts.model;
    let settings = MpsSettings {
        default_active_thread_percentage: 30,
        default_pinned_mem_limit: Some(MemMiB(10240)),
    };
    let desired = GpuDesired {
        mps: Some(settings),
        ..GpuDesired::default()
    };
    let out = reconcile_gpu(&h, 0, &model, &desired).unwrap();
    assert_eq!(
        out.applied,
        vec![Op::SetMps {
            settings: Some(settings)
        }]
    );
    assert_eq!(out.observed.mps, Some(settings));
    let lines = rec.lines();
    for expected in [
        "-d",
        "set_default_active_thread_percentage 30",
        "set_default_device_pinned_mem_limit 0 10240M",
    ] {
        assert!(lines.iter().any(|l| l == expected), "{expected}: {lines:?}");
    }
    assert!(reconcile_gpu(&h, 0, &model, &desired)
        .unwrap()
        .applied
        .is_empty());

    // MIG cannot be turned on under MPS; stopping the daemon first works.
    let err = h.apply(0, &Op::EnableMig).unwrap_err().to_string();
    assert!(err.contains("MPS"), "{err}");
    // Clients connected: the daemon is not stopped under them.
    h.mig.0.lock().unwrap().busy.whole_gpu = true;
    let err = h
        .apply(0, &Op::SetMps { settings: None })
        .unwrap_err()
        .to_string();
    assert!(err.contains("disconnect"), "{err}");
    h.mig.0.lock().unwrap().busy.whole_gpu = false;
    let out = reconcile_gpu(&h, 0, &model, &GpuDesired::default()).unwrap();
    assert_eq!(out.applied, vec![Op::SetMps { settings: None }]);
    assert_eq!(out.observed.mps, None);
    assert!(rec.lines().iter().any(|l| l == "quit"), "{:?}", rec.lines());
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn reconciles_time_slicing_into_the_device_plugin_config() {
    let (h, _, root) = host("nvml-ts", true);
    let model = h.facts.model;
    let desired = GpuDesired {
        time_slice_replicas: 4,
        ..GpuDesired::default()
    };
    let out = reconcile_gpu(&h, 0, &model, &desired).unwrap();
    assert_eq!(out.applied, vec![Op::SetReplicas { replicas: 4 }]);
    assert_eq!(out.observed.time_slice_replicas, 4);
    let text = std::fs::read_to_string(root.join("device-plugin/config.yaml")).unwrap();
    assert!(
        text.contains("replicas: 4") && text.contains(&format!("devices:\n      - {UUID}\n")),
        "{text}"
    );
    let out = reconcile_gpu(&h, 0, &model, &GpuDesired::default()).unwrap();
    assert_eq!(out.observed.time_slice_replicas, 1);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn time_slicing_without_a_device_plugin_is_the_drivers_and_the_agent_keeps_the_count() {
    let (h, _, root) = host("nvml-ts-none", false);
    h.apply(0, &Op::SetReplicas { replicas: 4 }).unwrap();
    assert_eq!(h.observe(0).unwrap().time_slice_replicas, 4);
    let model = h.facts.model;
    let desired = GpuDesired {
        time_slice_replicas: 4,
        ..GpuDesired::default()
    };
    let out = reconcile_gpu(&h, 0, &model, &desired).unwrap();
    assert!(out.applied.is_empty(), "{:?}", out.applied);
    h.apply(0, &Op::SetReplicas { replicas: 1 }).unwrap();
    assert_eq!(h.observe(0).unwrap().time_slice_replicas, 1);
    let _ = std::fs::remove_dir_all(root);
}

#[test]
fn a_changed_config_makes_the_running_device_plugin_read_it_again() {
    // A stand-in plugin: a script whose process name the kernel takes from
    // the file name, counting the SIGHUPs it gets.
    let root = temp_root("nvml-ts-reload");
    std::fs::create_dir_all(&root).unwrap();
    let script = root.join("fake-dev-plugin");
    let hups = root.join("hups");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ntrap 'echo hup >> \"{}\"' HUP\nwhile :; do sleep 0.05; done\n",
            hups.display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&script)
        .status()
        .unwrap();
    let mut plugin = std::process::Command::new(&script).spawn().unwrap();
    let count = || {
        std::fs::read_to_string(&hups)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let wait_for = |n: usize| {
        for _ in 0..100 {
            if count() >= n {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    // The plugin has to be running (and its trap set) first.
    for _ in 0..100 {
        if !super::time_slicing::processes_named("fake-dev-plugin").is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));

    let (h, _, cfg_root) = host_with_plugin("nvml-ts-reload-host", true, "fake-dev-plugin");
    h.apply(0, &Op::SetReplicas { replicas: 4 }).unwrap();
    wait_for(1);
    assert_eq!(count(), 1, "the plugin was told once");
    // The same replicas again: the file does not change, nothing is sent.
    h.apply(0, &Op::SetReplicas { replicas: 4 }).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(count(), 1);
    h.apply(0, &Op::SetReplicas { replicas: 1 }).unwrap();
    wait_for(2);
    assert_eq!(count(), 2);
    let _ = plugin.kill();
    let _ = plugin.wait();
    let _ = std::fs::remove_dir_all(root);
    let _ = std::fs::remove_dir_all(cfg_root);
}

#[test]
fn without_a_driver_init_fails_with_nvml_unavailable() {
    match NvmlBackend::init(NvmlOptions::default()) {
        Ok(_) => eprintln!("an NVIDIA driver is installed here; nothing to check"),
        Err(err) => {
            assert!(matches!(err, BackendError::NvmlUnavailable(_)), "{err}");
            let message = err.to_string();
            assert!(
                message.contains("NVIDIA driver installed") && message.contains("--backend sim"),
                "{message}"
            );
            assert!(message.contains("libnvidia-ml"), "{message}");
        }
    }
}
