//! The HTTP surface, in-process, against a real SQLite (or PostgreSQL when
//! `TESSERA_TEST_POSTGRES_URL` is set) database. The OIDC flow itself is covered
//! by the end-to-end suite with a real identity provider.
// The tests stamp sessions and bodies with the real time the server runs on.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use sea_orm::ConnectionTrait;
use serde_json::{json, Value};
use std::sync::Arc;
use tessera_core::role::TokenScope;
use tessera_server::app::{build_state, router};
use tessera_server::config::Config;
use tessera_service::audit::Actor;
use tessera_service::{Service, SystemClock};
use tower::ServiceExt;

#[path = "http/command_line.rs"]
mod command_line;
#[path = "http/fuzz.rs"]
mod fuzz;
#[path = "http/openapi.rs"]
mod openapi;
#[path = "http/security.rs"]
mod security;

/// Tessera's origin in these tests (the default `server.public_url`): the
/// origin a browser on its pages sends.
const ORIGIN: &str = "http://127.0.0.1:3000";

use tessera_test_kit::fresh_database_url as database_url;

struct App {
    router: Router,
    service: Service,
    store: tessera_server::auth::session::DbSessionStore,
    database_url: String,
}

async fn app() -> App {
    app_with("", Vec::new()).await
}

/// The configuration every test app starts from.
const BASE_CONFIG: &str = r#"
[oidc]
issuer_url = "http://127.0.0.1:9"
client_id = "tessera"
client_secret = "secret"
[directory]
platform_admin_groups = ["admins"]
[[directory.tenants]]
slug = "vision"
name = "Vision"
member_groups = ["vision"]
admin_groups = ["vision-leads"]
quotas = [{ pool = "l4", gpus = 1, memory_gib = 24, max_slices = 2 }]
[[directory.tenants]]
slug = "nlp"
name = "NLP"
member_groups = ["nlp"]
admin_groups = ["nlp-leads"]
quotas = [{ pool = "l4", gpus = 1, memory_gib = 24, max_slices = 2 }]
[[pools]]
name = "l4"
sharing = "time-slicing"
models = ["L4"]
time_slice_replicas = 2
max_lease_hours = 24
"#;

/// The test app with `extra` TOML appended and `env` overrides.
async fn app_with(extra: &str, mut env: Vec<(String, String)>) -> App {
    let database_url = database_url().await;
    env.push(("TESSERA_DATABASE__URL".to_owned(), database_url.clone()));
    let config = Config::from_toml_and_env(&format!("{BASE_CONFIG}\n{extra}"), env).unwrap();
    let (state, store) = build_state(config, Arc::new(SystemClock)).await.unwrap();
    let service = state.service.clone();
    App {
        router: router(state, store.clone()),
        service,
        store,
        database_url,
    }
}

impl App {
    async fn call(&self, req: Request<Body>) -> (StatusCode, axum::http::HeaderMap, String) {
        let resp = self.router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        (status, headers, String::from_utf8_lossy(&body).into_owned())
    }

    async fn post_json(&self, path: &str, bearer: Option<&str>, body: &str) -> (StatusCode, Value) {
        let mut req = Request::post(path).header(header::CONTENT_TYPE, "application/json");
        if let Some(b) = bearer {
            req = req.header(header::AUTHORIZATION, format!("Bearer {b}"));
        }
        let (status, _, text) = self
            .call(req.body(Body::from(body.to_owned())).unwrap())
            .await;
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn get_json(&self, path: &str, bearer: Option<&str>) -> (StatusCode, Value) {
        let mut req = Request::get(path);
        if let Some(b) = bearer {
            req = req.header(header::AUTHORIZATION, format!("Bearer {b}"));
        }
        let (status, _, text) = self.call(req.body(Body::empty()).unwrap()).await;
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Signs a user in (as the OIDC callback would) and returns the cookie.
    async fn sign_in(&self, subject: &str, groups: &[&str]) -> String {
        self.sign_in_at(subject, groups, chrono::Utc::now()).await
    }

    /// [`App::sign_in`] with the sign-in at `at`.
    async fn sign_in_at(
        &self,
        subject: &str,
        groups: &[&str],
        at: chrono::DateTime<chrono::Utc>,
    ) -> String {
        use tower_sessions::session::{Id, Record};
        use tower_sessions::session_store::SessionStore;
        let user_id = self
            .service
            .login(&tessera_service::LoginClaims {
                issuer: "http://idp.test".into(),
                subject: subject.into(),
                email: Some(format!("{subject}@example.com")),
                name: format!("User {subject}"),
                groups: groups.iter().map(|g| (*g).to_owned()).collect(),
            })
            .await
            .unwrap();
        let mut record = Record {
            id: Id::default(),
            data: [
                ("user_id".to_owned(), json!(user_id)),
                ("login_at".to_owned(), json!(at.timestamp())),
            ]
            .into_iter()
            .collect(),
            expiry_date: tower_sessions::cookie::time::OffsetDateTime::now_utc()
                + tower_sessions::cookie::time::Duration::hours(1),
        };
        self.store.create(&mut record).await.unwrap();
        format!("tessera_session={}", record.id)
    }

    /// A JSON (or form, for server functions) call as a signed-in user.
    async fn send(
        &self,
        method: &str,
        path: &str,
        cookie: &str,
        body: Option<&str>,
    ) -> (StatusCode, Value) {
        let form = path.starts_with("/api/ui/");
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::COOKIE, cookie)
            .header(header::ORIGIN, ORIGIN)
            .header(
                header::CONTENT_TYPE,
                if form {
                    "application/x-www-form-urlencoded"
                } else {
                    "application/json"
                },
            )
            .body(Body::from(
                body.unwrap_or(if form { "" } else { "{}" }).to_owned(),
            ))
            .unwrap();
        let (status, _, text) = self.call(req).await;
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Audit events so far.
    async fn audit_count(&self) -> usize {
        use sea_orm::{EntityTrait, PaginatorTrait};
        tessera_service::entity::audit_event::Entity::find()
            .count(self.service.db())
            .await
            .unwrap() as usize
    }

    /// The newest audit event's action.
    async fn last_action(&self) -> String {
        use sea_orm::{EntityTrait, QueryOrder};
        use tessera_service::entity::audit_event;
        audit_event::Entity::find()
            .order_by_desc(audit_event::Column::Id)
            .one(self.service.db())
            .await
            .unwrap()
            .unwrap()
            .action
            .to_string()
    }

    async fn api_token(&self, tenant: &str) -> String {
        self.service
            .create_api_token_as_system(&tenant.parse().unwrap(), "test", None, TokenScope::Request)
            .await
            .unwrap()
            .secret
    }

    async fn join_token(&self) -> String {
        self.service
            .create_join_token_as(
                Actor::System,
                &tessera_service::fleet::NewJoinToken {
                    description: "test".into(),
                    ttl_minutes: 60,
                    for_host: None,
                },
            )
            .await
            .unwrap()
            .secret
    }

    async fn enroll(&self, hostname: &str) -> String {
        let token = self.join_token().await;
        let (status, body) = self
            .post_json(
                "/api/agent/v1/enroll",
                None,
                &json!({"join_token": token, "hostname": hostname}).to_string(),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["credential"].as_str().unwrap().to_owned()
    }
}

/// Who calls `path` in the fleet steps: the member asks for a slice again,
/// the admin runs the fleet.
fn admin_or_member(admin: &str, member: &str, path: &str) -> String {
    if path.contains("/requeue") {
        member
    } else {
        admin
    }
    .to_owned()
}

fn report(hostname: &str) -> Value {
    json!({
        "hostname": hostname, "agent_version": "0.1.0", "cpu_milli": 8000, "memory_mib": 65536,
        "backend": "simulated",
        "gpus": [{"index": 0, "uuid": format!("GPU-{:08x}", hostname.len()), "name": "NVIDIA L4", "memory_mib": 23034,
                  "mig_capable": false, "mig_enabled": false}]
    })
}

#[tokio::test]
async fn health_and_readiness() {
    let app = app().await;
    let (status, _, body) = app
        .call(Request::get("/healthz").body(Body::empty()).unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.contains("ok"));
    let (status, _, body) = app
        .call(Request::get("/readyz").body(Body::empty()).unwrap())
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("ready"));
}

#[tokio::test]
async fn metrics_count_hosts_and_gpus() {
    let app = app().await;
    let credential = app.enroll("node-m").await;
    app.post_json(
        "/api/agent/v1/report",
        Some(&credential),
        &report("node-m").to_string(),
    )
    .await;
    let _never_reported = app.enroll("node-silent").await;
    let (status, headers, body) = app
        .call(Request::get("/metrics").body(Body::empty()).unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    assert!(
        body.contains("tessera_hosts{status=\"online\"} 1"),
        "{body}"
    );
    assert!(
        body.contains("tessera_hosts{status=\"offline\"} 1"),
        "{body}"
    );
    assert!(
        body.contains("tessera_gpus{mig=\"n/a\",model=\"L4\"} 1"),
        "{body}"
    );
}

#[tokio::test]
async fn enrol_and_report() {
    let app = app().await;
    let credential = app.enroll("node-1").await;
    let (status, body) = app
        .post_json(
            "/api/agent/v1/report",
            Some(&credential),
            &report("node-1").to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["next_report_in_s"], 5);
    // Idle polls are held for half the offline grace (30 s).
    assert_eq!(body["heartbeat_s"], 15);
}

#[tokio::test]
async fn bad_or_reused_join_tokens_are_401_and_store_nothing() {
    let app = app().await;
    let (status, body) = app
        .post_json(
            "/api/agent/v1/enroll",
            None,
            r#"{"join_token":"tsj_wrong","hostname":"n"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["code"], "invalid_join_token");
    let token = app.join_token().await;
    let req = json!({"join_token": token, "hostname": "n1"}).to_string();
    assert_eq!(
        app.post_json("/api/agent/v1/enroll", None, &req).await.0,
        StatusCode::OK
    );
    let req = json!({"join_token": token, "hostname": "n2"}).to_string();
    let (status, body) = app.post_json("/api/agent/v1/enroll", None, &req).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    // A name that is not a host name is refused where the body is read,
    // naming the field, and the token stays usable.
    let fresh = app.join_token().await;
    let req = json!({"join_token": fresh, "hostname": "bad host!"}).to_string();
    let (status, body) = app.post_json("/api/agent/v1/enroll", None, &req).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.starts_with("hostname:") && message.contains("is not a valid host name"),
        "{message}"
    );
    let count = app
        .service
        .db()
        .query_one(sea_orm::Statement::from_string(
            app.service.db().get_database_backend(),
            "SELECT COUNT(*) AS n FROM hosts",
        ))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(count.try_get::<i64>("", "n").unwrap(), 1);
}

#[tokio::test]
async fn malformed_bodies_are_400_naming_the_field() {
    let app = app().await;
    let credential = app.enroll("node-2").await;
    let mut bad = report("node-2");
    bad["gpus"][0]["memory_mib"] = json!("lots");
    let (status, body) = app
        .post_json("/api/agent/v1/report", Some(&credential), &bad.to_string())
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], "invalid_request");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .starts_with("gpus[0].memory_mib:"),
        "{body}"
    );

    let (status, body) = app
        .post_json("/api/agent/v1/report", Some(&credential), "{not json")
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    let (status, body) = app
        .post_json(
            "/api/agent/v1/report",
            Some(&credential),
            r#"{"hostname":"node-2"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["message"].as_str().unwrap().contains("agent_version"),
        "{body}"
    );
    let mut extra = report("node-2");
    extra["surprise"] = json!(1);
    let (status, body) = app
        .post_json(
            "/api/agent/v1/report",
            Some(&credential),
            &extra.to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["message"].as_str().unwrap().contains("surprise"),
        "{body}"
    );
}

#[tokio::test]
async fn agents_report_only_for_their_own_host() {
    let app = app().await;
    let a = app.enroll("node-a").await;
    let _b = app.enroll("node-b").await;
    let (status, body) = app
        .post_json(
            "/api/agent/v1/report",
            Some(&a),
            &report("node-b").to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = app
        .post_json("/api/agent/v1/report", None, &report("node-a").to_string())
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["code"], "invalid_credential");
    let (status, _) = app
        .post_json(
            "/api/agent/v1/report",
            Some("tsh_forged"),
            &report("node-a").to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn visitors_without_a_session_are_sent_to_login_and_back() {
    let app = app().await;
    let (status, headers, _) = app
        .call(Request::get("/fleet?tab=gpus").body(Body::empty()).unwrap())
        .await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(
        headers[header::LOCATION],
        "/auth/login?next=%2Ffleet%3Ftab%3Dgpus"
    );
}

/// A page's status and HTML, for the person signed in with `cookie`.
async fn page(app: &App, path: &str, cookie: &str) -> (StatusCode, String) {
    let (status, body) = app.send("GET", path, cookie, None).await;
    let html = body.as_str().map(str::to_owned);
    (status, html.expect("a page, not JSON"))
}

#[tokio::test]
async fn an_allocation_page_whose_id_is_not_a_number_is_a_clear_404() {
    let app = app().await;
    let lead = app.sign_in("lee", &["vision", "vision-leads"]).await;
    for (path, shown) in [
        ("/t/vision/a/abc", "'abc' is not an allocation id"),
        ("/t/vision/a/%3Cb%3E", "'&lt;b&gt;' is not an allocation id"),
    ] {
        let (status, html) = page(&app, path, &lead).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {html}");
        assert!(html.contains("data-test=\"error-panel\""), "{path}: {html}");
        assert!(
            html.contains(shown),
            "{path}: the id as typed, escaped: {html}"
        );
        assert!(
            html.contains("/t/vision/a/42"),
            "{path}: what an id looks like"
        );
    }
    // A number that names no allocation of the tenant is a 404 too, from the service.
    let (status, html) = page(&app, "/t/vision/a/999999", &lead).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(!html.contains("is not an allocation id"), "{html}");
}

/// Building a router while another serves pages (the tests, replicas in one
/// process) must not stall the pages: listing the routes suppresses resource
/// loading process-wide in leptos, and a page whose resource was first polled
/// then waited forever (a 408 after 30 s; leptos-rs/leptos#4773).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_render_while_another_router_is_built() {
    let app = Arc::new(app().await);
    let lead = app.sign_in("lee", &["vision", "vision-leads"]).await;
    let serving = {
        let app = app.clone();
        tokio::spawn(async move {
            for round in 0..60 {
                let page = page(&app, "/t/vision/a/abc", &lead);
                let (status, _) = tokio::time::timeout(std::time::Duration::from_secs(10), page)
                    .await
                    .unwrap_or_else(|_| panic!("round {round}: the page never finished"));
                assert_eq!(status, StatusCode::NOT_FOUND, "round {round}");
            }
        })
    };
    for _ in 0..4 {
        let _other = app_with("", Vec::new()).await;
    }
    serving.await.unwrap();
}

#[tokio::test]
async fn unreachable_idp_gives_a_clear_503_page() {
    let app = app().await;
    let (status, _, body) = app
        .call(
            Request::get("/auth/login?next=/fleet")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(body.contains("not reachable right now"), "{body}");
    assert!(
        !body.contains("panicked") && !body.contains("reqwest"),
        "no internals: {body}"
    );
}

/// An end date past 9999-12-31 (which SQLite would store as text sorting
/// before every real date, so the grant would never be in force) is refused
/// at the edge with a 400 naming `ends_at`, and nothing is stored: for a
/// member's quota request and for a platform admin's grant.
#[tokio::test]
async fn end_dates_beyond_the_year_9999_are_refused_at_the_edge() {
    let app = app().await;
    let member = app.sign_in("max", &["vision"]).await;
    let admin = app.sign_in("ada", &["admins"]).await;
    let amount = r#"{"gpus":1,"memory_gib":24,"max_slices":1}"#;
    let before = app.audit_count().await;
    for (cookie, path, body) in [
        (
            &member,
            "/api/v1/quota-requests",
            format!(
                r#"{{"tenant":"vision","pool":"l4","amount":{amount},"ends_at":"+10000-01-01T00:00:00Z","justification":"forever"}}"#
            ),
        ),
        (
            &admin,
            "/api/v1/admin/quota-grants",
            format!(
                r#"{{"tenant":"vision","pool":"l4","amount":{amount},"ends_at":"+10000-01-01T00:00:00Z","reason":"forever"}}"#
            ),
        ),
    ] {
        let (status, body) = app.send("POST", path, cookie, Some(&body)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(message.contains("ends_at"), "{path}: {body}");
        assert!(message.contains("9999-12-31"), "{path}: {body}");
    }
    assert_eq!(app.audit_count().await, before, "nothing stored");
    // The last second of the year 9999 is still a date.
    let (status, body) = app
        .send(
            "POST",
            "/api/v1/quota-requests",
            &member,
            Some(&format!(
                r#"{{"tenant":"vision","pool":"l4","amount":{amount},"ends_at":"9999-12-31T23:59:59Z","justification":"long"}}"#
            )),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// The idle timeout slides with use: a session used after an eighth of its
/// idle timeout is saved again (a fresh cookie with a new expiry); one used
/// sooner is not rewritten.
#[tokio::test]
async fn a_used_session_pushes_its_idle_timeout_back() {
    let app = app_with("[session]\nidle_timeout_minutes = 8\n", Vec::new()).await;
    let session_cookie = |headers: &axum::http::HeaderMap| {
        headers
            .get_all(header::SET_COOKIE)
            .iter()
            .map(|c| c.to_str().unwrap().to_owned())
            .find(|c| c.starts_with("tessera_session="))
    };
    let get = |cookie: String| {
        Request::get("/api/v1/notifications")
            .header(header::COOKIE, cookie)
            .body(Body::empty())
            .unwrap()
    };
    let fresh = app.sign_in("ida", &["vision"]).await;
    let (status, headers, _) = app.call(get(fresh)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        session_cookie(&headers),
        None,
        "used at once: not rewritten"
    );

    let earlier = chrono::Utc::now() - chrono::Duration::minutes(2);
    let used = app.sign_in_at("ida", &["vision"], earlier).await;
    let (status, headers, _) = app.call(get(used)).await;
    assert_eq!(status, StatusCode::OK);
    let renewed = session_cookie(&headers).expect("a renewed session cookie");
    assert!(renewed.contains("Max-Age=480"), "{renewed}");
}

/// A session kept in use lives past its idle timeout, and ends at its
/// absolute lifetime however busy it is.
#[tokio::test]
async fn a_busy_session_outlives_the_idle_timeout_and_ends_at_the_absolute_lifetime() {
    let app = app_with(
        "[session]\nidle_timeout_minutes = 8\nabsolute_timeout_hours = 1\nmembership_recheck_minutes = 120\n",
        Vec::new(),
    )
    .await;
    let get = |cookie: &str| {
        Request::get("/api/v1/notifications")
            .header(header::COOKIE, cookie)
            .body(Body::empty())
            .unwrap()
    };
    // Signed in 50 minutes ago and used every minute since (its stored
    // expiry was pushed on): six idle timeouts later it still works.
    let busy = app
        .sign_in_at(
            "ida",
            &["vision"],
            chrono::Utc::now() - chrono::Duration::minutes(50),
        )
        .await;
    let (status, _, body) = app.call(get(&busy)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Signed in 61 minutes ago, as busy: past the absolute lifetime it ends.
    let old = app
        .sign_in_at(
            "ida",
            &["vision"],
            chrono::Utc::now() - chrono::Duration::minutes(61),
        )
        .await;
    let (status, _, body) = app.call(get(&old)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    // And it stays ended: the session was removed, not just refused once.
    let (status, _, _) = app.call(get(&old)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn callback_without_a_pending_login_is_400_and_starts_no_session() {
    let app = app().await;
    let (status, headers, body) = app
        .call(
            Request::get("/auth/callback?code=abc&state=forged")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("invalid or was already used"), "{body}");
    let cookies: Vec<_> = headers.get_all(header::SET_COOKIE).iter().collect();
    assert!(
        cookies
            .iter()
            .all(|c| !c.to_str().unwrap().starts_with("tessera_session=")),
        "no session for a forged callback: {cookies:?}"
    );
}

#[tokio::test]
async fn server_functions_refuse_anonymous_callers() {
    let app = app().await;
    let req = Request::post("/api/ui/list_host_names")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(Body::empty())
        .unwrap();
    let (status, _, body) = app.call(req).await;
    assert!(
        status.is_client_error() || status.is_server_error(),
        "{status}"
    );
    assert!(body.contains("sign in to continue"), "{status} {body}");
}

/// An L4 host (one GPU, time-sliced into 2 replicas by the `l4` pool) that has reported.
async fn l4_host(app: &App) -> String {
    let credential = app.enroll("node-l4").await;
    let (status, body) = app
        .post_json(
            "/api/agent/v1/report",
            Some(&credential),
            &report("node-l4").to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    credential
}

const TIME_SLICE: &str =
    r#"{"pool":"l4","shape":{"kind":"time_slice"},"lease_hours":2,"purpose":"ci"}"#;

#[tokio::test]
async fn kubernetes_configs_describe_the_host_and_the_tenants_slices() {
    let app = app().await;
    l4_host(&app).await;
    let token = app.api_token("vision").await;
    let admin = app.sign_in("root", &["admins"]).await;
    let member = app.sign_in("mia", &["vision"]).await;
    let (status, created) = app
        .post_json("/api/v1/allocations", Some(&token), TIME_SLICE)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let get = |path: String, cookie: Option<String>, bearer: Option<String>| {
        let app = &app;
        async move {
            let mut req = Request::builder().method("GET").uri(path);
            if let Some(c) = cookie {
                req = req.header(header::COOKIE, c);
            }
            if let Some(b) = bearer {
                req = req.header(header::AUTHORIZATION, format!("Bearer {b}"));
            }
            let (status, headers, body) = app.call(req.body(Body::empty()).unwrap()).await;
            (status, headers, body)
        }
    };
    let (_, fleet) = app.send("GET", "/api/v1/fleet", &admin, None).await;
    let host = fleet["hosts"][0]["id"].as_i64().unwrap();
    // The device plugin config advertises the L4's two time-sliced replicas.
    let (status, headers, body) = get(
        format!("/api/v1/hosts/{host}/device-plugin.yaml"),
        Some(admin.clone()),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(headers[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("application/yaml"));
    assert!(headers[header::CONTENT_DISPOSITION]
        .to_str()
        .unwrap()
        .contains("node-l4-device-plugin.yaml"));
    let plugin: tessera_core::k8s::DevicePluginConfig = serde_yaml_ng::from_str(&body).unwrap();
    let ts = plugin.sharing.unwrap().time_slicing.unwrap();
    assert!(ts.rename_by_default, "replicas are nvidia.com/gpu.shared");
    assert_eq!(ts.resources[0].replicas, 2);
    assert_eq!(ts.resources[0].devices.len(), 1);
    // mig-parted: the L4 has no MIG.
    let (status, _, body) = get(
        format!("/api/v1/hosts/{host}/mig-parted.yaml"),
        Some(admin.clone()),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let parted: tessera_core::k8s::MigPartedConfig = serde_yaml_ng::from_str(&body).unwrap();
    let entries = &parted.mig_configs["tessera-node-l4"];
    assert_eq!(
        (entries[0].devices.clone(), entries[0].mig_enabled),
        (vec![0], false)
    );
    // Only platform admins read host configs.
    let (status, _, _) = get(
        format!("/api/v1/hosts/{host}/mig-parted.yaml"),
        Some(member.clone()),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // The tenant's Kubernetes bundle, for a member and for its token.
    for (cookie, bearer) in [(Some(member.clone()), None), (None, Some(token.clone()))] {
        let (status, headers, body) =
            get("/api/v1/tenants/vision/kubernetes".into(), cookie, bearer).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert!(headers[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("application/yaml"));
        // `make test` validates this document against Kubernetes' schemas
        // (scripts/deploy-check.py): it must be what the server serves.
        golden("deploy/generated/tenant-bundle.yaml", &body);
        let docs: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&body)
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
        let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["Namespace", "ResourceQuota", "PriorityClass"]);
        let quota: tessera_k8s::k8s_openapi::api::core::v1::ResourceQuota =
            serde_json::from_value(docs[1].clone()).unwrap();
        assert_eq!(quota.metadata.namespace.as_deref(), Some("vision"));
        // vision's quota in force in the time-sliced l4 pool: 2 slices.
        let hard = quota.spec.unwrap().hard.unwrap();
        assert_eq!(hard["requests.nvidia.com/gpu.shared"].0, "2");
        assert_eq!(
            hard["gpu.nvidia.com.deviceclass.resource.k8s.io/devices"].0,
            "2"
        );
    }
    // Another tenant's is not found for this token.
    let (status, _, _) = get(
        "/api/v1/tenants/nlp/kubernetes".into(),
        None,
        Some(token.clone()),
    )
    .await;
    assert!(
        status == StatusCode::NOT_FOUND || status == StatusCode::FORBIDDEN,
        "{status}"
    );
}

/// The claim of a slice: 409 until it is active; then YAML by default and
/// a JSON `List` on `Accept: application/json`, selecting the slice's GPU;
/// 404 for another tenant.
#[tokio::test]
async fn an_active_slice_has_a_dra_claim_in_yaml_and_json() {
    let app = app().await;
    let host = l4_host(&app).await;
    let token = app.api_token("vision").await;
    let other = app.api_token("nlp").await;
    let (status, created) = app
        .post_json("/api/v1/allocations", Some(&token), TIME_SLICE)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_i64().unwrap();
    let path = format!("/api/v1/allocations/{id}/kubernetes");
    let (status, body) = app.get_json(&path, Some(&token)).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("once it is active"),
        "{body}"
    );
    let (_, desired) = app
        .get_json("/api/agent/v1/desired?wait_s=0", Some(&host))
        .await;
    let mut applied = report("node-l4");
    applied["applied_generation"] = desired["generation"].clone();
    let (status, body) = app
        .post_json("/api/agent/v1/report", Some(&host), &applied.to_string())
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, a) = app
        .get_json(&format!("/api/v1/allocations/{id}"), Some(&token))
        .await;
    let gpu = a["gpus"][0]["uuid"].as_str().unwrap().to_owned();

    let call = |accept: Option<&'static str>, bearer: String| {
        let app = &app;
        let path = path.clone();
        async move {
            let mut req = Request::builder()
                .method("GET")
                .uri(path)
                .header(header::AUTHORIZATION, format!("Bearer {bearer}"));
            if let Some(a) = accept {
                req = req.header(header::ACCEPT, a);
            }
            app.call(req.body(Body::empty()).unwrap()).await
        }
    };
    let (status, headers, yaml) = call(None, token.clone()).await;
    assert_eq!(status, StatusCode::OK, "{yaml}");
    assert!(headers[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("application/yaml"));
    assert!(headers[header::CONTENT_DISPOSITION]
        .to_str()
        .unwrap()
        .contains(&format!("tessera-alloc-{id}.yaml")));
    let first: tessera_k8s::k8s_openapi::api::resource::v1::ResourceClaim =
        serde_yaml_ng::Deserializer::from_str(&yaml)
            .next()
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .unwrap();
    let exactly = first.spec.devices.unwrap().requests.unwrap()[0]
        .exactly
        .clone()
        .unwrap();
    assert_eq!(
        exactly.selectors.unwrap()[0]
            .cel
            .as_ref()
            .unwrap()
            .expression,
        format!("device.attributes['gpu.nvidia.com'].uuid == '{gpu}'")
    );

    let (status, headers, json) = call(Some("application/json"), token.clone()).await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert!(headers[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let list: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        (list["apiVersion"].as_str(), list["kind"].as_str()),
        (Some("v1"), Some("List"))
    );
    assert_eq!(list["items"][0]["kind"], "ResourceClaim");
    assert_eq!(list["items"][1]["kind"], "Pod");
    assert_eq!(
        list["items"][0]["metadata"]["name"],
        format!("tessera-alloc-{id}")
    );
    // A YAML preference wins over JSON listed later.
    let (_, headers, _) = call(Some("application/yaml, application/json"), token).await;
    assert!(headers[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("application/yaml"));

    let (status, _, body) = call(None, other).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

/// `body` is the file at `path` (from the repository root); with
/// `TESSERA_UPDATE_GOLDEN=1` the file is written instead.
fn golden(path: &str, body: &str) {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path);
    if std::env::var("TESSERA_UPDATE_GOLDEN").as_deref() == Ok("1") {
        std::fs::write(&file, body).unwrap();
    }
    let want = std::fs::read_to_string(&file).unwrap_or_default();
    assert_eq!(
        body, want,
        "{path} differs from what the server serves (TESSERA_UPDATE_GOLDEN=1 rewrites it)"
    );
}

#[tokio::test]
async fn a_read_only_token_lists_slices_and_is_refused_every_change_over_http() {
    let app = app().await;
    l4_host(&app).await;
    let writer = app.api_token("vision").await;
    let reader = app
        .service
        .create_api_token_as_system(
            &"vision".parse().unwrap(),
            "dashboard",
            None,
            TokenScope::Read,
        )
        .await
        .unwrap()
        .secret;
    let (status, created) = app
        .post_json("/api/v1/allocations", Some(&writer), TIME_SLICE)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_i64().unwrap();
    let (status, listed) = app.get_json("/api/v1/allocations", Some(&reader)).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    let audited = app.audit_count().await;
    for (path, body) in [
        ("/api/v1/allocations".to_owned(), TIME_SLICE),
        (format!("/api/v1/allocations/{id}/extend"), r#"{"hours":1}"#),
        (format!("/api/v1/allocations/{id}/release"), "{}"),
    ] {
        let (status, err) = app.post_json(&path, Some(&reader), body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}: {err}");
        assert_eq!(err["code"], "forbidden", "{err}");
        assert!(
            err["message"].as_str().unwrap().contains("read-only"),
            "{err}"
        );
    }
    assert_eq!(app.audit_count().await, audited, "nothing was written");
    let (status, _) = app
        .post_json(
            &format!("/api/v1/allocations/{id}/release"),
            Some(&writer),
            "{}",
        )
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn rest_api_allocation_lifecycle_with_a_tenant_token() {
    let app = app().await;
    let host = l4_host(&app).await;
    let token = app.api_token("vision").await;

    // Create: placed at once.
    let (status, created) = app
        .post_json("/api/v1/allocations", Some(&token), TIME_SLICE)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["state"], "placed");
    assert_eq!(created["tenant"], "vision");
    assert_eq!(created["host"], "node-l4");
    let id = created["id"].as_i64().unwrap();

    // The agent's long poll carries the pool's policy; the allocation is then provisioning.
    let (status, desired) = app
        .get_json("/api/agent/v1/desired?wait_s=0", Some(&host))
        .await;
    assert_eq!(status, StatusCode::OK, "{desired}");
    assert_eq!(desired["gpus"][0]["desired"]["time_slice_replicas"], 2);
    let generation = desired["generation"].as_i64().unwrap();
    let (_, a) = app
        .get_json(&format!("/api/v1/allocations/{id}"), Some(&token))
        .await;
    assert_eq!(a["state"], "provisioning");

    // The agent applied it: active, with connection details.
    let mut applied = report("node-l4");
    applied["applied_generation"] = json!(generation);
    let (status, body) = app
        .post_json("/api/agent/v1/report", Some(&host), &applied.to_string())
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (_, a) = app
        .get_json(&format!("/api/v1/allocations/{id}"), Some(&token))
        .await;
    assert_eq!(a["state"], "active", "{a}");
    assert_eq!(a["connection"]["env"][0][0], "CUDA_VISIBLE_DEVICES");
    assert_eq!(a["connection"]["k8s_resource"], "nvidia.com/gpu.shared");
    assert!(a["lease_ends_at"].is_string());

    // Listed for the tenant; invisible to another tenant's token.
    let (_, list) = app.get_json("/api/v1/allocations", Some(&token)).await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(list[0]["state"], "active", "the list follows the report");
    // Sent compressed when asked, encoded once: the same JSON.
    for (accept, coding) in [("gzip, deflate, br", "br"), ("gzip", "gzip")] {
        let req = Request::get("/api/v1/allocations")
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .header(header::ACCEPT_ENCODING, accept)
            .body(Body::empty())
            .unwrap();
        let resp = app.router.clone().oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()[header::CONTENT_ENCODING], coding);
        assert_eq!(resp.headers()[header::VARY], "accept-encoding");
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        let mut json = Vec::new();
        use std::io::Read as _;
        match coding {
            "br" => brotli::Decompressor::new(&body[..], 4096)
                .read_to_end(&mut json)
                .unwrap(),
            _ => flate2::read::GzDecoder::new(&body[..])
                .read_to_end(&mut json)
                .unwrap(),
        };
        let decoded: Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(decoded[0]["id"], list[0]["id"]);
        assert_eq!(decoded[0]["state"], "active");
    }
    let other = app.api_token("nlp").await;
    let (status, body) = app
        .get_json(&format!("/api/v1/allocations/{id}"), Some(&other))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["code"], "not_found");
    let (status, _) = app
        .post_json(
            &format!("/api/v1/allocations/{id}/release"),
            Some(&other),
            "",
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, nlp_list) = app.get_json("/api/v1/allocations", Some(&other)).await;
    assert_eq!(nlp_list.as_array().unwrap().len(), 0);

    // Extend within policy, and beyond it.
    let (status, body) = app
        .post_json(
            &format!("/api/v1/allocations/{id}/extend"),
            Some(&token),
            r#"{"hours":1}"#,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app
        .post_json(
            &format!("/api/v1/allocations/{id}/extend"),
            Some(&token),
            r#"{"hours":100}"#,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"].as_str().unwrap().starts_with("hours:"),
        "{body}"
    );

    // Release: releasing until the agent has applied the new generation, then released.
    let (status, body) = app
        .post_json(
            &format!("/api/v1/allocations/{id}/release"),
            Some(&token),
            "",
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["state"], "releasing");
    let (_, desired) = app
        .get_json("/api/agent/v1/desired?wait_s=0", Some(&host))
        .await;
    applied["applied_generation"] = desired["generation"].clone();
    app.post_json("/api/agent/v1/report", Some(&host), &applied.to_string())
        .await;
    let (_, a) = app
        .get_json(&format!("/api/v1/allocations/{id}"), Some(&token))
        .await;
    assert_eq!(a["state"], "released", "{a}");
    let (status, body) = app
        .post_json(
            &format!("/api/v1/allocations/{id}/release"),
            Some(&token),
            "",
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
}

#[tokio::test]
async fn rest_api_refuses_bad_callers_and_bad_input_and_stores_nothing() {
    let app = app().await;
    l4_host(&app).await;
    let token = app.api_token("vision").await;
    let (status, body) = app.post_json("/api/v1/allocations", None, TIME_SLICE).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, body) = app
        .post_json("/api/v1/allocations", Some("tsk_forged"), TIME_SLICE)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["code"], "invalid_api_token");
    let cases = [
        (
            r#"{"pool":"nope","shape":{"kind":"time_slice"},"lease_hours":2}"#,
            "pool:",
        ),
        (
            r#"{"pool":"l4","shape":{"kind":"mig","profile":"1g.10gb"},"lease_hours":2}"#,
            "shape:",
        ),
        (
            r#"{"pool":"l4","shape":{"kind":"time_slice"},"lease_hours":0}"#,
            "lease_hours:",
        ),
        (
            r#"{"pool":"l4","shape":{"kind":"time_slice"},"lease_hours":25}"#,
            "lease_hours:",
        ),
        (
            r#"{"pool":"l4","shape":{"kind":"time_slice"},"lease_hours":2,"colour":"red"}"#,
            "colour:",
        ),
        (
            r#"{"pool":"l4","shape":{"kind":"time_slice"},"lease_hours":-1}"#,
            "lease_hours:",
        ),
        (
            r#"{"pool":"l4","shape":{"kind":"whole","count":1,"nvlink_local":false},"lease_hours":2}"#,
            "shape:",
        ),
    ];
    for (body, field) in cases {
        let (status, answer) = app
            .post_json("/api/v1/allocations", Some(&token), body)
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body} → {answer}");
        assert_eq!(answer["code"], "invalid_request");
        assert!(
            answer["message"].as_str().unwrap().starts_with(field),
            "{body} → {answer}"
        );
    }
    // Another tenant named in the body: not found, not forbidden (no leak).
    let (status, _) = app
        .post_json(
            "/api/v1/allocations",
            Some(&token),
            r#"{"tenant":"nlp","pool":"l4","shape":{"kind":"time_slice"},"lease_hours":2}"#,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // Beyond quota (2 slices): the third is refused with what to do.
    for _ in 0..2 {
        assert_eq!(
            app.post_json("/api/v1/allocations", Some(&token), TIME_SLICE)
                .await
                .0,
            StatusCode::CREATED
        );
    }
    let (status, body) = app
        .post_json("/api/v1/allocations", Some(&token), TIME_SLICE)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["code"], "quota_exceeded");
    let (_, list) = app.get_json("/api/v1/allocations", Some(&token)).await;
    assert_eq!(
        list.as_array().unwrap().len(),
        2,
        "only the two good requests were stored"
    );
    let rows = app
        .service
        .db()
        .query_one(sea_orm::Statement::from_string(
            app.service.db().get_database_backend(),
            "SELECT COUNT(*) AS n FROM allocations",
        ))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(rows.try_get::<i64>("", "n").unwrap(), 2);
}

#[tokio::test]
async fn desired_state_long_poll_wakes_on_a_change() {
    let app = app().await;
    let host = l4_host(&app).await;
    let token = app.api_token("vision").await;
    let (_, first) = app
        .get_json("/api/agent/v1/desired?wait_s=0", Some(&host))
        .await;
    let before = first["generation"].as_i64().unwrap();
    let waiter = {
        let router = app.router.clone();
        let host = host.clone();
        tokio::spawn(async move {
            let req = Request::get(format!("/api/agent/v1/desired?after={before}&wait_s=30"))
                .header(header::AUTHORIZATION, format!("Bearer {host}"))
                .body(Body::empty())
                .unwrap();
            let resp = router.oneshot(req).await.unwrap();
            let bytes = resp.into_body().collect().await.unwrap().to_bytes();
            serde_json::from_slice::<Value>(&bytes).unwrap()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !waiter.is_finished(),
        "the poll waits while nothing changes"
    );
    app.post_json("/api/v1/allocations", Some(&token), TIME_SLICE)
        .await;
    // Guard only: the poll must answer long before its 30 s hold.
    let answer = tokio::time::timeout(std::time::Duration::from_secs(15), waiter)
        .await
        .expect("the long poll woke up")
        .unwrap();
    let after = answer["generation"].as_i64().unwrap();
    assert!(after > before, "{answer}");

    // Still that generation at the end of the hold: an agent that prefers
    // it gets no body (nothing is read for it), any other the state again.
    let poll = |prefer: Option<&'static str>| {
        let router = app.router.clone();
        let host = host.clone();
        async move {
            let mut req = Request::get(format!("/api/agent/v1/desired?after={after}&wait_s=0"))
                .header(header::AUTHORIZATION, format!("Bearer {host}"));
            if let Some(p) = prefer {
                req = req.header("prefer", p);
            }
            let resp = router
                .oneshot(req.body(Body::empty()).unwrap())
                .await
                .unwrap();
            let (status, applied) = (
                resp.status(),
                resp.headers().get("preference-applied").cloned(),
            );
            let bytes = resp.into_body().collect().await.unwrap().to_bytes();
            (status, applied, bytes)
        }
    };
    let (status, applied, body) = poll(Some("respond-async, return=minimal")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(applied.unwrap(), "return=minimal");
    assert!(body.is_empty());
    let (status, _, body) = poll(None).await;
    assert_eq!(status, StatusCode::OK);
    let again: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(again, answer, "the same state, read again");
    let (status, _, body) = poll(Some("return=representation")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(!body.is_empty());

    let (status, _) = app
        .get_json("/api/agent/v1/desired", Some("tsh_forged"))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

/// An agent whose next report repeats its last names it on the long poll
/// (`Tessera-Report-Digest`, the ack's `digest`); the server says whether
/// the poll stood for it.
#[tokio::test]
async fn a_poll_can_stand_for_an_unchanged_report() {
    let app = app().await;
    let credential = app.enroll("node-l4").await;
    let body = report("node-l4").to_string();
    let (status, ack) = app
        .post_json("/api/agent/v1/report", Some(&credential), &body)
        .await;
    assert_eq!(status, StatusCode::OK, "{ack}");
    let digest = ack["digest"].as_str().unwrap().to_owned();
    assert_eq!(digest.len(), 64, "{ack}");
    let (_, again) = app
        .post_json("/api/agent/v1/report", Some(&credential), &body)
        .await;
    assert_eq!(
        again["digest"], ack["digest"],
        "the same report, the same name"
    );

    let poll = |digest: Option<String>| {
        let router = app.router.clone();
        let credential = credential.clone();
        async move {
            let mut req = Request::get("/api/agent/v1/desired?wait_s=0")
                .header(header::AUTHORIZATION, format!("Bearer {credential}"));
            if let Some(d) = digest {
                req = req.header("tessera-report-digest", d);
            }
            let resp = router
                .oneshot(req.body(Body::empty()).unwrap())
                .await
                .unwrap();
            assert_eq!(resp.status(), StatusCode::OK);
            resp.headers()
                .get("tessera-report")
                .map(|v| v.to_str().unwrap().to_owned())
        }
    };
    assert_eq!(poll(Some(digest.clone())).await.as_deref(), Some("noted"));
    assert_eq!(
        poll(Some("0".repeat(64))).await.as_deref(),
        Some("wanted"),
        "not the report processed last"
    );
    assert_eq!(poll(None).await, None, "a poll that names none");

    // A held poll whose report is wanted is answered at once, so that the
    // host is not left unseen for the whole poll.
    let (_, state) = app
        .get_json("/api/agent/v1/desired", Some(&credential))
        .await;
    let generation = state["generation"].as_i64().unwrap();
    let held = Request::get(format!(
        "/api/agent/v1/desired?wait_s=30&after={generation}"
    ))
    .header(header::AUTHORIZATION, format!("Bearer {credential}"))
    .header("prefer", "return=minimal")
    .header("tessera-report-digest", "1".repeat(64))
    .body(Body::empty())
    .unwrap();
    let resp = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        app.router.clone().oneshot(held),
    )
    .await
    .expect("answered at once, not held 30 s")
    .unwrap();
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert_eq!(resp.headers()["tessera-report"], "wanted");

    // A change of the host's desired state: the report is wanted again.
    let token = app.api_token("vision").await;
    let (status, placed) = app
        .post_json("/api/v1/allocations", Some(&token), TIME_SLICE)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{placed}");
    assert_eq!(poll(Some(digest.clone())).await.as_deref(), Some("wanted"));

    let (_, _, metrics) = app
        .call(Request::get("/metrics").body(Body::empty()).unwrap())
        .await;
    assert!(
        metrics.contains(r#"tessera_agent_reports_total{outcome="polled"} 1"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn openapi_document_describes_the_routes() {
    let app = app().await;
    let (status, doc) = app.get_json("/api/v1/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/allocations",
        "/allocations/{id}",
        "/allocations/{id}/release",
        "/allocations/{id}/extend",
        "/allocations/{id}/requeue",
        "/fleet",
        "/hosts/{id}/operations",
        "/hosts/{id}/gpus/{index}/operations",
        "/hosts/{id}/mig-parted.yaml",
        "/hosts/{id}/device-plugin.yaml",
        "/tenants/{slug}/kubernetes",
        "/allocations/{id}/kubernetes",
        "/quota-requests",
        "/quota-requests/{id}/decide",
        "/approvals",
        "/admin/quotas",
        "/notifications",
        "/tenants/{slug}/webhook",
    ] {
        assert!(doc["paths"][path].is_object(), "missing {path}");
    }
    assert!(doc["components"]["schemas"]["NewAllocation"]["properties"]["shape"].is_object());
}

#[tokio::test]
async fn audit_csv_needs_a_signed_in_admin_and_checks_its_filters() {
    let app = app().await;
    let (status, body) = app.get_json("/audit.csv", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, body) = app.get_json("/audit.csv?from=yesterday", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"].as_str().unwrap().starts_with("from:"),
        "{body}"
    );
}

#[tokio::test]
async fn every_mutating_endpoint_leaves_exactly_one_audit_event() {
    // Four-eyes off: a platform admin's direct set and grant apply at once
    // (with it on they are quota requests, covered by
    // `a_platform_admins_raise_waits_for_a_second_admin_over_http`).
    let app = app_with("[approvals]\nfour_eyes = false\n", Vec::new()).await;
    let member = app.sign_in("mia", &["vision"]).await;
    let lead = app.sign_in("lee", &["vision", "vision-leads"]).await;
    let admin = app.sign_in("root", &["admins"]).await;
    let credential = app.enroll("node-l4").await;
    let token = app.api_token("vision").await;
    let ends = (chrono::Utc::now() + chrono::Duration::days(3)).to_rfc3339();
    let amount = r#"{"gpus":1,"memory_gib":8,"max_slices":1}"#;

    // (expected action, call) — each call must leave exactly that one event.
    let mut ids: std::collections::BTreeMap<&str, String> = Default::default();
    type Step<'a> = (
        &'a str,
        &'a str,
        String,
        String,
        Option<String>,
        Option<&'a str>,
    );
    // action, method, path, cookie or "token", body, remember json pointer as
    let steps: Vec<Step> = vec![
        (
            "host.first_report",
            "POST",
            "/api/agent/v1/report".into(),
            "agent".into(),
            Some(report("node-l4").to_string()),
            None,
        ),
        (
            "allocation.create",
            "POST",
            "/api/v1/allocations".into(),
            "token".into(),
            Some(TIME_SLICE.into()),
            Some("alloc"),
        ),
        (
            "allocation.release",
            "POST",
            "/api/v1/allocations/{alloc}/release".into(),
            member.clone(),
            None,
            None,
        ),
        (
            "quota_request.create",
            "POST",
            "/api/v1/quota-requests".into(),
            member.clone(),
            Some(format!(
                r#"{{"tenant":"vision","pool":"l4","amount":{amount},"justification":"more"}}"#
            )),
            Some("qr1"),
        ),
        (
            "quota_request.submit",
            "POST",
            "/api/v1/quota-requests/{qr1}/submit".into(),
            lead.clone(),
            None,
            None,
        ),
        (
            "quota_request.approve",
            "POST",
            "/api/v1/quota-requests/{qr1}/decide".into(),
            admin.clone(),
            Some(r#"{"decision":"approve"}"#.into()),
            None,
        ),
        (
            "quota_request.create",
            "POST",
            "/api/v1/quota-requests".into(),
            lead.clone(),
            Some(format!(
                r#"{{"tenant":"vision","pool":"l4","amount":{amount},"ends_at":"{ends}","justification":"burst"}}"#
            )),
            Some("qr2"),
        ),
        (
            "quota_request.reject",
            "POST",
            "/api/v1/quota-requests/{qr2}/decide".into(),
            admin.clone(),
            Some(r#"{"decision":"reject","reason":"not this week"}"#.into()),
            None,
        ),
        (
            "quota_request.create",
            "POST",
            "/api/v1/quota-requests".into(),
            lead.clone(),
            Some(format!(
                r#"{{"tenant":"vision","pool":"l4","amount":{amount},"justification":"oops"}}"#
            )),
            Some("qr3"),
        ),
        (
            "quota_request.withdraw",
            "POST",
            "/api/v1/quota-requests/{qr3}/withdraw".into(),
            lead.clone(),
            None,
            None,
        ),
        (
            "quota.set",
            "PUT",
            "/api/v1/admin/quotas".into(),
            admin.clone(),
            Some(format!(
                r#"{{"tenant":"nlp","pool":"l4","amount":{amount}}}"#
            )),
            None,
        ),
        (
            "quota.grant",
            "POST",
            "/api/v1/admin/quota-grants".into(),
            admin.clone(),
            Some(format!(
                r#"{{"tenant":"nlp","pool":"l4","amount":{amount},"ends_at":"{ends}","reason":"demo"}}"#
            )),
            Some("grant"),
        ),
        (
            "webhook.set",
            "PUT",
            "/api/v1/tenants/vision/webhook".into(),
            lead.clone(),
            Some(r#"{"url":"https://hooks.example.com/hook"}"#.into()),
            None,
        ),
        (
            "webhook.test",
            "POST",
            "/api/v1/tenants/vision/webhook/test".into(),
            lead.clone(),
            None,
            None,
        ),
        (
            "webhook.delete",
            "DELETE",
            "/api/v1/tenants/vision/webhook".into(),
            lead.clone(),
            None,
            None,
        ),
        (
            "api_token.create",
            "POST",
            "/api/ui/create_api_token".into(),
            lead.clone(),
            Some("slug=vision&name=ci".into()),
            Some("token"),
        ),
        (
            "api_token.revoke",
            "POST",
            "/api/ui/revoke_api_token".into(),
            lead.clone(),
            Some("slug=vision&id={token}".into()),
            None,
        ),
        (
            "pool.create",
            "POST",
            "/api/v1/pools".into(),
            admin.clone(),
            Some(r#"{"spec":{"name":"t4-new","sharing":"time-slicing","models":["T4"],"time_slice_replicas":4}}"#.into()),
            None,
        ),
        (
            "pool.update",
            "PUT",
            "/api/v1/pools/t4-new".into(),
            admin.clone(),
            Some(r#"{"spec":{"name":"t4-new","description":"edge","sharing":"time-slicing","models":["T4"],"time_slice_replicas":4},"revision":1}"#.into()),
            None,
        ),
        (
            "tenant.create",
            "POST",
            "/api/v1/tenants".into(),
            admin.clone(),
            Some(r#"{"slug":"robotics","name":"Robotics","member_groups":["robots"]}"#.into()),
            None,
        ),
        (
            "tenant.update",
            "PUT",
            "/api/v1/tenants/robotics".into(),
            admin.clone(),
            Some(r#"{"slug":"robotics","name":"Robotics Lab","member_groups":["robots"],"revision":1}"#.into()),
            None,
        ),
        (
            "join_token.create",
            "POST",
            "/api/ui/create_join_token".into(),
            admin.clone(),
            Some("description=rack+7&ttl_hours=2".into()),
            Some("join"),
        ),
        (
            "join_token.revoke",
            "POST",
            "/api/ui/revoke_join_token".into(),
            admin.clone(),
            Some("id={join}".into()),
            None,
        ),
    ];
    for (action, method, path, who, body, remember) in steps {
        let fill = |s: &str| {
            ids.iter()
                .fold(s.to_owned(), |s, (k, v)| s.replace(&format!("{{{k}}}"), v))
        };
        let (path, body) = (fill(&path), body.map(|b| fill(&b)));
        let before = app.audit_count().await;
        let (status, json) = match who.as_str() {
            "token" => {
                app.post_json(&path, Some(&token), body.as_deref().unwrap())
                    .await
            }
            "agent" => {
                app.post_json(&path, Some(&credential), body.as_deref().unwrap())
                    .await
            }
            cookie => app.send(method, &path, cookie, body.as_deref()).await,
        };
        assert!(
            status.is_success(),
            "{action}: {method} {path} -> {status} {json}"
        );
        assert_eq!(
            app.audit_count().await,
            before + 1,
            "{action}: {method} {path}"
        );
        assert_eq!(app.last_action().await, action, "{method} {path}");
        if let Some(key) = remember {
            let id = json["id"]
                .as_i64()
                .or_else(|| json["token"]["id"].as_i64())
                .or_else(|| json["quota"]["grants"][0]["id"].as_i64())
                .unwrap_or_else(|| panic!("{action}: no id in {json}"));
            ids.insert(key, id.to_string());
        }
    }
    // The fleet: a platform admin's decisions about the host and its GPU,
    // one event each; asking again for the released slice is one request.
    let (status, fleet) = app.send("GET", "/api/v1/fleet", &admin, None).await;
    assert_eq!(status, StatusCode::OK, "{fleet}");
    let host = fleet["hosts"][0]["id"].as_i64().unwrap();
    // Filters: typed, and a bad one is a 400 that names it.
    let name = fleet["hosts"][0]["hostname"]
        .as_str()
        .unwrap()
        .to_uppercase();
    let (status, found) = app
        .send(
            "GET",
            &format!("/api/v1/fleet?q={name}&page=1"),
            &admin,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{found}");
    assert_eq!(found["hosts"][0]["id"].as_i64(), Some(host), "{found}");
    assert_eq!(found["matching"], 1, "{found}");
    for (query, field) in [
        ("status=sick", "query"),
        ("page=0", "page"),
        ("pool=nope", "pool"),
        ("colour=red", "query"),
    ] {
        let (status, body) = app
            .send("GET", &format!("/api/v1/fleet?{query}"), &admin, None)
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        let message = body["message"].as_str().unwrap_or_default();
        assert!(
            message.starts_with(&format!("{field}: ")),
            "{query}: {body}"
        );
    }
    for (action, path, body) in [
        (
            "host.drain",
            format!("/api/v1/hosts/{host}/operations"),
            r#"{"action":"drain","deadline_minutes":30,"reason":"rack work"}"#,
        ),
        (
            "gpu.cordon",
            format!("/api/v1/hosts/{host}/gpus/0/operations"),
            r#"{"action":"cordon","reason":"fan"}"#,
        ),
        (
            "host.resume",
            format!("/api/v1/hosts/{host}/operations"),
            r#"{"action":"resume","reason":"done"}"#,
        ),
        (
            "allocation.create",
            format!("/api/v1/allocations/{}/requeue", ids["alloc"]),
            "{}",
        ),
    ] {
        let before = app.audit_count().await;
        let (status, json) = app
            .send(
                "POST",
                &path,
                &admin_or_member(&admin, &member, &path),
                Some(body),
            )
            .await;
        assert!(
            status.is_success(),
            "{action}: POST {path} -> {status} {json}"
        );
        assert_eq!(app.audit_count().await, before + 1, "{action}");
        assert_eq!(app.last_action().await, action, "POST {path}");
    }
    // A refused operation records nothing; a tenant token may not operate.
    let before = app.audit_count().await;
    let (status, json) = app
        .send(
            "POST",
            &format!("/api/v1/hosts/{host}/operations"),
            &admin,
            Some(r#"{"action":"resume","reason":"again"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{json}");
    assert!(
        json["message"]
            .as_str()
            .unwrap()
            .contains("already available"),
        "{json}"
    );
    let (status, json) = app
        .post_json(
            &format!("/api/v1/hosts/{host}/operations"),
            Some(&token),
            r#"{"action":"cordon","reason":"x"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{json}");
    let (status, json) = app
        .send(
            "POST",
            &format!("/api/v1/hosts/{host}/operations"),
            &member,
            Some(r#"{"action":"cordon","reason":"x"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{json}");
    let (status, json) = app
        .send(
            "POST",
            &format!("/api/v1/hosts/{host}/operations"),
            &admin,
            Some(r#"{"action":"reboot","reason":"x"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    assert_eq!(app.audit_count().await, before);

    // Ending the grant, then a refused call and reading notifications: one
    // event, then none (reading is the reader's own view, not shared state).
    let before = app.audit_count().await;
    let (status, body) = app
        .send(
            "DELETE",
            &format!("/api/v1/admin/quota-grants/{}", ids["grant"]),
            &admin,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(app.audit_count().await, before + 1);
    assert_eq!(app.last_action().await, "quota.grant_end");
    let before = app.audit_count().await;
    let (status, _) = app
        .send(
            "DELETE",
            &format!("/api/v1/admin/quota-grants/{}", ids["grant"]),
            &admin,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, page) = app
        .send("POST", "/api/v1/notifications/read", &member, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["unread"], 0);
    assert_eq!(app.audit_count().await, before);
    // Every event kind above hashes the same when read back.
    let chain = app.service.verify_audit_chain().await.unwrap();
    assert_eq!(chain.broken, None, "{chain:?}");
    assert_eq!(chain.verified, app.audit_count().await as u64);
}

#[tokio::test]
async fn quota_endpoints_check_roles_and_two_admins_racing_get_one_win() {
    let app = app().await;
    let member = app.sign_in("mia", &["vision"]).await;
    let lead = app.sign_in("lee", &["vision", "vision-leads"]).await;
    let a = app.sign_in("ann", &["admins"]).await;
    let b = app.sign_in("bo", &["admins"]).await;
    let token = app.api_token("vision").await;

    // Tokens act for slices only; anonymous callers sign in first.
    let (status, body) = app
        .get_json("/api/v1/tenants/vision/quotas", Some(&token))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _) = app.get_json("/api/v1/tenants/vision/quotas", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A member cannot set quota or see the queue; a tenant admin cannot decide.
    let set =
        r#"{"tenant":"vision","pool":"l4","amount":{"gpus":9,"memory_gib":9,"max_slices":9}}"#;
    let (status, body) = app
        .send("PUT", "/api/v1/admin/quotas", &member, Some(set))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, _) = app.send("GET", "/api/v1/approvals", &lead, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let new = r#"{"tenant":"vision","pool":"l4","amount":{"gpus":1,"memory_gib":0,"max_slices":1},"justification":"x"}"#;
    let (status, r) = app
        .send("POST", "/api/v1/quota-requests", &lead, Some(new))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{r}");
    assert_eq!(r["state"]["state"], "pending");
    let id = r["id"].as_i64().unwrap();
    let decide = format!("/api/v1/quota-requests/{id}/decide");
    let (status, body) = app
        .send("POST", &decide, &lead, Some(r#"{"decision":"approve"}"#))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    // A forged tenant is a 404; a bad body names the field.
    let forged = new.replace("\"vision\"", "\"nlp\"");
    let (status, _) = app
        .send("POST", "/api/v1/quota-requests", &lead, Some(&forged))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = app
        .send(
            "POST",
            &decide,
            &a,
            Some(r#"{"decision":"approve","amount":{"gpus":"lots"}}"#),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("amount.gpus"),
        "{body}"
    );

    // The queue holds it; two admins approve at once: one wins, one gets 409.
    let (status, queue) = app.send("GET", "/api/v1/approvals", &a, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(queue["items"][0]["request"]["id"], id);
    let body = r#"{"decision":"approve"}"#;
    let (ra, rb) = tokio::join!(
        app.send("POST", &decide, &a, Some(body)),
        app.send("POST", &decide, &b, Some(body)),
    );
    let mut statuses = [ra.0, rb.0];
    statuses.sort();
    assert_eq!(
        statuses,
        [StatusCode::OK, StatusCode::CONFLICT],
        "{ra:?} {rb:?}"
    );
    let loser = if ra.0 == StatusCode::CONFLICT {
        ra.1
    } else {
        rb.1
    };
    assert_eq!(loser["code"], "conflict");
    assert!(
        loser["message"]
            .as_str()
            .unwrap()
            .contains("already approved"),
        "{loser}"
    );
    let (_, page) = app
        .send("GET", "/api/v1/tenants/vision/quotas", &member, None)
        .await;
    assert_eq!(page["quotas"][0]["quota"]["compute"], 2000, "{page}");
    // The lead was told.
    let (_, inbox) = app.send("GET", "/api/v1/notifications", &lead, None).await;
    assert_eq!(
        inbox["items"][0]["kind"], "quota_request.approved",
        "{inbox}"
    );
}

#[tokio::test]
async fn webhooks_are_signed_and_retried_until_delivered() {
    use axum::routing::post;
    use std::sync::Mutex;
    // The receiver is on loopback, which the operator must allow.
    let app = app_with(
        "[webhooks]\nallowed_networks = [\"127.0.0.0/8\"]\n",
        Vec::new(),
    )
    .await;
    let lead = app.sign_in("lee", &["vision", "vision-leads"]).await;

    // A receiver that fails the first call and accepts the next.
    type Seen = Arc<Mutex<Vec<(axum::http::HeaderMap, String)>>>;
    let seen: Seen = Arc::default();
    let receiver = Router::new()
        .route(
            "/hook",
            post(
                |axum::extract::State(seen): axum::extract::State<Seen>,
                 headers: axum::http::HeaderMap,
                 body: String| async move {
                    let mut seen = seen.lock().unwrap();
                    seen.push((headers, body));
                    if seen.len() == 1 {
                        StatusCode::INTERNAL_SERVER_ERROR
                    } else {
                        StatusCode::NO_CONTENT
                    }
                },
            ),
        )
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, receiver).await.unwrap() });

    let (status, created) = app
        .send(
            "PUT",
            "/api/v1/tenants/vision/webhook",
            &lead,
            Some(&format!(r#"{{"url":"http://{addr}/hook"}}"#)),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let secret = created["secret"].as_str().unwrap().to_owned();
    let (status, _) = app
        .send("POST", "/api/v1/tenants/vision/webhook/test", &lead, None)
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);

    let config = tessera_server::webhooks::DeliveryConfig {
        timeout: std::time::Duration::from_secs(5),
        retry_base_s: 1,
        per_tenant: 2,
        trust: tessera_trust::Trust::system(),
    };
    let mut deliverer =
        tessera_server::webhooks::Deliverer::new(app.service.clone(), config).unwrap();
    async fn pass(d: &mut tessera_server::webhooks::Deliverer) -> usize {
        let started = d.start_due().await.unwrap();
        d.finish().await;
        started
    }
    assert_eq!(pass(&mut deliverer).await, 1);
    // Not due again until the backoff has passed.
    assert_eq!(pass(&mut deliverer).await, 0);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(pass(&mut deliverer).await, 1);

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    for (headers, body) in &seen {
        let ts: i64 = headers["x-tessera-timestamp"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            headers["x-tessera-signature"].to_str().unwrap(),
            tessera_service::notifications::sign(&secret, ts, body)
        );
        assert_eq!(headers["x-tessera-event"], "webhook.test");
        let payload: Value = serde_json::from_str(body).unwrap();
        assert_eq!(payload["tenant"], "vision");
    }
    let (_, view) = app
        .send("GET", "/api/v1/tenants/vision/webhook", &lead, None)
        .await;
    assert_eq!(view["deliveries"][0]["status"], "delivered", "{view}");
    assert_eq!(view["deliveries"][0]["attempts"], 2);
}

#[tokio::test]
async fn pools_and_tenants_are_for_platform_admins_and_bad_edits_change_nothing() {
    let app = app().await;
    let member = app.sign_in("mia", &["vision"]).await;
    let admin = app.sign_in("root", &["admins"]).await;
    let token = app.api_token("vision").await;
    let (status, body) = app.send("GET", "/api/v1/pools", &member, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = app.send("GET", "/api/v1/tenants", &member, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let new_pool = r#"{"spec":{"name":"t4","sharing":"exclusive","models":["T4"]}}"#;
    let (status, body) = app.post_json("/api/v1/pools", Some(&token), new_pool).await;
    assert!(status.is_client_error(), "{status} {body}");
    let before = app.audit_count().await;
    // Mistakes are 400s that name the field; a stale revision is a 409.
    for (method, path, body, status, says) in [
        (
            "POST",
            "/api/v1/pools",
            r#"{"spec":{"name":"x","sharing":"mig","models":["L4"]}}"#,
            StatusCode::BAD_REQUEST,
            "spec.sharing",
        ),
        (
            "POST",
            "/api/v1/pools",
            r#"{"spec":{"name":"x","sharing":"exclusive","models":["T4"]},"colour":"red"}"#,
            StatusCode::BAD_REQUEST,
            "colour",
        ),
        (
            "PUT",
            "/api/v1/pools/l4",
            r#"{"spec":{"name":"l4","sharing":"time-slicing","models":["L4"],"time_slice_replicas":3},"revision":7}"#,
            StatusCode::CONFLICT,
            "reload",
        ),
        (
            "PUT",
            "/api/v1/pools/l4",
            r#"{"spec":{"name":"l4","sharing":"time-slicing","models":["L4"]}}"#,
            StatusCode::BAD_REQUEST,
            "revision",
        ),
        (
            "POST",
            "/api/v1/tenants",
            r#"{"slug":"Big Team","name":"Big"}"#,
            StatusCode::BAD_REQUEST,
            "slug",
        ),
        (
            "POST",
            "/api/v1/tenants",
            r#"{"slug":"vision","name":"Again"}"#,
            StatusCode::CONFLICT,
            "already",
        ),
    ] {
        let (got, json) = app.send(method, path, &admin, Some(body)).await;
        assert_eq!(got, status, "{method} {path}: {json}");
        assert!(
            json["message"].as_str().unwrap_or_default().contains(says),
            "{json}"
        );
    }
    assert_eq!(app.audit_count().await, before);
    let (status, pools) = app.send("GET", "/api/v1/pools", &admin, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(pools["pools"][0]["spec"]["time_slice_replicas"], 2);
    // What a change would do, without doing it.
    let (status, preview) = app
        .send(
            "POST",
            "/api/v1/pools/l4/preview",
            &admin,
            Some(r#"{"spec":{"name":"l4","sharing":"exclusive","models":["L4"]},"revision":1}"#),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{preview}");
    assert_eq!(preview["changes"][0]["field"], "sharing");
    assert_eq!(preview["immediate"], true);
    assert_eq!(app.audit_count().await, before);
}

#[tokio::test]
async fn usage_and_prices_over_http() {
    let app = app().await;
    let member = app.sign_in("mia", &["vision"]).await;
    let admin = app.sign_in("root", &["admins"]).await;
    // Prices: admins set them (audited), everyone signed in reads them.
    let before = app.audit_count().await;
    let (status, json) = app
        .send(
            "POST",
            "/api/v1/prices",
            &admin,
            Some(r#"{"pool":"l4","currency":"EUR","gpu_hour":"0.80","gib_hour":"0.001"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json["gpu_hour"], "0.80");
    assert_eq!(app.audit_count().await, before + 1);
    assert_eq!(app.last_action().await, "pool.set_price");
    let (status, json) = app
        .send(
            "POST",
            "/api/v1/prices",
            &member,
            Some(r#"{"pool":"l4","currency":"EUR","gpu_hour":"0.01"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{json}");
    let (status, json) = app
        .send(
            "POST",
            "/api/v1/prices",
            &admin,
            Some(r#"{"pool":"l4","currency":"euros","gpu_hour":"1"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    assert!(
        json["message"].as_str().unwrap().starts_with("currency"),
        "{json}"
    );
    let (status, json) = app.send("GET", "/api/v1/prices", &member, None).await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json.as_array().map(Vec::len), Some(1));

    // Usage: members name their tenant; admins see all; bad input is a 400.
    let (status, json) = app
        .send(
            "GET",
            "/api/v1/usage?tenant=vision&group_by=pool",
            &member,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json["group_by"], "pool");
    let (status, json) = app.send("GET", "/api/v1/usage", &member, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    let (status, json) = app
        .send("GET", "/api/v1/usage?tenant=nlp", &member, None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{json}");
    let (status, json) = app
        .send("GET", "/api/v1/usage?month=2026-13", &admin, None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    assert!(
        json["message"].as_str().unwrap().starts_with("month"),
        "{json}"
    );
    let (status, json) = app
        .send("GET", "/api/v1/usage?group_by=colour", &admin, None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    let (status, json) = app
        .send("GET", "/api/v1/usage?month=2026-11", &admin, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json["from"], "2026-11-01T00:00:00Z");
    let (status, csv) = app
        .send("GET", "/api/v1/usage.csv?month=2026-11", &admin, None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        csv.as_str()
            .unwrap_or_default()
            .starts_with("AvailabilityZone,BilledCost,BillingAccountId,"),
        "{csv}"
    );

    // The fleet ledger: platform admins only; it balances; bad input is a 400.
    let (status, json) = app
        .send("GET", "/api/v1/ledger?group_by=host&step=hour&from=2026-11-30T00:00:00Z&to=2026-12-02T00:00:00Z", &admin, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json["balanced"], true, "{json}");
    assert_eq!(json["group_by"], "host");
    assert_eq!(json["step"], "hour");
    let (status, json) = app.send("GET", "/api/v1/ledger", &member, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{json}");
    let (status, json) = app
        .send(
            "GET",
            "/api/v1/ledger?month=2026-11&step=hour",
            &admin,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    assert!(
        json["message"].as_str().unwrap().starts_with("step"),
        "{json}"
    );
    let (status, json) = app
        .send("GET", "/api/v1/ledger?group_by=colour", &admin, None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    let (status, json) = app
        .send("GET", "/api/v1/ledger?month=2026-11", &admin, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert!(json["charges"].is_array(), "{json}");

    // Prices name a recovery policy; a bad one is a 400 naming it.
    let (status, json) = app
        .send(
            "POST",
            "/api/v1/prices",
            &admin,
            Some(r#"{"pool":"l4","currency":"EUR","gpu_hour":"0.90","recovery":"full_recovery","effective_from":"2030-01-01T00:00:00Z"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json["recovery"], "full_recovery");
    let (status, json) = app
        .send(
            "POST",
            "/api/v1/prices",
            &admin,
            Some(r#"{"pool":"l4","currency":"EUR","gpu_hour":"0.90","recovery":"everyone"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");

    // Budgets: a platform admin sets one (audited); members read their
    // tenant's but set none; bad input is a 400 that changes nothing.
    let before = app.audit_count().await;
    let (status, json) = app
        .send(
            "PUT",
            "/api/v1/budgets",
            &admin,
            Some(r#"{"tenant":"vision","amount":"1500","currency":"eur","block_when_exceeded":true}"#),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json["amount"], "1500.00");
    assert_eq!(json["currency"], "EUR");
    assert_eq!(json["scope"], "tenant");
    assert_eq!(json["blocking"], false);
    assert_eq!(app.audit_count().await, before + 1);
    assert_eq!(app.last_action().await, "budget.set");
    let id = json["id"].as_i64().unwrap();
    let (status, json) = app
        .send("GET", "/api/v1/budgets?tenant=vision", &member, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json[0]["id"], id);
    let (status, json) = app.send("GET", "/api/v1/budgets", &member, None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    let (status, json) = app
        .send(
            "PUT",
            "/api/v1/budgets",
            &member,
            Some(r#"{"tenant":"vision","amount":"9","currency":"EUR"}"#),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{json}");
    for bad in [
        r#"{"tenant":"vision","amount":"0","currency":"EUR"}"#,
        r#"{"amount":"10","currency":"EUR"}"#,
        r#"{"tenant":"vision","amount":"10","currency":"EUR","colour":"red"}"#,
    ] {
        let (status, json) = app.send("PUT", "/api/v1/budgets", &admin, Some(bad)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}: {json}");
    }
    assert_eq!(app.audit_count().await, before + 1);
    let (status, json) = app
        .send(
            "GET",
            "/api/v1/statements?tenant=vision&month=2026-11",
            &member,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{json}");
    assert_eq!(json["month"], "2026-11");
    assert_eq!(json["budgets"][0]["id"], id);
    let (status, csv) = app
        .send("GET", "/api/v1/statements.csv?tenant=vision", &member, None)
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        csv.as_str()
            .unwrap_or_default()
            .starts_with("month,tenant,"),
        "{csv}"
    );
    let (status, json) = app
        .send("GET", "/api/v1/statements?cost_centre=CC-1", &member, None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{json}");
    let (status, json) = app
        .send("DELETE", &format!("/api/v1/budgets/{id}"), &member, None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{json}");
    let (status, _) = app
        .send("DELETE", &format!("/api/v1/budgets/{id}"), &admin, None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(app.last_action().await, "budget.delete");
}

/// A telemetry batch as the agent sends it: gzip-compressed JSON.
fn gzip(body: &Value) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(body.to_string().as_bytes()).unwrap();
    gz.finish().unwrap()
}

#[tokio::test]
async fn telemetry_is_compressed_authenticated_and_stored_once() {
    let app = app().await;
    let credential = app.enroll("node-1").await;
    let (status, body) = app
        .post_json(
            "/api/agent/v1/report",
            Some(&credential),
            &report("node-1").to_string(),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let at_ms = chrono::Utc::now().timestamp_millis();
    let batch = |hostname: &str, util: u32| {
        json!({"hostname": hostname, "interval_ms": 10000, "rounds": [
            {"at_ms": at_ms, "gpus": [{"uuid": "GPU-00000006", "util_pct": util, "mem_used_mib": 1000,
                                       "power_mw": 70000, "temp_c": 40, "sm_clock_mhz": 1500}]}
        ]})
    };
    let app = &app;
    let send = |bearer: Option<String>, body: Vec<u8>| {
        let mut req = Request::post("/api/agent/v1/telemetry")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CONTENT_ENCODING, "gzip");
        if let Some(b) = bearer {
            req = req.header(header::AUTHORIZATION, format!("Bearer {b}"));
        }
        let req = req.body(Body::from(body)).unwrap();
        async move {
            let (status, _, text) = app.call(req).await;
            (
                status,
                serde_json::from_str::<Value>(&text).unwrap_or(Value::String(text)),
            )
        }
    };
    let (status, ack) = send(Some(credential.clone()), gzip(&batch("node-1", 55))).await;
    assert_eq!(status, StatusCode::OK, "{ack}");
    assert_eq!(
        (ack["stored"].as_u64(), ack["duplicates"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(ack["last_at_ms"].as_i64(), Some(at_ms));
    // The same batch again (the answer was lost): stored once.
    let (status, ack) = send(Some(credential.clone()), gzip(&batch("node-1", 55))).await;
    assert_eq!(status, StatusCode::OK, "{ack}");
    assert_eq!(
        (ack["stored"].as_u64(), ack["duplicates"].as_u64()),
        (Some(0), Some(1))
    );

    let stored = || async {
        use sea_orm::{EntityTrait, PaginatorTrait};
        tessera_service::entity::gpu_sample::Entity::find()
            .count(app.service.db())
            .await
            .unwrap()
    };
    assert_eq!(stored().await, 1);
    // No credential, another host's name, a bad figure, a broken stream:
    // refused, nothing stored.
    let (status, _) = send(None, gzip(&batch("node-1", 55))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let other = app.enroll("node-22").await;
    let (status, json) = send(Some(other), gzip(&batch("node-1", 55))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{json}");
    let (status, json) = send(Some(credential.clone()), gzip(&batch("node-1", 101))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    assert!(
        json["message"].as_str().unwrap().contains("util_pct"),
        "{json}"
    );
    let (status, json) = send(Some(credential.clone()), b"\x1f\x8b not gzip".to_vec()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{json}");
    assert_eq!(stored().await, 1);
    // Anywhere else a compressed body is refused: it would not be inflated,
    // and the NUL check cannot read it.
    let token = app.api_token("vision").await;
    let req = Request::post("/api/v1/allocations")
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::CONTENT_ENCODING, "gzip")
        .header(header::AUTHORIZATION, format!("Bearer {token}"))
        .body(Body::from(
            r#"{"pool":"l4","shape":{"kind":"time_slice"},"lease_hours":1,"purpose":"a\u0000b"}"#,
        ))
        .unwrap();
    let (status, _, text) = app.call(req).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("compressed"), "{text}");

    // The latest round in /metrics, DCGM-named, read by a Prometheus parser.
    let (status, _, text) = app
        .call(Request::get("/metrics").body(Body::empty()).unwrap())
        .await;
    assert_eq!(status, StatusCode::OK);
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).unwrap();
    let util = scrape
        .samples
        .iter()
        .find(|s| s.metric == "DCGM_FI_DEV_GPU_UTIL")
        .unwrap_or_else(|| panic!("no GPU_UTIL in {text}"));
    assert_eq!(util.labels.get("UUID"), Some("GPU-00000006"));
    assert_eq!(util.labels.get("Hostname"), Some("node-1"));
    assert_eq!(util.labels.get("gpu"), Some("0"));
    assert!(
        matches!(util.value, prometheus_parse::Value::Gauge(v) if v == 55.0),
        "{util:?}"
    );
    let power = scrape
        .samples
        .iter()
        .find(|s| s.metric == "DCGM_FI_DEV_POWER_USAGE")
        .unwrap();
    assert!(
        matches!(power.value, prometheus_parse::Value::Gauge(v) if v == 70.0),
        "{power:?}"
    );
    assert!(scrape.samples.iter().any(|s| s.metric == "tessera_hosts"));
}

/// Four-eyes over the API: a platform admin's direct raise and grant answer
/// 202 with a pending quota request and change nothing in force; another
/// platform admin's approval applies it; a decrease answers 200 at once.
#[tokio::test]
async fn a_platform_admins_raise_waits_for_a_second_admin_over_http() {
    let app = app().await;
    let ann = app
        .sign_in("ann", &["admins", "vision", "vision-leads"])
        .await;
    let bo = app.sign_in("bo", &["admins"]).await;
    let before = l4_in_force(&app, &ann).await;
    let raise = format!(
        r#"{{"tenant":"vision","pool":"l4","amount":{{"gpus":{},"memory_gib":500,"max_slices":50}},"reason":"new team"}}"#,
        before / 1000 + 5
    );
    let (status, change) = app
        .send("PUT", "/api/v1/admin/quotas", &ann, Some(&raise))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{change}");
    assert_eq!(change["proposal"]["state"]["state"], "pending", "{change}");
    assert_eq!(
        l4_in_force(&app, &ann).await,
        before,
        "nothing in force yet"
    );
    let id = change["proposal"]["id"].as_i64().unwrap();
    let decide = format!("/api/v1/quota-requests/{id}/decide");
    let approve = Some(r#"{"decision":"approve"}"#);
    let (status, body) = app.send("POST", &decide, &ann, approve).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, body) = app.send("POST", &decide, &bo, approve).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(l4_in_force(&app, &ann).await, before + 5000);
    // A grant waits the same way.
    let ends = (chrono::Utc::now() + chrono::Duration::days(3)).to_rfc3339();
    let (status, change) = app
        .send(
            "POST",
            "/api/v1/admin/quota-grants",
            &ann,
            Some(&format!(
                r#"{{"tenant":"vision","pool":"l4","amount":{{"gpus":1,"memory_gib":0,"max_slices":0}},"ends_at":"{ends}","reason":"demo"}}"#
            )),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{change}");
    assert_eq!(l4_in_force(&app, &ann).await, before + 5000);
    // Lowering applies at once.
    let (status, change) = app
        .send(
            "PUT",
            "/api/v1/admin/quotas",
            &ann,
            Some(r#"{"tenant":"vision","pool":"l4","amount":{"gpus":0,"memory_gib":0,"max_slices":0}}"#),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{change}");
    assert!(change["proposal"].is_null(), "{change}");
}

/// Vision's quota in force in pool l4 (milli-GPUs), as `cookie` reads it.
async fn l4_in_force(app: &App, cookie: &str) -> u64 {
    let (_, page) = app
        .send("GET", "/api/v1/tenants/vision/quotas", cookie, None)
        .await;
    page["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["pool"] == "l4")
        .map(|q| q["quota"]["compute"].as_u64().unwrap_or(0))
        .unwrap_or(0)
}

#[tokio::test]
async fn people_can_be_signed_out_everywhere_and_deactivated_over_http() {
    let app = app().await;
    // Signed in a while ago (within the membership re-check).
    let earlier = chrono::Utc::now() - chrono::Duration::minutes(2);
    let lee = app
        .sign_in_at("lee", &["vision", "vision-leads"], earlier)
        .await;
    let mia = app.sign_in_at("mia", &["vision"], earlier).await;
    let root = app.sign_in("root", &["admins"]).await;

    // A tenant admin's token works while its creator may act.
    let (status, made) = app
        .send(
            "POST",
            "/api/ui/create_api_token",
            &lee,
            Some("slug=vision&name=ci"),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{made}");
    let secret = made["secret"].as_str().unwrap().to_owned();
    let (status, _) = app.get_json("/api/v1/allocations", Some(&secret)).await;
    assert_eq!(status, StatusCode::OK);

    // People: platform admins only.
    let (status, body) = app.send("GET", "/api/v1/admin/people", &mia, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    let (status, people) = app.send("GET", "/api/v1/admin/people", &root, None).await;
    assert_eq!(status, StatusCode::OK, "{people}");
    let id_of = |name: &str| {
        people
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == format!("User {name}"))
            .unwrap()["id"]
            .as_i64()
            .unwrap()
    };
    let (lee_id, mia_id) = (id_of("lee"), id_of("mia"));

    // Mia signs herself out everywhere: her session is over.
    let before = app.audit_count().await;
    let (status, me) = app
        .send("POST", "/api/v1/me/sign-out-everywhere", &mia, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(app.audit_count().await, before + 1);
    assert_eq!(app.last_action().await, "user.sign_out_everywhere");
    let (status, body) = app
        .send("GET", "/api/v1/tenants/vision/quotas", &mia, None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let mia = app.sign_in("mia", &["vision"]).await;
    let (status, _) = app
        .send("GET", "/api/v1/tenants/vision/quotas", &mia, None)
        .await;
    assert_eq!(status, StatusCode::OK, "a new sign-in works");

    // Only a platform admin signs out someone else.
    let path = format!("/api/v1/admin/people/{lee_id}/sign-out");
    let (status, body) = app.send("POST", &path, &mia, None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");

    // Deactivating Lee ends his session and his token, audited once for
    // him and once per token.
    let before = app.audit_count().await;
    let path = format!("/api/v1/admin/people/{lee_id}/deactivate");
    let (status, lee_view) = app.send("POST", &path, &root, None).await;
    assert_eq!(status, StatusCode::OK, "{lee_view}");
    assert!(lee_view["deactivated_at"].is_string(), "{lee_view}");
    assert_eq!(app.audit_count().await, before + 2);
    assert_eq!(app.last_action().await, "user.deactivate");
    let (status, body) = app.get_json("/api/v1/allocations", Some(&secret)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["code"], "invalid_api_token");
    let (status, _) = app
        .send("GET", "/api/v1/tenants/vision/quotas", &lee, None)
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = app.send("POST", &path, &root, None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, body) = app
        .send(
            "POST",
            "/api/v1/admin/people/999999/deactivate",
            &root,
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");

    // Reactivated, and the others' routes are in the OpenAPI document.
    let path = format!("/api/v1/admin/people/{lee_id}/reactivate");
    let (status, body) = app.send("POST", &path, &root, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(app.last_action().await, "user.reactivate");
    let path = format!("/api/v1/admin/people/{mia_id}/sign-out");
    let (status, _) = app.send("POST", &path, &root, None).await;
    assert_eq!(status, StatusCode::OK);
    let (_, doc) = app.get_json("/api/v1/openapi.json", None).await;
    for p in [
        "/admin/people",
        "/admin/people/{id}/deactivate",
        "/me/sign-out-everywhere",
    ] {
        assert!(doc["paths"][p].is_object(), "{p} documented");
    }
}

#[tokio::test]
async fn verify_audit_passes_then_names_the_row_edited_in_the_database() {
    let app = app().await;
    let alice = app.sign_in("alice", &["vision"]).await;
    let (status, _) = app
        .send("POST", "/api/v1/me/sign-out-everywhere", &alice, None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let dir = std::env::temp_dir().join("tessera-tests");
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join(format!("verify-{:016x}.toml", rand::random::<u64>()));
    std::fs::write(&config, BASE_CONFIG).unwrap();
    let verify = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_tessera-server"))
            .arg("--config")
            .arg(&config)
            .arg("verify-audit")
            .env("TESSERA_DATABASE__URL", &app.database_url)
            .output()
            .unwrap()
    };
    let out = verify();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = app.audit_count().await;
    assert!(
        stdout.contains(&format!("audit chain verified: {rows} rows")),
        "{stdout}"
    );
    // The SIEM export: one JSON line per row, oldest first, with its hash.
    let root = app.sign_in("root", &["admins"]).await;
    let (status, body) = app.send("GET", "/audit.jsonl", &root, None).await;
    assert_eq!(status, StatusCode::OK);
    let text = body.as_str().unwrap().to_owned();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), app.audit_count().await);
    assert!(lines
        .windows(2)
        .all(|w| w[0]["id"].as_i64() < w[1]["id"].as_i64()));
    assert!(lines
        .iter()
        .all(|l| l["hash"].as_str().is_some_and(|h| h.len() == 64)));
    let (status, _) = app.get_json("/audit.jsonl", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    use sea_orm::{ConnectionTrait, EntityTrait, QueryOrder};
    use tessera_service::entity::audit_event;
    let first = audit_event::Entity::find()
        .order_by_asc(audit_event::Column::Id)
        .one(app.service.db())
        .await
        .unwrap()
        .unwrap()
        .id;
    app.service
        .db()
        .execute_unprepared(&format!(
            "UPDATE audit_events SET target_id = 'someone-else' WHERE id = {first}"
        ))
        .await
        .unwrap();
    let out = verify();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("audit chain broken at row {first}")),
        "{stderr}"
    );
    let _ = std::fs::remove_file(&config);
}
