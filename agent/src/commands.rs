//! The commands that work on one host's GPUs without a server: `plan`
//! (apply a desired state and print what was done) and `probe` (print the
//! inventory and telemetry the agent would report).

use crate::backend::GpuBackend;
use crate::reconcile;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::ExitCode;
use tessera_core::plan::GpuDesired;

/// `tessera-agent plan`: one JSON line per GPU; non-zero exit if any GPU fails.
pub fn plan(backend: &dyn GpuBackend, desired: &Path) -> ExitCode {
    let wanted: BTreeMap<u32, GpuDesired> = match std::fs::read_to_string(desired)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(w) => w,
        Err(e) => {
            eprintln!("tessera-agent: {}: {e}", desired.display());
            return ExitCode::from(2);
        }
    };
    let inventory = match backend.inventory() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("tessera-agent: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut ok = true;
    for (index, want) in &wanted {
        let Some(gpu) = inventory.gpus.iter().find(|g| g.index == *index) else {
            println!(
                "{}",
                serde_json::json!({"gpu": index, "error": format!("there is no GPU {index} on this host")})
            );
            ok = false;
            continue;
        };
        let model = tessera_core::catalogue::lookup(&gpu.name, gpu.memory_mib);
        let line = match reconcile::reconcile_gpu(backend, *index, &model, want) {
            Ok(out) => {
                serde_json::json!({"gpu": index, "ops": out.applied, "stopped": out.stopped, "observed": out.observed})
            }
            Err(e) => {
                ok = false;
                serde_json::json!({"gpu": index, "error": e.to_string()})
            }
        };
        println!("{line}");
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// `tessera-agent probe`: one JSON document with the host's inventory and
/// `rounds` telemetry rounds `interval_ms` apart. Nothing is changed.
pub fn probe(backend: &dyn GpuBackend, rounds: u32, interval_ms: u64) -> ExitCode {
    let inventory = match backend.inventory() {
        Ok(i) => i,
        Err(e) => {
            eprintln!("tessera-agent: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut samples = Vec::new();
    for round in 0..rounds {
        if round > 0 {
            std::thread::sleep(std::time::Duration::from_millis(interval_ms));
        }
        let at_ms = crate::telemetry::now_ms();
        match backend.sample(at_ms, &BTreeSet::new()) {
            Ok(gpus) => samples.push(serde_json::json!({"at_ms": at_ms, "gpus": gpus})),
            Err(e) => {
                eprintln!("tessera-agent: telemetry: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    // What Tessera's catalogue expects of each GPU (MIG profiles, GPM): a
    // hardware check compares it with what the driver says.
    let catalogue: Vec<_> = inventory
        .gpus
        .iter()
        .map(|g| {
            let model = tessera_core::catalogue::lookup(&g.name, g.memory_mib);
            serde_json::json!({
                "index": g.index,
                "model": model,
                "gpm_expected": model.architecture.has_gpm(),
            })
        })
        .collect();
    let doc = serde_json::json!({
        "backend": backend.name(),
        "catalogue": catalogue,
        "hostname": backend.hostname(),
        "driver_version": inventory.driver_version,
        "cpu_milli": inventory.cpu_milli,
        "memory_mib": inventory.memory_mib,
        "gpus": inventory.gpus,
        "rounds": samples,
    });
    println!("{doc}");
    ExitCode::SUCCESS
}
