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

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use sea_orm::{ColumnTrait, ConnectionTrait, EntityTrait, QueryFilter, QuerySelect};
use tokio::time::Instant;

use crate::entity::host;
use crate::ServiceError;

/// The last read of the waiting hosts' generations.
#[derive(Debug, Default)]
struct Read {
    at: Option<Instant>,
    generations: HashMap<i64, i64>,
}

/// Waiting long polls per host, and the last read of their generations.
#[derive(Debug, Default)]
pub(crate) struct Generations {
    waiting: Mutex<HashMap<i64, usize>>,
    last: tokio::sync::Mutex<Read>,
}

/// A long poll registered as waiting; unregisters when dropped.
pub(crate) struct Waiting<'a> {
    generations: &'a Generations,
    host: i64,
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut waiting = self.generations.waiting();
        if let Some(n) = waiting.get_mut(&self.host) {
            *n -= 1;
            if *n == 0 {
                waiting.remove(&self.host);
            }
        }
    }
}

impl Generations {
    /// A poisoned lock only means a thread panicked mid-update; the map is
    /// still a valid map.
    fn waiting(&self) -> MutexGuard<'_, HashMap<i64, usize>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a long poll for `host` until the guard drops.
    pub(crate) fn wait(&self, host: i64) -> Waiting<'_> {
        *self.waiting().entry(host).or_default() += 1;
        Waiting {
            generations: self,
            host,
        }
    }

    /// The hosts with a long poll waiting.
    pub(crate) fn waiting_hosts(&self) -> Vec<i64> {
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
        host: i64,
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
        let rows: Vec<(i64, i64)> = host::Entity::find()
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
        let a = g.wait(1);
        let b = g.wait(1);
        let c = g.wait(2);
        let mut hosts = g.waiting_hosts();
        hosts.sort_unstable();
        assert_eq!(hosts, [1, 2]);
        drop(a);
        drop(c);
        assert_eq!(g.waiting_hosts(), [1]);
        drop(b);
        assert!(g.waiting_hosts().is_empty());
    }
}
