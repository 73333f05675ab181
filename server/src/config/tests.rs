#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

const MINIMAL: &str = r#"
[oidc]
issuer_url = "http://127.0.0.1:4011"
client_id = "tessera"
client_secret = "s3cret"
"#;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn defaults_and_env_overrides() {
    let c = Config::from_toml_and_env(
        MINIMAL,
        env(&[
            ("TESSERA_DATABASE__URL", "postgres://localhost/x"),
            ("TESSERA_AGENTS__OFFLINE_AFTER_SECONDS", "7"),
            ("TESSERA_CONFIG", "ignored.toml"),
            ("TESSERA_TEST_POSTGRES_URL", "postgres://elsewhere"),
            ("PATH", "/bin"),
        ]),
    )
    .unwrap();
    assert_eq!(c.database.url.expose(), "postgres://localhost/x");
    assert_eq!(c.agents.offline_after_seconds, 7);
    assert_eq!(c.oidc.groups_claim, "groups");
    assert_eq!(c.redirect_url(), "http://127.0.0.1:3000/auth/callback");
    assert!(!c.secure_cookies());
    assert_eq!(c.session_cookie_name(), "tessera_session");
}

#[test]
fn https_gets_host_prefixed_cookies() {
    let c = Config::from_toml_and_env(
        MINIMAL,
        env(&[("TESSERA_SERVER__PUBLIC_URL", "https://gpus.example.com")]),
    )
    .unwrap();
    assert!(c.secure_cookies());
    assert_eq!(c.session_cookie_name(), "__Host-tessera_session");
}

#[test]
fn webhook_networks_and_metrics_token_parse() {
    let c = Config::from_toml_and_env(
        &format!("{MINIMAL}\n[webhooks]\nallowed_networks = [\"10.20.0.0/16\"]\n[metrics]\nbearer_token = \"m3trics\"\n"),
        env(&[]),
    )
    .unwrap();
    assert!(c
        .webhooks
        .allowed_networks
        .permits("10.20.1.1".parse().unwrap()));
    assert!(!c
        .webhooks
        .allowed_networks
        .permits("10.21.1.1".parse().unwrap()));
    assert!(!format!("{c:?}").contains("m3trics"));
    let err = Config::from_toml_and_env(
        &format!("{MINIMAL}\n[webhooks]\nallowed_networks = [\"10.20.0.0/33\"]\n"),
        env(&[]),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("allowed_networks") || err.to_string().contains("invalid"),
        "{err}"
    );
}

#[test]
fn unknown_keys_are_rejected_in_file_and_env() {
    let err =
        Config::from_toml_and_env(&format!("{MINIMAL}\n[server]\nlisten_port = 1\n"), env(&[]))
            .unwrap_err();
    assert!(err.to_string().contains("listen_port"), "{err}");
    let err = Config::from_toml_and_env(MINIMAL, env(&[("TESSERA_OIDC__CLIENT_SECRETS", "x")]))
        .unwrap_err();
    assert!(err.to_string().contains("client_secrets"), "{err}");
}

#[test]
fn secrets_are_not_printed() {
    let c = Config::from_toml_and_env(MINIMAL, env(&[])).unwrap();
    let debug = format!("{c:?}");
    assert!(!debug.contains("s3cret"), "{debug}");
    assert!(debug.contains("***"));
}

#[test]
fn bad_values_name_the_field() {
    let err = Config::from_toml_and_env(MINIMAL, env(&[("TESSERA_DATABASE__URL", "mysql://x")]))
        .unwrap_err();
    assert!(err.to_string().contains("database.url"), "{err}");
    let err =
        Config::from_toml_and_env(MINIMAL, env(&[("TESSERA_SERVER__PUBLIC_URL", "not a url")]))
            .unwrap_err();
    assert!(err.to_string().contains("server.public_url"), "{err}");
}

#[test]
fn api_token_lifetimes_default_and_are_checked() {
    let c = Config::from_toml_and_env(MINIMAL, env(&[])).unwrap();
    assert_eq!(
        (c.api_tokens.default_days, c.api_tokens.max_days),
        (90, 365)
    );
    let c = Config::from_toml_and_env(
        &format!("{MINIMAL}\n[api_tokens]\ndefault_days = 7\nmax_days = 30\n"),
        env(&[]),
    )
    .unwrap();
    assert_eq!(c.api_tokens.policy().max_days, 30);
    for (key, value, field) in [
        (
            "TESSERA_API_TOKENS__DEFAULT_DAYS",
            "400",
            "api_tokens.default_days",
        ),
        (
            "TESSERA_API_TOKENS__DEFAULT_DAYS",
            "0",
            "api_tokens.default_days",
        ),
        ("TESSERA_API_TOKENS__MAX_DAYS", "0", "api_tokens.max_days"),
        (
            "TESSERA_API_TOKENS__MAX_DAYS",
            "100000",
            "api_tokens.max_days",
        ),
    ] {
        let err = Config::from_toml_and_env(MINIMAL, env(&[(key, value)])).unwrap_err();
        assert!(err.to_string().contains(field), "{key}={value}: {err}");
    }
}

#[test]
fn durations_that_overflow_are_refused() {
    for (key, value, field) in [
        (
            "TESSERA_AGENTS__OFFLINE_AFTER_SECONDS",
            "9223372036854775807",
            "agents",
        ),
        ("TESSERA_AGENTS__PROVISION_TIMEOUT_SECONDS", "0", "agents"),
        (
            "TESSERA_SESSION__ABSOLUTE_TIMEOUT_HOURS",
            "9223372036854775807",
            "session",
        ),
        (
            "TESSERA_SESSION__IDLE_TIMEOUT_MINUTES",
            "9223372036854775807",
            "session",
        ),
    ] {
        let err = Config::from_toml_and_env(MINIMAL, env(&[(key, value)])).unwrap_err();
        assert!(err.to_string().contains(field), "{key}={value}: {err}");
    }
}

/// The configuration reference (docs/operations.md) names every key
/// the server reads and only those: each documented key is one the code
/// has, and every key of a loaded configuration is documented. The
/// pools table likewise against a pool's fields.
#[test]
fn the_configuration_reference_matches_the_code() {
    use std::collections::BTreeSet;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join("docs/operations.md")).unwrap();
    let start = doc.find("\n## Configuration reference").unwrap() + 1;
    let section = &doc[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |i| i + 3)];
    let table = |header: &str| -> BTreeSet<String> {
        let at = section
            .find(header)
            .unwrap_or_else(|| panic!("no table '{header}' in the reference"));
        section[at..]
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .flat_map(|l| {
                l.split('|')
                    .nth(1)
                    .unwrap_or_default()
                    .split(',')
                    .map(|k| k.trim().trim_matches('`').to_owned())
                    .collect::<Vec<_>>()
            })
            .collect()
    };

    let demo = std::fs::read_to_string(root.join("demo/tessera.toml")).unwrap();
    let config = Config::from_toml_and_env(&demo, Vec::new()).unwrap();
    let mut code = BTreeSet::new();
    let serde_json::Value::Object(sections) = serde_json::to_value(&config).unwrap() else {
        panic!("a configuration is a table");
    };
    for (name, value) in sections {
        match (name.as_str(), value) {
            ("pools" | "priority_classes", _) => {
                code.insert(format!("[[{name}]]"));
            }
            (_, serde_json::Value::Object(keys)) => {
                for key in keys.keys() {
                    code.insert(if name == "directory" && key == "tenants" {
                        "[[directory.tenants]]".to_owned()
                    } else {
                        format!("{name}.{key}")
                    });
                }
            }
            (_, other) => panic!("[{name}] is not a table: {other}"),
        }
    }
    let documented = table("| key | default |");
    let undocumented: Vec<_> = code.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&code).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "keys the code reads but the reference does not name: {undocumented:?}; \
         keys the reference names but the code does not read: {unknown:?}"
    );

    let mut pool = tessera_service::pools::PoolSpec::new(
        "p".parse().unwrap(),
        tessera_core::sharing::SharingMode::Mps,
        &["L4"],
    );
    pool.idle_reclaim = Some(tessera_core::idle::IdlePolicy::new(15, 120));
    let serde_json::Value::Object(fields) = serde_json::to_value(&pool).unwrap() else {
        panic!("a pool is a table");
    };
    let code: BTreeSet<String> = fields.keys().cloned().collect();
    let documented = table("| field | default |");
    assert_eq!(
        code, documented,
        "the pools table of the reference and a pool's fields differ"
    );
}

/// The Kubernetes manifest in `deploy/` is one this server runs with:
/// its configuration plus the container's environment load (unknown keys
/// are refused), the probes and port are the server's, and there are
/// replicas to survive a lost machine; the systemd unit names a real
/// configuration file path and the secrets' environment file.
#[test]
fn the_deployed_configuration_loads() {
    use serde::Deserialize;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let text = std::fs::read_to_string(root.join("kubernetes/server.yaml")).unwrap();
    let docs: Vec<serde_yaml_ng::Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde_yaml_ng::Value::deserialize(d).unwrap())
        .collect();
    let kind = |k: &str| {
        docs.iter()
            .find(|d| d["kind"].as_str() == Some(k))
            .unwrap_or_else(|| panic!("no {k} in server.yaml"))
    };
    let toml = kind("ConfigMap")["data"]["tessera.toml"].as_str().unwrap();
    let deployment = kind("Deployment");
    assert!(deployment["spec"]["replicas"].as_u64().unwrap() >= 2);
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let env: Vec<(String, String)> = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_owned();
            // Secrets are references; any well-formed value stands in.
            let value = match name.as_str() {
                "TESSERA_DATABASE__URL" => "postgres://tessera@db.internal/tessera",
                _ => "from-the-secret",
            };
            (name, value.to_owned())
        })
        .collect();
    let config = Config::from_toml_and_env(toml, env).unwrap();
    assert!(config.database.url.expose().starts_with("postgres://"));
    assert!(config.server.public_url.starts_with("https://"));
    assert_eq!(config.server.log_format, "json");
    assert!(config.metrics.bearer_token.is_some());
    let port = container["ports"][0]["containerPort"].as_u64().unwrap();
    assert_eq!(u64::from(config.server.listen.port()), port);
    assert_eq!(
        container["readinessProbe"]["httpGet"]["path"].as_str(),
        Some("/readyz")
    );
    assert_eq!(
        container["livenessProbe"]["httpGet"]["path"].as_str(),
        Some("/healthz")
    );
    let args = container["args"].as_sequence().unwrap();
    let mount = container["volumeMounts"][0]["mountPath"].as_str().unwrap();
    assert_eq!(args[1].as_str(), Some(&*format!("{mount}/tessera.toml")));
    for k in ["Service", "PodDisruptionBudget", "Ingress"] {
        kind(k);
    }
    assert!(!kind("Ingress")["spec"]["tls"]
        .as_sequence()
        .unwrap()
        .is_empty());

    let unit = std::fs::read_to_string(root.join("systemd/tessera-server.service")).unwrap();
    assert!(
        unit.contains("ExecStart=/usr/local/bin/tessera-server --config /etc/tessera/tessera.toml")
    );
    assert!(unit.contains("EnvironmentFile=/etc/tessera/server.env"));
}
