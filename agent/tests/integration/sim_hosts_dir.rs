//! `--sim-hosts-dir`: every `*.toml` in a folder is one simulated host.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::kit::{self, HostFile, Scratch};

fn dir(test: &str, hosts: &[(&str, &str)]) -> Scratch {
    let dir = Scratch::new("dir", test);
    for (file, hostname) in hosts {
        dir.host_file(file, &HostFile::named(hostname).gpus("L4", 1));
    }
    dir.write("README.txt", "not a host");
    dir
}

fn agent(args: &[&str], hosts_dir: &Scratch) -> (bool, String) {
    let out = kit::agent()
        .args(args)
        .arg("--sim-hosts-dir")
        .arg(hosts_dir.path())
        .output()
        .unwrap();
    (out.status.success(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn plan_reads_the_single_host_of_a_folder() {
    let d = dir("plan", &[("a.toml", "a")]);
    let desired = d.write("desired.json", "{}");
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
