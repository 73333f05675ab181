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
//! (not shared) are not listed. The parser reads exactly this format back.

use crate::backend::BackendError;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// The resource every entry advertises.
pub const RESOURCE_NAME: &str = "nvidia.com/gpu";

/// The config for `replicas` per GPU UUID (GPUs with fewer than 2 replicas
/// are left out).
pub fn render_time_slicing(replicas: &BTreeMap<String, u32>) -> String {
    let mut by_count: BTreeMap<u32, Vec<&str>> = BTreeMap::new();
    for (uuid, n) in replicas {
        if *n > 1 {
            by_count.entry(*n).or_default().push(uuid);
        }
    }
    let mut out = String::from("version: v1\n");
    if by_count.is_empty() {
        return out;
    }
    out.push_str("sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n");
    for (n, devices) in by_count {
        let list = devices
            .iter()
            .map(|d| format!("\"{d}\""))
            .collect::<Vec<_>>()
            .join(", ");
        out.push_str(&format!(
            "    - name: {RESOURCE_NAME}\n      replicas: {n}\n      devices: [{list}]\n"
        ));
    }
    out
}

/// Replicas per GPU UUID from a config [`render_time_slicing`] wrote. Lines
/// it does not understand are skipped; a GPU not listed has one replica.
pub fn parse_time_slicing(text: &str) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    let mut replicas: Option<u32> = None;
    let mut devices: Vec<String> = Vec::new();
    let mut flush = |replicas: &mut Option<u32>, devices: &mut Vec<String>| {
        if let Some(n) = replicas.take() {
            for d in devices.drain(..) {
                out.insert(d, n);
            }
        }
        devices.clear();
    };
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let (item_start, line) = match line.strip_prefix('-') {
            Some(rest) => (true, rest.trim()),
            None => (false, line),
        };
        if item_start {
            flush(&mut replicas, &mut devices);
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "replicas" => replicas = value.parse().ok(),
            "devices" => {
                let inner = value
                    .strip_prefix('[')
                    .and_then(|v| v.strip_suffix(']'))
                    .unwrap_or("");
                devices = inner
                    .split(',')
                    .map(|d| d.trim().trim_matches(|c| c == '"' || c == '\'').to_owned())
                    .filter(|d| !d.is_empty())
                    .collect();
            }
            _ => {}
        }
    }
    flush(&mut replicas, &mut devices);
    out
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
            Ok(text) => Ok(parse_time_slicing(&text)),
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
    pub fn set(&self, uuid: &str, replicas: u32) -> Result<(), BackendError> {
        let _guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut all = self.read()?;
        if all.get(uuid).copied().unwrap_or(1) == replicas {
            return Ok(());
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
        std::fs::write(&tmp, render_time_slicing(&all)).map_err(|e| self.err(e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| self.err(e))
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
        ]));
        assert_eq!(
            text,
            "version: v1\n\
             sharing:\n  timeSlicing:\n    renameByDefault: true\n    resources:\n\
             \x20   - name: nvidia.com/gpu\n      replicas: 2\n      devices: [\"GPU-c\"]\n\
             \x20   - name: nvidia.com/gpu\n      replicas: 4\n      devices: [\"GPU-a\", \"GPU-b\"]\n"
        );
        assert_eq!(render_time_slicing(&BTreeMap::new()), "version: v1\n");
        assert_eq!(render_time_slicing(&map(&[("GPU-x", 1)])), "version: v1\n");
    }

    #[test]
    fn time_slicing_round_trips() {
        let cases = [
            map(&[]),
            map(&[("GPU-1", 2)]),
            map(&[("GPU-1", 2), ("GPU-2", 64), ("GPU-3", 2), ("GPU-4", 8)]),
        ];
        for m in cases {
            assert_eq!(parse_time_slicing(&render_time_slicing(&m)), m);
        }
        // Ones are dropped: not listed reads back as one replica.
        let with_one = map(&[("GPU-1", 1), ("GPU-2", 3)]);
        assert_eq!(
            parse_time_slicing(&render_time_slicing(&with_one)),
            map(&[("GPU-2", 3)])
        );
    }

    #[test]
    fn parses_hand_edits_of_the_same_shape() {
        let text = "# edited\nversion: v1\nsharing:\n  timeSlicing:\n    resources:\n\
                    \x20   - name: nvidia.com/gpu\n      devices: ['GPU-a' , GPU-b]\n      replicas: 3\n";
        assert_eq!(parse_time_slicing(text), map(&[("GPU-a", 3), ("GPU-b", 3)]));
        assert!(parse_time_slicing("not yaml at all").is_empty());
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
            text.contains("devices: [\"GPU-b\"]") && !text.contains("GPU-a"),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
