//! Tessera's use-cases over the database, with authorization.
//!
//! Every public operation takes the acting [`Principal`] (or a proof of a role
//! derived from it, such as [`PlatformAdmin`]) and returns a typed
//! [`ServiceError`]. Time comes from the [`Clock`] in [`Service`], so tests
//! control it.

pub mod audit;
mod auth;
mod db;
pub mod entity;
mod error;
pub mod fleet;
pub mod identity;
pub mod pools;
mod secret;
pub mod tenants;

pub use auth::{PlatformAdmin, Principal, Viewer};
pub use db::{connect, migrate, pending_migrations, DbKind};
pub use error::ServiceError;
pub use identity::{Directory, LoginClaims, TenantSpec};
pub use sea_orm::DatabaseConnection;

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
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// Settings the use-cases need.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Tenants and how IdP groups map to roles.
    pub directory: Directory,
    /// A host that has not reported for this long is offline.
    pub host_offline_after: Duration,
    /// How often agents should report.
    pub report_interval: Duration,
    /// GPU pools.
    pub pools: Vec<pools::PoolSpec>,
}

/// Handle to the use-cases: the database, settings and clock. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Service {
    db: DatabaseConnection,
    settings: Arc<Settings>,
    clock: Arc<dyn Clock>,
}

impl Service {
    /// Wraps a connected, migrated database.
    pub fn new(db: DatabaseConnection, settings: Settings, clock: Arc<dyn Clock>) -> Self {
        Self {
            db,
            settings: Arc::new(settings),
            clock,
        }
    }

    /// The database connection (for health checks and the session store).
    pub fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }
}
