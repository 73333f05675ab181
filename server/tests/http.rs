//! The HTTP surface, in-process, against a real SQLite (or PostgreSQL when
//! `TESSERA_TEST_POSTGRES_URL` is set) database. The OIDC flow itself is covered
//! by the end-to-end suite with a real identity provider.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use sea_orm::{ConnectionTrait, Database};
use serde_json::{json, Value};
use std::sync::Arc;
use tessera_server::app::{build_state, router};
use tessera_server::config::Config;
use tessera_service::audit::Actor;
use tessera_service::{Service, SystemClock};
use tower::ServiceExt;

async fn database_url() -> String {
    let suffix = format!("{:016x}", rand::random::<u64>());
    match std::env::var("TESSERA_TEST_POSTGRES_URL") {
        Ok(admin_url) if !admin_url.is_empty() => {
            let admin = Database::connect(&admin_url).await.unwrap();
            admin
                .execute_unprepared(&format!("CREATE DATABASE tessera_t_{suffix}"))
                .await
                .unwrap();
            let base = admin_url.rsplit_once('/').unwrap().0.to_owned();
            format!("{base}/tessera_t_{suffix}")
        }
        _ => {
            let dir = std::env::temp_dir().join("tessera-tests");
            std::fs::create_dir_all(&dir).unwrap();
            format!("sqlite://{}/{suffix}.db?mode=rwc", dir.display())
        }
    }
}

struct App {
    router: Router,
    service: Service,
}

async fn app() -> App {
    let toml = r#"
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
"#;
    let env = vec![("TESSERA_DATABASE__URL".to_owned(), database_url().await)];
    let config = Config::from_toml_and_env(toml, env).unwrap();
    let (state, store) = build_state(config, Arc::new(SystemClock)).await.unwrap();
    let service = state.service.clone();
    App {
        router: router(state, store),
        service,
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

    async fn join_token(&self) -> String {
        self.service
            .create_join_token_as(Actor::System, "test", chrono::Duration::hours(1))
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
        body.contains("tessera_gpus{model=\"L4\",mig=\"n/a\"} 1"),
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
    assert!(
        headers.get(header::SET_COOKIE).is_none(),
        "no session for a forged callback"
    );
}

#[tokio::test]
async fn server_functions_refuse_anonymous_callers() {
    let app = app().await;
    let req = Request::post("/api/ui/get_fleet")
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
