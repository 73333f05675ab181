//! The security mechanisms through the whole router: CSRF, headers, limits,
//! SSRF-safe and fair webhooks, host takeover, crash-proof input.

use super::*;
use std::time::Duration;

/// A cookie-carrying request with extra headers.
async fn send_with(
    app: &App,
    method: &str,
    path: &str,
    cookie: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (StatusCode, Value) {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header(header::COOKIE, cookie)
        .header(header::CONTENT_TYPE, "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let (status, _, text) = app
        .call(req.body(Body::from(body.to_owned())).unwrap())
        .await;
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test]
async fn cross_site_requests_with_the_session_cookie_are_refused_and_change_nothing() {
    let app = app().await;
    let lead = app.sign_in("lee", &["vision", "vision-leads"]).await;
    let body = r#"{"url":"https://hooks.example.com/gpu"}"#;
    let path = "/api/v1/tenants/vision/webhook";
    let before = app.audit_count().await;
    for headers in [
        vec![
            ("sec-fetch-site", "same-site"),
            ("origin", "http://127.0.0.1:4000"),
        ],
        vec![("sec-fetch-site", "cross-site")],
        vec![("origin", "https://intranet.example.com")],
        vec![("origin", "null")],
        vec![],
    ] {
        let (status, err) = send_with(&app, "PUT", path, &lead, &headers, body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{headers:?}: {err}");
        assert_eq!(err["code"], "forbidden", "{err}");
        // A server function (a plain form post) is guarded the same way.
        let (status, _) = send_with(
            &app,
            "POST",
            "/api/ui/mark_all_notifications_read",
            &lead,
            &headers,
            "",
        )
        .await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{headers:?}");
    }
    assert_eq!(app.audit_count().await, before, "nothing changed");
    let (status, _) = app.send("GET", path, &lead, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "no webhook was set");

    // From Tessera's own pages: fetch metadata, or the Origin, or (a script
    // without Origin) the custom header.
    for headers in [
        vec![("sec-fetch-site", "same-origin")],
        vec![("origin", ORIGIN)],
        vec![("x-tessera-csrf", "1")],
    ] {
        let (status, out) = send_with(&app, "PUT", path, &lead, &headers, body).await;
        assert_eq!(status, StatusCode::OK, "{headers:?}: {out}");
    }
    // API tokens carry no ambient authority: no Origin needed.
    let token = app.api_token("vision").await;
    let (status, _) = app
        .get_json("/api/v1/allocations?tenant=vision", Some(&token))
        .await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn every_response_carries_the_security_headers_and_pages_a_matching_nonce() {
    let app = app().await;
    let lead = app.sign_in("lee", &["vision", "vision-leads"]).await;
    let req = Request::get("/t/vision")
        .header(header::COOKIE, &lead)
        .body(Body::empty())
        .unwrap();
    let (status, headers, html) = app.call(req).await;
    assert_eq!(status, StatusCode::OK);
    let csp = headers[header::CONTENT_SECURITY_POLICY]
        .to_str()
        .unwrap()
        .to_owned();
    let script_src = csp
        .split(';')
        .find(|d| d.trim().starts_with("script-src"))
        .unwrap();
    assert!(!script_src.contains("unsafe-inline"), "{csp}");
    let nonce = script_src
        .split_whitespace()
        .find_map(|t| t.strip_prefix("'nonce-"))
        .unwrap()
        .trim_end_matches('\'')
        .to_owned();
    assert!(
        html.contains(&format!("nonce=\"{nonce}\"")),
        "the hydration script carries the policy's nonce {nonce}"
    );
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(headers[header::X_FRAME_OPTIONS], "DENY");
    assert!(headers.contains_key(header::REFERRER_POLICY));
    assert!(
        !headers.contains_key(header::STRICT_TRANSPORT_SECURITY),
        "no HSTS over http"
    );

    // A second page gets a fresh nonce; JSON and errors get the headers too.
    let req = Request::get("/t/vision")
        .header(header::COOKIE, &lead)
        .body(Body::empty())
        .unwrap();
    let (_, again, _) = app.call(req).await;
    assert_ne!(
        again[header::CONTENT_SECURITY_POLICY],
        headers[header::CONTENT_SECURITY_POLICY]
    );
    let (_, json_headers, _) = app
        .call(
            Request::get("/api/v1/allocations")
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(json_headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert!(json_headers.contains_key(header::CONTENT_SECURITY_POLICY));
}

#[tokio::test]
async fn https_adds_hsts_and_host_prefixed_cookies() {
    let app = app_with(
        "",
        vec![(
            "TESSERA_SERVER__PUBLIC_URL".to_owned(),
            "https://gpus.example.com".to_owned(),
        )],
    )
    .await;
    let (_, headers, _) = app
        .call(Request::get("/healthz").body(Body::empty()).unwrap())
        .await;
    assert!(headers[header::STRICT_TRANSPORT_SECURITY]
        .to_str()
        .unwrap()
        .starts_with("max-age="));
}

#[tokio::test]
async fn oversized_bodies_are_413_and_store_nothing() {
    let app = app().await;
    let token = app.api_token("vision").await;
    let huge = format!(
        r#"{{"tenant":"vision","pool":"l4","shape":{{"kind":"replica"}},"note":"{}"}}"#,
        "x".repeat(2 * 1024 * 1024)
    );
    let (status, _) = app
        .post_json("/api/v1/allocations", Some(&token), &huge)
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let (_, list) = app
        .get_json("/api/v1/allocations?tenant=vision", Some(&token))
        .await;
    assert_eq!(list.as_array().map(Vec::len), Some(0), "{list}");
}

#[tokio::test]
async fn sign_in_starts_and_enrolments_are_rate_limited_with_retry_after() {
    let app = app_with(
        "[limits]\nsign_in_per_client = 3\nenroll_per_client = 2\n",
        Vec::new(),
    )
    .await;
    let mut statuses = Vec::new();
    for _ in 0..5 {
        let (status, headers, _) = app
            .call(Request::get("/auth/login").body(Body::empty()).unwrap())
            .await;
        statuses.push(status);
        if status == StatusCode::TOO_MANY_REQUESTS {
            let wait: u64 = headers[header::RETRY_AFTER]
                .to_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!((1..=60).contains(&wait), "{wait}");
        }
    }
    // The IdP of this fixture is unreachable (503); the limiter answers first.
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
            .count(),
        2,
        "{statuses:?}"
    );
    let enroll =
        |n: u32| json!({"join_token": format!("tsj_bogus{n}"), "hostname": "gpu-1"}).to_string();
    let mut statuses = Vec::new();
    for n in 0..4 {
        let (status, _) = app
            .post_json("/api/agent/v1/enroll", None, &enroll(n))
            .await;
        statuses.push(status);
    }
    assert_eq!(
        statuses,
        [
            StatusCode::UNAUTHORIZED,
            StatusCode::UNAUTHORIZED,
            StatusCode::TOO_MANY_REQUESTS,
            StatusCode::TOO_MANY_REQUESTS
        ]
    );
}

#[tokio::test]
async fn metrics_can_require_a_bearer_token() {
    let app = app_with("[metrics]\nbearer_token = \"m3trics\"\n", Vec::new()).await;
    let (status, body) = app.get_json("/metrics", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["code"], "invalid_metrics_token", "{body}");
    let (status, _) = app.get_json("/metrics", Some("wrong")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = app.get_json("/metrics", Some("m3trics")).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body.as_str().unwrap().contains("tessera_hosts"), "{body}");
}

/// A receiver on loopback that counts calls; `hang` makes it never answer.
async fn receiver(hang: bool) -> (std::net::SocketAddr, Arc<std::sync::atomic::AtomicUsize>) {
    use axum::routing::post;
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    let router = Router::new().route(
        "/hook",
        post(move || {
            let seen = seen.clone();
            async move {
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if hang {
                    std::future::pending::<()>().await;
                }
                StatusCode::NO_CONTENT
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (addr, calls)
}

fn delivery_config() -> tessera_server::webhooks::DeliveryConfig {
    tessera_server::webhooks::DeliveryConfig {
        timeout: Duration::from_secs(30),
        retry_base_s: 1,
        per_tenant: 2,
        trust: tessera_trust::Trust::system(),
    }
}

#[tokio::test]
async fn webhooks_never_reach_internal_addresses() {
    let app = app().await;
    let lead = app.sign_in("lee", &["vision", "vision-leads"]).await;
    let (addr, calls) = receiver(false).await;
    for url in [
        format!("http://{addr}/hook"),
        format!("http://2130706433:{}/hook", addr.port()),
        format!("http://[::ffff:127.0.0.1]:{}/hook", addr.port()),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://[::1]/".to_owned(),
        "http://10.1.2.3/".to_owned(),
    ] {
        let (status, err) = app
            .send(
                "PUT",
                "/api/v1/tenants/vision/webhook",
                &lead,
                Some(&json!({ "url": url }).to_string()),
            )
            .await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{url}: {err}");
        assert!(
            err["message"]
                .as_str()
                .unwrap()
                .contains("private or internal"),
            "{err}"
        );
    }
    // A name that resolves inside is refused at delivery, on the address
    // actually resolved, and the tenant learns no more than that the
    // receiver did not answer.
    let (status, _) = app
        .send(
            "PUT",
            "/api/v1/tenants/vision/webhook",
            &lead,
            Some(&json!({ "url": format!("http://localhost:{}/hook", addr.port()) }).to_string()),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    app.send("POST", "/api/v1/tenants/vision/webhook/test", &lead, None)
        .await;
    let mut deliverer =
        tessera_server::webhooks::Deliverer::new(app.service.clone(), delivery_config()).unwrap();
    assert_eq!(deliverer.start_due().await.unwrap(), 1);
    deliverer.finish().await;
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "never called"
    );
    let (_, view) = app
        .send("GET", "/api/v1/tenants/vision/webhook", &lead, None)
        .await;
    let inside = view["deliveries"][0]["last_error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(inside.contains("did not answer"), "{view}");

    // A name that does not resolve reads the same: the errors are no
    // oracle of which internal names exist.
    let (status, _) = app
        .send(
            "PUT",
            "/api/v1/tenants/vision/webhook",
            &lead,
            Some(&json!({ "url": "http://no-such-host.invalid/hook" }).to_string()),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    app.send("POST", "/api/v1/tenants/vision/webhook/test", &lead, None)
        .await;
    assert!(deliverer.start_due().await.unwrap() >= 1);
    deliverer.finish().await;
    let (_, view) = app
        .send("GET", "/api/v1/tenants/vision/webhook", &lead, None)
        .await;
    let nowhere = view["deliveries"][0]["last_error"].as_str().unwrap();
    assert_eq!(nowhere, inside, "{view}");
    assert!(
        view["deliveries"][0]["detail"].is_null(),
        "the tenant's admin never sees the exact reason: {view}"
    );
    // A platform admin sees why each call failed, exactly.
    let root = app.sign_in("root", &["admins"]).await;
    let (status, seen) = app
        .send("GET", "/api/v1/tenants/vision/webhook", &root, None)
        .await;
    assert_eq!(status, StatusCode::OK, "{seen}");
    let details: Vec<&str> = seen["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["detail"].as_str())
        .collect();
    assert!(
        details.iter().any(|d| d.contains("private or internal")),
        "{seen}"
    );
    assert!(
        details.iter().any(|d| !d.contains("private or internal")),
        "the name that does not resolve reads differently for the admin: {seen}"
    );
}

#[tokio::test]
async fn a_receiver_that_never_answers_delays_only_its_own_tenant() {
    // The operator allows loopback receivers for this test.
    let app = app_with(
        "[webhooks]\nallowed_networks = [\"127.0.0.0/8\"]\n",
        Vec::new(),
    )
    .await;
    let vision = app.sign_in("lee", &["vision", "vision-leads"]).await;
    let nlp = app.sign_in("nia", &["nlp", "nlp-leads"]).await;
    let (stuck, stuck_calls) = receiver(true).await;
    let (fine, fine_calls) = receiver(false).await;
    for (cookie, slug, addr) in [(&vision, "vision", stuck), (&nlp, "nlp", fine)] {
        let (status, out) = app
            .send(
                "PUT",
                &format!("/api/v1/tenants/{slug}/webhook"),
                cookie,
                Some(&json!({ "url": format!("http://{addr}/hook") }).to_string()),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{out}");
    }
    // The stuck tenant clicks "send test event" until it is rate limited.
    let mut accepted = 0;
    loop {
        let (status, out) = app
            .send("POST", "/api/v1/tenants/vision/webhook/test", &vision, None)
            .await;
        if status == StatusCode::TOO_MANY_REQUESTS {
            assert_eq!(out["code"], "rate_limited", "{out}");
            break;
        }
        assert_eq!(status, StatusCode::ACCEPTED, "{out}");
        accepted += 1;
        assert!(accepted <= 10, "test events are rate limited");
    }
    assert_eq!(accepted, 5);
    // The other tenant's event is queued after all of them.
    let (status, _) = app
        .send("POST", "/api/v1/tenants/nlp/webhook/test", &nlp, None)
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);

    let mut deliverer =
        tessera_server::webhooks::Deliverer::new(app.service.clone(), delivery_config()).unwrap();
    // Two calls to the stuck receiver (its bound) and the other tenant's.
    assert_eq!(deliverer.start_due().await.unwrap(), 3);
    for _ in 0..200 {
        if fine_calls.load(std::sync::atomic::Ordering::SeqCst) == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        fine_calls.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "delivered while the other receiver hangs"
    );
    // Nothing more goes to the stuck receiver while its two calls hang.
    assert_eq!(deliverer.start_due().await.unwrap(), 0);
    assert_eq!(stuck_calls.load(std::sync::atomic::Ordering::SeqCst), 2);
}

#[tokio::test]
async fn crash_inputs_get_a_4xx_and_never_drop_the_connection() {
    let app = app().await;
    let admin = app.sign_in("ada", &["admins"]).await;
    for (path, signed_in) in [
        ("/audit.csv?until=+262142-12-31", StatusCode::BAD_REQUEST),
        ("/audit.csv?until=9999999999-01-01", StatusCode::BAD_REQUEST),
        ("/audit.csv?from=-262143-01-01", StatusCode::BAD_REQUEST),
        (
            "/audit.csv?from=1970-01-01&until=9999-12-31",
            StatusCode::OK,
        ),
    ] {
        let req = Request::get(path)
            .header(header::COOKIE, &admin)
            .body(Body::empty())
            .unwrap();
        let (status, _, body) = app.call(req).await;
        assert_eq!(status, signed_in, "{path}: {body}");
        // Anonymous too (the filters are checked first).
        let (status, _, _) = app
            .call(Request::get(path).body(Body::empty()).unwrap())
            .await;
        assert!(status.is_client_error(), "{path} anonymous: {status}");
    }
}

/// Path and query parameters that do not parse get the API's JSON error
/// (`{code, message}` naming what is wrong), not axum's plain text.
#[tokio::test]
async fn unparsable_path_and_query_parameters_are_a_json_400() {
    let app = app().await;
    let token = app.api_token("vision").await;
    for path in [
        "/api/v1/allocations/abc",
        "/api/v1/allocations/-9223372036854775809/release",
        "/api/v1/allocations/1.5/activity",
    ] {
        let method = if path.ends_with("release") {
            "POST"
        } else {
            "GET"
        };
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Body::empty())
            .unwrap();
        let (status, headers, body) = app.call(req).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert_eq!(headers[header::CONTENT_TYPE], "application/json", "{path}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["code"], "invalid_request", "{path}");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.starts_with("path:") || message.starts_with("query:"),
            "{path}: {message}"
        );
    }
}

/// Tenant slugs and pool names are checked where they enter: in a path, a
/// query, a JSON body and a server function's form, a name that breaks the
/// rule is a 400 naming the field and the rule, and nothing is written.
#[tokio::test]
async fn names_that_break_their_rule_are_a_400_naming_the_field() {
    let app = app().await;
    let lead = app.sign_in("lee", &["vision", "vision-leads"]).await;
    let token = app.api_token("vision").await;
    let before = app.audit_count().await;
    let (status, err) = app
        .send("GET", "/api/v1/tenants/Not%20A%20Slug/quotas", &lead, None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    let message = err["message"].as_str().unwrap();
    assert!(message.starts_with("path:"), "{message}");
    assert!(message.contains("is not a valid tenant slug"), "{message}");
    let (status, err) = app
        .send("GET", "/api/v1/allocations?tenant=UPPER", &lead, None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(
        err["message"].as_str().unwrap().contains("tenant slug"),
        "{err}"
    );
    let (status, err) = app
        .post_json(
            "/api/v1/allocations",
            Some(&token),
            r#"{"pool":"L4 shared","shape":{"kind":"replica"},"lease_hours":1}"#,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    let message = err["message"].as_str().unwrap();
    assert!(message.starts_with("pool"), "{message}");
    assert!(message.contains("is not a valid pool name"), "{message}");
    let (status, _) = app
        .send(
            "POST",
            "/api/ui/create_api_token",
            &lead,
            Some("slug=Vision!&name=ci"),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(app.audit_count().await, before, "nothing was written");
}

#[tokio::test]
async fn nul_characters_are_refused_in_urls_and_bodies_on_both_databases() {
    let app = app().await;
    let lead = app.sign_in("lee", &["vision", "vision-leads"]).await;
    let before = app.audit_count().await;
    let (status, err) = app
        .send("GET", "/api/v1/tenants/%00/quotas", &lead, None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{err}");
    assert!(err["message"].as_str().unwrap().contains("NUL"), "{err}");
    let (status, _) = app
        .send(
            "POST",
            "/api/ui/create_api_token",
            &lead,
            Some("slug=vision&name=a%00b"),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let token = app.api_token("vision").await;
    let before_token = app.audit_count().await;
    assert_eq!(before_token, before + 1);
    let (status, _) = app
        .post_json(
            "/api/v1/allocations",
            Some(&token),
            r#"{"tenant":"vision","pool":"l4","shape":{"kind":"replica"},"note":"a\u0000b"}"#,
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(app.audit_count().await, before_token, "nothing written");
}

#[tokio::test]
async fn a_panicking_handler_is_a_500_not_a_dropped_connection() {
    let resp = tessera_server::security::panic_response(Box::new("boom".to_owned()));
    assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&body);
    assert!(!text.contains("boom"), "no detail leaks: {text}");
    assert!(text.contains("\"internal\""), "{text}");
}

#[tokio::test]
async fn roles_are_rechecked_at_the_idp_after_the_recheck_interval() {
    let app = app().await;
    let page = |cookie: String| {
        Request::get("/t/vision")
            .header(header::COOKIE, cookie)
            .body(Body::empty())
            .unwrap()
    };
    let fresh = app
        .sign_in_at(
            "lee",
            &["vision"],
            chrono::Utc::now() - chrono::Duration::minutes(14),
        )
        .await;
    let (status, _, _) = app.call(page(fresh)).await;
    assert_eq!(status, StatusCode::OK);
    // Past the 15 minutes: the session ends and the page goes through the
    // IdP again, which answers with the person's current groups.
    let stale = app
        .sign_in_at(
            "lee",
            &["vision"],
            chrono::Utc::now() - chrono::Duration::minutes(16),
        )
        .await;
    let (status, headers, _) = app.call(page(stale.clone())).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
    assert_eq!(headers[header::LOCATION], "/auth/login?next=%2Ft%2Fvision");
    // And the ended session does not come back.
    let (status, _, _) = app.call(page(stale)).await;
    assert_eq!(status, StatusCode::SEE_OTHER);
}

/// A receiver behind a company CA: refused with the reason (and the setting
/// that fixes it) on the system roots; delivered once the CA is in
/// `tls.ca_bundle`.
#[tokio::test]
async fn webhooks_to_a_receiver_behind_an_internal_ca_need_its_ca() {
    use std::sync::atomic::Ordering;
    let app = app_with(
        "[webhooks]\nallowed_networks = [\"127.0.0.0/8\"]\n",
        Vec::new(),
    )
    .await;
    let lead = app.sign_in("lee", &["vision", "vision-leads"]).await;
    let pki = tessera_test_kit::tls::TestPki::new();
    let (base, answered) = pki.serve().await;
    let (status, body) = app
        .send(
            "PUT",
            "/api/v1/tenants/vision/webhook",
            &lead,
            Some(&json!({ "url": format!("{base}/hook") }).to_string()),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    app.send("POST", "/api/v1/tenants/vision/webhook/test", &lead, None)
        .await;

    let mut untrusting =
        tessera_server::webhooks::Deliverer::new(app.service.clone(), delivery_config()).unwrap();
    assert_eq!(untrusting.start_due().await.unwrap(), 1);
    untrusting.finish().await;
    assert_eq!(answered.load(Ordering::SeqCst), 0);
    let (_, view) = app
        .send("GET", "/api/v1/tenants/vision/webhook", &lead, None)
        .await;
    let why = view["deliveries"][0]["last_error"].as_str().unwrap();
    assert!(
        why.contains("TLS certificate is not trusted")
            && why.contains("UnknownIssuer")
            && why.contains("tls.ca_bundle"),
        "{view}"
    );

    let dir = tessera_test_kit::scratch_dir("webhook-ca");
    let tls = tessera_server::config::TlsConfig {
        ca_bundle: Some(pki.write_ca(&dir)),
    };
    let config = tessera_server::webhooks::DeliveryConfig {
        trust: tls.trust().unwrap(),
        ..delivery_config()
    };
    let mut trusting =
        tessera_server::webhooks::Deliverer::new(app.service.clone(), config).unwrap();
    // The retry is due a second after the failure.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(trusting.start_due().await.unwrap(), 1);
    trusting.finish().await;
    assert_eq!(answered.load(Ordering::SeqCst), 1);
    let (_, view) = app
        .send("GET", "/api/v1/tenants/vision/webhook", &lead, None)
        .await;
    assert_eq!(view["deliveries"][0]["status"], "delivered", "{view}");
    std::fs::remove_dir_all(&dir).unwrap();
}
