//! The process's own counters for `/metrics` (each replica counts what it
//! did; Prometheus adds them up): admissions by outcome, webhook deliveries
//! by outcome, telemetry rounds and agents' reports by what became of them. The server
//! registers its request latency histogram in the same registry. Figures
//! that must agree across replicas (queue depth, ingest lag) are read from
//! the database at scrape time instead ([`crate::fleet::FleetCounts`]).

use prometheus::{Histogram, HistogramOpts, IntCounterVec, IntGauge, Opts, Registry};

/// What became of a request for a slice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmissionOutcome {
    /// Placed at once.
    Placed,
    /// Waiting for capacity.
    Queued,
    /// Refused: it does not fit in the tenant's quota.
    RefusedQuota,
    /// Refused otherwise (bad input, a pool it can never fit, a conflict).
    Refused,
}

impl AdmissionOutcome {
    /// Label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Placed => "placed",
            Self::Queued => "queued",
            Self::RefusedQuota => "refused_quota",
            Self::Refused => "refused",
        }
    }
}

/// What became of an agent's report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportOutcome {
    /// Processed in full (stored, allocations advanced).
    Processed,
    /// It repeated the last one processed here: only noted in memory.
    Repeated,
    /// It repeated the last one stored (another replica's): one `UPDATE`.
    RepeatedStored,
    /// It would have repeated the last one processed here, and the agent
    /// named it on its desired-state poll instead of sending it.
    Polled,
}

impl ReportOutcome {
    /// Label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Processed => "processed",
            Self::Repeated => "repeated",
            Self::RepeatedStored => "repeated_stored",
            Self::Polled => "polled",
        }
    }
}

/// What became of one webhook call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// The receiver answered 2xx.
    Delivered,
    /// Failed; tried again later.
    Retrying,
    /// Failed for the last time.
    GaveUp,
}

impl DeliveryOutcome {
    /// Label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delivered => "delivered",
            Self::Retrying => "retrying",
            Self::GaveUp => "gave_up",
        }
    }
}

/// The counters, and the registry they are in.
#[derive(Clone)]
pub struct ServiceMetrics {
    registry: Registry,
    admissions: IntCounterVec,
    deliveries: IntCounterVec,
    telemetry_rounds: IntCounterVec,
    fleet_index: IntCounterVec,
    admission_turns: Histogram,
    reports: IntCounterVec,
    leader: IntGauge,
}

impl std::fmt::Debug for ServiceMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceMetrics").finish_non_exhaustive()
    }
}

fn counter(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels)
        .unwrap_or_else(|e| unreachable!("the counters' names and labels are constants: {e}"));
    // A fresh registry per ServiceMetrics: each name is registered once.
    if let Err(e) = r.register(Box::new(c.clone())) {
        tracing::error!("counter {name} not registered: {e}");
    }
    c
}

impl Default for ServiceMetrics {
    fn default() -> Self {
        let registry = Registry::new();
        Self {
            admissions: counter(
                &registry,
                "tessera_admissions_total",
                "Requests for slices by pool and outcome (placed, queued, refused_quota, refused).",
                &["pool", "outcome"],
            ),
            deliveries: counter(
                &registry,
                "tessera_webhook_deliveries_total",
                "Webhook calls by outcome (delivered, retrying, gave_up).",
                &["outcome"],
            ),
            telemetry_rounds: counter(
                &registry,
                "tessera_telemetry_rounds_total",
                "Agents' telemetry rounds received, by what became of them (stored, duplicate, expired).",
                &["result"],
            ),
            fleet_index: counter(
                &registry,
                "tessera_fleet_index_plans_total",
                "Admissions' and queue passes' plans by the pool index they used: reused (kept in memory), rebuilt (read from the database), stale (a kept one whose chosen host moved on: its generation or last sighting no longer matched).",
                &["outcome"],
            ),
            admission_turns: {
                let h = Histogram::with_opts(
                    HistogramOpts::new(
                        "tessera_admission_turn_requests",
                        "Requests admitted per admission turn (one transaction): those that waited together take one turn.",
                    )
                    .buckets(vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0]),
                )
                .unwrap_or_else(|e| unreachable!("the histogram's name and buckets are constants: {e}"));
                if let Err(e) = registry.register(Box::new(h.clone())) {
                    tracing::error!("histogram tessera_admission_turn_requests not registered: {e}");
                }
                h
            },
            reports: counter(
                &registry,
                "tessera_agent_reports_total",
                "Agents' reports by what became of them: processed (in full), repeated (the last one processed on this replica: noted in memory), repeated_stored (the last one stored: one UPDATE), polled (the agent named it on its desired-state poll instead of sending it: noted in memory).",
                &["outcome"],
            ),
            leader: {
                let g = IntGauge::new(
                    "tessera_scheduler_leader",
                    "1 on the replica that runs the timer (queue, lease ends, reclaim), 0 on the others.",
                )
                .unwrap_or_else(|e| unreachable!("the gauge's name is a constant: {e}"));
                if let Err(e) = registry.register(Box::new(g.clone())) {
                    tracing::error!("gauge tessera_scheduler_leader not registered: {e}");
                }
                g
            },
            registry,
        }
    }
}

impl ServiceMetrics {
    /// The registry (the server adds its own metrics to it).
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub(crate) fn admitted(&self, pool: &str, outcome: AdmissionOutcome) {
        self.admissions
            .with_label_values(&[pool, outcome.as_str()])
            .inc();
    }

    /// Counts a plan on a kept pool index (`reused`), a rebuilt one
    /// (`rebuilt`), or one found stale at the chosen host (`stale`).
    pub(crate) fn fleet_index(&self, outcome: &'static str) {
        self.fleet_index.with_label_values(&[outcome]).inc();
    }

    /// The count of [`Self::fleet_index`] `outcome`s so far.
    pub(crate) fn fleet_index_count(&self, outcome: &'static str) -> u64 {
        self.fleet_index.with_label_values(&[outcome]).get()
    }

    /// Counts an admission turn that admitted `requests` requests.
    pub(crate) fn admission_turn(&self, requests: usize) {
        self.admission_turns.observe(requests as f64);
    }

    /// Admission turns so far, and the requests they admitted.
    pub(crate) fn admission_turns(&self) -> (u64, u64) {
        (
            self.admission_turns.get_sample_count(),
            self.admission_turns.get_sample_sum() as u64,
        )
    }

    pub(crate) fn reported(&self, outcome: ReportOutcome) {
        self.reports.with_label_values(&[outcome.as_str()]).inc();
    }

    pub(crate) fn set_leader(&self, leads: bool) {
        self.leader.set(i64::from(leads));
    }

    pub(crate) fn delivered(&self, outcome: DeliveryOutcome) {
        self.deliveries.with_label_values(&[outcome.as_str()]).inc();
    }

    pub(crate) fn telemetry(&self, stored: u32, duplicates: u32, expired: u32) {
        for (result, n) in [
            ("stored", stored),
            ("duplicate", duplicates),
            ("expired", expired),
        ] {
            self.telemetry_rounds
                .with_label_values(&[result])
                .inc_by(u64::from(n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_count_by_label() {
        let m = ServiceMetrics::default();
        m.admitted("a100", AdmissionOutcome::Queued);
        m.admitted("a100", AdmissionOutcome::Queued);
        m.delivered(DeliveryOutcome::GaveUp);
        m.telemetry(5, 1, 0);
        let families = m.registry().gather();
        let value = |name: &str, label: &str| -> u64 {
            families
                .iter()
                .find(|f| f.name() == name)
                .and_then(|f| {
                    f.get_metric()
                        .iter()
                        .find(|m| m.get_label().iter().any(|l| l.value() == label))
                })
                .map(|m| m.get_counter().get_value() as u64)
                .unwrap_or(0)
        };
        assert_eq!(value("tessera_admissions_total", "queued"), 2);
        assert_eq!(value("tessera_admissions_total", "placed"), 0);
        assert_eq!(value("tessera_webhook_deliveries_total", "gave_up"), 1);
        assert_eq!(value("tessera_telemetry_rounds_total", "stored"), 5);
        assert_eq!(value("tessera_telemetry_rounds_total", "duplicate"), 1);
    }
}
