//! Sessions stored in Tessera's own database, so they survive a restart.

use async_trait::async_trait;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend};
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, ExpiredDeletion, SessionStore};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

/// Session keys.
pub mod keys {
    /// The signed-in user's id (i64).
    pub const USER_ID: &str = "user_id";
    /// Unix time of login (i64), for the absolute timeout.
    pub const LOGIN_AT: &str = "login_at";
    /// The raw id_token, as hint for RP-initiated logout.
    pub const ID_TOKEN: &str = "id_token";
    /// Unix time the session's idle timeout was last pushed back (i64).
    pub const TOUCHED_AT: &str = "touched_at";
}

/// A session store on whichever database Tessera runs on.
#[derive(Debug, Clone)]
pub enum DbSessionStore {
    /// SQLite.
    Sqlite(SqliteStore),
    /// PostgreSQL.
    Postgres(PostgresStore),
}

impl DbSessionStore {
    /// A store sharing `db`'s connection pool; creates its table if missing.
    pub async fn new(db: &DatabaseConnection) -> Result<Self, sqlx_error::Error> {
        let store = match db.get_database_backend() {
            DbBackend::Postgres => {
                let s = PostgresStore::new(db.get_postgres_connection_pool().clone());
                s.migrate().await?;
                Self::Postgres(s)
            }
            _ => {
                let s = SqliteStore::new(db.get_sqlite_connection_pool().clone());
                s.migrate().await?;
                Self::Sqlite(s)
            }
        };
        Ok(store)
    }
}

/// Re-export of the driver error type used by the stores.
pub mod sqlx_error {
    pub use sea_orm::sqlx::Error;
}

#[async_trait]
impl SessionStore for DbSessionStore {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        match self {
            Self::Sqlite(s) => s.create(record).await,
            Self::Postgres(s) => s.create(record).await,
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        match self {
            Self::Sqlite(s) => s.save(record).await,
            Self::Postgres(s) => s.save(record).await,
        }
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        match self {
            Self::Sqlite(s) => s.load(id).await,
            Self::Postgres(s) => s.load(id).await,
        }
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        match self {
            Self::Sqlite(s) => s.delete(id).await,
            Self::Postgres(s) => s.delete(id).await,
        }
    }
}

#[async_trait]
impl ExpiredDeletion for DbSessionStore {
    async fn delete_expired(&self) -> session_store::Result<()> {
        match self {
            Self::Sqlite(s) => s.delete_expired().await,
            Self::Postgres(s) => s.delete_expired().await,
        }
    }
}
