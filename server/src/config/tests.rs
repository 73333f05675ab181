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
    // `X_FILE` reads key `x` from a file: a key named `..._file` would make
    // its variable ambiguous.
    let ambiguous: Vec<_> = code.iter().filter(|k| k.ends_with("_file")).collect();
    assert!(ambiguous.is_empty(), "keys ending in _file: {ambiguous:?}");
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

/// The kustomize base in `deploy/` is one this server runs with: its
/// configuration plus the container's environment load (unknown keys are
/// refused; secrets are files from the mounted Secret), the probes and port
/// are the server's; the systemd unit names a real configuration file path
/// and the secrets' environment file. (`scripts/deploy-check.py` renders
/// each overlay and loads its configuration in the release binary.)
#[test]
fn the_deployed_configuration_loads() {
    use serde::Deserialize;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let base = root.join("kustomize/base");
    let text = std::fs::read_to_string(base.join("server.yaml")).unwrap();
    let docs: Vec<serde_yaml_ng::Value> = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde_yaml_ng::Value::deserialize(d).unwrap())
        .collect();
    let kind = |k: &str| {
        docs.iter()
            .find(|d| d["kind"].as_str() == Some(k))
            .unwrap_or_else(|| panic!("no {k} in server.yaml"))
    };
    let toml = std::fs::read_to_string(base.join("tessera.toml")).unwrap();
    let deployment = kind("Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let secrets = scratch("deployed");
    let env: Vec<(String, String)> = container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_owned();
            let value = e["value"].as_str().unwrap();
            // A secret file: a stand-in of the same name.
            let file = secrets.join(value.rsplit('/').next().unwrap());
            assert!(
                value.starts_with("/run/secrets/tessera/"),
                "{name}: {value}"
            );
            std::fs::write(&file, "123456\n").unwrap();
            (name, file.to_str().unwrap().to_owned())
        })
        .collect();
    let config = Config::from_toml_and_env(&toml, env).unwrap();
    std::fs::remove_dir_all(&secrets).unwrap();
    assert_eq!(config.oidc.client_secret.expose(), "123456");
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
    for k in ["Service", "PodDisruptionBudget"] {
        kind(k);
    }

    let unit = std::fs::read_to_string(root.join("systemd/tessera-server.service")).unwrap();
    assert!(
        unit.contains("ExecStart=/usr/local/bin/tessera-server --config /etc/tessera/tessera.toml")
    );
    assert!(unit.contains("EnvironmentFile=/etc/tessera/server.env"));
}

/// Environment values are text: a string field keeps exactly what was
/// written, whatever it looks like in TOML.
#[test]
fn secrets_from_the_environment_stay_strings() {
    for value in [
        "123456",
        "007",
        "true",
        "[abc]",
        "1.5e3",
        "a=b==",
        "#not-a-comment",
        "say \"hi\" & 'bye'",
        "",
    ] {
        let c = Config::from_toml_and_env(MINIMAL, env(&[("TESSERA_OIDC__CLIENT_SECRET", value)]))
            .unwrap_or_else(|e| panic!("{value:?}: {e}"));
        assert_eq!(c.oidc.client_secret.expose(), value);
        let c = Config::from_toml_and_env(MINIMAL, env(&[("TESSERA_OIDC__CLIENT_ID", value)]))
            .unwrap_or_else(|e| panic!("{value:?}: {e}"));
        assert_eq!(c.oidc.client_id, value);
    }
    let c = Config::from_toml_and_env(
        MINIMAL,
        env(&[(
            "TESSERA_DATABASE__URL",
            "postgres://tessera:p%40ss=w#rd@db/tessera?sslmode=require",
        )]),
    )
    .unwrap();
    assert_eq!(
        c.database.url.expose(),
        "postgres://tessera:p%40ss=w#rd@db/tessera?sslmode=require"
    );
}

/// Numbers, booleans and lists are parsed from the text when the field
/// asks for one, and a value that is none names its key.
#[test]
fn typed_fields_parse_environment_text() {
    let c = Config::from_toml_and_env(
        MINIMAL,
        env(&[
            ("TESSERA_AGENTS__OFFLINE_AFTER_SECONDS", "007"),
            ("TESSERA_APPROVALS__FOUR_EYES", "false"),
            ("TESSERA_OIDC__SCOPES", "profile, email"),
            ("TESSERA_WEBHOOKS__ALLOWED_NETWORKS", "[\"10.20.0.0/16\"]"),
            ("TESSERA_METRICS__BEARER_TOKEN", "42"),
            ("TESSERA_AUDIT__KEEP_DAYS", "400"),
        ]),
    )
    .unwrap();
    assert_eq!(c.agents.offline_after_seconds, 7);
    assert!(!c.approvals.four_eyes);
    assert_eq!(c.oidc.scopes, ["profile", "email"]);
    assert!(c
        .webhooks
        .allowed_networks
        .permits("10.20.3.4".parse().unwrap()));
    assert_eq!(
        c.metrics.bearer_token.as_ref().map(Secret::expose),
        Some("42")
    );
    for (key, value, field) in [
        (
            "TESSERA_AGENTS__OFFLINE_AFTER_SECONDS",
            "seven",
            "agents.offline_after_seconds",
        ),
        ("TESSERA_APPROVALS__FOUR_EYES", "yes", "approvals.four_eyes"),
        ("TESSERA_OIDC__SCOPES", "[\"unterminated", "oidc.scopes"),
        ("TESSERA_LIMITS__MAX_BODY_KIB", "-1", "limits.max_body_kib"),
    ] {
        let err = Config::from_toml_and_env(MINIMAL, env(&[(key, value)])).unwrap_err();
        assert!(err.to_string().contains(field), "{key}={value}: {err}");
    }
}

fn scratch(name: &str) -> std::path::PathBuf {
    tessera_test_kit::scratch_dir(&format!("config-{name}"))
}

/// `*_FILE` reads a value from a file, as Kubernetes mounts Secrets.
#[test]
fn values_come_from_files() {
    let dir = scratch("files");
    let secret = dir.join("client-secret");
    std::fs::write(&secret, "123456\n").unwrap();
    let url = dir.join("db-url");
    std::fs::write(&url, "postgres://u:p=#@db/t").unwrap();
    let c = Config::from_toml_and_env(
        MINIMAL,
        env(&[
            ("TESSERA_OIDC__CLIENT_SECRET_FILE", secret.to_str().unwrap()),
            ("TESSERA_DATABASE__URL_FILE", url.to_str().unwrap()),
        ]),
    )
    .unwrap();
    assert_eq!(c.oidc.client_secret.expose(), "123456");
    assert_eq!(c.database.url.expose(), "postgres://u:p=#@db/t");

    let err = Config::from_toml_and_env(
        MINIMAL,
        env(&[
            ("TESSERA_OIDC__CLIENT_SECRET_FILE", secret.to_str().unwrap()),
            ("TESSERA_OIDC__CLIENT_SECRET", "other"),
        ]),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("TESSERA_OIDC__CLIENT_SECRET_FILE")
            && err.to_string().contains("keep one"),
        "{err}"
    );
    let missing = dir.join("missing");
    let err = Config::from_toml_and_env(
        MINIMAL,
        env(&[(
            "TESSERA_OIDC__CLIENT_SECRET_FILE",
            missing.to_str().unwrap(),
        )]),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("TESSERA_OIDC__CLIENT_SECRET_FILE"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `tls.ca_bundle` is checked when the configuration loads: a missing
/// file or one without certificates stops the start with its key named.
#[test]
fn a_ca_bundle_is_checked_at_load() {
    let dir = scratch("tls");
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "no certificates here\n").unwrap();
    for path in [dir.join("missing.pem"), empty] {
        let err = Config::from_toml_and_env(
            MINIMAL,
            env(&[("TESSERA_TLS__CA_BUNDLE", path.to_str().unwrap())]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("tls.ca_bundle"), "{err}");
    }
    let c = Config::from_toml_and_env(MINIMAL, env(&[])).unwrap();
    assert!(c.tls.ca_bundle.is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}
