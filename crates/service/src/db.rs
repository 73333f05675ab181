//! Connecting to SQLite or PostgreSQL and applying migrations.

use sea_orm::{ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend, DbErr};
use tessera_migrations::{Migrator, MigratorTrait};

/// Which database engine a URL points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbKind {
    /// A SQLite file (`sqlite://path?mode=rwc`).
    Sqlite,
    /// PostgreSQL (`postgres://...`).
    Postgres,
}

impl DbKind {
    /// Recognises the URL scheme.
    pub fn of_url(url: &str) -> Option<Self> {
        if url.starts_with("sqlite:") {
            Some(Self::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Some(Self::Postgres)
        } else {
            None
        }
    }
}

/// The longest a request waits for a free database connection.
const ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Connects and, for SQLite, switches the file to WAL so readers don't block the writer.
pub async fn connect(url: &str) -> Result<DatabaseConnection, DbErr> {
    let kind = DbKind::of_url(url).ok_or_else(|| {
        DbErr::Custom(
            "database.url must start with sqlite: or postgres:// (e.g. sqlite://tessera.db?mode=rwc)"
                .to_owned(),
        )
    })?;
    let mut options = ConnectOptions::new(url.to_owned());
    options.sqlx_logging(false);
    // A request that waits this long for a connection is answered 503
    // with Retry-After (the server is overloaded), not held on.
    options.acquire_timeout(ACQUIRE_TIMEOUT);
    if kind == DbKind::Sqlite {
        options.max_connections(8);
    }
    let db = Database::connect(options).await?;
    if db.get_database_backend() == DbBackend::Sqlite {
        db.execute_unprepared("PRAGMA journal_mode=WAL;").await?;
    }
    Ok(db)
}

/// Applies pending migrations (replicas starting together hold a
/// [`crate::StartupLock`] around it).
pub async fn migrate(db: &DatabaseConnection) -> Result<(), DbErr> {
    Migrator::up(db, None).await
}

/// Number of migrations not yet applied (0 when the schema is current).
pub async fn pending_migrations(db: &DatabaseConnection) -> Result<usize, DbErr> {
    Ok(Migrator::get_pending_migrations(db).await?.len())
}
