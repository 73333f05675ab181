//! What the workspace's integration tests share: the one place that says
//! which database a test runs on. A dev-dependency only; nothing here is
//! built into Tessera.
//!
//! With `TESSERA_TEST_POSTGRES_URL` set (an admin connection, as
//! `scripts/test.sh` sets it), every test gets a new PostgreSQL database of
//! its own; otherwise a new SQLite file.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use sea_orm::{ConnectionTrait, Database};

pub mod tls;

/// The variable naming the PostgreSQL server the tests run on.
pub const POSTGRES_URL_VAR: &str = "TESSERA_TEST_POSTGRES_URL";

/// Whether the tests run on PostgreSQL.
pub fn on_postgres() -> bool {
    std::env::var(POSTGRES_URL_VAR).is_ok_and(|u| !u.is_empty())
}

/// A new, empty database for one test: on PostgreSQL when
/// [`POSTGRES_URL_VAR`] is set, else a new SQLite file.
pub async fn fresh_database_url() -> String {
    match std::env::var(POSTGRES_URL_VAR) {
        Ok(admin_url) if !admin_url.is_empty() => {
            let name = format!("tessera_t_{}", random_suffix());
            let admin = Database::connect(&admin_url)
                .await
                .expect("connect to PostgreSQL");
            admin
                .execute_unprepared(&format!("CREATE DATABASE {name}"))
                .await
                .expect("create test database");
            let base = admin_url
                .rsplit_once('/')
                .map(|(b, _)| b.to_owned())
                .expect("a PostgreSQL URL ends with /<database>");
            format!("{base}/{name}")
        }
        _ => sqlite_url(),
    }
}

/// A new SQLite file's URL, whichever database the suite runs on.
pub fn sqlite_url() -> String {
    let dir = std::env::temp_dir().join("tessera-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("{}.db", random_suffix()));
    format!("sqlite://{}?mode=rwc", file.display())
}

fn random_suffix() -> String {
    format!("{:016x}", rand::random::<u64>())
}

/// A new, empty folder under the system's temporary directory, its name
/// starting with `tessera-<what>-` (the caller removes it when done).
pub fn scratch_dir(what: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-{what}-{}", random_suffix()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
