//! Tessera's use-cases over the database, with authorization.
//!
//! Every public operation takes the acting [`Principal`] (or a proof of a role
//! derived from it, such as [`PlatformAdmin`]) and returns a typed
//! [`ServiceError`]. Time comes from the [`Clock`] in [`Service`], so tests
//! control it.

pub mod allocations;
pub mod api_tokens;
pub mod audit;
pub mod audit_chain;
pub mod audit_log;
pub mod audit_retention;
mod auth;
mod budgets;
mod commit_hook;
mod db;
pub mod entity;
mod error;
pub mod events;
pub mod fleet;
pub mod identity;
pub mod insights;
pub mod k8s;
pub mod ledger;
pub mod metrics;
pub mod notifications;
pub mod people;
mod policy;
pub mod pools;
pub mod quotas;
mod rightsizing;
mod runtime;
mod secret;
mod statements;
pub mod telemetry;
pub mod tenants;
pub mod token_auth;
pub mod usage;
mod write;

pub use auth::{PlatformAdmin, Principal, TenantActor, Viewer};
pub use db::{connect, migrate, pending_migrations, DbKind};
pub use error::{ErrorCode, ServiceError};
pub use identity::{Directory, LoginClaims, TenantSpec};
pub use runtime::replicas::StartupLock;
pub use sea_orm::DatabaseConnection;
pub use write::ADMISSION_LOCK;

use chrono::{DateTime, Duration, Utc};
use std::sync::Arc;

/// Source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now, in UTC.
    fn now(&self) -> DateTime<Utc>;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    // The one place the wall clock is read for the use-cases.
    #[allow(clippy::disallowed_methods)]
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// Settings the use-cases need.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The platform-admin groups, and the tenants the configuration seeds
    /// (with their groups while the database has none).
    pub directory: Directory,
    /// A host that has not reported for this long is offline.
    pub host_offline_after: Duration,
    /// A host that has not reported for this long has lost its slices.
    pub host_lost_after: Duration,
    /// How often agents should report.
    pub report_interval: Duration,
    /// GPU pools the configuration seeds (the database owns them once
    /// seeded; see [`Service::seed_policy`]).
    pub pools: Vec<pools::PoolSpec>,
    /// A slice not active this long after placement fails.
    pub provision_timeout: Duration,
    /// Nobody decides a quota request they filed or submitted, or one of a
    /// tenant they administer.
    pub four_eyes: bool,
    /// Internal networks tenant webhooks may reach (the public internet always).
    pub webhook_egress: notifications::EgressPolicy,
    /// How long tenant API tokens live.
    pub api_tokens: api_tokens::ApiTokenPolicy,
    /// Priority classes requests may choose (checked; always has a default).
    pub priority_classes: tessera_core::schedule::PriorityClasses,
    /// How long GPU telemetry is kept.
    pub telemetry: telemetry::TelemetryPolicy,
    /// How long audit rows are kept.
    pub audit: audit_retention::AuditRetention,
    /// Headroom and data right-sizing advice asks for.
    pub rightsizing: tessera_core::rightsize::RightSizing,
}

/// Handle to the use-cases: the database, settings and clock. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Service {
    db: DatabaseConnection,
    settings: Arc<Settings>,
    clock: Arc<dyn Clock>,
    /// On SQLite, write transactions take turns (see [`Service::begin_write`]).
    sqlite_writer: Option<Arc<tokio::sync::Mutex<()>>>,
    /// This process's admissions wait here before they open a transaction
    /// (see [`Service::begin_admission`]).
    admission_turn: Arc<tokio::sync::Semaphore>,
    /// This process's admissions waiting for a turn (see `allocations::line`).
    admission_line: Arc<allocations::AdmissionLine>,
    /// The generations of the hosts whose long polls wait here.
    generations: Arc<allocations::Generations>,
    /// API tokens verified in the last second, and uses not yet written.
    token_checks: Arc<token_auth::TokenChecks>,
    /// Host credentials verified in the last second, the last report each
    /// host's agent sent here, and sightings not yet written.
    host_checks: Arc<fleet::HostChecks>,
    /// Tenants' allocation lists, kept between the writes that change them.
    lists: Arc<allocations::ListCache<tessera_protocol::views::AllocationView>>,
    /// Each pool's fleet, indexed for the placer between admissions.
    fleet_index: Arc<runtime::fleet_index::FleetIndex>,
    /// The minute telemetry retention last ran in (ms).
    telemetry_minute: Arc<std::sync::atomic::AtomicI64>,
    /// This process's counters for `/metrics`.
    metrics: Arc<metrics::ServiceMetrics>,
    /// The minute idle reclaim last ran in.
    idle_minute: Arc<std::sync::atomic::AtomicI64>,
    /// The minute budgets were last checked in.
    budget_minute: Arc<std::sync::atomic::AtomicI64>,
    /// This process among the server replicas: its id and leadership.
    replica: Arc<runtime::replicas::Replica>,
    /// How often a waiting long poll re-reads its generation.
    desired_recheck: std::time::Duration,
}

/// The process's writer turn on SQLite; keep it until the transaction ends.
pub(crate) type WriterTurn = Option<tokio::sync::OwnedMutexGuard<()>>;

/// The writer turn for writes that do not go through the service (the
/// session store): on SQLite they wait for the process's writers like every
/// use case does; on PostgreSQL taking it costs nothing.
#[derive(Debug, Clone, Default)]
pub struct WriterTurns(Option<Arc<tokio::sync::Mutex<()>>>);

/// A held writer turn (see [`WriterTurns`]); the turn ends when it drops.
#[derive(Debug)]
pub struct HeldTurn {
    _turn: WriterTurn,
}

impl WriterTurns {
    /// Waits for the turn.
    pub async fn take(&self) -> HeldTurn {
        HeldTurn {
            _turn: match &self.0 {
                Some(lock) => Some(Arc::clone(lock).lock_owned().await),
                None => None,
            },
        }
    }
}

impl Service {
    /// Wraps a connected, migrated database.
    pub fn new(db: DatabaseConnection, settings: Settings, clock: Arc<dyn Clock>) -> Self {
        use sea_orm::ConnectionTrait;
        let sqlite_writer = (db.get_database_backend() == sea_orm::DbBackend::Sqlite)
            .then(|| Arc::new(tokio::sync::Mutex::new(())));
        Self {
            db,
            settings: Arc::new(settings),
            clock,
            sqlite_writer,
            admission_turn: Arc::new(tokio::sync::Semaphore::new(write::ADMISSIONS_AT_THE_LOCK)),
            admission_line: Arc::default(),
            generations: Arc::default(),
            token_checks: Arc::default(),
            host_checks: Arc::default(),
            lists: Arc::default(),
            fleet_index: Arc::default(),
            telemetry_minute: Arc::new(std::sync::atomic::AtomicI64::new(i64::MIN)),
            metrics: Arc::default(),
            idle_minute: Arc::new(std::sync::atomic::AtomicI64::new(i64::MIN)),
            budget_minute: Arc::new(std::sync::atomic::AtomicI64::new(i64::MIN)),
            replica: Arc::default(),
            desired_recheck: allocations::DESIRED_RECHECK,
        }
    }

    /// The writer turn, for writes made beside the service on its database.
    pub fn writer_turns(&self) -> WriterTurns {
        WriterTurns(self.sqlite_writer.clone())
    }

    /// How often a waiting long poll re-reads its host's generation when no
    /// notice wakes it (default 1 s; ten times that while this replica
    /// hears the others' notices): the safety net under the replicas'
    /// notices.
    pub fn with_desired_recheck(mut self, every: std::time::Duration) -> Self {
        self.desired_recheck = every;
        self
    }

    /// This process's counters (for `/metrics`).
    pub fn metrics(&self) -> &metrics::ServiceMetrics {
        &self.metrics
    }

    /// The database connection (for health checks and the session store).
    pub fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Now, by the service's clock (pages stamp what they show with it).
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}
