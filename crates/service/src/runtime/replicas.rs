//! Several server replicas on one PostgreSQL.
//!
//! - **Leadership.** The timer (lease ends, drains, lost hosts, provisioning
//!   timeouts, idle reclaim, preemption, the queue, telemetry rollups and
//!   retention) runs on one replica at a time: the one holding the
//!   session-level advisory lock [`LEADER_LOCK`] on a connection of its own.
//!   When that replica dies, PostgreSQL ends its session, the lock is free,
//!   and the next replica to try (each tries every timer round) leads. The
//!   leader checks its connection every round and stops leading the moment
//!   it fails. Leadership saves work; it is not what keeps the timer's
//!   effects single: every step of it is a conditional update inside a
//!   write (admissions and the queue also hold a transaction-scoped advisory
//!   lock), so a deposed leader finishing a round it began can only find
//!   the rows already changed. That is the fencing.
//! - **Wake-ups.** A commit that changes a host's desired state, or revokes
//!   an API token, is announced on the `tessera` channel with `pg_notify`;
//!   every replica listens ([`Service::listen_to_peers`]) and wakes its own
//!   long polls or forgets the token, so a change made on one replica reaches
//!   agents connected to another at once. Long polls still re-read their
//!   generation every second, which covers notices lost while a listener
//!   reconnects. A re-enrolled or decommissioned host's credential is
//!   announced the same way; host credentials are believed longer only
//!   while the listener is subscribed, and a new subscription forgets
//!   them all.
//!
//! On SQLite there is one process: it always leads and has no peers.

use super::list_cache::Touched;
use crate::{Service, ServiceError};
use sea_orm::sqlx::{self, Connection};
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend};
use std::sync::atomic::{AtomicBool, Ordering};
use tessera_core::ids::{ApiTokenId, HostId, TenantId};

/// The session-level advisory-lock key of the timer's leader.
pub(crate) const LEADER_LOCK: i64 = 0x0074_6c65_6164_6572; // "tleader"
/// The session-level advisory-lock key a starting server holds.
const STARTUP_LOCK: i64 = 0x0074_7374_6172_7475; // "tstartu"
/// The `LISTEN` channel replicas announce changes on.
const CHANNEL: &str = "tessera";

/// A change one replica announces to the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PeerNotice {
    /// A host's desired state changed (`None`: every host's).
    Desired(Option<HostId>),
    /// An API token was revoked.
    TokenRevoked(ApiTokenId),
    /// A host's credential stopped working (re-enrolled or decommissioned).
    HostCredential(HostId),
    /// A tenant's allocations changed (`None`: every tenant's).
    Lists(Option<TenantId>),
}

impl PeerNotice {
    /// The `pg_notify` payload: the sending replica, then the notice.
    fn payload(self, replica: u64) -> String {
        match self {
            Self::Desired(Some(host)) => format!("{replica:x} desired {host}"),
            Self::Desired(None) => format!("{replica:x} desired *"),
            Self::TokenRevoked(token) => format!("{replica:x} token {token}"),
            Self::HostCredential(host) => format!("{replica:x} credential {host}"),
            Self::Lists(Some(tenant)) => format!("{replica:x} lists {tenant}"),
            Self::Lists(None) => format!("{replica:x} lists *"),
        }
    }

    /// Reads a payload: the sender and the notice (`None`: not ours to read).
    fn parse(payload: &str) -> Option<(u64, Self)> {
        let mut parts = payload.split(' ');
        let replica = u64::from_str_radix(parts.next()?, 16).ok()?;
        let notice = match (parts.next()?, parts.next()?) {
            ("desired", "*") => Self::Desired(None),
            ("desired", host) => Self::Desired(Some(host.parse().ok()?)),
            ("token", token) => Self::TokenRevoked(token.parse().ok()?),
            ("credential", host) => Self::HostCredential(host.parse().ok()?),
            ("lists", "*") => Self::Lists(None),
            ("lists", tenant) => Self::Lists(Some(tenant.parse().ok()?)),
            _ => return None,
        };
        parts.next().is_none().then_some((replica, notice))
    }
}

/// This replica's part in the cluster: who it is, and its leadership.
pub(crate) struct Replica {
    /// A random id, so a replica skips its own notices.
    id: u64,
    /// The connection holding (or trying for) the leader lock.
    lock_conn: tokio::sync::Mutex<Option<sqlx::PgConnection>>,
    leading: AtomicBool,
    /// The listener is subscribed: the others' notices reach this replica.
    hearing: AtomicBool,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica")
            .field("id", &format_args!("{:x}", self.id))
            .field("leading", &self.leading.load(Ordering::Relaxed))
            .field("hearing", &self.hearing.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Default for Replica {
    fn default() -> Self {
        Self {
            id: rand::random(),
            lock_conn: tokio::sync::Mutex::new(None),
            leading: AtomicBool::new(false),
            hearing: AtomicBool::new(false),
        }
    }
}

fn postgres_pool(db: &DatabaseConnection) -> Option<&sqlx::PgPool> {
    (db.get_database_backend() == DbBackend::Postgres).then(|| db.get_postgres_connection_pool())
}

/// A connection of its own, out of the pool (a session-level lock must stay
/// with one session, and a pooled connection would go back to others).
async fn own_connection(pool: &sqlx::PgPool) -> Result<sqlx::PgConnection, sqlx::Error> {
    Ok(pool.acquire().await?.detach())
}

/// Held while a server starts: migrations, the session table and seeding
/// the pools and tenants run on one replica at a time (PostgreSQL: a
/// session-level advisory lock on a connection of its own; SQLite: one
/// process, nothing to hold), so replicas started together never race to
/// create the same rows; the later ones find the work done. Dropped
/// without [`StartupLock::release`] (a failed start), the connection closes
/// and PostgreSQL releases the lock.
pub struct StartupLock(Option<sqlx::PgConnection>);

impl std::fmt::Debug for StartupLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StartupLock")
            .field(&self.0.is_some())
            .finish()
    }
}

impl StartupLock {
    /// Waits for the other replicas' starts to finish, then holds the lock.
    pub async fn acquire(db: &DatabaseConnection) -> Result<Self, sea_orm::DbErr> {
        let Some(pool) = postgres_pool(db) else {
            return Ok(Self(None));
        };
        let err = |e: sqlx::Error| sea_orm::DbErr::Custom(format!("startup lock: {e}"));
        let mut conn = own_connection(pool).await.map_err(err)?;
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(STARTUP_LOCK)
            .execute(&mut conn)
            .await
            .map_err(err)?;
        Ok(Self(Some(conn)))
    }

    /// Lets the next replica start.
    pub async fn release(self) {
        if let Some(mut conn) = self.0 {
            let _ = sqlx::query("SELECT pg_advisory_unlock($1)")
                .bind(STARTUP_LOCK)
                .execute(&mut conn)
                .await;
            let _ = conn.close().await;
        }
    }
}

impl Service {
    /// Whether this replica runs the timer now. A replica that does not lead
    /// tries to take the lead; the leader checks it still holds it.
    pub async fn lead(&self) -> bool {
        let Some(pool) = postgres_pool(&self.db) else {
            return true;
        };
        let replica = &self.replica;
        let mut slot = replica.lock_conn.lock().await;
        let was = replica.leading.load(Ordering::Relaxed);
        let now = match Self::hold_lead(pool, &mut slot, was).await {
            Ok(leads) => leads,
            Err(e) => {
                // The session is gone, and the lock with it.
                tracing::warn!("leader lock connection: {e}");
                *slot = None;
                false
            }
        };
        if now != was {
            if now {
                tracing::info!(replica = %format_args!("{:x}", replica.id), "this replica now runs the timer");
            } else {
                tracing::warn!(replica = %format_args!("{:x}", replica.id), "this replica no longer runs the timer");
            }
        }
        replica.leading.store(now, Ordering::Relaxed);
        self.metrics.set_leader(now);
        now
    }

    async fn hold_lead(
        pool: &sqlx::PgPool,
        slot: &mut Option<sqlx::PgConnection>,
        leading: bool,
    ) -> Result<bool, sqlx::Error> {
        let conn = match slot {
            Some(c) => c,
            None => slot.insert(own_connection(pool).await?),
        };
        if leading {
            // The lock lives as long as the session; a round trip proves it.
            sqlx::query("SELECT 1").execute(&mut *conn).await?;
            return Ok(true);
        }
        sqlx::query_scalar::<_, bool>("SELECT pg_try_advisory_lock($1)")
            .bind(LEADER_LOCK)
            .fetch_one(&mut *conn)
            .await
    }

    /// Whether every other replica's notices reach this one: on SQLite
    /// (there are none), or while the listener is subscribed.
    pub fn peers_heard(&self) -> bool {
        postgres_pool(&self.db).is_none() || self.replica.hearing.load(Ordering::Acquire)
    }

    /// Whether this replica led at its last timer round.
    pub fn leads(&self) -> bool {
        self.replica.leading.load(Ordering::Relaxed) || postgres_pool(&self.db).is_none()
    }

    /// Gives up the lead (on shutdown), so another replica takes over at its
    /// next round instead of when PostgreSQL notices this one is gone.
    pub async fn resign(&self) {
        let mut slot = self.replica.lock_conn.lock().await;
        if let Some(conn) = slot.take() {
            let _ = conn.close().await;
        }
        self.replica.leading.store(false, Ordering::Relaxed);
        self.metrics.set_leader(false);
    }

    /// Tells the other replicas (PostgreSQL) about `notices`, in one
    /// statement in the background; a notice that cannot be sent is covered
    /// by their periodic re-checks.
    pub(crate) fn tell_peers(&self, notices: Vec<PeerNotice>) {
        let Some(pool) = postgres_pool(&self.db) else {
            return;
        };
        if notices.is_empty() {
            return;
        }
        let pool = pool.clone();
        let payloads: Vec<String> = notices.iter().map(|n| n.payload(self.replica.id)).collect();
        tokio::spawn(async move {
            if let Err(e) = sqlx::query("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p")
                .bind(CHANNEL)
                .bind(&payloads)
                .execute(&pool)
                .await
            {
                tracing::debug!("telling the other replicas: {e}");
            }
        });
    }

    /// Listens to the other replicas' notices until `stop` turns `true`
    /// (returns at once on SQLite), reconnecting when the connection drops.
    pub async fn listen_to_peers(&self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let Some(pool) = postgres_pool(&self.db) else {
            return;
        };
        loop {
            let outcome = tokio::select! {
                r = self.listen_once(pool) => r,
                _ = stop.wait_for(|s| *s) => None,
            };
            self.replica.hearing.store(false, Ordering::Release);
            let Some(outcome) = outcome else {
                return;
            };
            if let Err(e) = outcome {
                tracing::warn!("listening to the other replicas: {e}; again in 1 s");
            }
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }

    /// Forgets the kept lists a committed write may have changed here;
    /// returns the notices that tell the other replicas.
    pub(crate) fn lists_touched(&self, touched: &Touched) -> Vec<PeerNotice> {
        self.lists.touch(touched);
        match touched {
            Touched::Nothing => Vec::new(),
            Touched::Tenants(ts) => ts.iter().map(|t| PeerNotice::Lists(Some(*t))).collect(),
            Touched::All => vec![PeerNotice::Lists(None)],
        }
    }

    /// Listens until the connection fails (`Some(Err)`); never ends
    /// otherwise.
    async fn listen_once(&self, pool: &sqlx::PgPool) -> Option<Result<(), ServiceError>> {
        let err = |e: sqlx::Error| ServiceError::internal(format!("the replicas' listener: {e}"));
        let mut listener = match sqlx::postgres::PgListener::connect_with(pool).await {
            Ok(l) => l,
            Err(e) => return Some(Err(err(e))),
        };
        // A listener whose connection dropped may have missed notices: it
        // is not reconnected behind our back (`recv` would), this
        // subscription ends and the next one starts over.
        listener.eager_reconnect(false);
        if let Err(e) = listener.listen(CHANNEL).await {
            return Some(Err(err(e)));
        }
        // Whatever changed while nobody listened: every long poll re-reads,
        // every kept list is read again, every credential is checked again.
        self.wake_local(None);
        self.lists.touch(&Touched::All);
        self.host_checks.forget_credentials(None);
        self.replica.hearing.store(true, Ordering::Release);
        loop {
            let n = match listener.try_recv().await {
                Ok(Some(n)) => n,
                Ok(None) => {
                    return Some(Err(ServiceError::internal(
                        "the listener's connection was lost",
                    )))
                }
                Err(e) => return Some(Err(err(e))),
            };
            match PeerNotice::parse(n.payload()) {
                Some((from, _)) if from == self.replica.id => {}
                Some((_, PeerNotice::Desired(host))) => self.wake_local(host),
                Some((_, PeerNotice::TokenRevoked(token))) => self.token_checks.forget(token),
                Some((_, PeerNotice::HostCredential(host))) => {
                    self.host_checks.forget_credentials(Some(host));
                }
                Some((_, PeerNotice::Lists(tenant))) => self.lists.touch(&match tenant {
                    Some(t) => Touched::Tenants([t].into()),
                    None => Touched::All,
                }),
                None => tracing::debug!(payload = n.payload(), "unknown replica notice"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_read_back_and_nothing_else_does() {
        for n in [
            PeerNotice::Desired(Some(HostId::new(42))),
            PeerNotice::Desired(None),
            PeerNotice::TokenRevoked(ApiTokenId::new(7)),
            PeerNotice::HostCredential(HostId::new(9)),
            PeerNotice::Lists(Some(TenantId::new(3))),
            PeerNotice::Lists(None),
        ] {
            assert_eq!(PeerNotice::parse(&n.payload(0xbeef)), Some((0xbeef, n)));
        }
        for bad in [
            "",
            "beef",
            "beef desired",
            "zz desired 1",
            "beef desired x",
            "beef token *",
            "beef credential *",
            "beef other 1",
            "beef desired 1 2",
            "beef lists x",
        ] {
            assert_eq!(PeerNotice::parse(bad), None, "{bad:?}");
        }
    }
}
