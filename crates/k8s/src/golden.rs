//! Golden files under deploy/generated/ (validated by scripts/deploy-check.py).

/// Asserts `body` equals deploy/generated/`name`; with
/// `TESSERA_UPDATE_GOLDEN=1`, writes it first.
pub(crate) fn check(name: &str, body: &str) {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../deploy/generated")
        .join(name);
    if std::env::var("TESSERA_UPDATE_GOLDEN").as_deref() == Ok("1") {
        std::fs::write(&file, body).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    }
    let want = std::fs::read_to_string(&file).unwrap_or_default();
    assert_eq!(
        body, want,
        "deploy/generated/{name} differs from what is generated (TESSERA_UPDATE_GOLDEN=1 rewrites it)"
    );
}
