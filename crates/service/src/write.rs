//! The one write path. Every change opens a [`Write`], changes rows through
//! [`Write::db`], records what happened with [`Write::emit`], and ends with
//! [`Write::commit`], which writes the audit rows, notifications and webhook
//! outbox derived from the events in the same transaction, commits, lets go
//! of the writer turn, and only then wakes the agents and retries the queue.
//! A host's desired state changes only through [`Write::bump_generation`]
//! (or [`Write::bump_all_generations`]), so the write knows exactly which
//! agents' long polls to wake. Use cases that keep something of their own
//! across the commit hand it over as a [`CommitHook`] (the fleet index's
//! carried pools are one), settled in the transaction with the write's
//! events; the write knows no more of it. Dropping a `Write` without
//! committing rolls everything back.

use crate::audit::Actor;
use crate::commit_hook::CommitHook;
use crate::entity::{audit_event, host, notification, tenant, webhook, webhook_delivery};
use crate::events::{DomainEvent, Link, NoticeDraft, Recipients};
use crate::runtime::commit_hooks;
use crate::runtime::replicas::PeerNotice;
use crate::{Service, ServiceError, WriterTurn};
use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseTransaction, EntityTrait, QueryFilter,
    Set,
};
use serde_json::json;
use std::collections::BTreeSet;
use tessera_core::ids::{HostId, TenantId, UserId};

/// The PostgreSQL advisory-lock key that admissions and the queue take in
/// turn, on every replica (public for operators and tests: a session that
/// holds it stops every admission).
pub const ADMISSION_LOCK: i64 = 0x0074_6573_7365_7261; // "tessera"
/// How many of one process's admissions may hold a database connection at
/// once (see [`Service::begin_admission`]).
pub(crate) const ADMISSIONS_AT_THE_LOCK: usize = 2;
/// The advisory-lock key of telemetry rollups (one replica at a time).
pub(crate) const ROLLUP_LOCK: i64 = 0x0074_656c_726f_6c6c; // "telroll"
/// The advisory-lock key of tenant creations and changes: a namespace
/// serves one tenant, checked against every other tenant before the write.
pub(crate) const TENANTS_LOCK: i64 = 0x0074_7465_6e61_6e74; // "ttenant"

/// A write that changes nothing but takes SQLite's write lock (RESERVED) at
/// once, as `BEGIN IMMEDIATE` would, so a transaction never has to upgrade
/// from reader to writer.
pub(crate) const SQLITE_TAKE_WRITE_LOCK: &str = "DELETE FROM seaql_migrations WHERE 0";

/// Audit rows written by one statement (ten parameters each, well under
/// PostgreSQL's 65,535).
const AUDIT_ROWS_PER_INSERT: usize = 500;

/// An open write: a transaction, the writer turn that goes with it, and the
/// events of the change so far.
pub(crate) struct Write {
    txn: DatabaseTransaction,
    turn: WriterTurn,
    /// This process's leave to hold a connection for an admission (see
    /// [`Service::begin_admission`]).
    admission: Option<tokio::sync::OwnedSemaphorePermit>,
    events: Vec<DomainEvent>,
    /// Who did each of `events`, where not the committing actor (a write
    /// that admits several tenants' requests together names each).
    event_actors: Vec<Option<Actor<'static>>>,
    now: DateTime<Utc>,
    /// Hosts whose desired state this write changed (behind a lock so that
    /// a bump needs only `&self` while the transaction is borrowed).
    bumped: std::sync::Mutex<Bumped>,
    /// What use cases settle with the events before the commit (one of
    /// each type; see [`Write::hook`]).
    hooks: Vec<Box<dyn CommitHook>>,
}

/// Whose desired generation a write bumped.
#[derive(Debug, Default)]
struct Bumped {
    hosts: BTreeSet<HostId>,
    all: bool,
}

impl std::fmt::Debug for Write {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Write")
            .field("events", &self.events)
            .field("now", &self.now)
            .finish_non_exhaustive()
    }
}

impl Service {
    /// Opens a write. SQLite's deferred transactions fail at once with
    /// "database is locked" when a reader upgrades to a writer after another
    /// writer committed (no busy wait applies), so on SQLite the process's
    /// writers take turns, and each write transaction takes the database's
    /// write lock as its first statement (what `BEGIN IMMEDIATE` does, which
    /// sea-orm cannot issue): a writer of another process (the command line)
    /// is waited for under the busy timeout instead of failing half-way.
    /// PostgreSQL needs no such care.
    pub(crate) async fn begin_write(&self) -> Result<Write, ServiceError> {
        use sea_orm::TransactionTrait;
        let turn = match &self.sqlite_writer {
            Some(lock) => Some(std::sync::Arc::clone(lock).lock_owned().await),
            None => None,
        };
        let txn = self.db.begin().await?;
        if turn.is_some() {
            txn.execute_unprepared(SQLITE_TAKE_WRITE_LOCK).await?;
        }
        Ok(Write {
            txn,
            turn,
            admission: None,
            events: Vec::new(),
            event_actors: Vec::new(),
            now: self.now(),
            bumped: std::sync::Mutex::default(),
            hooks: commit_hooks(),
        })
    }

    /// Opens a write in which no other admission runs: on SQLite the writer
    /// turn already serializes; on PostgreSQL a transaction-scoped advisory
    /// lock does (released at commit or rollback). Of this process's
    /// admissions, at most [`ADMISSIONS_AT_THE_LOCK`] hold a connection (the
    /// one in its turn and the next, already waiting on the lock, so the
    /// hand-over costs no round trip); the rest wait in memory. Before,
    /// every waiting admission held a connection, and with a pool of ten,
    /// ten of them waiting left none for the agents' reports and the reads.
    pub(crate) async fn begin_admission(&self) -> Result<Write, ServiceError> {
        let admission = self.admission_permit().await?;
        self.begin_admission_holding(admission).await
    }

    /// This process's leave to hold a connection for an admission (see
    /// [`Self::begin_admission`]).
    pub(crate) async fn admission_permit(
        &self,
    ) -> Result<tokio::sync::OwnedSemaphorePermit, ServiceError> {
        std::sync::Arc::clone(&self.admission_turn)
            .acquire_owned()
            .await
            .map_err(|_| ServiceError::internal("the admission turn was closed"))
    }

    /// [`Self::begin_admission`] with the leave already taken.
    pub(crate) async fn begin_admission_holding(
        &self,
        admission: tokio::sync::OwnedSemaphorePermit,
    ) -> Result<Write, ServiceError> {
        let mut w = self.begin_locked(ADMISSION_LOCK).await?;
        w.admission = Some(admission);
        Ok(w)
    }

    /// Opens a write that holds PostgreSQL advisory lock `key` until it
    /// ends, so no other replica runs the same kind of write meanwhile (on
    /// SQLite the writer turn already does).
    pub(crate) async fn begin_locked(&self, key: i64) -> Result<Write, ServiceError> {
        let w = self.begin_write().await?;
        if w.txn.get_database_backend() == sea_orm::DbBackend::Postgres {
            w.txn
                .execute(sea_orm::Statement::from_string(
                    sea_orm::DbBackend::Postgres,
                    format!("SELECT pg_advisory_xact_lock({key})"),
                ))
                .await?;
        }
        Ok(w)
    }
}

impl Write {
    /// The transaction, for reads and row changes.
    pub fn db(&self) -> &DatabaseTransaction {
        &self.txn
    }

    /// The time of this write (by the service's clock when it began).
    pub fn now(&self) -> DateTime<Utc> {
        self.now
    }

    /// Records that `event` happened in this write.
    pub fn emit(&mut self, event: DomainEvent) {
        self.events.push(event);
        self.event_actors.push(None);
    }

    /// Records that `actor` did `event` in this write (the audit row and
    /// the notices name `actor`, not the actor the write commits as).
    pub fn emit_as(&mut self, event: DomainEvent, actor: Actor<'static>) {
        self.events.push(event);
        self.event_actors.push(Some(actor));
    }

    /// Changes the desired state of host `host_id`: a new generation (its
    /// next report is processed in full), and its agent's long poll wakes
    /// once this write commits. The one place a host's generation moves.
    pub async fn bump_generation(&self, host_id: HostId) -> Result<i64, ServiceError> {
        use sea_orm::QueryTrait;
        // One statement: the update answers the new generation (`RETURNING`,
        // which PostgreSQL and SQLite both have).
        let mut update = new_generation()
            .filter(host::Column::Id.eq(host_id))
            .into_query();
        update.returning_col(host::Column::DesiredGeneration);
        let backend = self.txn.get_database_backend();
        let generation: i64 = self
            .txn
            .query_one(backend.build(&update))
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("host {host_id}")))?
            .try_get(
                "",
                &sea_orm::Iden::to_string(&host::Column::DesiredGeneration),
            )?;
        self.bumped().hosts.insert(host_id);
        Ok(generation)
    }

    /// Changes the desired state of every host (a pool's policy, which
    /// every host's desired state is computed from, changed).
    pub async fn bump_all_generations(&self) -> Result<(), ServiceError> {
        new_generation().exec(&self.txn).await?;
        self.bumped().all = true;
        Ok(())
    }

    /// The hook of type `H` this write carries (a new one, added, the
    /// first time a use case asks).
    pub fn hook<H: CommitHook + Default>(&mut self) -> &mut H {
        let at = match self.hooks.iter_mut().position(|h| h.as_any_mut().is::<H>()) {
            Some(at) => at,
            None => {
                self.hooks.push(Box::new(H::default()));
                self.hooks.len() - 1
            }
        };
        match self.hooks[at].as_any_mut().downcast_mut::<H>() {
            Some(hook) => hook,
            None => unreachable!("the hook at {at} was found by its type"),
        }
    }

    fn bumped(&self) -> std::sync::MutexGuard<'_, Bumped> {
        self.bumped
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Derives the audit rows, notifications and webhook events, commits,
    /// releases the writer turn, then wakes the agents whose desired state
    /// changed and, when quota grew, places what waits in the queues.
    pub async fn commit(self, service: &Service, actor: &Actor<'_>) -> Result<(), ServiceError> {
        if self.commit_without_retry(service, actor).await? {
            service.retry_waiting().await?;
        }
        Ok(())
    }

    /// [`Write::commit`] without the queue retry; returns whether quota grew.
    /// The queue itself commits this way (placing never grows quota, and a
    /// retry from inside the retry would be a cycle).
    pub async fn commit_without_retry(
        self,
        service: &Service,
        actor: &Actor<'_>,
    ) -> Result<bool, ServiceError> {
        let Write {
            txn,
            turn,
            admission,
            events,
            event_actors,
            now,
            bumped,
            hooks,
        } = self;
        let bumped = bumped
            .into_inner()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // The tenants whose allocation lists this write may change: those
        // its events name, or all of them for an event that names none.
        let mut touched = crate::allocations::Touched::default();
        let mut audit_rows = Vec::new();
        for (event, own) in events.iter().zip(&event_actors) {
            let actor = own.as_ref().unwrap_or(actor);
            let audit = event.audit();
            touched.add(audit.as_ref().and_then(|a| a.tenant_id));
            if let Some(entry) = audit {
                let (actor_user_id, actor_name) = actor.parts();
                audit_rows.push(audit_event::Model {
                    id: 0,
                    at: crate::audit_chain::stored_instant(now),
                    actor_user_id,
                    actor: actor_name,
                    tenant_id: entry.tenant_id,
                    action: entry.action,
                    target_type: entry.target_type,
                    target_id: entry.target_id,
                    before: entry.before,
                    after: entry.after,
                    hash: None,
                });
            }
            if let Some(notice) = event.notice() {
                let spare = notice.spare_actor.then(|| actor.parts().0).flatten();
                send(&txn, notice, spare, now).await?;
            }
        }
        // The write's audit rows in one statement (a few hundred at a time:
        // a bulk change may emit thousands), in the events' order.
        // Chained after the log's head, which stays locked until the commit.
        crate::audit_chain::append(&txn, &mut audit_rows).await?;
        let mut audit_rows: Vec<audit_event::ActiveModel> = audit_rows
            .into_iter()
            .map(|row| {
                let mut row: audit_event::ActiveModel = row.into();
                row.id = sea_orm::ActiveValue::NotSet;
                row
            })
            .collect();
        while !audit_rows.is_empty() {
            let rest = audit_rows.split_off(audit_rows.len().min(AUDIT_ROWS_PER_INSERT));
            audit_event::Entity::insert_many(std::mem::replace(&mut audit_rows, rest))
                .exec_without_returning(&txn)
                .await?;
        }
        for hook in hooks {
            hook.settle(service, &txn, &events).await?;
        }
        txn.commit().await?;
        drop(turn);
        drop(admission);
        // What changed is forgotten here at once, and on the other replicas
        // by notices sent together.
        let mut notices = service.lists_touched(&touched);
        if bumped.all {
            notices.push(service.desired_changed(None));
        } else {
            for host in bumped.hosts {
                notices.push(service.desired_changed(Some(host)));
            }
        }
        let mut retries_queue = false;
        for after in events.iter().map(DomainEvent::after_commit) {
            retries_queue |= after.retries_queue;
            if let Some(token) = after.forgets_token {
                service.token_checks.forget(token);
                notices.push(PeerNotice::TokenRevoked(token));
            }
            if let Some(host) = after.forgets_host_credential {
                service.host_checks.forget_credentials(Some(host));
                notices.push(PeerNotice::HostCredential(host));
            }
        }
        service.tell_peers(notices);
        Ok(retries_queue)
    }
}

/// The update that gives hosts a new desired generation; their next
/// reports are processed in full (the digest of the last one is cleared).
fn new_generation() -> sea_orm::UpdateMany<host::Entity> {
    host::Entity::update_many()
        .col_expr(
            host::Column::DesiredGeneration,
            Expr::col(host::Column::DesiredGeneration).add(1),
        )
        .col_expr(
            host::Column::ReportDigest,
            Expr::value(Option::<String>::None),
        )
}

/// Writes `notice` for each recipient (deduplicated, sparing `spare`) and
/// queues it for the tenant's webhook.
async fn send<C: ConnectionTrait>(
    conn: &C,
    notice: NoticeDraft,
    spare: Option<UserId>,
    now: DateTime<Utc>,
) -> Result<(), ServiceError> {
    let mut recipients: BTreeSet<UserId> = match &notice.to {
        Recipients::Users(users) => users.iter().copied().collect(),
        Recipients::TenantAdmins(t) => crate::notifications::tenant_admins(conn, *t)
            .await?
            .into_iter()
            .collect(),
        Recipients::PlatformAdminsAnd(users) => crate::notifications::platform_admins(conn)
            .await?
            .into_iter()
            .chain(users.iter().copied())
            .collect(),
    };
    if let Some(u) = spare {
        recipients.remove(&u);
    }
    // The tenant's slug (for the link) and whether it has a webhook, in
    // one statement.
    let (slug, hooked) = match notice.tenant_id {
        Some(id) => tenant_and_hook(conn, id).await?,
        None => (String::new(), false),
    };
    let link = match &notice.link {
        Link::Path(p) => p.clone(),
        Link::Allocation(id) => format!("/t/{slug}/a/{id}"),
    };
    for user_id in recipients {
        notification::ActiveModel {
            user_id: Set(user_id),
            tenant_id: Set(notice.tenant_id),
            kind: Set(notice.kind),
            title: Set(clip(&notice.title, 300)),
            body: Set(clip(&notice.body, 2000)),
            link: Set(Some(link.clone())),
            created_at: Set(now),
            read_at: Set(None),
            ..Default::default()
        }
        .insert(conn)
        .await?;
    }
    let Some(tenant_id) = notice.tenant_id else {
        return Ok(());
    };
    if hooked {
        let payload = json!({
            "event": notice.kind,
            "at": now,
            "tenant": slug,
            "title": notice.title,
            "body": notice.body,
            "link": link,
            "data": notice.data,
        });
        webhook_delivery::ActiveModel {
            tenant_id: Set(tenant_id),
            event: Set(notice.kind),
            payload: Set(payload.to_string()),
            attempts: Set(0),
            next_attempt_at: Set(Some(now)),
            delivered_at: Set(None),
            failed_at: Set(None),
            last_error: Set(None),
            created_at: Set(now),
            ..Default::default()
        }
        .insert(conn)
        .await?;
    }
    Ok(())
}

/// Tenant `id`'s slug, and whether it has a webhook.
async fn tenant_and_hook<C: ConnectionTrait>(
    conn: &C,
    id: TenantId,
) -> Result<(String, bool), ServiceError> {
    use sea_orm::sea_query::Query;
    use sea_orm::QuerySelect;
    let hook = Query::select()
        .expr(Expr::val(1))
        .from(webhook::Entity)
        .and_where(
            Expr::col((webhook::Entity, webhook::Column::TenantId))
                .equals((tenant::Entity, tenant::Column::Id)),
        )
        .to_owned();
    tenant::Entity::find_by_id(id)
        .select_only()
        .column(tenant::Column::Slug)
        .column_as(Expr::exists(hook), "hooked")
        .into_tuple::<(String, bool)>()
        .one(conn)
        .await?
        .ok_or_else(|| ServiceError::not_found(format!("tenant {id}")))
}

fn clip(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}
