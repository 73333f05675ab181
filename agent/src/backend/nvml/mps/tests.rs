#![allow(clippy::unwrap_used)]
use super::*;
use std::sync::{Arc, Mutex};

/// Records commands and answers as a daemon would: running after `-d`,
/// gone after `quit`, echoing the last percentage set.
#[derive(Default, Clone)]
pub(crate) struct Recorder {
    pub log: Arc<Mutex<Vec<CommandSpec>>>,
    state: Arc<Mutex<Option<String>>>,
}

impl Recorder {
    pub(crate) fn lines(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .map(|c| {
                let mut s = c.args.join(" ");
                if let Some(stdin) = &c.stdin {
                    s.push_str(stdin);
                }
                s
            })
            .collect()
    }
}

impl CommandRunner for Recorder {
    fn run(&self, cmd: &CommandSpec) -> std::io::Result<CommandOutput> {
        self.log.lock().unwrap().push(cmd.clone());
        let mut state = self.state.lock().unwrap();
        let ok = |stdout: &str| CommandOutput {
            success: true,
            stdout: stdout.to_owned(),
            stderr: String::new(),
        };
        let gone = CommandOutput {
            success: false,
            stdout: String::new(),
            stderr: "Cannot find MPS control daemon process".into(),
        };
        if cmd.args == ["-d"] {
            *state = Some("100.0".into());
            return Ok(ok(""));
        }
        let line = cmd.stdin.clone().unwrap_or_default();
        Ok(
            match (
                state.as_mut(),
                line.split_whitespace().collect::<Vec<_>>().as_slice(),
            ) {
                (None, _) => gone,
                (Some(p), ["get_default_active_thread_percentage"]) => ok(&format!("{p}\n")),
                (Some(p), ["set_default_active_thread_percentage", n]) => {
                    *p = format!("{n}.0");
                    ok("")
                }
                (Some(_), ["quit"]) => {
                    *state = None;
                    ok("")
                }
                (Some(_), _) => ok(""),
            },
        )
    }
}

pub(crate) fn temp_root(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "tessera-{name}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn control(rec: &Recorder, root: &Path) -> MpsControl {
    let mut c = MpsControl::new(Box::new(rec.clone()), root.join("run"), root.join("log"));
    c.start_tries = 1;
    c
}

const UUID: &str = "GPU-0000-test";

#[test]
fn starts_configures_and_stops_one_daemon_per_gpu() {
    let root = temp_root("mps-seq");
    let rec = Recorder::default();
    let mps = control(&rec, &root);
    assert_eq!(mps.observe(UUID).unwrap(), None);
    assert!(rec.lines().is_empty(), "no pipe dir, no command");

    let settings = MpsSettings {
        default_active_thread_percentage: 25,
        default_pinned_mem_limit: Some(MemMiB(8192)),
    };
    mps.apply(UUID, 81559, Some(settings)).unwrap();
    assert_eq!(
        rec.lines(),
        vec![
            "-d",
            "get_default_active_thread_percentage",
            "set_default_active_thread_percentage 25",
            "set_default_device_pinned_mem_limit 0 8192M",
        ]
    );
    let all = rec.log.lock().unwrap().clone();
    for c in &all {
        assert_eq!(c.program, "nvidia-cuda-mps-control");
        let env: std::collections::BTreeMap<_, _> = c.env.iter().cloned().collect();
        assert_eq!(env["CUDA_VISIBLE_DEVICES"], UUID);
        assert_eq!(
            Path::new(&env["CUDA_MPS_PIPE_DIRECTORY"]),
            root.join("run").join(UUID)
        );
        assert_eq!(
            Path::new(&env["CUDA_MPS_LOG_DIRECTORY"]),
            root.join("log").join(UUID)
        );
    }
    assert!(all[0].daemon && !all[1].daemon);
    assert!(root.join("run").join(UUID).is_dir() && root.join("log").join(UUID).is_dir());
    assert_eq!(mps.observe(UUID).unwrap(), Some(settings));

    // Reconfigure: no second daemon; dropping the limit sets the whole GPU.
    rec.log.lock().unwrap().clear();
    let relaxed = MpsSettings {
        default_active_thread_percentage: 50,
        default_pinned_mem_limit: None,
    };
    mps.apply(UUID, 81559, Some(relaxed)).unwrap();
    assert_eq!(
        rec.lines(),
        vec![
            "get_default_active_thread_percentage",
            "set_default_active_thread_percentage 50",
            "set_default_device_pinned_mem_limit 0 81559M",
        ]
    );
    assert_eq!(mps.observe(UUID).unwrap(), Some(relaxed));

    rec.log.lock().unwrap().clear();
    mps.apply(UUID, 81559, None).unwrap();
    assert_eq!(
        rec.lines(),
        vec!["get_default_active_thread_percentage", "quit"]
    );
    assert_eq!(mps.observe(UUID).unwrap(), None);
    // Stopping a stopped daemon sends nothing but the check.
    rec.log.lock().unwrap().clear();
    mps.apply(UUID, 81559, None).unwrap();
    assert_eq!(rec.lines(), vec!["get_default_active_thread_percentage"]);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_daemon_that_does_not_start_is_an_error_naming_the_log() {
    struct Failing;
    impl CommandRunner for Failing {
        fn run(&self, _: &CommandSpec) -> std::io::Result<CommandOutput> {
            Ok(CommandOutput::default())
        }
    }
    let root = temp_root("mps-fail");
    let mut mps = MpsControl::new(Box::new(Failing), root.join("run"), root.join("log"));
    mps.start_tries = 1;
    let err = mps
        .apply(
            UUID,
            1024,
            Some(MpsSettings {
                default_active_thread_percentage: 10,
                default_pinned_mem_limit: None,
            }),
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("control.log"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_missing_control_program_says_what_to_install() {
    let root = temp_root("mps-missing");
    let runner = SystemRunner::default();
    let mut mps = MpsControl::new(Box::new(runner), root.join("run"), root.join("log"));
    mps.start_tries = 1;
    if std::process::Command::new(MPS_CONTROL)
        .arg("-h")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
    {
        eprintln!("{MPS_CONTROL} is installed here; skipping");
        return;
    }
    let err = mps
        .apply(
            UUID,
            1024,
            Some(MpsSettings {
                default_active_thread_percentage: 10,
                default_pinned_mem_limit: None,
            }),
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("was not found"), "{err}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn system_runner_feeds_stdin_and_captures_output() {
    let out = SystemRunner::default()
        .run(&CommandSpec {
            program: "sh".into(),
            args: vec!["-c".into(), "read x; echo \"got $x $FOO\"; exit 3".into()],
            env: vec![("FOO".into(), "bar".into())],
            stdin: Some("hello".into()),
            daemon: false,
        })
        .unwrap();
    assert!(!out.success);
    assert_eq!(out.stdout, "got hello bar\n");
    let slow = SystemRunner {
        timeout: Duration::from_millis(100),
    }
    .run(&CommandSpec {
        program: "sleep".into(),
        args: vec!["5".into()],
        env: vec![],
        stdin: None,
        daemon: false,
    })
    .unwrap_err();
    assert_eq!(slow.kind(), std::io::ErrorKind::TimedOut);
}

#[test]
fn parses_the_daemons_percentage() {
    assert_eq!(parse_percentage("100.0\n"), Some(100));
    assert_eq!(parse_percentage("25.0"), Some(25));
    assert_eq!(
        parse_percentage("Cannot find MPS control daemon process"),
        None
    );
    assert_eq!(parse_percentage(""), None);
}
