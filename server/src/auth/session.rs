//! Sessions stored in Tessera's own database, so they survive a restart.

use async_trait::async_trait;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend};
use tessera_service::WriterTurns;
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

/// A session store on whichever database Tessera runs on. Its writes take
/// the service's writer turn (see [`tessera_service::WriterTurns`]): on
/// SQLite a sign-in never races a use case's write for the file.
#[derive(Debug, Clone)]
pub struct DbSessionStore {
    backend: Backend,
    turns: WriterTurns,
}

#[derive(Debug, Clone)]
enum Backend {
    Sqlite(SqliteStore),
    Postgres(PostgresStore),
}

impl DbSessionStore {
    /// A store sharing `db`'s connection pool; creates its table if missing.
    pub async fn new(db: &DatabaseConnection) -> Result<Self, sqlx_error::Error> {
        let backend = match db.get_database_backend() {
            DbBackend::Postgres => {
                let s = PostgresStore::new(db.get_postgres_connection_pool().clone());
                s.migrate().await?;
                Backend::Postgres(s)
            }
            _ => {
                let s = SqliteStore::new(db.get_sqlite_connection_pool().clone());
                s.migrate().await?;
                Backend::Sqlite(s)
            }
        };
        Ok(Self {
            backend,
            turns: WriterTurns::default(),
        })
    }

    /// The same store, writing in the service's writer turn.
    pub fn in_turns_with(mut self, turns: WriterTurns) -> Self {
        self.turns = turns;
        self
    }
}

/// Re-export of the driver error type used by the stores.
pub mod sqlx_error {
    pub use sea_orm::sqlx::Error;
}

#[async_trait]
impl SessionStore for DbSessionStore {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        let _turn = self.turns.take().await;
        match &self.backend {
            Backend::Sqlite(s) => s.create(record).await,
            Backend::Postgres(s) => s.create(record).await,
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        let _turn = self.turns.take().await;
        match &self.backend {
            Backend::Sqlite(s) => s.save(record).await,
            Backend::Postgres(s) => s.save(record).await,
        }
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        match &self.backend {
            Backend::Sqlite(s) => s.load(id).await,
            Backend::Postgres(s) => s.load(id).await,
        }
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        let _turn = self.turns.take().await;
        match &self.backend {
            Backend::Sqlite(s) => s.delete(id).await,
            Backend::Postgres(s) => s.delete(id).await,
        }
    }
}

#[async_trait]
impl ExpiredDeletion for DbSessionStore {
    async fn delete_expired(&self) -> session_store::Result<()> {
        let _turn = self.turns.take().await;
        match &self.backend {
            Backend::Sqlite(s) => s.delete_expired().await,
            Backend::Postgres(s) => s.delete_expired().await,
        }
    }
}
