//! The agent tests' kit: a scratch folder per test (removed when the test
//! ends), simulated host files said as a builder rather than as TOML text,
//! and the agent binary. Every module of this binary sets up with it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// A scratch folder for one test, emptied first and removed at the end.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A fresh folder for `test` of `area` (unique per test process).
    pub fn new(area: &str, test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "tessera-agent-{area}-{}-{test}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A path inside the folder.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// Writes `text` to `name` in the folder.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Writes `host` as `name`.
    pub fn host_file(&self, name: &str, host: &HostFile) -> PathBuf {
        self.write(name, &host.toml())
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A simulated host file (`tessera_sim_host::SimHost`), built by what a
/// test cares about: `HostFile::named("h").gpus("L4", 1)`.
#[derive(Clone, Debug)]
pub struct HostFile {
    hostname: String,
    cpu_cores: u32,
    memory_gib: u32,
    workload: Option<&'static str>,
    health_file: Option<&'static str>,
    groups: Vec<GpuGroup>,
}

#[derive(Clone, Debug)]
struct GpuGroup {
    model: String,
    count: u32,
    mig_enabled: bool,
    instances: Vec<String>,
    nvlink_groups: Option<String>,
}

impl HostFile {
    /// A host called `hostname` with 8 cores, 64 GiB and no GPUs yet.
    pub fn named(hostname: &str) -> Self {
        Self {
            hostname: hostname.to_owned(),
            cpu_cores: 8,
            memory_gib: 64,
            workload: None,
            health_file: None,
            groups: Vec::new(),
        }
    }

    /// Its CPU cores and memory.
    pub fn size(mut self, cpu_cores: u32, memory_gib: u32) -> Self {
        self.cpu_cores = cpu_cores;
        self.memory_gib = memory_gib;
        self
    }

    /// The load its slices run (`training`, `idle`, ...).
    pub fn workload(mut self, workload: &'static str) -> Self {
        self.workload = Some(workload);
        self
    }

    /// Reads its GPUs' hardware faults from `file` (beside the host file).
    pub fn health_file(mut self, file: &'static str) -> Self {
        self.health_file = Some(file);
        self
    }

    /// `count` GPUs of `model`.
    pub fn gpus(mut self, model: &str, count: u32) -> Self {
        self.groups.push(GpuGroup {
            model: model.to_owned(),
            count,
            mig_enabled: false,
            instances: Vec::new(),
            nvlink_groups: None,
        });
        self
    }

    /// The last GPUs added are in MIG mode with these instances
    /// (`"3g.40gb@0"`: profile at start slice).
    pub fn mig(mut self, instances: &[&str]) -> Self {
        if let Some(g) = self.groups.last_mut() {
            g.mig_enabled = true;
            g.instances = instances.iter().map(|i| (*i).to_owned()).collect();
        }
        self
    }

    /// The last GPUs added are joined by NVLink in these groups
    /// (`"[[0, 1]]"`).
    pub fn nvlink(mut self, groups: &str) -> Self {
        if let Some(g) = self.groups.last_mut() {
            g.nvlink_groups = Some(groups.to_owned());
        }
        self
    }

    /// The file's text.
    pub fn toml(&self) -> String {
        let mut out = format!(
            "hostname = \"{}\"\ncpu_cores = {}\nmemory_gib = {}\n",
            self.hostname, self.cpu_cores, self.memory_gib
        );
        if let Some(w) = self.workload {
            out.push_str(&format!("workload = \"{w}\"\n"));
        }
        if let Some(f) = self.health_file {
            out.push_str(&format!("health_file = \"{f}\"\n"));
        }
        for g in &self.groups {
            out.push_str(&format!(
                "[[gpus]]\nmodel = \"{}\"\ncount = {}\n",
                g.model, g.count
            ));
            if g.mig_enabled {
                let list: Vec<String> = g.instances.iter().map(|i| format!("\"{i}\"")).collect();
                out.push_str(&format!(
                    "mig_enabled = true\ninstances = [{}]\n",
                    list.join(", ")
                ));
            }
            if let Some(n) = &g.nvlink_groups {
                out.push_str(&format!("nvlink_groups = {n}\n"));
            }
        }
        out
    }
}

/// The agent binary this test run built.
pub fn agent() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tessera-agent"))
}

#[test]
fn a_host_file_reads_back_as_the_simulator_reads_it() {
    let text = HostFile::named("mixed")
        .size(64, 512)
        .workload("training")
        .gpus("A30-24GB", 2)
        .mig(&["2g.12gb@0"])
        .gpus("H100-80GB", 2)
        .nvlink("[[0, 1]]")
        .toml();
    let host: tessera_sim_host::SimHost = toml::from_str(&text).unwrap();
    assert_eq!(host.hostname, "mixed");
    assert_eq!((host.cpu_cores, host.memory_gib), (64, 512));
    assert_eq!(host.gpus.len(), 2);
    assert!(host.gpus[0].mig_enabled && !host.gpus[1].mig_enabled);
    assert_eq!(host.gpus[1].count, 2);
    let lost = HostFile::named("l4")
        .health_file("health.toml")
        .gpus("L4", 1);
    let host: tessera_sim_host::SimHost = toml::from_str(&lost.toml()).unwrap();
    assert_eq!(host.health_file, Some("health.toml".into()));
    assert_eq!(host.workload, Default::default());
}
