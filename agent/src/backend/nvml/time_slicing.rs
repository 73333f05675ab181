//! Time-slicing through the NVIDIA Kubernetes device plugin's sharing config
//! (`--config-file` of the plugin; "Shared Access to GPUs with CUDA
//! Time-Slicing" in its README):
//!
//! ```yaml
//! version: v1
//! sharing:
//!   timeSlicing:
//!     renameByDefault: true
//!     resources:
//!     - name: nvidia.com/gpu
//!       replicas: 4
//!       devices: ["GPU-...", "GPU-..."]
//! ```
//!
//! Tessera owns the file: it writes one resource entry per distinct replica
//! count, listing the GPUs (by UUID) with that count; GPUs with one replica
//! (not shared) are not listed. Reading it back is strict: a key the plugin's
//! `v1` format does not have, a wrong type, another resource or a device
//! list that is not UUIDs is an error, never skipped (a file the agent
//! misread would be rewritten without the entries it missed).

use super::mps::CommandRunner;
use crate::backend::BackendError;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use tessera_core::k8s::DevicePluginConfig;

/// The resource every entry advertises.
pub const RESOURCE_NAME: &str = tessera_core::k8s::RESOURCE_GPU;

/// The config format version the plugin reads.
const VERSION: &str = tessera_core::k8s::CONFIG_VERSION;

/// Why a device plugin config could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Not YAML, or not the plugin's format (unknown key, wrong type).
    #[error("{0}")]
    Yaml(#[from] serde_yaml_ng::Error),
    /// Valid YAML of the right shape, but not something Tessera wrote.
    #[error("{0}")]
    Content(String),
}

/// The config for `replicas` per GPU UUID (GPUs with fewer than 2 replicas
/// are left out).
pub fn render_time_slicing(replicas: &BTreeMap<String, u32>) -> Result<String, ConfigError> {
    let config = tessera_core::k8s::device_plugin_config(replicas);
    Ok(serde_yaml_ng::to_string(&config)?)
}

/// Replicas per GPU UUID from a device plugin config; a GPU not listed has
/// one replica. Anything the agent cannot account for is an error.
pub fn parse_time_slicing(text: &str) -> Result<BTreeMap<String, u32>, ConfigError> {
    let content = |m: String| Err(ConfigError::Content(m));
    if text.trim().is_empty() {
        return Ok(BTreeMap::new());
    }
    let config: DevicePluginConfig = serde_yaml_ng::from_str(text)?;
    if config.version != VERSION {
        return content(format!(
            "version {:?}; this agent writes {VERSION:?}",
            config.version
        ));
    }
    let mut out = BTreeMap::new();
    let sharing = config.sharing.unwrap_or_default();
    if sharing.mps.is_some() {
        return content(
            "an mps section; this agent owns the file for time-slicing only".to_owned(),
        );
    }
    let resources = sharing
        .time_slicing
        .map(|t| t.resources)
        .unwrap_or_default();
    for r in resources {
        if r.name != RESOURCE_NAME {
            return content(format!(
                "resource {:?}; this agent only shares {RESOURCE_NAME}",
                r.name
            ));
        }
        if r.replicas == 0 {
            return content("0 replicas".to_owned());
        }
        for device in r.devices {
            if !device.starts_with("GPU-") {
                return content(format!("device {device:?} is not a GPU UUID"));
            }
            if out.insert(device.clone(), r.replicas).is_some() {
                return content(format!("device {device} is listed twice"));
            }
        }
    }
    Ok(out)
}

/// The device plugin config file, read and rewritten under a lock.
#[derive(Debug)]
pub struct TimeSlicingFile {
    path: PathBuf,
    lock: Mutex<()>,
}

impl TimeSlicingFile {
    /// The file at `path` (created on first write).
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            lock: Mutex::new(()),
        }
    }

    /// Where it is.
    #[cfg(test)]
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    fn err(&self, e: impl std::fmt::Display) -> BackendError {
        BackendError::Nvml {
            call: "device plugin config",
            detail: format!("{}: {e}", self.path.display()),
        }
    }

    fn read(&self) -> Result<BTreeMap<String, u32>, BackendError> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => parse_time_slicing(&text).map_err(|e| self.err(e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(self.err(e)),
        }
    }

    /// Replicas advertised for the GPU `uuid` (1 when not listed).
    pub fn replicas(&self, uuid: &str) -> Result<u32, BackendError> {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        Ok(self.read()?.get(uuid).copied().unwrap_or(1))
    }

    /// Advertises `replicas` for the GPU `uuid`, keeping the other GPUs'
    /// entries. The file is replaced atomically (written aside, renamed).
    /// Whether the file changed.
    pub fn set(&self, uuid: &str, replicas: u32) -> Result<bool, BackendError> {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = self.read()?;
        if all.get(uuid).copied().unwrap_or(1) == replicas {
            return Ok(false);
        }
        if replicas > 1 {
            all.insert(uuid.to_owned(), replicas);
        } else {
            all.remove(uuid);
        }
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| self.err(e))?;
        }
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tessera-tmp");
        let tmp = PathBuf::from(tmp);
        let text = render_time_slicing(&all).map_err(|e| self.err(e))?;
        std::fs::write(&tmp, text).map_err(|e| self.err(e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| self.err(e))?;
        Ok(true)
    }
}

/// The NVIDIA device plugin's processes on this host. The plugin reads its
/// config file when it starts and does not watch it; on SIGHUP it stops
/// its plugins and starts them again with the file read anew
/// (`k8s-device-plugin`, `cmd/nvidia-device-plugin/main.go`: "On SIGHUP,
/// restart this loop, restarting all of the plugins"), which is what its
/// own config-manager sidecar sends after changing the file.
pub struct DevicePlugin {
    /// The process name (`/proc/<pid>/comm`).
    process: String,
    runner: Box<dyn CommandRunner>,
}

impl std::fmt::Debug for DevicePlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevicePlugin")
            .field("process", &self.process)
            .finish_non_exhaustive()
    }
}

/// The device plugin's process name in NVIDIA's images.
pub const DEVICE_PLUGIN_PROCESS: &str = "nvidia-device-plugin";

/// The kernel keeps 15 bytes of a process name (`TASK_COMM_LEN` 16).
const COMM_LEN: usize = 15;

/// The live processes called `name` (as `/proc/<pid>/comm` has it).
pub fn processes_named(name: &str) -> Vec<u32> {
    let want = &name.as_bytes()[..name.len().min(COMM_LEN)];
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.strip_suffix(b"\n").unwrap_or(&comm) == want)
        })
        .filter(|pid| super::stop::alive(*pid))
        .collect();
    pids.sort_unstable();
    pids
}

impl DevicePlugin {
    /// The plugin processes called `process`, signalled through `runner`.
    pub fn new(process: String, runner: Box<dyn CommandRunner>) -> Self {
        Self { process, runner }
    }

    /// Tells every running plugin to read its config again (SIGHUP);
    /// returns the processes told. None running is not an error: a plugin
    /// that starts later reads the file as it is.
    pub fn reload(&self) -> Result<Vec<u32>, BackendError> {
        let pids = processes_named(&self.process);
        if pids.is_empty() {
            tracing::info!(
                process = %self.process,
                "no device plugin runs on this host; it reads the new replicas when it starts"
            );
            return Ok(pids);
        }
        super::stop::kill(self.runner.as_ref(), "HUP", &pids).map_err(|e| BackendError::Nvml {
            call: "kill",
            detail: format!("could not signal the device plugin ({}): {e}", self.process),
        })?;
        tracing::info!(
            ?pids,
            "told the device plugin to read its config again (SIGHUP)"
        );
        Ok(pids)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn map(entries: &[(&str, u32)]) -> BTreeMap<String, u32> {
        entries.iter().map(|(u, n)| ((*u).to_owned(), *n)).collect()
    }

    #[test]
    fn renders_the_device_plugin_format_one_entry_per_replica_count() {
        let text = render_time_slicing(&map(&[
            ("GPU-b", 4),
            ("GPU-a", 4),
            ("GPU-c", 2),
            ("GPU-d", 1),
        ]))
        .unwrap();
        assert_eq!(
            text,
            "version: v1\n\
             sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n\
             \x20   - name: nvidia.com/gpu\n      replicas: 2\n      devices:\n      - GPU-c\n\
             \x20   - name: nvidia.com/gpu\n      replicas: 4\n      devices:\n      - GPU-a\n      - GPU-b\n"
        );
        assert_eq!(
            render_time_slicing(&BTreeMap::new()).unwrap(),
            "version: v1\n"
        );
        assert_eq!(
            render_time_slicing(&map(&[("GPU-x", 1)])).unwrap(),
            "version: v1\n"
        );
    }

    #[test]
    fn time_slicing_round_trips() {
        let cases = [
            map(&[]),
            map(&[("GPU-1", 2)]),
            map(&[("GPU-1", 2), ("GPU-2", 64), ("GPU-3", 2), ("GPU-4", 8)]),
        ];
        for m in cases {
            assert_eq!(
                parse_time_slicing(&render_time_slicing(&m).unwrap()).unwrap(),
                m
            );
        }
        // Ones are dropped: not listed reads back as one replica.
        let with_one = map(&[("GPU-1", 1), ("GPU-2", 3)]);
        assert_eq!(
            parse_time_slicing(&render_time_slicing(&with_one).unwrap()).unwrap(),
            map(&[("GPU-2", 3)])
        );
    }

    #[test]
    fn parses_hand_edits_in_other_yaml_styles() {
        let text = "# edited\nversion: v1\nsharing:\n  timeSlicing:\n    resources:\n\
                    \x20   - name: nvidia.com/gpu\n      devices: ['GPU-a' , \"GPU-b\"]\n      replicas: 3\n";
        assert_eq!(
            parse_time_slicing(text).unwrap(),
            map(&[("GPU-a", 3), ("GPU-b", 3)])
        );
    }

    #[test]
    fn unknown_or_invalid_content_is_an_error_not_skipped() {
        let entry = |body: &str| {
            format!("version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n{body}")
        };
        for (text, why) in [
            ("not yaml at all".to_owned(), "a plain string"),
            ("version: v1\nsharing: [".to_owned(), "broken YAML"),
            ("version: v1\nflags:\n  migStrategy: none\n".to_owned(), "unknown top-level key"),
            (entry("      replicas: 2\n      devices: [GPU-a]\n      renamed: x\n"), "unknown key in a resource"),
            (entry("      replicas: two\n      devices: [GPU-a]\n"), "replicas not a number"),
            (entry("      replicas: 2\n      devices: all\n"), "devices not a list"),
            (entry("      replicas: 2\n      devices: [\"0\"]\n"), "a device index, not a UUID"),
            (entry("      replicas: 2\n      devices: [GPU-a]\n    - name: nvidia.com/gpu\n      replicas: 3\n      devices: [GPU-a]\n"), "a GPU listed twice"),
            (entry("      replicas: 0\n      devices: [GPU-a]\n"), "no replicas"),
            (entry("      replicas: 2\n      devices: [GPU-a]\n").replace("nvidia.com/gpu", "nvidia.com/mig-1g.10gb"), "another resource"),
            ("version: v2\n".to_owned(), "another version"),
        ] {
            assert!(parse_time_slicing(&text).is_err(), "{why}: {text}");
        }
        // An empty file (created ahead of the agent) lists nothing.
        assert!(parse_time_slicing("").unwrap().is_empty());
    }

    #[test]
    fn a_file_the_agent_cannot_read_is_an_error_and_is_left_alone() {
        let dir = std::env::temp_dir().join(format!(
            "tessera-ts-bad-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("config.yaml");
        let text = "version: v1\nflags:\n  migStrategy: mixed\n";
        std::fs::write(&path, text).unwrap();
        let file = TimeSlicingFile::new(path.clone());
        let err = file.replicas("GPU-a").unwrap_err().to_string();
        assert!(
            err.contains("config.yaml") && err.contains("flags"),
            "{err}"
        );
        assert!(file.set("GPU-a", 2).is_err());
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_file_keeps_other_gpus_and_reads_back() {
        let dir = std::env::temp_dir().join(format!(
            "tessera-ts-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let file = TimeSlicingFile::new(dir.join("sub/config.yaml"));
        assert_eq!(file.replicas("GPU-a").unwrap(), 1);
        file.set("GPU-a", 4).unwrap();
        file.set("GPU-b", 2).unwrap();
        assert_eq!(file.replicas("GPU-a").unwrap(), 4);
        assert_eq!(file.replicas("GPU-b").unwrap(), 2);
        file.set("GPU-a", 1).unwrap();
        assert_eq!(file.replicas("GPU-a").unwrap(), 1);
        let text = std::fs::read_to_string(file.path()).unwrap();
        assert!(
            text.contains("- GPU-b") && !text.contains("GPU-a"),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
