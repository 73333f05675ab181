//! `tessera-agent plan` end to end: a simulated host file, a desired-state file,
//! one JSON line per GPU, and a non-zero exit when a GPU cannot get there.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::kit::{agent, HostFile, Scratch};

fn run(test: &str, desired: &str) -> (bool, Vec<serde_json::Value>) {
    let s = Scratch::new("plan", test);
    let host = HostFile::named("h").gpus("A100-SXM4-40GB", 2).mig(&[]);
    let out = agent()
        .args(["plan", "--backend", "sim", "--sim-host"])
        .arg(s.host_file("host.toml", &host))
        .arg("--desired")
        .arg(s.write("desired.json", desired))
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
