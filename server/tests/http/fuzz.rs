//! Arbitrary input at every endpoint: every REST operation of the OpenAPI
//! document gets random JSON bodies and query strings, every server function
//! random forms, as a signed-in platform admin who is also a tenant admin
//! (so requests get past authorization into the parsing and the use-cases).
//! Each must be answered (no dropped connection) with something other than a
//! 5xx, and a refused one must have written nothing.

use super::*;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

/// Field names the endpoints read, so random objects reach deep parsing.
const FIELDS: &[&str] = &[
    "tenant",
    "pool",
    "shape",
    "kind",
    "profile",
    "gpus",
    "count",
    "share",
    "replicas",
    "lease_hours",
    "hours",
    "memory_gib",
    "max_slices",
    "url",
    "name",
    "slug",
    "id",
    "ids",
    "reason",
    "decision",
    "approve",
    "comment",
    "days",
    "ttl_minutes",
    "description",
    "from",
    "until",
    "action",
    "actor",
    "page",
    "hostname",
    "note",
    "query",
];

/// Strings at the edges of what parsers accept.
fn edge_string() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("+262142-12-31".to_owned()),
        Just("-262143-01-01".to_owned()),
        Just("9999-12-31".to_owned()),
        Just("1970-01-01T00:00:00Z".to_owned()),
        Just("4294967295".to_owned()),
        Just("18446744073709551616".to_owned()),
        Just("-1".to_owned()),
        Just("NaN".to_owned()),
        Just("1e309".to_owned()),
        Just("vision".to_owned()),
        Just("l4".to_owned()),
        Just("http://127.0.0.1/".to_owned()),
        Just("\u{0}\u{202e}<script>".to_owned()),
        "[a-z0-9_.:/%+-]{0,24}",
        "\\PC{0,40}",
        Just("x".repeat(5000)),
    ]
}

fn edge_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(0)),
        Just(json!(-1)),
        Just(json!(u32::MAX)),
        Just(json!(u64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(i64::MAX)),
        Just(json!(1e308)),
        Just(json!(-1e308)),
        Just(json!(0.000_001)),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| json!(f)),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        edge_number(),
        edge_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(prop::sample::select(FIELDS), inner, 0..6).prop_map(|m| {
                Value::Object(m.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            }),
        ]
    })
}

/// A random body: JSON, or something that is not JSON at all.
fn body() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => json_value().prop_map(|v| v.to_string()),
        1 => "\\PC{0,60}",
        1 => Just("{\"shape\":".to_owned()),
    ]
}

/// A random query string or form body (`k=v&...`).
fn pairs() -> impl Strategy<Value = String> {
    prop::collection::vec((prop::sample::select(FIELDS), edge_string()), 0..5).prop_map(|kv| {
        kv.iter()
            .map(|(k, v)| format!("{k}={}", tessera_protocol::query::encode_component(v)))
            .collect::<Vec<_>>()
            .join("&")
    })
}

fn sample<S: Strategy>(runner: &mut TestRunner, s: &S) -> S::Value {
    s.new_tree(runner).unwrap().current()
}

/// Fills `{param}`s with a real value, a missing one or an edge value.
fn fill(path: &str, runner: &mut TestRunner) -> String {
    let choices = prop_oneof![
        Just("vision".to_owned()),
        Just("nlp".to_owned()),
        Just("1".to_owned()),
        Just("0".to_owned()),
        Just("-1".to_owned()),
        Just("99999999999999999999".to_owned()),
        Just("%00".to_owned()),
    ];
    let mut out = String::new();
    for segment in path.split('/').skip(1) {
        out.push('/');
        if segment.starts_with('{') {
            out.push_str(&sample(runner, &choices));
        } else {
            out.push_str(segment);
        }
    }
    out
}

#[tokio::test]
async fn arbitrary_input_at_every_endpoint_is_a_4xx_and_writes_nothing() {
    let app = app().await;
    let cookie = app
        .sign_in("root", &["admins", "vision", "vision-leads"])
        .await;
    // Something to act on: a slice and a quota request exist.
    let token = app.api_token("vision").await;
    let _ = app
        .post_json(
            "/api/v1/allocations",
            Some(&token),
            &json!({"tenant": "vision", "pool": "l4", "shape": {"kind": "replica"}}).to_string(),
        )
        .await;

    let (_, doc) = app.get_json("/api/v1/openapi.json", None).await;
    let mut operations: Vec<(String, String)> = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in ["get", "post", "put", "patch", "delete"] {
            if item.get(method).is_some() {
                operations.push((method.to_uppercase(), format!("/api/v1{path}")));
            }
        }
    }
    assert!(operations.len() >= 15, "{operations:?}");
    let server_fns: Vec<String> = leptos::server_fn::axum::server_fn_paths()
        .map(|(p, _)| p.to_owned())
        .collect();
    assert!(server_fns.len() >= 20, "{server_fns:?}");

    let cases: usize = std::env::var("TESSERA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let mut runner = TestRunner::deterministic();
    let mut tried = 0;
    let check = |status: StatusCode, what: &str, changed: bool| {
        assert!(
            !status.is_server_error(),
            "{what} answered {status}: arbitrary input must be refused with a 4xx"
        );
        if status.is_client_error() {
            assert!(
                !changed,
                "{what} was refused ({status}) but wrote audit events"
            );
        }
    };
    for (method, path) in &operations {
        for _ in 0..cases {
            let uri = format!(
                "{}?{}",
                fill(path, &mut runner),
                sample(&mut runner, &pairs())
            );
            let body = sample(&mut runner, &body());
            let before = app.audit_count().await;
            let req = Request::builder()
                .method(method.as_str())
                .uri(&uri)
                .header(header::COOKIE, &cookie)
                .header(header::ORIGIN, ORIGIN)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(body.clone()))
                .unwrap();
            let (status, _, text) = app.call(req).await;
            let changed = app.audit_count().await != before;
            check(
                status,
                &format!("{method} {uri} {body:.200} -> {text:.300}"),
                changed,
            );
            tried += 1;
        }
    }
    for path in &server_fns {
        for _ in 0..cases {
            let form = sample(&mut runner, &pairs());
            let before = app.audit_count().await;
            let req = Request::post(path.as_str())
                .header(header::COOKIE, &cookie)
                .header(header::ORIGIN, ORIGIN)
                .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
                .body(Body::from(form.clone()))
                .unwrap();
            let (status, _, text) = app.call(req).await;
            let changed = app.audit_count().await != before;
            check(
                status,
                &format!("POST {path} {form:.200} -> {text:.300}"),
                changed,
            );
            tried += 1;
        }
    }
    // Anonymous callers and pages with arbitrary queries.
    for path in [
        "/audit.csv",
        "/",
        "/fleet",
        "/audit",
        "/t/vision",
        "/auth/callback",
    ] {
        for _ in 0..cases {
            let uri = format!("{path}?{}", sample(&mut runner, &pairs()));
            for with_cookie in [false, true] {
                let mut req = Request::get(&uri);
                if with_cookie {
                    req = req.header(header::COOKIE, &cookie);
                }
                let (status, _, text) = app.call(req.body(Body::empty()).unwrap()).await;
                check(status, &format!("GET {uri} -> {text:.300}"), false);
                tried += 1;
            }
        }
    }
    assert!(tried > 500, "{tried}");
}
