//! The server binary itself: its configuration from the environment and
//! from `*_FILE` files, checked by `check-config` as an operator (or a
//! container's start) would.

use std::process::Command;

const CONFIG: &str = r#"
[oidc]
issuer_url = "https://sso.example.com/realms/corp"
client_id = "tessera"
"#;

fn server(dir: &std::path::Path) -> Command {
    let config = dir.join("tessera.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_tessera-server"));
    c.arg("--config").arg(&config).arg("check-config");
    // Nothing from the test's own environment decides the outcome.
    for (k, _) in std::env::vars() {
        if k.starts_with("TESSERA_") {
            c.env_remove(k);
        }
    }
    c
}

/// Exits 0, or the test fails showing what the server said.
fn succeeds(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Exits 2 (a configuration error); returns what it said.
fn refused(command: &mut Command) -> String {
    let out = command.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A numeric client secret (what TOML would read as a number) from the
/// environment and from a file loads; the same key set both ways, or a
/// missing file, stops the server naming the variable.
#[test]
fn a_numeric_secret_loads_from_the_environment_and_from_a_file() {
    let dir = tessera_test_kit::scratch_dir("cli-secrets");
    assert_eq!(
        succeeds(server(&dir).env("TESSERA_OIDC__CLIENT_SECRET", "123456")),
        "configuration OK"
    );
    let file = dir.join("oidc-client-secret");
    std::fs::write(&file, "007\n").unwrap();
    succeeds(server(&dir).env("TESSERA_OIDC__CLIENT_SECRET_FILE", &file));
    let both = refused(
        server(&dir)
            .env("TESSERA_OIDC__CLIENT_SECRET_FILE", &file)
            .env("TESSERA_OIDC__CLIENT_SECRET", "123456"),
    );
    assert!(both.contains("keep one"), "{both}");
    let missing =
        refused(server(&dir).env("TESSERA_OIDC__CLIENT_SECRET_FILE", dir.join("missing")));
    assert!(
        missing.contains("TESSERA_OIDC__CLIENT_SECRET_FILE"),
        "{missing}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
