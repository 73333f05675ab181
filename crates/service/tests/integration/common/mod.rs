//! Test fixtures: a fresh database per test (SQLite file, or a new PostgreSQL
//! database when `TESSERA_TEST_POSTGRES_URL` is set), a controllable clock, and
//! principals.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod agent;

use chrono::{DateTime, Duration, TimeZone, Utc};
use sea_orm::ConnectionTrait;
use std::sync::{Arc, Mutex};
use tessera_service::identity::QuotaSpec;
use tessera_service::pools::{IsolationClass, PoolSpec};
use tessera_service::{Clock, Directory, LoginClaims, Principal, Service, Settings, TenantSpec};

/// A tenant's slug, from a literal the test knows is one.
pub fn slug(text: &str) -> tessera_core::checked::TenantSlug {
    text.parse().unwrap()
}

/// A pool's name, from a literal the test knows is one.
pub fn pool_name(text: &str) -> tessera_core::checked::PoolName {
    text.parse().unwrap()
}

/// A clock tests move by hand.
#[derive(Debug)]
pub struct TestClock(Mutex<DateTime<Utc>>);

impl TestClock {
    pub fn new() -> Arc<Self> {
        Arc::new(Self(Mutex::new(
            Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap(),
        )))
    }
    pub fn advance(&self, d: Duration) {
        let mut t = self.0.lock().unwrap();
        *t += d;
    }
}

impl Clock for TestClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}

pub fn directory() -> Directory {
    Directory {
        platform_admin_groups: vec!["platform".into()],
        tenants: vec![
            TenantSpec {
                slug: "vision".parse().unwrap(),
                name: "Vision".into(),
                cost_centre: Some("CC-1".into()),
                member_groups: vec!["vision".into()],
                admin_groups: vec!["vision-leads".into()],
                namespaces: Vec::new(),
                quotas: vec![
                    QuotaSpec {
                        pool: "h100-mig".parse().unwrap(),
                        gpus: 2.0,
                        memory_gib: 160,
                        max_slices: 8,
                    },
                    QuotaSpec {
                        pool: "a100-whole".parse().unwrap(),
                        gpus: 4.0,
                        memory_gib: 160,
                        max_slices: 4,
                    },
                    QuotaSpec {
                        pool: "l4-shared".parse().unwrap(),
                        gpus: 1.0,
                        memory_gib: 24,
                        max_slices: 4,
                    },
                ],
            },
            TenantSpec {
                slug: "nlp".parse().unwrap(),
                name: "NLP".into(),
                cost_centre: None,
                member_groups: vec!["nlp".into()],
                admin_groups: vec![],
                namespaces: Vec::new(),
                quotas: vec![QuotaSpec {
                    pool: "h100-mig".parse().unwrap(),
                    gpus: 1.0,
                    memory_gib: 80,
                    max_slices: 4,
                }],
            },
        ],
    }
}

/// Test pools: H100s in MIG mode, whole A100s, time-sliced L4s (4 replicas).
/// Batch isolation: tenants may share a GPU (the isolation tests use
/// [`production_pools`]).
pub fn pools() -> Vec<PoolSpec> {
    let pool = |name: &str, sharing, model: &str| PoolSpec {
        description: format!("{name} pool"),
        isolation: IsolationClass::Batch,
        ..PoolSpec::new(pool_name(name), sharing, &[model])
    };
    use tessera_core::sharing::SharingMode;
    let mut l4 = pool("l4-shared", SharingMode::TimeSlicing, "L4");
    l4.time_slice_replicas = 4;
    vec![
        pool("h100-mig", SharingMode::Mig, "H100-80GB"),
        pool("a100-whole", SharingMode::Exclusive, "A100-SXM4-40GB"),
        l4,
    ]
}

/// The test pools as production pools: tenants never share a GPU.
pub fn production_pools() -> Vec<PoolSpec> {
    let mut pools = pools();
    for p in &mut pools {
        p.isolation = IsolationClass::Production;
    }
    pools
}

use tessera_test_kit::fresh_database_url as fresh_url;
pub use tessera_test_kit::sqlite_url;

pub struct Fixture {
    pub service: Service,
    pub clock: Arc<TestClock>,
}

/// A fresh, connected, not yet migrated database.
pub async fn fresh_db() -> tessera_service::DatabaseConnection {
    let url = fresh_url().await;
    tessera_service::connect(&url).await.expect("connect")
}

pub async fn fixture() -> Fixture {
    fixture_with_pools(pools()).await
}

/// Test priority classes: `urgent` (100) for vision in the MIG pool,
/// `batch` (-10) for everyone, and the built-in `standard` (0).
pub fn priority_classes() -> Vec<tessera_core::schedule::PriorityClass> {
    let class = |name: &str, value, tenants: &[&str], pools: &[&str]| {
        tessera_core::schedule::PriorityClass {
            name: name.into(),
            value,
            description: format!("{name} work"),
            tenants: tenants.iter().map(|t| t.to_string()).collect(),
            pools: pools.iter().map(|p| p.to_string()).collect(),
            default: false,
        }
    };
    vec![
        class("urgent", 100, &["vision"], &["h100-mig"]),
        class("batch", -10, &[], &[]),
    ]
}

/// A fixture with other pools (e.g. another isolation class).
pub async fn fixture_with_pools(pools: Vec<PoolSpec>) -> Fixture {
    // Most tests let hours pass with agents that stay silent: their slices
    // are only marked lost where a test asks for it ([`fixture_with_grace`]).
    fixture_with(pools, Duration::days(1000)).await
}

/// A fixture whose hosts lose their slices after `lost_after` of silence.
pub async fn fixture_with_grace(lost_after: Duration) -> Fixture {
    fixture_with(pools(), lost_after).await
}

async fn fixture_with(pools: Vec<PoolSpec>, lost_after: Duration) -> Fixture {
    let db = fresh_db().await;
    tessera_service::migrate(&db).await.expect("migrate");
    let clock = TestClock::new();
    let pools_for_classes = pools.clone();
    let service = Service::new(
        db,
        Settings {
            directory: directory(),
            host_offline_after: Duration::seconds(30),
            host_lost_after: lost_after,
            report_interval: Duration::seconds(5),
            pools,
            provision_timeout: Duration::seconds(300),
            four_eyes: true,
            webhook_egress: Default::default(),
            api_tokens: Default::default(),
            priority_classes: tessera_service::pools::priority_classes(
                priority_classes(),
                &pools_for_classes,
                &directory(),
            )
            .expect("priority classes"),
            telemetry: Default::default(),
            rightsizing: Default::default(),
            audit: Default::default(),
        },
        clock.clone(),
    );
    service.seed_policy().await.expect("seed pools and tenants");
    Fixture { service, clock }
}

/// A plain join token (enrols a new host) valid for `ttl_minutes`.
pub fn join_token(description: &str, ttl_minutes: i64) -> tessera_service::fleet::NewJoinToken {
    tessera_service::fleet::NewJoinToken {
        description: description.into(),
        ttl_minutes,
        for_host: None,
    }
}

/// A re-enrolment token for the enrolled host `hostname`, valid for an hour.
pub fn reenrol_token(hostname: &str) -> tessera_service::fleet::NewJoinToken {
    tessera_service::fleet::NewJoinToken {
        description: format!("re-enrol {hostname}"),
        ttl_minutes: 60,
        for_host: Some(hostname.into()),
    }
}

pub fn claims(subject: &str, groups: &[&str]) -> LoginClaims {
    LoginClaims {
        issuer: "http://idp.test".into(),
        subject: subject.into(),
        email: Some(format!("{subject}@example.com")),
        name: format!("User {subject}"),
        groups: groups.iter().map(|g| g.to_string()).collect(),
    }
}

impl Fixture {
    /// Runs `sql` on the database behind the service's back (as another
    /// replica, or a hand edit, would), so that only what the service
    /// reads again shows it.
    pub async fn behind_the_back(&self, sql: impl AsRef<str>) {
        use sea_orm::ConnectionTrait;
        self.service
            .db()
            .execute_unprepared(sql.as_ref())
            .await
            .unwrap();
    }

    pub async fn login(&self, subject: &str, groups: &[&str]) -> Principal {
        let id = self.service.login(&claims(subject, groups)).await.unwrap();
        self.service.principal(id).await.unwrap()
    }

    pub async fn admin(&self) -> Principal {
        self.login("root", &["platform"]).await
    }

    /// A host enrolled with a fresh join token.
    pub async fn enrolled_host(&self, hostname: &str) -> tessera_service::fleet::AuthenticatedHost {
        let admin = self.admin().await;
        let proof = admin.require_platform_admin().unwrap();
        let token = self
            .service
            .create_join_token(&proof, &join_token(hostname, 60))
            .await
            .unwrap();
        let enrolled = self
            .service
            .enroll(&tessera_protocol::agent::EnrollRequest {
                join_token: token.secret,
                hostname: host_named(hostname),
            })
            .await
            .unwrap();
        self.service
            .authenticate_host(&enrolled.credential)
            .await
            .unwrap()
    }

    /// Enrols `hostname` with a join token made from `token` and returns
    /// the host's credential.
    pub async fn enrol_credential(
        &self,
        token: tessera_service::fleet::NewJoinToken,
        hostname: &str,
    ) -> String {
        let admin = self.admin().await;
        let proof = admin.require_platform_admin().unwrap();
        let token = self
            .service
            .create_join_token(&proof, &token)
            .await
            .unwrap();
        self.service
            .enroll(&tessera_protocol::agent::EnrollRequest {
                join_token: token.secret,
                hostname: host_named(hostname),
            })
            .await
            .unwrap()
            .credential
    }

    /// Number of rows in a table.
    pub async fn count(&self, table: &str) -> i64 {
        use sea_orm::{FromQueryResult, Statement};
        #[derive(FromQueryResult)]
        struct N {
            n: i64,
        }
        let backend = self.service.db().get_database_backend();
        N::find_by_statement(Statement::from_string(
            backend,
            format!("SELECT COUNT(*) AS n FROM {table}"),
        ))
        .one(self.service.db())
        .await
        .unwrap()
        .unwrap()
        .n
    }

    /// Audit entries recorded so far, oldest first.
    pub async fn audit_entries(&self) -> Vec<tessera_service::entity::audit_event::Model> {
        use sea_orm::{EntityTrait, QueryOrder};
        use tessera_service::entity::audit_event;
        audit_event::Entity::find()
            .order_by_asc(audit_event::Column::Id)
            .all(self.service.db())
            .await
            .unwrap()
    }

    /// Audit actions recorded so far, oldest first.
    pub async fn audit_actions(&self) -> Vec<String> {
        use sea_orm::{EntityTrait, QueryOrder};
        use tessera_service::entity::audit_event;
        audit_event::Entity::find()
            .order_by_asc(audit_event::Column::Id)
            .all(self.service.db())
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.action.to_string())
            .collect()
    }
}

/// A host name for tests (panics on a bad one).
pub fn host_named(name: &str) -> tessera_core::checked::Hostname {
    tessera_core::checked::Hostname::parse(name).unwrap_or_else(|e| panic!("{e}"))
}
