//! The agent's NVML backend run for real, against the fake NVML library
//! (`tessera-fake-nvml`, loaded with `--nvml-library`): telemetry per GPU
//! mode and generation, MIG changes through the driver, released slices'
//! processes stopped (real processes, really signalled), and the simulated
//! backend answering as the fake does for the same host.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::kit::{agent, HostFile, Scratch as Kit};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;

/// The fake library, built once per run (cheap when it is fresh) next to
/// this test's own build, so a stale library never answers.
fn library() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        // target/<profile>/deps/fake_nvml-<hash>
        let profile_dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
        let mut build = Command::new(env!("CARGO"));
        build.args(["build", "--quiet", "-p", "tessera-fake-nvml"]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let target_dir = profile_dir.parent().unwrap();
        let status = build
            .env("CARGO_TARGET_DIR", target_dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .unwrap();
        assert!(status.success(), "building the fake NVML library failed");
        let lib = profile_dir.join("libtessera_fake_nvml.so");
        assert!(lib.exists(), "{} was not built", lib.display());
        lib
    })
}

/// The fake `nvidia-cuda-mps-control`, built with the library.
fn mps_control() -> PathBuf {
    library().parent().unwrap().join("tessera-fake-mps-control")
}

/// A fake host's folder: its host file, the fake library's state and the
/// processes "on" its GPUs.
struct Scratch(Kit);

impl Scratch {
    fn new(test: &str) -> Self {
        Self(Kit::new("fake-nvml", test))
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        self.0.write(name, text)
    }

    fn host(&self, host: &HostFile) -> PathBuf {
        self.0.host_file("host.toml", host)
    }

    /// The agent on the fake library, with this folder's host, state and
    /// processes.
    fn agent(&self) -> Command {
        let mut c = agent();
        c.arg("--nvml-library")
            .arg(library())
            .env("TESSERA_FAKE_NVML_HOST", self.0.join("host.toml"))
            .env("TESSERA_FAKE_NVML_STATE", self.0.join("state.json"))
            .env("TESSERA_FAKE_NVML_PROCESSES", self.0.join("processes.toml"))
            .env("TESSERA_LOG", "error");
        c
    }

    /// Processes "running on" the GPUs: (pid, gpu, GPU instance start).
    fn processes(&self, list: &[(u32, u32, Option<u8>)]) {
        let text: String = list
            .iter()
            .map(|(pid, gpu, gi)| {
                let gi = gi.map(|s| format!("gi_start = {s}\n")).unwrap_or_default();
                format!("[[process]]\npid = {pid}\ngpu = {gpu}\nused_mib = 2048\n{gi}")
            })
            .collect();
        self.write("processes.toml", &text);
    }
}

fn json_of(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "agent failed: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `tessera-agent probe` on `cmd`'s backend: inventory and two rounds.
fn probe(mut cmd: Command) -> Value {
    json_of(
        &cmd.args(["probe", "--rounds", "2", "--interval-ms", "50"])
            .output()
            .unwrap(),
    )
}

/// `tessera-agent plan` with `desired` (`{"<gpu>": GpuDesired}`): whether
/// every GPU got there, and each GPU's line.
fn plan(scratch: &Scratch, mut cmd: Command, desired: &str) -> (bool, Vec<Value>) {
    let file = scratch.write("desired.json", desired);
    let out = cmd.arg("plan").arg("--desired").arg(file).output().unwrap();
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out.status.success(), lines)
}

fn gpu(doc: &Value, round: usize, index: usize) -> &Value {
    &doc["rounds"][round]["gpus"][index]
}

/// Busy hosts of each kind the tests measure.
fn h100_mig() -> HostFile {
    HostFile::named("h100")
        .size(32, 256)
        .workload("training")
        .gpus("H100-80GB", 1)
        .mig(&["3g.40gb@0", "1g.10gb@6"])
}

fn a100_mig() -> HostFile {
    HostFile::named("a100")
        .size(32, 256)
        .workload("training")
        .gpus("A100-SXM4-40GB", 1)
        .mig(&["3g.20gb@4", "2g.10gb@0"])
}

fn l4() -> HostFile {
    HostFile::named("l4")
        .size(16, 64)
        .workload("training")
        .gpus("L4", 2)
}

#[test]
fn an_h100_in_mig_mode_measures_each_instance_through_gpm_and_not_the_parent() {
    let s = Scratch::new("h100");
    s.host(&h100_mig());
    let doc = probe(s.agent());
    assert_eq!(doc["backend"], "nvml");
    let inventory = &doc["gpus"][0];
    assert_eq!(inventory["mig_enabled"], true);
    assert_eq!(inventory["mig_devices"].as_array().unwrap().len(), 2);
    for round in 0..2 {
        let g = gpu(&doc, round, 0);
        // nvml.h: utilisation is not supported on a MIG-enabled GPU.
        assert_eq!(g["util_pct"], Value::Null, "round {round}: {g}");
        assert!(g["mem_used_mib"].as_u64().unwrap() > 0, "{g}");
        assert!(g["power_mw"].as_u64().unwrap() > 0, "{g}");
        let instances = g["instances"].as_array().unwrap();
        assert_eq!(instances.len(), 2, "{g}");
        for i in instances {
            assert!(i["uuid"].as_str().unwrap().starts_with("MIG-"));
            assert!(i["mem_used_mib"].as_u64().unwrap() > 0, "{i}");
            // GPM measures between two samples: nothing in the first round.
            if round == 0 {
                assert_eq!(i["util_pct"], Value::Null, "{i}");
            } else {
                let pct = i["util_pct"].as_u64().expect("activity in round 2");
                assert!(pct <= 100);
            }
        }
    }
}

#[test]
fn an_a100_in_mig_mode_has_memory_per_instance_and_no_activity_figure() {
    let s = Scratch::new("a100");
    s.host(&a100_mig());
    let doc = probe(s.agent());
    for round in 0..2 {
        let g = gpu(&doc, round, 0);
        assert_eq!(g["util_pct"], Value::Null, "{g}");
        let instances = g["instances"].as_array().unwrap();
        assert_eq!(instances.len(), 2);
        for i in instances {
            // No GPM before Hopper: unknown, never 0.
            assert_eq!(i["util_pct"], Value::Null, "{i}");
            assert!(i["mem_used_mib"].as_u64().unwrap() > 0, "{i}");
        }
    }
}

fn sleeper() -> Child {
    Command::new("sleep").arg("300").spawn().unwrap()
}

/// Whether the child has exited (reaping it), within `secs`.
fn exits_within(child: &mut Child, secs: u64) -> bool {
    for _ in 0..secs * 20 {
        if child.try_wait().unwrap().is_some() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

#[test]
fn a_whole_gpu_is_measured_busy_while_a_process_runs_and_released_stops_it() {
    let s = Scratch::new("l4");
    s.host(&l4());
    let idle = probe(s.agent());
    assert_eq!(gpu(&idle, 1, 0)["util_pct"], 0);
    assert_eq!(gpu(&idle, 1, 0)["mem_used_mib"], 0);

    let mut work = sleeper();
    s.processes(&[(work.id(), 0, None)]);
    let busy = probe(s.agent());
    let g = gpu(&busy, 1, 0);
    assert!(g["util_pct"].as_u64().unwrap() > 0, "{g}");
    assert!(g["mem_used_mib"].as_u64().unwrap() > 0, "{g}");
    assert_eq!(busy["gpus"][0]["sharing"]["processes_running"], true);
    assert_eq!(gpu(&busy, 1, 1)["util_pct"], 0, "the other GPU idles");

    // Not released: nothing is stopped.
    let keep =
        r#"{"0": {"mig_enabled": false, "instances": [], "mps": null, "time_slice_replicas": 1}}"#;
    let (ok, _) = plan(&s, s.agent(), keep);
    assert!(ok);
    assert!(
        work.try_wait().unwrap().is_none(),
        "a process of a live slice was stopped"
    );

    // Released: the agent stops it (SIGTERM), as on a host.
    let released = r#"{"0": {"mig_enabled": false, "instances": [], "mps": null, "time_slice_replicas": 1,
        "released": {"instances": [], "whole_gpu": true}}}"#;
    let mut agent = s.agent();
    agent.args(["--stop-grace-seconds", "2"]);
    let (ok, lines) = plan(&s, agent, released);
    assert!(ok, "{lines:?}");
    assert_eq!(lines[0]["ops"][0]["op"], "stop_processes", "{lines:?}");
    assert_eq!(
        lines[0]["stopped"],
        serde_json::json!([{"index": 0, "scope": {"kind": "gpu"}, "terminated": 1, "killed": 0}])
    );
    assert!(
        exits_within(&mut work, 5),
        "the released slice's process still runs"
    );
    let after = probe(s.agent());
    assert_eq!(gpu(&after, 1, 0)["util_pct"], 0);
}

fn tagged_sleeper(allocation: u32) -> Child {
    sleeper_with(&[("TESSERA_ALLOCATION", &allocation.to_string())])
}

/// MPS and time-sliced slices share a GPU: releasing one stops the
/// processes that carry its allocation and none of its neighbours'.
#[test]
fn a_released_shared_slice_stops_its_own_processes_and_no_others() {
    let s = Scratch::new("shared");
    s.host(&l4());
    let mut mine = tagged_sleeper(7);
    let mut neighbour = tagged_sleeper(8);
    let mut untagged = sleeper();
    // One of the slice's processes is an MPS client: NVML lists those apart
    // (`nvmlDeviceGetMPSComputeRunningProcesses`).
    let mut mine_mps = tagged_sleeper(7);
    s.processes(&[
        (mine.id(), 0, None),
        (neighbour.id(), 0, None),
        (untagged.id(), 0, None),
    ]);
    let listed = std::fs::read_to_string(s.0.join("processes.toml")).unwrap();
    s.write(
        "processes.toml",
        &format!(
            "{listed}[[process]]\npid = {}\ngpu = 0\nused_mib = 1024\nmps = true\n",
            mine_mps.id()
        ),
    );
    let shared = |released: &str| {
        format!(
            r#"{{"0": {{"mig_enabled": false, "instances": [], "mps": null, "time_slice_replicas": 4,
            "released": {{"instances": [], "whole_gpu": false, "allocations": [{released}]}}}}}}"#
        )
    };
    // Which slices run is observed from the processes' environment.
    let (ok, lines) = plan(&s, s.agent(), &shared(""));
    assert!(ok, "{lines:?}");
    assert_eq!(
        lines[0]["observed"]["allocations_running"],
        serde_json::json!([7, 8])
    );

    let mut agent = s.agent();
    agent.args(["--stop-grace-seconds", "2"]);
    let (ok, lines) = plan(&s, agent, &shared("7, 9"));
    assert!(ok, "{lines:?}");
    // (Each `plan` is a new agent without a device plugin: it sets the
    // replicas again.)
    let stops: Vec<&Value> = lines[0]["ops"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|op| op["op"].as_str().unwrap().starts_with("stop"))
        .collect();
    assert_eq!(
        stops,
        vec![&serde_json::json!({"op": "stop_allocation", "allocation": 7})],
        "9 runs nothing: nothing to do for it"
    );
    assert_eq!(
        lines[0]["stopped"],
        serde_json::json!([{"index": 0, "scope": {"kind": "allocation", "allocation": 7}, "terminated": 2, "killed": 0}])
    );
    assert!(
        exits_within(&mut mine, 5),
        "the released slice's process still runs"
    );
    assert!(
        exits_within(&mut mine_mps, 5),
        "the released slice's MPS client still runs"
    );
    assert!(
        neighbour.try_wait().unwrap().is_none(),
        "a neighbour was stopped"
    );
    assert!(
        untagged.try_wait().unwrap().is_none(),
        "an untagged process was stopped"
    );
    assert_eq!(
        lines[0]["observed"]["allocations_running"],
        serde_json::json!([8])
    );
    for c in [&mut neighbour, &mut untagged] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

/// MPS clients and time-sliced replicas get their own figures: each slice's
/// processes (by `TESSERA_ALLOCATION`) with their SM use from
/// `nvmlDeviceGetProcessUtilization` and their memory, not the GPU's figure
/// copied to every holder.
#[test]
fn shared_slices_are_measured_by_their_own_processes() {
    let s = Scratch::new("clients");
    s.host(&l4());
    let mut a = tagged_sleeper(7);
    let mut b = tagged_sleeper(7);
    let mut c = tagged_sleeper(8);
    let mut untagged = sleeper();
    let line = |pid: u32, mib: u64, sm: u8| {
        format!("[[process]]\npid = {pid}\ngpu = 0\nused_mib = {mib}\nsm_util = {sm}\n")
    };
    s.write(
        "processes.toml",
        &[
            line(a.id(), 1024, 20),
            line(b.id(), 512, 15),
            line(c.id(), 4096, 10),
            line(untagged.id(), 256, 5),
        ]
        .concat(),
    );
    let doc = probe(s.agent());
    for round in 0..2 {
        let clients = &gpu(&doc, round, 0)["clients"];
        assert_eq!(
            clients,
            &serde_json::json!([
                {"allocation": 7, "util_pct": 35, "mem_used_mib": 1536},
                {"allocation": 8, "util_pct": 10, "mem_used_mib": 4096}
            ]),
            "round {round}"
        );
    }
    assert_eq!(
        gpu(&doc, 1, 1)["clients"],
        Value::Null,
        "the idle GPU has none"
    );
    for c in [&mut a, &mut b, &mut c, &mut untagged] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

const GI_1G_AT_0: &str = r#"{"placement": {"profile": "1g.10gb", "start": 0}, "compute_instances": [{"start": 0, "size": 1}]}"#;

#[test]
fn mig_changes_go_through_the_driver_and_a_released_instance_is_emptied_first() {
    let s = Scratch::new("mig");
    s.host(&HostFile::named("h").gpus("H100-80GB", 1));
    // MIG on and one instance, from a GPU with MIG off.
    let one = format!(
        r#"{{"0": {{"mig_enabled": true, "instances": [{GI_1G_AT_0}], "mps": null, "time_slice_replicas": 1}}}}"#
    );
    let (ok, lines) = plan(&s, s.agent(), &one);
    assert!(ok, "{lines:?}");
    let ops: Vec<&str> = lines[0]["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["op"].as_str().unwrap())
        .collect();
    assert_eq!(
        ops,
        [
            "enable_mig",
            "create_gpu_instance",
            "create_compute_instance"
        ]
    );
    // The GPU keeps its layout across processes, as hardware does.
    let doc = probe(s.agent());
    let devices = doc["gpus"][0]["mig_devices"].as_array().unwrap().clone();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0]["profile"], "1g.10gb");

    // A tenant's process runs in the instance.
    let mut work = sleeper();
    s.processes(&[(work.id(), 0, Some(0))]);
    let doc = probe(s.agent());
    assert_eq!(doc["gpus"][0]["sharing"]["instances"][0]["in_use"], true);

    // Asked to remove the instance while it is not released: refused, and
    // the process runs on.
    let none =
        r#"{"0": {"mig_enabled": true, "instances": [], "mps": null, "time_slice_replicas": 1}}"#;
    let (ok, lines) = plan(&s, s.agent(), none);
    assert!(!ok, "{lines:?}");
    assert!(work.try_wait().unwrap().is_none());

    // Released: stopped, then destroyed.
    let released = r#"{"0": {"mig_enabled": true, "instances": [], "mps": null, "time_slice_replicas": 1,
        "released": {"instances": [0], "whole_gpu": false}}}"#;
    let mut agent = s.agent();
    agent.args(["--stop-grace-seconds", "2"]);
    let (ok, lines) = plan(&s, agent, released);
    assert!(ok, "{lines:?}");
    assert!(
        exits_within(&mut work, 5),
        "the released instance's process still runs"
    );
    let doc = probe(s.agent());
    assert_eq!(doc["gpus"][0]["mig_devices"], serde_json::json!([]));
}

#[test]
fn a_gpu_lost_before_the_agent_first_read_it_does_not_hide_the_others() {
    let s = Scratch::new("lost");
    s.host(&l4().health_file("health.toml"));
    s.write("health.toml", "[[gpu]]\nindex = 1\nlost = true\n");
    let doc = probe(s.agent());
    let gpus = doc["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 1, "{doc}");
    assert_eq!(gpus[0]["index"], 0);
    assert_eq!(doc["rounds"][1]["gpus"].as_array().unwrap().len(), 1);
}

/// The fields of a probe the simulated backend and the fake must agree
/// on: everything but the load, which follows the clock.
fn comparable(doc: &Value) -> Value {
    let rounds: Vec<Value> = doc["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            r["gpus"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| {
                    serde_json::json!({
                        "uuid": g["uuid"],
                        "util_known": !g["util_pct"].is_null(),
                        "instances": g["instances"].as_array().unwrap().iter().map(|i| serde_json::json!({
                            "uuid": i["uuid"],
                            "util_known": !i["util_pct"].is_null(),
                            "mem_used_mib": i["mem_used_mib"],
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect()
        })
        .collect();
    // The host name is the machine's under NVML, the file's in the
    // simulation.
    serde_json::json!({
        "driver_version": doc["driver_version"],
        "gpus": doc["gpus"],
        "rounds": rounds,
    })
}

#[test]
fn the_simulator_answers_as_the_fake_library_does() {
    let hosts = [
        h100_mig(),
        a100_mig(),
        l4(),
        HostFile::named("mixed")
            .size(64, 512)
            .gpus("A30-24GB", 2)
            .mig(&["2g.12gb@0"])
            .gpus("H100-80GB", 2)
            .nvlink("[[0, 1]]"),
    ];
    let scenarios = [
        // MIG off and back to a whole GPU.
        r#"{"0": {"mig_enabled": false, "instances": [], "mps": null, "time_slice_replicas": 1}}"#.to_owned(),
        // A new layout.
        format!(r#"{{"0": {{"mig_enabled": true, "instances": [{GI_1G_AT_0}], "mps": null, "time_slice_replicas": 1}}}}"#),
        // Something the driver refuses: MIG on a GPU without it, or a
        // profile a model lacks.
        r#"{"0": {"mig_enabled": true, "instances": [{"placement": {"profile": "7g.80gb", "start": 0}, "compute_instances": [{"start": 0, "size": 7}]}], "mps": null, "time_slice_replicas": 1}}"#.to_owned(),
    ];
    for host in &hosts {
        let s = Scratch::new("agree");
        let host_file = s.host(host);
        let sim = || {
            let mut c = agent();
            c.args(["--backend", "sim", "--sim-host"])
                .arg(&host_file)
                .env("TESSERA_LOG", "error");
            c
        };
        let toml = host.toml();
        let name = toml.lines().next().unwrap();
        assert_eq!(
            comparable(&probe(sim())),
            comparable(&probe(s.agent())),
            "{name}: the probe differs"
        );
        for desired in &scenarios {
            let _ = std::fs::remove_file(s.0.join("state.json"));
            let (sim_ok, sim_lines) = plan(&s, sim(), desired);
            let (fake_ok, fake_lines) = plan(&s, s.agent(), desired);
            assert_eq!(
                sim_ok, fake_ok,
                "{name} {desired}: {sim_lines:?} vs {fake_lines:?}"
            );
            if sim_ok {
                assert_eq!(sim_lines, fake_lines, "{name} {desired}");
            } else {
                // Both refuse, each in its own words.
                for l in sim_lines.iter().chain(&fake_lines) {
                    assert!(l.get("error").is_some() || l.get("ops").is_some(), "{l}");
                }
            }
        }
    }
}

/// A process that sleeps, with `env` (and no inherited TESSERA_ALLOCATION).
fn sleeper_with(env: &[(&str, &str)]) -> Child {
    let mut c = Command::new("sleep");
    c.arg("300").env_remove("TESSERA_ALLOCATION");
    for (k, v) in env {
        c.env(k, v);
    }
    c.spawn().unwrap()
}

/// One line to the fake MPS control daemon of GPU `uuid`; its output.
fn mps(s: &Scratch, uuid: &str, line: &str) -> String {
    use std::io::Write;
    let mut child = Command::new(mps_control())
        .env("CUDA_MPS_PIPE_DIRECTORY", s.0.join("mps").join(uuid))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("{line}\n").as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{line}");
    String::from_utf8(out.stdout).unwrap()
}

/// The commands the fake MPS control daemon of GPU `uuid` was told that
/// start with `prefix`, in order.
fn told(s: &Scratch, uuid: &str, prefix: &str) -> Vec<String> {
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(s.0.join("mps").join(uuid).join("fake-mps.json")).unwrap(),
    )
    .unwrap();
    state["log"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().to_owned())
        .filter(|l| l.starts_with(prefix))
        .collect()
}

/// MPS as strong as MPS allows: the daemon's defaults are the smallest
/// grant (a client without its variables gets least); a client's variables
/// can only lower its server's limit, so the agent raises running servers to
/// the largest grant; clients that leave their variables out or name no
/// slice are reported. The control daemon is the fake, which keeps MPS's
/// documented rules.
#[test]
fn mps_servers_are_raised_to_the_largest_grant_and_stray_clients_are_reported() {
    let s = Scratch::new("mps");
    s.host(&l4());
    let uuid = probe(s.agent())["gpus"][0]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    let agent = || {
        let mut a = s.agent();
        a.arg("--mps-control")
            .arg(mps_control())
            .arg("--mps-pipe-root")
            .arg(s.0.join("mps"));
        a
    };
    let desired = r#"{"0": {"mig_enabled": false, "instances": [], "time_slice_replicas": 1,
        "mps": {"default_active_thread_percentage": 25, "default_pinned_mem_limit": 4096},
        "mps_clients": [
            {"allocation": 7, "active_thread_percentage": 25, "pinned_mem_limit": 4096},
            {"allocation": 8, "active_thread_percentage": 40, "pinned_mem_limit": 6144}]}}"#;
    let (ok, lines) = plan(&s, agent(), desired);
    assert!(ok, "{lines:?}");
    assert_eq!(lines[0]["ops"][0]["op"], "set_mps", "{lines:?}");
    assert_eq!(
        lines[0]["observed"]["mps_servers"],
        Value::Null,
        "no client yet"
    );

    // The 40 % slice's first process starts its server at the defaults: it
    // gets 25 %, whatever its variables say.
    let big = [
        ("TESSERA_ALLOCATION", "8"),
        ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "40"),
        ("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=6144M"),
    ];
    let mut first = sleeper_with(&big);
    mps(&s, &uuid, &format!("fake_connect {}", first.id()));
    let clients: Value = serde_json::from_str(&mps(&s, &uuid, "fake_clients")).unwrap();
    assert_eq!(clients[0]["pct"], 25, "{clients}");

    // The agent raises the running server to the largest grant.
    let (ok, lines) = plan(&s, agent(), desired);
    assert!(ok, "{lines:?}");
    assert_eq!(
        lines[0]["ops"],
        serde_json::json!([{"op": "set_mps_server_limits", "active_thread_percentage": 40, "pinned_mem_limit": 6144}])
    );
    let server = &lines[0]["observed"]["mps_servers"][0];
    assert_eq!(server["active_thread_percentage"], 40, "{server}");
    assert_eq!(server["pinned_mem_limit"], 6144, "{server}");
    let (ok, again) = plan(&s, agent(), desired);
    assert!(ok && again[0]["ops"] == serde_json::json!([]), "{again:?}");

    // Clients that connect now get their own share; one that leaves its
    // variables out gets the largest: reported, with the one that names a
    // slice the GPU does not hold.
    let mut second = sleeper_with(&big);
    let mut small = sleeper_with(&[
        ("TESSERA_ALLOCATION", "7"),
        ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "25"),
        ("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=4096M"),
    ]);
    let mut bare = sleeper_with(&[]);
    let mut stranger = sleeper_with(&[
        ("TESSERA_ALLOCATION", "99"),
        ("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "10"),
        ("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=1G"),
    ]);
    for c in [&second, &small, &bare, &stranger] {
        mps(&s, &uuid, &format!("fake_connect {}", c.id()));
    }
    let clients: Value = serde_json::from_str(&mps(&s, &uuid, "fake_clients")).unwrap();
    let got = |pid: u32| {
        clients
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["pid"] == pid)
            .map(|c| (c["pct"].as_u64().unwrap(), c["mem_mib"].as_u64().unwrap()))
            .unwrap()
    };
    assert_eq!(got(second.id()), (40, 6144));
    assert_eq!(got(small.id()), (25, 4096));
    assert_eq!(
        got(bare.id()),
        (40, 6144),
        "the gap MPS leaves: reported below"
    );

    let (ok, lines) = plan(&s, agent(), desired);
    assert!(ok, "{lines:?}");
    let strays = lines[0]["observed"]["mps_strays"]
        .as_array()
        .unwrap()
        .clone();
    let stray_pids: Vec<u64> = strays.iter().map(|s| s["pid"].as_u64().unwrap()).collect();
    assert_eq!(
        stray_pids,
        vec![u64::from(bare.id()), u64::from(stranger.id())],
        "{strays:?}"
    );
    assert!(strays[0]["problem"]
        .as_str()
        .unwrap()
        .contains("without TESSERA_ALLOCATION"));
    assert!(strays[1]["problem"]
        .as_str()
        .unwrap()
        .contains("names slice 99"));

    // What the daemon was told, in order.
    assert_eq!(
        told(&s, &uuid, "set_"),
        vec![
            "set_default_active_thread_percentage 25",
            "set_default_device_pinned_mem_limit 0 4096M",
            "set_active_thread_percentage 5000000 40",
            "set_device_pinned_mem_limit 5000000 0 6144M",
        ]
    );

    // Reported only: both strays still run.
    assert!(
        [&mut bare, &mut stranger]
            .into_iter()
            .all(|c| c.try_wait().unwrap().is_none()),
        "the report policy stops nothing"
    );

    // A pool that stops strays: their GPU work ends through the daemon
    // (`terminate_client <server> <client>`), then the processes; clients
    // that keep to their grant are untouched.
    let stopping = desired.replacen(
        r#""mig_enabled": false,"#,
        r#""mig_enabled": false, "mps_strays": "stop","#,
        1,
    );
    let (ok, lines) = plan(&s, agent(), &stopping);
    assert!(ok, "{lines:?}");
    let strays = lines[0]["observed"]["mps_strays"].as_array().unwrap();
    assert_eq!(strays.len(), 2, "{strays:?}");
    assert!(strays.iter().all(|s| s["stopped"] == true), "{strays:?}");
    assert!(exits_within(&mut bare, 5), "the bare client is stopped");
    assert!(exits_within(&mut stranger, 5), "the stranger is stopped");
    for c in [&mut first, &mut second, &mut small] {
        assert!(c.try_wait().unwrap().is_none(), "a keeping client runs on");
    }
    assert_eq!(
        told(&s, &uuid, "terminate_client"),
        vec![
            format!("terminate_client 5000000 {}", bare.id()),
            format!("terminate_client 5000000 {}", stranger.id()),
        ]
    );
    let clients: Value = serde_json::from_str(&mps(&s, &uuid, "fake_clients")).unwrap();
    assert_eq!(clients.as_array().unwrap().len(), 3, "{clients}");
    // Nothing left to stop on the next pass.
    let (ok, lines) = plan(&s, agent(), &stopping);
    assert!(ok, "{lines:?}");
    assert_eq!(lines[0]["observed"]["mps_strays"], Value::Null, "{lines:?}");

    for c in [&mut first, &mut second, &mut small] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}
