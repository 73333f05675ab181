//! The apply step against the simulated driver, and the whole loop against a
//! small fake server (plain threads and sockets, no server crate).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::backend::sim::{Fault, FaultAction, SimBackend, SimHost};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Condvar, Mutex};
use std::time::Instant;
use tessera_core::mig::MigPlacement;
use tessera_core::plan::{ComputeInstance, DesiredInstance, GpuDesired};
use tessera_protocol::agent::{GpuDesiredEntry, ReportAck};
use tessera_sim_host::{sim_uuid, SimGpus};

fn sim(hostname: &str, faults: Vec<Fault>) -> SimBackend {
    SimBackend::new(SimHost {
        hostname: hostname.into(),
        cpu_cores: 16,
        memory_gib: 128,
        driver_version: "test".into(),
        faults,
        health_file: None,
        workload: Default::default(),
        gpus: vec![SimGpus {
            model: "H100-80GB".into(),
            count: 2,
            memory_gib: None,
            mig_enabled: false,
            nvlink_groups: vec![],
            instances: vec![],
        }],
    })
    .unwrap()
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

fn desired(hostname: &str, generation: i64, gpus: Vec<(u32, GpuDesired)>) -> DesiredState {
    DesiredState {
        generation,
        gpus: gpus
            .into_iter()
            .map(|(index, desired)| GpuDesiredEntry {
                slices: 0,
                index,
                uuid: sim_uuid(hostname, index),
                desired,
            })
            .collect(),
    }
}

#[test]
fn apply_desired_creates_the_wanted_instances_and_then_does_nothing() {
    let b = sim("h", vec![]);
    let want = desired("h", 1, vec![(0, mig_layout())]);
    let first = apply_desired(&b, &b.inventory().unwrap(), &want);
    assert!(first.errors.is_empty(), "{:?}", first.errors);
    assert_eq!(
        first.ops,
        1 + 3 * 2,
        "enable MIG, then 3 GIs with a CI each"
    );
    let inv = b.inventory().unwrap();
    assert_eq!(inv.gpus[0].mig_devices.len(), 3);
    assert!(inv.gpus[0]
        .mig_devices
        .iter()
        .all(|d| d.uuid.starts_with("MIG-")));
    assert!(!inv.gpus[1].mig_enabled, "GPUs not listed are left alone");

    let again = apply_desired(&b, &inv, &want);
    assert_eq!(again, Applied::default());
    assert_eq!(b.inventory().unwrap(), inv);
}

#[test]
fn apply_desired_refuses_a_gpu_whose_uuid_does_not_match() {
    let b = sim("h", vec![]);
    let mut want = desired("h", 1, vec![(0, mig_layout()), (1, mig_layout())]);
    want.gpus[0].uuid = sim_uuid("another-host", 0);
    want.gpus.push(GpuDesiredEntry {
        slices: 0,
        index: 7,
        uuid: sim_uuid("h", 7),
        desired: mig_layout(),
    });
    let out = apply_desired(&b, &b.inventory().unwrap(), &want);
    assert_eq!(out.errors.len(), 2, "{:?}", out.errors);
    assert_eq!(out.errors[0].index, 0);
    assert!(
        out.errors[0].message.contains(&sim_uuid("h", 0)),
        "{}",
        out.errors[0].message
    );
    assert_eq!(out.errors[1].index, 7);
    assert!(out.errors[1].message.contains("no GPU 7"));
    assert!(
        !b.observe(0).unwrap().mig_enabled,
        "the mismatched GPU is untouched"
    );
    assert_eq!(
        b.observe(1).unwrap().instances.len(),
        3,
        "the others still apply"
    );
}

#[test]
fn apply_desired_reports_a_driver_fault_by_operation_and_retries_clean() {
    let b = sim(
        "h",
        vec![Fault {
            op: "create_gpu_instance".into(),
            gpu: Some(1),
            action: FaultAction::Fail,
            hang_ms: 0,
            times: Some(1),
        }],
    );
    let want = desired("h", 3, vec![(0, mig_layout()), (1, mig_layout())]);
    let out = apply_desired(&b, &b.inventory().unwrap(), &want);
    assert_eq!(out.errors.len(), 1, "{:?}", out.errors);
    assert_eq!(out.errors[0].index, 1);
    assert!(
        out.errors[0].message.contains("create_gpu_instance"),
        "{}",
        out.errors[0].message
    );
    assert_eq!(out.ops, 7 + 1, "GPU 0 in full, then MIG on for GPU 1");
    // The fault fired once: the next pass finishes the job.
    let again = apply_desired(&b, &b.inventory().unwrap(), &want);
    assert!(again.errors.is_empty(), "{:?}", again.errors);
    assert_eq!(again.ops, 6);
}

#[test]
fn apply_desired_reports_an_impossible_layout() {
    let b = sim("h", vec![]);
    let overlapping = GpuDesired {
        mig_enabled: true,
        instances: vec![instance("4g.40gb", 0, 4), instance("3g.40gb", 0, 3)],
        ..GpuDesired::default()
    };
    let out = apply_desired(
        &b,
        &b.inventory().unwrap(),
        &desired("h", 1, vec![(0, overlapping)]),
    );
    assert_eq!(out.errors.len(), 1);
    assert!(
        out.errors[0].message.contains("cannot plan"),
        "{}",
        out.errors[0].message
    );
    assert_eq!(out.ops, 0);
}

// ---- The loop against a fake server ----

/// A fake Tessera: `/desired` long polls on `desired` (404 when `None`),
/// `/report` records the report.
#[derive(Default)]
struct Fake {
    state: Mutex<FakeState>,
    changed: Condvar,
}

#[derive(Default)]
struct FakeState {
    desired: Option<DesiredState>,
    /// Status for `/desired` instead of answering (e.g. 401).
    desired_status: Option<u16>,
    reports: Vec<HostReport>,
    polls: Vec<(Option<i64>, u64)>,
    /// `next_report_in_s` of every ack (1 when 0).
    interval_s: u64,
    /// `heartbeat_s` of every ack.
    heartbeat_s: u64,
    /// Whether a poll naming the last ack's digest stands for the report
    /// (acks name their report `r<n>` either way).
    note_polled: bool,
    /// The digest each poll named.
    polled_digests: Vec<Option<String>>,
}

impl Fake {
    fn start(state: FakeState) -> (Arc<Fake>, String) {
        let fake = Arc::new(Fake {
            state: Mutex::new(state),
            changed: Condvar::new(),
        });
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = Arc::clone(&fake);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let server = Arc::clone(&server);
                std::thread::spawn(move || server.serve(conn));
            }
        });
        (fake, url)
    }

    fn set_desired(&self, d: DesiredState) {
        self.state.lock().unwrap().desired = Some(d);
        self.changed.notify_all();
    }

    fn reports(&self) -> Vec<HostReport> {
        self.state.lock().unwrap().reports.clone()
    }

    /// Serves requests on one keep-alive connection.
    fn serve(&self, conn: TcpStream) {
        let mut reader = BufReader::new(conn.try_clone().unwrap());
        let mut conn = conn;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let target = line.split_whitespace().nth(1).unwrap_or("").to_owned();
            let mut length = 0;
            let mut auth = String::new();
            let mut digest = None;
            loop {
                let mut h = String::new();
                reader.read_line(&mut h).unwrap();
                let h = h.trim_end();
                if h.is_empty() {
                    break;
                }
                let (name, value) = h.split_once(':').unwrap();
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => length = value.trim().parse().unwrap(),
                    "authorization" => auth = value.trim().to_owned(),
                    "tessera-report-digest" => digest = Some(value.trim().to_owned()),
                    _ => {}
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let (status, answer) = if auth != "Bearer secret" {
                (
                    401,
                    r#"{"code":"invalid_credential","message":"no"}"#.to_owned(),
                )
            } else {
                self.route(&target, &body)
            };
            let noted = self.note(&target, digest);
            let reason = if status == 200 { "OK" } else { "Error" };
            let head = format!(
                "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n{noted}content-length: {}\r\n\r\n",
                answer.len()
            );
            if conn.write_all(head.as_bytes()).is_err()
                || conn.write_all(answer.as_bytes()).is_err()
            {
                return;
            }
        }
    }

    /// The `tessera-report` header line of a poll that named `digest`.
    fn note(&self, target: &str, digest: Option<String>) -> &'static str {
        if !target.starts_with("/api/agent/v1/desired") {
            return "";
        }
        let mut state = self.state.lock().unwrap();
        let last = format!("r{}", state.reports.len());
        let answer = match &digest {
            None => "",
            Some(d) if state.note_polled && *d == last => "tessera-report: noted\r\n",
            Some(_) => "tessera-report: wanted\r\n",
        };
        state.polled_digests.push(digest);
        answer
    }

    fn route(&self, target: &str, body: &[u8]) -> (u16, String) {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let param = |name: &str| {
            query
                .split('&')
                .filter_map(|kv| kv.split_once('='))
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_owned())
        };
        match path {
            "/api/agent/v1/report" => {
                let report: HostReport = serde_json::from_slice(body).unwrap();
                let mut state = self.state.lock().unwrap();
                state.reports.push(report);
                self.changed.notify_all();
                let ack = ReportAck {
                    next_report_in_s: state.interval_s.max(1),
                    heartbeat_s: state.heartbeat_s,
                    digest: Some(format!("r{}", state.reports.len())),
                };
                (200, serde_json::to_string(&ack).unwrap())
            }
            "/api/agent/v1/desired" => {
                let after: Option<i64> = param("after").map(|a| a.parse().unwrap());
                let wait_s: u64 = param("wait_s").unwrap().parse().unwrap();
                let mut state = self.state.lock().unwrap();
                state.polls.push((after, wait_s));
                if let Some(status) = state.desired_status {
                    return (status, r#"{"code":"refused","message":"no"}"#.to_owned());
                }
                let deadline = Instant::now() + Duration::from_secs(wait_s);
                loop {
                    let Some(d) = &state.desired else {
                        return (404, String::new());
                    };
                    let now = Instant::now();
                    if Some(d.generation) != after || now >= deadline {
                        return (200, serde_json::to_string(d).unwrap());
                    }
                    state = self.changed.wait_timeout(state, deadline - now).unwrap().0;
                }
            }
            _ => (404, String::new()),
        }
    }
}

fn agent(url: &str, backend: Arc<SimBackend>, once: bool, test: &str) -> HostAgent {
    let dir =
        std::env::temp_dir().join(format!("tessera-agent-loop-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let credential_path = dir.join("h.credential");
    std::fs::write(&credential_path, "secret\n").unwrap();
    HostAgent {
        hostname: tessera_core::checked::Hostname::parse(&backend.hostname()).unwrap(),
        backend,
        client: ServerClient::new(url, &tessera_trust::Trust::system()).unwrap(),
        credential_path,
        join_token: None,
        once,
        telemetry: None,
    }
}

/// Waits (up to 10 s) for a report that `pred` accepts; returns it.
fn wait_for_report(fake: &Fake, pred: impl Fn(&HostReport) -> bool) -> HostReport {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut state = fake.state.lock().unwrap();
    loop {
        if let Some(r) = state.reports.iter().find(|r| pred(r)) {
            return r.clone();
        }
        let now = Instant::now();
        assert!(now < deadline, "no such report; got {:?}", state.reports);
        state = fake.changed.wait_timeout(state, deadline - now).unwrap().0;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn once_fetches_applies_and_reports() {
    let (fake, url) = Fake::start(FakeState {
        desired: Some(desired("h", 4, vec![(1, mig_layout())])),
        ..FakeState::default()
    });
    let backend = Arc::new(sim("h", vec![]));
    agent(&url, Arc::clone(&backend), true, "once")
        .run()
        .await
        .unwrap();
    let reports = fake.reports();
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].applied_generation, Some(4));
    assert!(reports[0].errors.is_empty());
    assert_eq!(
        reports[0].gpus[1].mig_devices.len(),
        3,
        "reported after applying"
    );
    assert!(reports[0].gpus[0].mig_devices.is_empty());
    assert_eq!(fake.state.lock().unwrap().polls, vec![(None, 0)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_generation_is_applied_and_reported_within_a_second() {
    let (fake, url) = Fake::start(FakeState {
        desired: Some(desired("h", 1, vec![(0, mig_layout())])),
        // Polls are held 10 s: a quick answer can only come from the change.
        interval_s: 10,
        ..FakeState::default()
    });
    let backend = Arc::new(sim("h", vec![]));
    let task = tokio::spawn(agent(&url, Arc::clone(&backend), false, "gen").run());
    let first = tokio::task::spawn_blocking({
        let fake = Arc::clone(&fake);
        move || wait_for_report(&fake, |r| r.applied_generation == Some(1))
    })
    .await
    .unwrap();
    assert_eq!(first.gpus[0].mig_devices.len(), 3);
    // Let the agent get into its long poll.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let bumped = Instant::now();
    fake.set_desired(desired("h", 2, vec![(0, GpuDesired::default())]));
    let second = tokio::task::spawn_blocking({
        let fake = Arc::clone(&fake);
        move || wait_for_report(&fake, |r| r.applied_generation == Some(2))
    })
    .await
    .unwrap();
    assert!(
        bumped.elapsed() < Duration::from_millis(1500),
        "{:?}",
        bumped.elapsed()
    );
    assert!(!second.gpus[0].mig_enabled && second.gpus[0].mig_devices.is_empty());
    // The agent goes straight back to polling, with the new generation.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let polls = fake.state.lock().unwrap().polls.clone();
    assert_eq!(
        polls,
        vec![(None, 5), (Some(1), 10), (Some(2), 10)],
        "first poll: no generation yet, default interval; then the server's"
    );
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_changes_it_still_reports_every_interval() {
    let (fake, url) = Fake::start(FakeState {
        desired: Some(desired("h", 1, vec![(0, mig_layout())])),
        interval_s: 1,
        ..FakeState::default()
    });
    let backend = Arc::new(sim("h", vec![]));
    let task = tokio::spawn(agent(&url, Arc::clone(&backend), false, "interval").run());
    tokio::time::sleep(Duration::from_millis(3500)).await;
    task.abort();
    let reports = fake.reports();
    // One at once, then one per held poll of 1 s.
    assert!(
        (3..=5).contains(&reports.len()),
        "{} reports in 3.5 s",
        reports.len()
    );
    assert!(reports
        .iter()
        .all(|r| r.applied_generation == Some(1) && r.errors.is_empty()));
    // Each poll after a report named it; this server wanted them all.
    let polled = fake.state.lock().unwrap().polled_digests.clone();
    assert_eq!(polled[0], None, "nothing reported before the first poll");
    assert_eq!(polled[1].as_deref(), Some("r1"));
    assert_eq!(polled[2].as_deref(), Some("r2"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_the_server_noted_stands_for_an_unchanged_report() {
    let (fake, url) = Fake::start(FakeState {
        desired: Some(desired("h", 1, vec![(0, mig_layout())])),
        interval_s: 1,
        note_polled: true,
        ..FakeState::default()
    });
    let backend = Arc::new(sim("h", vec![]));
    let task = tokio::spawn(agent(&url, Arc::clone(&backend), false, "noted").run());
    tokio::time::sleep(Duration::from_millis(3500)).await;
    {
        let state = fake.state.lock().unwrap();
        assert_eq!(state.reports.len(), 1, "only the first report is sent");
        assert!(state.polls.len() >= 3, "{:?}", state.polls);
        assert!(
            state.polled_digests[1..]
                .iter()
                .all(|d| d.as_deref() == Some("r1")),
            "{:?}",
            state.polled_digests
        );
    }
    // A report that changed is sent, although the poll was noted.
    fake.set_desired(desired("h", 2, vec![(0, GpuDesired::default())]));
    let second = tokio::task::spawn_blocking({
        let fake = Arc::clone(&fake);
        move || wait_for_report(&fake, |r| r.applied_generation == Some(2))
    })
    .await
    .unwrap();
    assert!(second.gpus[0].mig_devices.is_empty());
    tokio::time::sleep(Duration::from_millis(2500)).await;
    task.abort();
    let state = fake.state.lock().unwrap();
    assert_eq!(state.reports.len(), 2, "then quiet again");
    assert_eq!(
        state.polled_digests.last().unwrap().as_deref(),
        Some("r2"),
        "later polls name the new report"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_poll_is_held_for_the_heartbeat_and_a_change_drops_it() {
    // Observed every second, heartbeat every 30 s.
    let (fake, url) = Fake::start(FakeState {
        desired: Some(desired("h", 1, vec![(0, mig_layout())])),
        interval_s: 1,
        heartbeat_s: 30,
        note_polled: true,
        ..FakeState::default()
    });
    let dir = std::env::temp_dir().join(format!("tessera-agent-heartbeat-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _ = std::fs::remove_file(dir.join("faults.toml"));
    let host_file = dir.join("h.toml");
    std::fs::write(
        &host_file,
        "hostname = \"h\"\ncpu_cores = 16\nmemory_gib = 128\nhealth_file = \"faults.toml\"\n\
         [[gpus]]\nmodel = \"H100-80GB\"\ncount = 2\n",
    )
    .unwrap();
    let backend = Arc::new(SimBackend::from_file(&host_file).unwrap());
    let task = tokio::spawn(agent(&url, Arc::clone(&backend), false, "heartbeat").run());
    tokio::task::spawn_blocking({
        let fake = Arc::clone(&fake);
        move || wait_for_report(&fake, |r| r.applied_generation == Some(1))
    })
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    {
        let state = fake.state.lock().unwrap();
        assert_eq!(state.reports.len(), 1, "nothing changed, nothing sent");
        // The first poll at once, then one held for the heartbeat (not one
        // a second, though the host is observed that often).
        assert_eq!(state.polls, vec![(None, 5), (Some(1), 30)]);
    }
    // A GPU throws an Xid while the poll is held: reported within about
    // the observation interval, not the heartbeat.
    let faulted = Instant::now();
    std::fs::write(
        dir.join("faults.toml"),
        "[[gpu]]\nindex = 1\nxids = [{ xid = 79, count = 1 }]\n",
    )
    .unwrap();
    let report = tokio::task::spawn_blocking({
        let fake = Arc::clone(&fake);
        move || wait_for_report(&fake, |r| !r.gpus[1].health.xids.is_empty())
    })
    .await
    .unwrap();
    let took = faulted.elapsed();
    assert!(took < Duration::from_secs(5), "reported after {took:?}");
    assert_eq!(report.applied_generation, Some(1));
    // Then the next poll is held again (the dropped one is still the
    // third: the fake answers, and records digests, only when it ends).
    tokio::time::sleep(Duration::from_millis(300)).await;
    task.abort();
    let state = fake.state.lock().unwrap();
    assert_eq!(state.reports.len(), 2);
    assert_eq!(
        state.polls,
        vec![(None, 5), (Some(1), 30), (Some(1), 30)],
        "one poll dropped for the report, then a new one"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_desired_state_is_retried_not_reported_to_only() {
    // Every Tessera server has the endpoint: a 404 is a fault (a proxy, a
    // wrong URL), retried with backoff; `--once` does not end on it.
    let (fake, url) = Fake::start(FakeState::default());
    let backend = Arc::new(sim("h", vec![]));
    let run = agent(&url, backend, true, "no-desired").run();
    assert!(
        tokio::time::timeout(Duration::from_millis(1200), run)
            .await
            .is_err(),
        "--once ended without a desired state"
    );
    let state = fake.state.lock().unwrap();
    assert!(state.polls.len() >= 2, "{:?}", state.polls);
    assert!(state.reports.iter().all(|r| r.applied_generation.is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_credential_on_desired_stops_the_agent() {
    let (fake, url) = Fake::start(FakeState {
        desired_status: Some(401),
        ..FakeState::default()
    });
    let backend = Arc::new(sim("h", vec![]));
    let err = agent(&url, backend, false, "refused")
        .run()
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            AgentError::Refused(ClientError::Refused { status: 401, .. })
        ),
        "{err}"
    );
    assert!(fake.reports().is_empty());
}

/// Retries wait between half the backoff and all of it, the backoff
/// doubling up to its ceiling, and hosts failing together spread out.
#[test]
fn retries_back_off_with_jitter() {
    let mut backoff = FIRST_BACKOFF;
    let mut ceiling = FIRST_BACKOFF;
    for _ in 0..10 {
        let wait = next_backoff(&mut backoff);
        assert!(
            wait >= ceiling / 2 && wait <= ceiling,
            "{wait:?} of {ceiling:?}"
        );
        ceiling = (ceiling * 2).min(MAX_BACKOFF);
        assert_eq!(backoff, ceiling);
    }
    assert_eq!(backoff, MAX_BACKOFF);
    let waits: std::collections::BTreeSet<Duration> = (0..50)
        .map(|_| next_backoff(&mut MAX_BACKOFF.clone()))
        .collect();
    assert!(
        waits.len() > 40,
        "50 hosts at once wait {} distinct times",
        waits.len()
    );
}
