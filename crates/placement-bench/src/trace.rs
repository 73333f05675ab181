//! Trace records (the column layout of Alibaba's 2023 GPU-sharing cluster
//! trace, `openb_node_list` / `openb_pod_list`) and their conversion into the
//! placer's types.

use tessera_core::catalogue;
use tessera_core::placement::{Demand, GpuState, HostState, PlacementRequest};
use tessera_core::units::{ComputeMilli, CpuMilli, MemMiB};

use crate::csv::Table;
use crate::error::BenchError;

/// A host row: `sn,cpu_milli,memory_mib,gpu,model`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceHost {
    /// Host name.
    pub sn: String,
    /// CPU in thousandths of a core.
    pub cpu_milli: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// Number of GPUs.
    pub gpus: u32,
    /// GPU model as written in the trace.
    pub model: String,
}

/// A request row: `name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec]`
/// (the `multigpu*` traces have no `gpu_spec`: any model).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceRequest {
    /// Pod name.
    pub name: String,
    /// CPU in thousandths of a core.
    pub cpu_milli: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// GPUs; 0 for CPU-only pods.
    pub num_gpu: u32,
    /// Share of each GPU in thousandths (1000 when `num_gpu` > 1).
    pub gpu_milli: u32,
    /// Allowed models as written in the trace; empty = any.
    pub gpu_spec: Vec<String>,
}

impl TraceRequest {
    /// GPU requested, in thousandths: `num_gpu` × `gpu_milli`.
    pub fn gpu_requested(&self) -> u64 {
        u64::from(self.num_gpu) * u64::from(self.gpu_milli)
    }
}

/// Reads a fleet CSV.
pub fn read_hosts(table: &Table) -> Result<Vec<TraceHost>, BenchError> {
    table.require(&["sn", "cpu_milli", "memory_mib", "gpu", "model"])?;
    let mut hosts = Vec::with_capacity(table.len());
    let mut seen = std::collections::HashSet::new();
    for row in table.rows() {
        let host = TraceHost {
            sn: row.text("sn")?.to_string(),
            cpu_milli: row.quantity_u32("cpu_milli")?,
            memory_mib: row.quantity("memory_mib")?,
            gpus: row.quantity_u32("gpu")?,
            model: row.text("model")?.to_string(),
        };
        if host.sn.is_empty() {
            return Err(row.error("sn", "empty host name"));
        }
        if !seen.insert(host.sn.clone()) {
            return Err(row.error("sn", "a host name seen before"));
        }
        if host.gpus > 64 {
            return Err(row.error("gpu", "more than 64 GPUs on one host"));
        }
        if host.gpus > 0 && host.model.is_empty() {
            return Err(row.error("model", "a host with GPUs needs a model"));
        }
        hosts.push(host);
    }
    Ok(hosts)
}

/// Reads a request CSV.
pub fn read_requests(table: &Table) -> Result<Vec<TraceRequest>, BenchError> {
    table.require(&["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"])?;
    let mut requests = Vec::with_capacity(table.len());
    for row in table.rows() {
        let num_gpu = row.quantity_u32("num_gpu")?;
        let mut gpu_milli = row.quantity_u32("gpu_milli")?;
        if num_gpu > 0 && (gpu_milli == 0 || gpu_milli > 1000) {
            return Err(row.error(
                "gpu_milli",
                format!("{gpu_milli} is outside 1..=1000 for a GPU request"),
            ));
        }
        if num_gpu > 1 {
            gpu_milli = 1000;
        }
        if num_gpu == 0 {
            gpu_milli = 0;
        }
        let gpu_spec = row
            .optional_text("gpu_spec")
            .split('|')
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "nan")
            .map(str::to_string)
            .collect();
        requests.push(TraceRequest {
            name: row.text("name")?.to_string(),
            cpu_milli: row.quantity_u32("cpu_milli")?,
            memory_mib: row.quantity("memory_mib")?,
            num_gpu,
            gpu_milli,
            gpu_spec,
        });
    }
    Ok(requests)
}

/// Maps a trace model name to the name the fleet uses and the memory to
/// assume. The trace's names (`V100M16`, `V100M32`, `T4`, `A10`, `P100`,
/// `G2`, `G3`, ...) map to catalogue models where the catalogue has them;
/// the others stay generic with a memory guess.
pub fn map_model(name: &str) -> (String, u64) {
    let upper = name.trim().to_ascii_uppercase();
    let alias = match upper.as_str() {
        "V100M16" => "V100-16GB",
        "V100M32" => "V100-32GB",
        other => other,
    };
    let model = catalogue::lookup(alias, 0);
    if !model.generic {
        return (model.name.to_string(), model.memory_mib);
    }
    // Undocumented trace models: 16 GiB (P100, G1/G2) or 24 GiB (G3) guesses.
    let guess_gib = match upper.as_str() {
        "G3" => 24,
        _ => 16,
    };
    (upper, guess_gib * 1024)
}

/// Builds the placer's hosts, known to it by their position in the trace.
/// With `mig`, MIG-capable models start with MIG enabled and no instances;
/// all other GPUs are shared (MPS-style).
pub fn to_hosts(hosts: &[TraceHost], mig: bool) -> Vec<HostState> {
    hosts
        .iter()
        .enumerate()
        .map(|(at, h)| {
            let (model, memory) = map_model(&h.model);
            let capable = catalogue::lookup(&model, memory);
            let gpus = (0..h.gpus)
                .map(|i| {
                    let gpu = GpuState::exclusive(i, model.clone(), MemMiB(memory));
                    if mig && capable.is_mig_capable() {
                        gpu.mig_enabled()
                    } else {
                        gpu.shared(capable.mps_max_clients.max(1))
                    }
                })
                .collect();
            HostState {
                id: tessera_core::ids::HostId::new(at as i64),
                cpu_free: CpuMilli(h.cpu_milli),
                memory_free: MemMiB(h.memory_mib),
                gpus,
            }
        })
        .collect()
}

/// Builds the placer's request.
pub fn to_request(r: &TraceRequest) -> PlacementRequest {
    let demand = match (r.num_gpu, r.gpu_milli) {
        (0, _) => Demand::None,
        (1, milli) if milli < 1000 => Demand::Fraction {
            compute: ComputeMilli(milli),
            memory: None,
        },
        (count, _) => Demand::Whole { count },
    };
    PlacementRequest::new(demand)
        .with_host(CpuMilli(r.cpu_milli), MemMiB(r.memory_mib))
        .with_models(r.gpu_spec.iter().map(|m| map_model(m).0))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn trace_models_map_to_the_catalogue_or_stay_generic() {
        assert_eq!(map_model("V100M32").0, "V100-32GB");
        assert_eq!(map_model("T4").0, catalogue::lookup("T4", 0).name);
        assert_eq!(map_model("G2"), ("G2".to_string(), 16 * 1024));
    }

    #[test]
    fn request_rows_become_demands() {
        let t = Table::parse(
            "r.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n\
             a,4000,8192,1,500,V100M16|V100M32,LS\n\
             b,8000,1024,2,1000,,BE\n\
             c,1000,1024,0,0,,BE\n",
        )
        .unwrap();
        let r = read_requests(&t).unwrap();
        assert_eq!(r[0].gpu_requested(), 500);
        assert_eq!(r[1].gpu_requested(), 2000);
        let a = to_request(&r[0]);
        assert_eq!(a.allowed_models, vec!["V100-16GB", "V100-32GB"]);
        assert_eq!(to_request(&r[1]).demand, Demand::Whole { count: 2 });
        assert_eq!(to_request(&r[2]).demand, Demand::None);
    }

    #[test]
    fn the_gpu_spec_column_is_optional() {
        // As in openb_pod_list_multigpu*.csv: five columns only.
        let t = Table::parse(
            "r.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,12000,16384,1,1000\nb,6000,12288,1,460\n",
        )
        .unwrap();
        let r = read_requests(&t).unwrap();
        assert_eq!(r.len(), 2);
        assert!(r.iter().all(|r| r.gpu_spec.is_empty()));
        assert_eq!(r[1].gpu_requested(), 460);
    }

    #[test]
    fn bad_rows_name_line_and_column() {
        let t = Table::parse(
            "r.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\nx,1,1,1,0,\n",
        )
        .unwrap();
        let e = read_requests(&t).unwrap_err().to_string();
        assert!(e.starts_with("r.csv:2: column gpu_milli:"), "{e}");
        let t = Table::parse("r.csv", "name,cpu_milli,memory_mib,num_gpu\nx,1,1,1\n").unwrap();
        let e = read_requests(&t).unwrap_err().to_string();
        assert_eq!(e, "r.csv:1: column gpu_milli: missing column in the header");
        let t = Table::parse("n.csv", "sn,cpu_milli,memory_mib,model\nh,1,1,T4\n").unwrap();
        let e = read_hosts(&t).unwrap_err().to_string();
        assert_eq!(e, "n.csv:1: column gpu: missing column in the header");
        let t = Table::parse(
            "n.csv",
            "sn,cpu_milli,memory_mib,gpu,model\nh,1,1,1,T4\nh,1,1,1,T4\n",
        )
        .unwrap();
        let e = read_hosts(&t).unwrap_err().to_string();
        assert!(e.starts_with("n.csv:3: column sn:"), "{e}");
    }
}
