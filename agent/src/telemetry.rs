//! The telemetry loop of one host: sample every GPU each interval, keep the
//! rounds in a bounded buffer, and send them in batches. Rounds leave the
//! buffer only when the server says it holds them (its acknowledgement
//! names the last round it stored), so an outage loses nothing up to the
//! buffer's size and a batch sent twice is stored once (the server skips
//! rounds it has).

use crate::backend::GpuBackend;
use crate::client::{ClientError, ServerClient};
use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tessera_protocol::agent::{TelemetryBatch, TelemetryRound, MAX_TELEMETRY_ROUNDS};

/// Rounds sent in one batch (10 minutes at 10 s: small enough to send
/// quickly after an outage, large enough to catch up fast).
pub const ROUNDS_PER_BATCH: usize = 60;
/// Rounds kept while the server cannot be reached (6 hours at 10 s); the
/// oldest go first beyond it.
pub const BUFFER_ROUNDS: usize = 2160;

const _: () = assert!(ROUNDS_PER_BATCH <= MAX_TELEMETRY_ROUNDS);

/// Rounds not yet acknowledged, oldest first.
#[derive(Debug)]
pub struct Buffer {
    rounds: VecDeque<TelemetryRound>,
    capacity: usize,
    /// Rounds dropped because the buffer was full.
    pub dropped: u64,
}

impl Buffer {
    /// An empty buffer of `capacity` rounds (at least one).
    pub fn new(capacity: usize) -> Self {
        Self {
            rounds: VecDeque::new(),
            capacity: capacity.max(1),
            dropped: 0,
        }
    }

    /// Adds a round, dropping the oldest when full.
    pub fn push(&mut self, round: TelemetryRound) {
        if self.rounds.len() == self.capacity {
            self.rounds.pop_front();
            self.dropped += 1;
        }
        self.rounds.push_back(round);
    }

    /// The oldest rounds, up to `n`, as a batch.
    pub fn batch(
        &self,
        hostname: &tessera_core::checked::Hostname,
        interval_ms: u32,
        n: usize,
    ) -> Option<TelemetryBatch> {
        (!self.is_empty()).then(|| TelemetryBatch {
            hostname: hostname.clone(),
            interval_ms,
            rounds: self.rounds.iter().take(n).cloned().collect(),
        })
    }

    /// Forgets the rounds the server holds (at or before `last_at_ms`).
    pub fn acknowledge(&mut self, last_at_ms: i64) {
        while self.rounds.front().is_some_and(|r| r.at_ms <= last_at_ms) {
            self.rounds.pop_front();
        }
    }

    /// Forgets the oldest `n` rounds (a batch the server refused).
    pub fn discard(&mut self, n: usize) {
        for _ in 0..n {
            self.rounds.pop_front();
        }
    }

    /// Rounds waiting.
    pub fn len(&self) -> usize {
        self.rounds.len()
    }

    /// Nothing waits.
    pub fn is_empty(&self) -> bool {
        self.rounds.is_empty()
    }
}

/// How often a host samples its GPUs, and how often it sends what it
/// sampled: every 10 s and every minute by default, so that an idle fleet's
/// telemetry costs the server one small write per host a minute while usage
/// keeps its 10 s resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cadence {
    /// Between samples.
    pub sample: Duration,
    /// Between sends (at least one sample).
    pub send: Duration,
}

impl Cadence {
    /// Whether rounds sampled since a send `since` ago are due now: a send
    /// period (less half a sample, for timer jitter) has passed, or a batch
    /// is full.
    pub fn due(&self, since: Option<Duration>, waiting: usize) -> bool {
        since.is_none_or(|since| since + self.sample / 2 >= self.send)
            || waiting >= ROUNDS_PER_BATCH
    }

    /// Where in the send period this host sends: spread over the period by
    /// its name (FNV-1a), so that a fleet started at once does not send at
    /// once, every minute.
    pub fn offset(&self, hostname: &str) -> Duration {
        let hash = hostname.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let period = u64::try_from(self.send.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        Duration::from_millis(hash % period)
    }
}

/// One host's telemetry loop.
pub struct TelemetryLoop {
    /// Where samples come from.
    pub backend: Arc<dyn GpuBackend>,
    /// The server.
    pub client: ServerClient,
    /// The host's credential.
    pub credential: String,
    /// The host name.
    pub hostname: tessera_core::checked::Hostname,
    /// Sampling and sending intervals.
    pub cadence: Cadence,
    /// The GPUs slices hold outside MIG (from the desired state).
    pub held: tokio::sync::watch::Receiver<BTreeSet<u32>>,
}

/// The wall clock, ms since the epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

impl TelemetryLoop {
    /// Samples and sends until the server refuses the credential.
    pub async fn run(self) -> Result<(), ClientError> {
        let interval_ms = u32::try_from(self.cadence.sample.as_millis() / 100 * 100)
            .unwrap_or(600_000)
            .clamp(1000, 600_000);
        let mut buffer = Buffer::new(BUFFER_ROUNDS);
        let mut tick = tokio::time::interval(Duration::from_millis(u64::from(interval_ms)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        // As if the last send was that long ago (none yet: at once).
        let mut sent_at = tokio::time::Instant::now().checked_sub(
            self.cadence
                .send
                .saturating_sub(self.cadence.offset(&self.hostname)),
        );
        loop {
            tick.tick().await;
            let at_ms = now_ms();
            let held = self.held.borrow().clone();
            let backend = Arc::clone(&self.backend);
            match tokio::task::spawn_blocking(move || backend.sample(at_ms, &held)).await {
                Ok(Ok(gpus)) if !gpus.is_empty() => buffer.push(TelemetryRound { at_ms, gpus }),
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::warn!(host = %self.hostname, "sampling failed: {e}"),
                Err(e) => tracing::warn!(host = %self.hostname, "sampling failed: {e}"),
            }
            if self.cadence.due(sent_at.map(|t| t.elapsed()), buffer.len()) {
                sent_at = Some(tokio::time::Instant::now());
                self.send(&mut buffer, interval_ms).await?;
            }
        }
    }

    /// Sends what the buffer holds, batch by batch, until it is empty or a
    /// send fails (then the rest waits for the next round).
    async fn send(&self, buffer: &mut Buffer, interval_ms: u32) -> Result<(), ClientError> {
        while let Some(batch) = buffer.batch(&self.hostname, interval_ms, ROUNDS_PER_BATCH) {
            match self.client.telemetry(&self.credential, &batch).await {
                Ok(ack) => {
                    // Every round of the batch is stored, was stored before,
                    // or was too old to keep: all are done with.
                    let sent = batch.rounds.last().map_or(i64::MIN, |r| r.at_ms);
                    buffer.acknowledge(ack.last_at_ms.max(sent));
                }
                Err(
                    e @ ClientError::Refused {
                        status: 401 | 403, ..
                    },
                ) => return Err(e),
                // Someone else is storing the same rounds: try again later.
                Err(e @ (ClientError::Refused { status: 409, .. } | ClientError::Transient(_))) => {
                    tracing::debug!(host = %self.hostname, waiting = buffer.len(), dropped = buffer.dropped, "telemetry kept for later: {e}");
                    return Ok(());
                }
                Err(e) => {
                    // The server will not take this batch as it is (a GPU it
                    // does not know yet, a clock far ahead): do not let it
                    // block the rounds behind it.
                    tracing::warn!(host = %self.hostname, rounds = batch.rounds.len(), "telemetry refused, dropped: {e}");
                    buffer.discard(batch.rounds.len());
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(at_ms: i64) -> TelemetryRound {
        TelemetryRound {
            at_ms,
            gpus: vec![],
        }
    }

    #[test]
    fn rounds_are_sent_once_a_send_period_has_passed_or_a_batch_is_full() {
        let s = Duration::from_secs;
        let c = Cadence {
            sample: s(10),
            send: s(60),
        };
        assert!(c.due(None, 1), "the first round goes at once");
        assert!(!c.due(Some(s(10)), 1));
        assert!(!c.due(Some(s(50)), 5));
        // The sixth tick, a little early.
        assert!(c.due(Some(Duration::from_millis(59_990)), 6));
        assert!(c.due(Some(s(61)), 6));
        assert!(c.due(Some(s(1)), ROUNDS_PER_BATCH), "a full batch goes");
        // Sending every sample.
        let every = Cadence {
            sample: s(2),
            send: s(2),
        };
        assert!(every.due(Some(Duration::from_millis(1_990)), 1));
    }

    #[test]
    fn hosts_send_at_different_points_of_the_period() {
        let c = Cadence {
            sample: Duration::from_secs(10),
            send: Duration::from_secs(60),
        };
        let offsets: BTreeSet<Duration> =
            (0..100).map(|i| c.offset(&format!("sim-{i:04}"))).collect();
        assert!(offsets.iter().all(|o| *o < c.send));
        assert!(offsets.len() > 90, "spread: {} distinct", offsets.len());
        let first_half = offsets.iter().filter(|o| **o < c.send / 2).count();
        assert!(
            (25..=75).contains(&first_half),
            "{first_half} of 100 in the first half"
        );
        assert_eq!(c.offset("gpu-1"), c.offset("gpu-1"), "stable");
    }

    #[test]
    fn the_buffer_keeps_what_is_not_acknowledged_and_stays_bounded() {
        let mut b = Buffer::new(3);
        let h = tessera_core::checked::Hostname::parse("h").unwrap();
        assert!(b.batch(&h, 10_000, 10).is_none());
        for t in 1..=5 {
            b.push(round(t));
        }
        assert_eq!((b.len(), b.dropped), (3, 2));
        let batch = b.batch(&h, 10_000, 2).unwrap();
        assert_eq!(
            batch.rounds.iter().map(|r| r.at_ms).collect::<Vec<_>>(),
            [3, 4]
        );
        // The server holds up to 3: 4 and 5 wait.
        b.acknowledge(3);
        assert_eq!(b.len(), 2);
        b.discard(1);
        assert_eq!(b.batch(&h, 10_000, 9).unwrap().rounds[0].at_ms, 5);
        b.acknowledge(99);
        assert!(b.is_empty());
    }
}
