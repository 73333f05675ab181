//! `--sim-hosts-dir`: every `*.toml` in a folder is one simulated host.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Command;

fn dir(test: &str, hosts: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-agent-dir-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (file, hostname) in hosts {
        std::fs::write(
            dir.join(file),
            format!("hostname = \"{hostname}\"\ncpu_cores = 8\nmemory_gib = 64\n[[gpus]]\nmodel = \"L4\"\ncount = 1\n"),
        )
        .unwrap();
    }
    std::fs::write(dir.join("README.txt"), "not a host").unwrap();
    dir
}

fn agent(args: &[&str], hosts_dir: &PathBuf) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera-agent"))
        .args(args)
        .arg("--sim-hosts-dir")
        .arg(hosts_dir)
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn plan_reads_the_single_host_of_a_folder() {
    let d = dir("plan", &[("a.toml", "a")]);
    let desired = d.join("desired.json");
    std::fs::write(&desired, "{}").unwrap();
    let (ok, err) = agent(
        &[
            "plan",
            "--backend",
            "sim",
            "--desired",
            desired.to_str().unwrap(),
        ],
        &d,
    );
    assert!(ok, "{err}");
}

#[test]
fn a_folder_without_hosts_or_with_a_name_twice_is_refused() {
    let args = [
        "--server",
        "http://127.0.0.1:9",
        "--backend",
        "sim",
        "--once",
    ];
    let (ok, err) = agent(&args, &dir("empty", &[]));
    assert!(!ok);
    assert!(err.contains("no *.toml"), "{err}");

    let (ok, err) = agent(
        &args,
        &dir("twice", &[("a.toml", "same"), ("b.toml", "same")]),
    );
    assert!(!ok);
    assert!(err.contains("host name 'same' is already used"), "{err}");
}
