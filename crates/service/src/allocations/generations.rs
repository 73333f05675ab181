//! The desired-state generations of the hosts whose agents wait in a long
//! poll on this process, re-read for all of them in one query.
//!
//! A waiting long poll wakes at once for a notice about its host (a commit
//! here, or another replica's), and re-reads its generation every
//! `desired_recheck` anyway (ten times rarer while this replica hears the
//! others' notices), in case a notice was lost. Done one host at a
//! time, an idle fleet of N hosts costs N queries a second; here the first
//! re-check that finds the last read too old reads every waiting host's
//! generation at once, and the others use that read.
//!
//! Each waiting host has its own [`Notify`]: a change wakes the polls of
//! the host it names, not every waiting poll (with a channel shared by the
//! fleet, each admission woke all 1,000 polls of a 1,000-host fleet to
//! find it was not theirs).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tessera_core::ids::HostId;

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::entity::host;
use crate::ServiceError;

/// The last read of the waiting hosts' generations.
#[derive(Debug, Default)]
struct Read {
    at: Option<Instant>,
    generations: HashMap<HostId, i64>,
}

/// The long polls waiting for one host: how many, and what wakes them.
#[derive(Debug, Default)]
struct Host {
    polls: usize,
    wake: Arc<Notify>,
}

/// Waiting long polls per host, and the last read of their generations.
#[derive(Debug, Default)]
pub(crate) struct Generations {
    waiting: Mutex<HashMap<HostId, Host>>,
    last: tokio::sync::Mutex<Read>,
}

/// A long poll registered as waiting; unregisters when dropped.
pub(crate) struct Waiting<'a> {
    generations: &'a Generations,
    host: HostId,
    wake: Arc<Notify>,
}

impl Waiting<'_> {
    /// What wakes this poll: a change to its host's desired state, or to
    /// every host's. Arm it ([`tokio::sync::futures::Notified::enable`])
    /// before reading the generation, so that no change slips between.
    pub(crate) fn wake(&self) -> &Notify {
        &self.wake
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut waiting = self.generations.waiting();
        if let Some(h) = waiting.get_mut(&self.host) {
            h.polls -= 1;
            if h.polls == 0 {
                waiting.remove(&self.host);
            }
        }
    }
}

impl Generations {
    /// A poisoned lock only means a thread panicked mid-update; the map is
    /// still a valid map.
    fn waiting(&self) -> MutexGuard<'_, HashMap<HostId, Host>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a long poll for `host` until the guard drops.
    pub(crate) fn wait(&self, host: HostId) -> Waiting<'_> {
        let mut waiting = self.waiting();
        let h = waiting.entry(host).or_default();
        h.polls += 1;
        Waiting {
            generations: self,
            host,
            wake: Arc::clone(&h.wake),
        }
    }

    /// Wakes the armed long polls of `host` (`None`: of every host).
    pub(crate) fn wake(&self, host: Option<HostId>) {
        let waiting = self.waiting();
        match host {
            Some(host) => {
                if let Some(h) = waiting.get(&host) {
                    h.wake.notify_waiters();
                }
            }
            None => {
                for h in waiting.values() {
                    h.wake.notify_waiters();
                }
            }
        }
    }

    /// The hosts with a long poll waiting.
    pub(crate) fn waiting_hosts(&self) -> Vec<HostId> {
        self.waiting().keys().copied().collect()
    }

    /// `host`'s generation as read at most `max_age` ago: from the last
    /// read of every waiting host when that is recent enough (and, when it
    /// does not cover `host`, which did not wait then, from a read of its
    /// own row added to it), else from a new one (one at a time; the others
    /// wait for it).
    pub(crate) async fn current<C: ConnectionTrait>(
        &self,
        conn: &C,
        host: HostId,
        max_age: Duration,
    ) -> Result<i64, ServiceError> {
        let mut last = self.last.lock().await;
        if last.at.is_some_and(|at| at.elapsed() < max_age) {
            if let Some(g) = last.generations.get(&host) {
                return Ok(*g);
            }
            // Not every waiting host's row again for one that joined since
            // (at 5,000 hosts, one such read per joining poll overloaded the
            // database): its own, without holding the others up.
            drop(last);
            let g = host::Entity::find_by_id(host)
                .select_only()
                .column(host::Column::DesiredGeneration)
                .into_tuple::<i64>()
                .one(conn)
                .await?
                .ok_or(ServiceError::InvalidCredential)?;
            self.last.lock().await.generations.insert(host, g);
            return Ok(g);
        }
        let mut hosts = self.waiting_hosts();
        if !hosts.contains(&host) {
            hosts.push(host);
        }
        let rows: Vec<(HostId, i64)> = host::Entity::find()
            .select_only()
            .column(host::Column::Id)
            .column(host::Column::DesiredGeneration)
            .filter(host::Column::Id.is_in(hosts))
            .into_tuple()
            .all(conn)
            .await?;
        *last = Read {
            at: Some(Instant::now()),
            generations: rows.into_iter().collect(),
        };
        last.generations
            .get(&host)
            .copied()
            .ok_or(ServiceError::InvalidCredential)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_long_polls_are_counted_per_host() {
        let g = Generations::default();
        let a = g.wait(HostId::new(1));
        let b = g.wait(HostId::new(1));
        let c = g.wait(HostId::new(2));
        let mut hosts = g.waiting_hosts();
        hosts.sort_unstable();
        assert_eq!(hosts, [HostId::new(1), HostId::new(2)]);
        drop(a);
        drop(c);
        assert_eq!(g.waiting_hosts(), [HostId::new(1)]);
        drop(b);
        assert!(g.waiting_hosts().is_empty());
    }

    /// A change wakes the armed polls of the host it names (and a change
    /// to every host's, all of them), not the others.
    #[tokio::test]
    async fn a_change_wakes_only_its_hosts_polls() {
        use std::future::Future;
        use std::pin::pin;
        use std::task::{Context, Poll, Waker};
        let g = Generations::default();
        let (one, also_one, two) = (
            g.wait(HostId::new(1)),
            g.wait(HostId::new(1)),
            g.wait(HostId::new(2)),
        );
        let mut one = pin!(one.wake().notified());
        let mut also_one = pin!(also_one.wake().notified());
        let mut two = pin!(two.wake().notified());
        for n in [one.as_mut(), also_one.as_mut(), two.as_mut()] {
            n.enable();
        }
        let mut cx = Context::from_waker(Waker::noop());
        g.wake(Some(HostId::new(1)));
        g.wake(Some(HostId::new(3)));
        assert_eq!(one.as_mut().poll(&mut cx), Poll::Ready(()));
        assert_eq!(also_one.as_mut().poll(&mut cx), Poll::Ready(()));
        assert_eq!(two.as_mut().poll(&mut cx), Poll::Pending);
        g.wake(None);
        assert_eq!(two.as_mut().poll(&mut cx), Poll::Ready(()));
    }
}
