//! What an idle fleet costs. Each agent observes its GPUs every few seconds
//! (the report interval) and holds a desired-state poll meanwhile, for half
//! the offline grace ([`tessera_protocol::agent::ReportAck::heartbeat_s`],
//! 15 s of the default 30 s) while nothing changes, ending at the host's
//! own phase ([`beat_hold`]: the fleet's polls spread evenly); the poll names the
//! agent's last report and is the host's heartbeat, and a report that
//! changed drops the poll and is sent at once. Almost every poll repeats
//! the last report; each agent request also presents the host's
//! credential. Per process, so that neither costs the database a thing:
//! - a credential that verified is believed for [`CREDENTIAL_BELIEVED_FOR`]
//!   while this replica hears the others' notices (always, on SQLite), a
//!   second otherwise: a re-enrolment or a decommission forgets the host's
//!   credential at once here and, by a notice, on every other replica; a
//!   replica whose listener reconnects forgets them all, since it may have
//!   missed a notice;
//! - a report that repeats the last one this process processed in full —
//!   the same digest, less than [`REPORT_FULL_EVERY`] ago, the host not
//!   offline since, its desired state not changed since (every change of it
//!   forgets the host here, on every replica: see
//!   [`crate::Service::wake_local`]) — is only noted as the host being seen;
//!   an agent whose next report would repeat its last names that report's
//!   digest on its desired-state poll instead of sending it, and the poll
//!   counts by the same rule ([`crate::Service::note_polled_report`]);
//! - a host is noted for writing at most once a third of the offline grace
//!   (10 s of the default 30 s), since the last time its sighting was
//!   written; those notes are written in one statement by
//!   [`crate::Service::flush_heartbeats`], which the server runs every round
//!   (about a second) and at shutdown, and [`crate::Service::tick`] runs
//!   first. A host's `last_seen_at` may lag by that much (and a round); an
//!   offline host is one not seen for the whole grace.
//!
//! A report this process has not processed in full falls back to the
//! stored digest (another replica may have), with a write; this process
//! then remembers it, with the time it was processed in full.

use super::AuthenticatedHost;
use crate::runtime::memo::{lock, Asked, Believed, Unwritten};
use chrono::{DateTime, Duration, Utc};
use std::collections::HashMap;
use std::sync::Mutex;
use tessera_core::ids::HostId;

/// How long a host credential that verified is believed while the other
/// replicas' notices are heard. A notice that could not be sent is the
/// only thing that lets a replaced or decommissioned host's old credential
/// work this long on another replica.
pub const CREDENTIAL_BELIEVED_FOR: Duration = Duration::seconds(60);

/// At most this many host credentials are believed at once.
const MAX_CREDENTIALS: usize = 100_000;

/// A report that repeats the last one is still processed in full this often.
pub const REPORT_FULL_EVERY: Duration = Duration::seconds(60);

/// How long to hold an idle poll of `host` that may wait `wait`, at
/// `now_ms` (wall clock, milliseconds since the epoch): until the host's
/// next beat, and at least half of `wait`. A host's beats are `wait` apart
/// at its own phase (its id, Fibonacci-hashed, so consecutive ids spread
/// evenly), so a fleet whose agents started together — a deployment, a
/// server restart — does not poll, and send its full reports
/// ([`REPORT_FULL_EVERY`]), in the same second ever after: after one
/// short hold each host keeps to its phase. The wall clock, not this
/// process's, so that a host keeps its phase whichever replica it reaches.
pub(crate) fn beat_hold(
    host: HostId,
    now_ms: u64,
    wait: std::time::Duration,
) -> std::time::Duration {
    let period = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX);
    if period < 2 {
        return wait;
    }
    // The fraction of the period (of 2^64) at which the host beats.
    let fraction = u128::from((host.get() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let phase = u64::try_from((fraction * u128::from(period)) >> 64).unwrap_or(0);
    let since_beat = (now_ms % period + period - phase) % period;
    let to_beat = period - since_beat;
    std::time::Duration::from_millis(to_beat.max(period / 2))
}

/// The last report of a host processed in full here, when the host was
/// last seen here, and the last sighting noted for writing.
#[derive(Debug, Clone)]
struct LastReport {
    digest: String,
    full_at: DateTime<Utc>,
    seen_at: DateTime<Utc>,
    noted_at: DateTime<Utc>,
}

/// Credentials believed, last reports and unwritten sightings, per process.
#[derive(Debug)]
pub(crate) struct HostChecks {
    /// By the credential's hash.
    credentials: Believed<AuthenticatedHost>,
    /// By host id.
    reports: Mutex<HashMap<HostId, LastReport>>,
    /// Host id → latest sighting not yet written.
    seen: Unwritten<HostId>,
}

impl Default for HostChecks {
    fn default() -> Self {
        Self {
            credentials: Believed::with_max(MAX_CREDENTIALS),
            reports: Mutex::default(),
            seen: Unwritten::default(),
        }
    }
}

impl HostChecks {
    /// The host whose credential has this hash, if it verified less than
    /// `within` ago; if not, the [`Asked`] to remember the answer with.
    pub(crate) fn credential(
        &self,
        hash: &str,
        now: DateTime<Utc>,
        within: Duration,
    ) -> Result<AuthenticatedHost, Asked> {
        self.credentials.lookup(hash, now, within)
    }

    /// Remembers a credential that verified at `now` (unless a credential
    /// was forgotten here since it was `asked`).
    pub(crate) fn remember_credential(
        &self,
        asked: Asked,
        hash: String,
        host: AuthenticatedHost,
        now: DateTime<Utc>,
    ) {
        self.credentials
            .remember(asked, hash, host, now, CREDENTIAL_BELIEVED_FOR);
    }

    /// Forgets the credentials of `host` (`None`: of every host): it
    /// enrolled again or was decommissioned, or a notice may have been
    /// missed.
    pub(crate) fn forget_credentials(&self, host: Option<HostId>) {
        self.credentials
            .forget(|h| host.is_none_or(|host| h.id == host));
    }

    /// Whether a report with `digest` repeats the last one processed in full
    /// here (see the module's rules); if it does, the host was seen at `now`,
    /// which is noted for writing when the last note is a third of
    /// `offline_after` old.
    pub(crate) fn repeats(
        &self,
        host: HostId,
        digest: &str,
        now: DateTime<Utc>,
        offline_after: Duration,
    ) -> bool {
        let mut reports = lock(&self.reports);
        let Some(last) = reports.get_mut(&host) else {
            return false;
        };
        let repeat = last.digest == digest
            && now >= last.full_at
            && now - last.full_at < REPORT_FULL_EVERY
            && now >= last.seen_at
            && now - last.seen_at < offline_after;
        if repeat {
            last.seen_at = now;
            if now - last.noted_at >= offline_after / 3 {
                last.noted_at = now;
                self.seen.note(host, now);
            }
        }
        repeat
    }

    /// Whether the last report of `host` processed in full here had
    /// `digest` and is [`REPORT_FULL_EVERY`] old at `now`: a repeat of it is
    /// due for full processing by its age, which the stored copy cannot
    /// change unless another replica processed it in full since (then one
    /// more full processing does no harm), so there is no need to ask it.
    pub(crate) fn full_due_here(&self, host: HostId, digest: &str, now: DateTime<Utc>) -> bool {
        lock(&self.reports)
            .get(&host)
            .is_some_and(|last| last.digest == digest && now - last.full_at >= REPORT_FULL_EVERY)
    }

    /// Remembers the report of `host` with `digest`, processed in full at `now`.
    pub(crate) fn processed(&self, host: HostId, digest: String, now: DateTime<Utc>) {
        self.processed_at(host, digest, now, now);
    }

    /// Remembers the report of `host` with `digest`, processed in full at
    /// `full_at` (perhaps by another replica) and seen at `now`.
    pub(crate) fn processed_at(
        &self,
        host: HostId,
        digest: String,
        full_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) {
        lock(&self.reports).insert(
            host,
            LastReport {
                digest,
                full_at,
                seen_at: now,
                // Processing it wrote the sighting.
                noted_at: now,
            },
        );
    }

    /// Forgets the last report of `host` (`None`: of every host), so that
    /// the next one is processed in full.
    pub(crate) fn forget_report(&self, host: Option<HostId>) {
        let mut reports = lock(&self.reports);
        match host {
            Some(host) => {
                reports.remove(&host);
            }
            None => reports.clear(),
        }
    }

    /// Takes the sightings to write them.
    pub(crate) fn take_seen(&self) -> HashMap<HostId, DateTime<Utc>> {
        self.seen.take()
    }

    /// Puts back sightings that could not be written.
    pub(crate) fn restore_seen(&self, seen: HashMap<HostId, DateTime<Utc>>) {
        self.seen.restore(seen);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use chrono::TimeZone;

    fn t0() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 12, 1, 8, 0, 0).unwrap()
    }

    #[test]
    fn a_poll_is_held_until_the_hosts_beat_and_at_least_half_the_wait() {
        let wait = std::time::Duration::from_secs(15);
        let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap();
        for host in [1, 2, 7, 4_999, i64::MAX, -3] {
            let mut now = 1_796_000_000_123_u64;
            let mut ends = Vec::new();
            for _ in 0..6 {
                let hold = beat_hold(HostId::new(host), now, wait);
                assert!(hold >= wait / 2 && hold <= wait, "{hold:?}");
                // The agent observes and polls again 7 ms later.
                now += ms(hold);
                ends.push(now);
                now += 7;
            }
            // After the first poll, one beat every `wait`, at the same phase.
            for pair in ends[1..].windows(2) {
                assert_eq!(pair[1] - pair[0], ms(wait), "host {host}: {ends:?}");
            }
        }
        assert_eq!(
            beat_hold(HostId::new(1), 5, std::time::Duration::ZERO),
            std::time::Duration::ZERO
        );
        assert_eq!(
            beat_hold(HostId::new(1), 5, std::time::Duration::from_millis(1)),
            std::time::Duration::from_millis(1)
        );
    }

    #[test]
    fn a_fleet_started_together_beats_spread_over_the_period() {
        let wait = std::time::Duration::from_secs(15);
        let start = 1_796_000_000_000_u64;
        let mut per_second = [0_u32; 15];
        for host in 1..=5_000 {
            // All start together; where the second poll ends is where the
            // host beats from then on.
            let first = start
                + u64::try_from(beat_hold(HostId::new(host), start, wait).as_millis()).unwrap();
            let second = first
                + u64::try_from(beat_hold(HostId::new(host), first, wait).as_millis()).unwrap();
            per_second[usize::try_from((second - start) / 1000 % 15).unwrap()] += 1;
        }
        // 5,000 / 15 = 333 a second, evenly.
        for (second, n) in per_second.iter().enumerate() {
            assert!((320..=347).contains(n), "second {second}: {per_second:?}");
        }
    }

    #[test]
    fn a_repeat_is_the_same_digest_within_a_minute_from_a_host_not_offline() {
        let offline = Duration::seconds(30);
        let at = |s: i64| t0() + Duration::seconds(s);
        let c = HostChecks::default();
        assert!(
            !c.repeats(HostId::new(1), "d", t0(), offline),
            "nothing processed yet"
        );
        c.processed(HostId::new(1), "d".into(), t0());
        assert!(!c.repeats(HostId::new(1), "other", at(5), offline));
        assert!(
            !c.repeats(HostId::new(2), "d", at(5), offline),
            "another host"
        );
        // Every 25 s: seen each time, never offline, until the minute is up.
        assert!(c.repeats(HostId::new(1), "d", at(25), offline));
        assert!(c.repeats(HostId::new(1), "d", at(50), offline));
        assert!(
            !c.repeats(HostId::new(1), "d", at(60), offline),
            "in full once a minute"
        );
        assert_eq!(c.take_seen(), HashMap::from([(HostId::new(1), at(50))]));
        assert!(c.take_seen().is_empty());

        // Silent longer than `offline`: in full.
        c.processed(HostId::new(1), "d".into(), at(100));
        assert!(!c.repeats(HostId::new(1), "d", at(130), offline));
        assert!(c.repeats(HostId::new(1), "d", at(129), offline));
        // A clock that went back is no repeat.
        assert!(!c.repeats(HostId::new(1), "d", at(90), offline));

        // Its age alone makes it due here (not its absence: another
        // replica may have seen the host meanwhile).
        assert!(!c.full_due_here(HostId::new(1), "d", at(130)));
        assert!(
            c.full_due_here(HostId::new(1), "d", at(160))
                && !c.full_due_here(HostId::new(1), "other", at(160))
        );
        // Forgotten (its desired state changed): in full.
        c.forget_report(Some(HostId::new(1)));
        assert!(!c.full_due_here(HostId::new(1), "d", at(160)));
        assert!(!c.repeats(HostId::new(1), "d", at(131), offline));
        c.processed(HostId::new(1), "d".into(), at(140));
        c.processed(HostId::new(2), "e".into(), at(140));
        c.forget_report(None);
        assert!(!c.repeats(HostId::new(1), "d", at(141), offline));
        assert!(!c.repeats(HostId::new(2), "e", at(141), offline));
    }

    #[test]
    fn a_sighting_is_noted_for_writing_a_third_of_the_grace_at_a_time() {
        let offline = Duration::seconds(30);
        let at = |s: i64| t0() + Duration::seconds(s);
        let c = HostChecks::default();
        c.processed(HostId::new(1), "d".into(), t0());
        // Seen every 5 s; noted at 10 s, then 20 s, then 30 s.
        for s in [5, 10, 15, 20, 25, 30] {
            assert!(c.repeats(HostId::new(1), "d", at(s), offline));
            let noted = c.take_seen();
            let expected = if s % 10 == 0 {
                HashMap::from([(HostId::new(1), at(s))])
            } else {
                HashMap::new()
            };
            assert_eq!(noted, expected, "at {s} s");
        }
        // Processing in full wrote it: the next note is 10 s after that.
        c.processed(HostId::new(1), "d".into(), at(32));
        assert!(c.repeats(HostId::new(1), "d", at(40), offline));
        assert!(c.take_seen().is_empty());
        assert!(c.repeats(HostId::new(1), "d", at(42), offline));
        assert_eq!(c.take_seen(), HashMap::from([(HostId::new(1), at(42))]));
    }

    #[test]
    fn sightings_survive_a_failed_write() {
        let c = HostChecks::default();
        c.processed(HostId::new(3), "d".into(), t0());
        assert!(c.repeats(
            HostId::new(3),
            "d",
            t0() + Duration::seconds(10),
            Duration::seconds(30)
        ));
        let taken = c.take_seen();
        c.restore_seen(taken.clone());
        assert_eq!(c.take_seen(), taken);
    }
}
