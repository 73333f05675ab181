//! The join token reaches the server from the environment or from a file, so
//! scripts need not put it on the command line (visible in `ps`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::kit::{agent, HostFile, Scratch};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A server that refuses every enrolment, and reports each request body it got.
fn refusing_server() -> (String, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let _ = tx.send(String::from_utf8_lossy(&body).into_owned());
            let answer = r#"{"code":"invalid_join_token","message":"refused by the test"}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    (url, rx)
}

fn workdir(test: &str) -> Scratch {
    let dir = Scratch::new("token", test);
    dir.host_file("h.toml", &HostFile::named("h").gpus("L4", 1));
    dir
}

/// Runs the agent once against `url` with `args` and `env`, and waits for it.
fn run_agent(dir: &Scratch, url: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = agent();
    cmd.args(["--server", url, "--backend", "sim", "--once"])
        .arg("--sim-host")
        .arg(dir.join("h.toml"))
        .arg("--state-dir")
        .arg(dir.join("state"))
        .args(args)
        .env_remove("TESSERA_JOIN_TOKEN")
        .env_remove("TESSERA_JOIN_TOKEN_FILE")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.wait_with_output().unwrap()
}

fn enrolled_with(rx: &mpsc::Receiver<String>) -> serde_json::Value {
    let body = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    serde_json::from_str(&body).unwrap()
}

#[test]
fn the_join_token_comes_from_the_environment() {
    let (url, rx) = refusing_server();
    let dir = workdir("env");
    let out = run_agent(&dir, &url, &[], &[("TESSERA_JOIN_TOKEN", "tsj_from_env")]);
    let body = enrolled_with(&rx);
    assert_eq!(body["join_token"], "tsj_from_env");
    assert_eq!(body["hostname"], "h");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("refused by the test"), "{stderr}");
}

#[test]
fn the_join_token_comes_from_a_file() {
    let (url, rx) = refusing_server();
    let dir = workdir("file");
    let file = dir.write("token", "tsj_from_file\n");
    let out = run_agent(
        &dir,
        &url,
        &["--join-token-file", file.to_str().unwrap()],
        &[],
    );
    assert_eq!(enrolled_with(&rx)["join_token"], "tsj_from_file");
    assert!(!out.status.success());
    // The environment variable names the file just as well.
    let out = run_agent(
        &dir,
        &url,
        &[],
        &[("TESSERA_JOIN_TOKEN_FILE", file.to_str().unwrap())],
    );
    assert_eq!(enrolled_with(&rx)["join_token"], "tsj_from_file");
    assert!(!out.status.success());
}

#[test]
fn a_bad_token_file_or_two_sources_stop_before_contacting_the_server() {
    let (url, rx) = refusing_server();
    let dir = workdir("bad");
    let empty = dir.write("empty", "\n");
    let out = run_agent(
        &dir,
        &url,
        &["--join-token-file", empty.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("the file is empty"), "{stderr}");
    let out = run_agent(
        &dir,
        &url,
        &["--join-token-file", empty.to_str().unwrap()],
        &[("TESSERA_JOIN_TOKEN", "tsj_x")],
    );
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    assert!(rx.try_recv().is_err(), "nothing was sent");
}
