//! SIGTERM and Ctrl-C stop a running agent promptly with exit status 0.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::kit::{agent, HostFile, Scratch};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// An agent in its loop: the server is unreachable, so it retries enrolment
/// with backoff until stopped.
fn running_agent(dir: &Scratch) -> Child {
    let host = dir.host_file("h.toml", &HostFile::named("h").gpus("L4", 1));
    let child = agent()
        .args(["--server", "http://127.0.0.1:9", "--backend", "sim"])
        .arg("--sim-host")
        .arg(&host)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .args(["--join-token", "tsj_test"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Long enough to be past start-up and into the retry loop.
    std::thread::sleep(Duration::from_millis(700));
    child
}

fn stop_with(mut child: Child, signal: &str) {
    assert!(
        child.try_wait().unwrap().is_none(),
        "the agent exited by itself"
    );
    let sent = Instant::now();
    let kill = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{signal}: {status}");
            return;
        }
        if sent.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            panic!("{signal}: still running 5 s later");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_stops_the_agent_with_status_0() {
    let dir = Scratch::new("stop", "term");
    stop_with(running_agent(&dir), "-TERM");
}

#[test]
fn ctrl_c_stops_the_agent_with_status_0() {
    let dir = Scratch::new("stop", "int");
    stop_with(running_agent(&dir), "-INT");
}
