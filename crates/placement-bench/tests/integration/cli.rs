//! The binary end to end: bad input names file, line and column and exits
//! non-zero; good input gives one JSON object.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_placement-bench"))
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("placement-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn data(name: &str) -> String {
    format!("{}/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn run_files(fleet: &Path, requests: &str) -> (bool, String) {
    let out = bin()
        .args(["--fleet", fleet.to_str().unwrap(), "--requests", requests])
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn negative_quantity_names_file_line_and_column() {
    let fleet = temp_file(
        "neg.csv",
        "sn,cpu_milli,memory_mib,gpu,model\nh1,1000,1024,1,T4\nh2,-5,1024,1,T4\n",
    );
    let (ok, stderr) = run_files(&fleet, &data("requests.csv"));
    assert!(!ok);
    assert!(
        stderr.contains("neg.csv:3: column cpu_milli: negative quantity -5"),
        "{stderr}"
    );
}

#[test]
fn non_numeric_value_names_file_line_and_column() {
    let requests = temp_file(
        "nan.csv",
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\np,1000,1024,one,500,\n",
    );
    let fleet = PathBuf::from(data("fleet.csv"));
    let (ok, stderr) = run_files(&fleet, requests.to_str().unwrap());
    assert!(!ok);
    assert!(
        stderr.contains("nan.csv:2: column num_gpu: not a number"),
        "{stderr}"
    );
}

#[test]
fn missing_column_and_missing_file_are_reported() {
    let fleet = temp_file("nocol.csv", "sn,cpu_milli,gpu,model\nh,1000,1,T4\n");
    let (ok, stderr) = run_files(&fleet, &data("requests.csv"));
    assert!(!ok);
    assert!(
        stderr.contains("nocol.csv:1: column memory_mib: missing column"),
        "{stderr}"
    );
    let (ok, stderr) = run_files(
        &PathBuf::from("/nonexistent/fleet.csv"),
        &data("requests.csv"),
    );
    assert!(!ok);
    assert!(stderr.contains("/nonexistent/fleet.csv"), "{stderr}");
}

#[test]
fn sample_data_gives_one_json_object() {
    let out = bin()
        .args([
            "--fleet",
            &data("fleet.csv"),
            "--requests",
            &data("requests.csv"),
        ])
        .args(["--seeds", "2", "--policy", "pack", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for key in [
        "policy",
        "seeds",
        "gpu_allocation_ratio",
        "allocated_gpu_milli",
        "total_gpu_milli",
        "failed",
        "fragmentation",
        "placements_per_s",
        "decision_us_p50",
        "decision_us_p99",
    ] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["seeds"], 2);
    let ratio = v["gpu_allocation_ratio"].as_f64().unwrap();
    assert!(ratio > 0.5 && ratio <= 1.0, "{ratio}");
}

#[test]
fn synthetic_runs_are_reproducible_and_bad_usage_exits_2() {
    let run = || {
        let out = bin()
            .args(["--synthetic", "30", "--policy", "random", "--json"])
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (v["allocated_gpu_milli"].clone(), v["failed"].clone())
    };
    assert_eq!(run(), run());
    let out = bin()
        .args(["--synthetic", "3", "--policy", "worst-fit"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
