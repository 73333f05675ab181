//! `tessera-agent plan` end to end: a simulated host file, a desired-state file,
//! one JSON line per GPU, and a non-zero exit when a GPU cannot get there.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

fn write(name: &str, text: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-agent-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn host(test: &str) -> std::path::PathBuf {
    write(
        &format!("{test}-host.toml"),
        "hostname = \"h\"\ncpu_cores = 8\nmemory_gib = 64\n[[gpus]]\nmodel = \"A100-SXM4-40GB\"\ncount = 2\nmig_enabled = true\n",
    )
}

fn run(test: &str, desired: &str) -> (bool, Vec<serde_json::Value>) {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera-agent"))
        .args(["plan", "--backend", "sim", "--sim-host"])
        .arg(host(test))
        .arg("--desired")
        .arg(write(&format!("{test}-desired.json"), desired))
        .output()
        .unwrap();
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out.status.success(), lines)
}

const GI_3G_AT_4: &str = r#"{"placement": {"profile": "3g.20gb", "start": 4}, "compute_instances": [{"start": 0, "size": 3}]}"#;

#[test]
fn prints_the_operations_per_gpu() {
    let (ok, lines) = run(
        "ops",
        &format!(
            r#"{{"1": {{"mig_enabled": true, "instances": [{GI_3G_AT_4}], "mps": null, "time_slice_replicas": 1}}}}"#
        ),
    );
    assert!(ok);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["gpu"], 1);
    let ops: Vec<&str> = lines[0]["ops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["op"].as_str().unwrap())
        .collect();
    assert_eq!(ops, ["create_gpu_instance", "create_compute_instance"]);
    assert_eq!(
        lines[0]["observed"]["instances"][0]["placement"]["start"],
        4
    );
}

#[test]
fn refuses_what_the_driver_would_refuse() {
    // 3g.20gb cannot start at slice 2 on an A100-40GB.
    let bad = GI_3G_AT_4.replace("\"start\": 4", "\"start\": 2");
    let (ok, lines) = run(
        "refused",
        &format!(
            r#"{{"0": {{"mig_enabled": true, "instances": [{bad}], "mps": null, "time_slice_replicas": 1}}, "7": {{"mig_enabled": false, "instances": [], "mps": null, "time_slice_replicas": 1}}}}"#
        ),
    );
    assert!(!ok);
    assert!(
        lines[0]["error"]
            .as_str()
            .unwrap()
            .contains("allowed starts are [0, 4]"),
        "{}",
        lines[0]
    );
    assert!(
        lines[1]["error"].as_str().unwrap().contains("no GPU 7"),
        "{}",
        lines[1]
    );
}
