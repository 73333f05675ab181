//! The browser bundle: `/pkg` files served from disk with their precompressed
//! variants (`.br`, `.gz`, written by `cargo leptos build --release
//! --precompress`) and cache headers, and the hash file that names them.
//!
//! With `hash-files = true` cargo-leptos puts a content hash into the names of
//! the JS, WASM and CSS files (`tessera.<hash>.wasm`) and lists the hashes in
//! `hash.txt`. It hashes the lazy islands' WASM files too (`chunk_4.<hash>.wasm`),
//! which only wasm-split's manifest names (`hash.txt` lists the manifest's
//! hash). Those names never change meaning, so browsers may keep them for a
//! year; anything else gets a short cache.

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tower_http::services::ServeDir;

/// Files whose name carries their content hash.
pub const IMMUTABLE: &str = "public, max-age=31536000, immutable";
/// Bundle files without a hash in their name: the browser revalidates each
/// time (a cheap 304 thanks to `Last-Modified`).
pub const REVALIDATE: &str = "no-cache";
/// Other static files (favicon): a short cache.
pub const SHORT: &str = "public, max-age=300";

/// The hash file cargo-leptos writes: `<kind>: <hash>` per line.
pub const HASH_FILE: &str = "hash.txt";

/// Where the hash file is: in the site root (where the build scripts copy
/// it, so that the site is self-contained) or, as cargo-leptos leaves it, next
/// to the server binary. `None` when the bundle was built without hashing.
pub fn find_hash_file(site_root: &Path) -> Option<PathBuf> {
    let beside_exe = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|dir| dir.join(HASH_FILE)));
    std::iter::once(site_root.join(HASH_FILE))
        .chain(beside_exe)
        .find(|p| p.is_file())
        // Leptos joins the name to the binary's folder: an absolute path wins.
        .map(|p| std::path::absolute(&p).unwrap_or(p))
}

/// The hashes of a hash file.
#[derive(Debug, Default)]
struct Hashes {
    /// Every hash listed (`js: abc`, `wasm: def`, `css: ...`).
    all: BTreeSet<String>,
    /// The stylesheet's.
    css: Option<String>,
    /// wasm-split's manifest's (`manifest: ...`).
    manifest: Option<String>,
    /// The lazy islands' WASM files, hashed names as the manifest lists them.
    split_files: BTreeSet<String>,
}

impl Hashes {
    fn parse(text: &str) -> Self {
        let mut hashes = Self::default();
        for (kind, hash) in text.lines().filter_map(|line| line.split_once(':')) {
            let hash = hash.trim();
            if hash.is_empty() {
                continue;
            }
            match kind.trim() {
                "css" => hashes.css = Some(hash.to_owned()),
                "manifest" => hashes.manifest = Some(hash.to_owned()),
                _ => {}
            }
            hashes.all.insert(hash.to_owned());
        }
        hashes
    }

    /// Adds the WASM files that wasm-split's manifest (`{"island": ["chunk_4.<hash>",
    /// "split_island_loader_<n>.<hash>"], ...}`) names, which cargo-leptos
    /// hashed: every name with a dot has its hash in it.
    fn add_split_files(&mut self, manifest: &str) -> Result<(), serde_json::Error> {
        let modules: std::collections::BTreeMap<String, Vec<String>> =
            serde_json::from_str(manifest)?;
        self.split_files.extend(
            modules
                .into_values()
                .flatten()
                .filter(|m| m.contains('.'))
                .map(|m| format!("{m}.wasm")),
        );
        Ok(())
    }

    /// True when the last segment of `path` is `<name>.<hash>.<ext>` for a
    /// listed hash, or a hashed lazy-island file.
    fn is_hashed(&self, path: &str) -> bool {
        let file = path.rsplit('/').next().unwrap_or("");
        self.split_files.contains(file)
            || file
                .split('.')
                .skip(1)
                .any(|segment| self.all.contains(segment))
    }
}

/// The hashes of `hash_file`, with the lazy islands' files from the manifest
/// it names in `pkg`. A manifest that is missing or does not parse leaves
/// those files revalidated (and is logged): slower, never stale.
fn read_hashes(pkg: &Path, hash_file: Option<&Path>) -> Hashes {
    let Some(hash_file) = hash_file else {
        return Hashes::default();
    };
    let text = match std::fs::read_to_string(hash_file) {
        Ok(text) => text,
        Err(e) => {
            tracing::warn!(path = %hash_file.display(), error = %e, "bundle files will be revalidated on every page: the hash file is unreadable");
            return Hashes::default();
        }
    };
    let mut hashes = Hashes::parse(&text);
    if let Some(hash) = hashes.manifest.clone() {
        let path = pkg.join(format!("__wasm_split_manifest.{hash}.json"));
        let read = std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|text| hashes.add_split_files(&text).map_err(|e| e.to_string()));
        if let Err(e) = read {
            tracing::warn!(path = %path.display(), error = %e, "the lazy islands' WASM files will be revalidated on every page: the split manifest is unreadable");
        }
    }
    hashes
}

/// The stylesheet's name without its hash, which pages outside the Leptos
/// app (sign-in errors) link to: it is served as the hashed file.
pub const STYLESHEET: &str = "/tessera.css";

/// `/pkg/*`: the bundle from `<site_root>/pkg`, precompressed variants
/// preferred when the browser accepts them, with cache headers.
pub fn pkg_router<S: Clone + Send + Sync + 'static>(
    site_root: &Path,
    hash_file: Option<&Path>,
) -> Router<S> {
    let hashes = read_hashes(&site_root.join("pkg"), hash_file);
    let files = ServeDir::new(site_root.join("pkg"))
        .precompressed_br()
        .precompressed_gzip();
    Router::new()
        .fallback_service(files)
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(hashes),
            pkg_cache_control,
        ))
}

async fn pkg_cache_control(
    State(hashes): State<Arc<Hashes>>,
    mut req: Request,
    next: Next,
) -> Response {
    if let (STYLESHEET, Some(css)) = (req.uri().path(), &hashes.css) {
        if let Ok(uri) = format!("/tessera.{css}.css").parse() {
            *req.uri_mut() = uri;
        }
        let mut resp = next.run(req).await;
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static(REVALIDATE));
        return resp;
    }
    let immutable = hashes.is_hashed(req.uri().path());
    let mut resp = next.run(req).await;
    if resp.status().is_success() || resp.status() == StatusCode::NOT_MODIFIED {
        let value = if immutable { IMMUTABLE } else { REVALIDATE };
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static(value));
    }
    resp
}

/// The top-level files of the site root (`/favicon.svg`), which the Leptos
/// fallback serves: they get [`SHORT`].
pub fn site_files(site_root: &Path) -> BTreeSet<String> {
    std::fs::read_dir(site_root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| e.file_name().to_str().map(|name| format!("/{name}")))
        .collect()
}

/// Middleware: a short cache for the site root's own files.
pub async fn site_file_cache_control(
    State(files): State<Arc<BTreeSet<String>>>,
    req: Request,
    next: Next,
) -> Response {
    let listed = files.contains(req.uri().path());
    let mut resp = next.run(req).await;
    if listed && resp.status().is_success() && !resp.headers().contains_key(header::CACHE_CONTROL) {
        resp.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static(SHORT));
    }
    resp
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use axum::body::Body;
    use tower::ServiceExt;

    fn site(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "tessera-bundle-{name}-{}-{:x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(dir.join("pkg")).unwrap();
        std::fs::write(
            dir.join("hash.txt"),
            "js: AbC-1\nwasm: dEf_2\ncss: ghi3\nmanifest: mAn4\nsplit: sPl5\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("pkg/__wasm_split_manifest.mAn4.json"),
            r#"{"form_loader_1":["chunk_4.cHk6","split_form_loader_1.fOr7"]}"#,
        )
        .unwrap();
        std::fs::write(dir.join("pkg/chunk_4.cHk6.wasm"), b"\0asm chunk").unwrap();
        std::fs::write(dir.join("pkg/chunk_9.wasm"), b"\0asm unlisted").unwrap();
        std::fs::write(dir.join("pkg/tessera.dEf_2.wasm"), b"\0asm plain").unwrap();
        std::fs::write(dir.join("pkg/tessera.dEf_2.wasm.br"), b"brotli bytes").unwrap();
        std::fs::write(dir.join("pkg/tessera.dEf_2.wasm.gz"), b"gzip bytes").unwrap();
        std::fs::write(dir.join("pkg/extra.js"), b"console.log(1)").unwrap();
        std::fs::write(dir.join("pkg/tessera.ghi3.css"), b"body{}").unwrap();
        dir
    }

    async fn get(router: &Router, path: &str, accept: &str) -> Response {
        router
            .clone()
            .oneshot(
                Request::get(path)
                    .header(header::ACCEPT_ENCODING, accept)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap()
    }

    #[test]
    fn hashes_come_from_the_hash_file_and_match_whole_segments() {
        let hashes = Hashes::parse("js: AbC-1\nwasm: dEf_2\n\nnot a line\ncss: x\n");
        assert_eq!(hashes.all.len(), 3);
        assert_eq!(hashes.css.as_deref(), Some("x"));
        assert!(hashes.is_hashed("/tessera.AbC-1.js"));
        assert!(hashes.is_hashed("/pkg/tessera.dEf_2.wasm"));
        assert!(!hashes.is_hashed("/tessera.js"));
        assert!(!hashes.is_hashed("/tessera.AbC.js"));
    }

    #[test]
    fn the_split_manifest_names_the_hashed_lazy_island_files() {
        let mut hashes = Hashes::parse("js: a\nmanifest: m1\n");
        assert_eq!(hashes.manifest.as_deref(), Some("m1"));
        hashes
            .add_split_files(r#"{"x":["chunk_1.h1","split_x.h2"],"y":["chunk_1.h1","plain"]}"#)
            .unwrap();
        assert!(hashes.is_hashed("/pkg/chunk_1.h1.wasm"));
        assert!(hashes.is_hashed("/split_x.h2.wasm"));
        // Without a hash in the name, or not a name the manifest gives.
        assert!(!hashes.is_hashed("/plain.wasm"));
        assert!(!hashes.is_hashed("/chunk_1.h1.js"));
        assert!(hashes.add_split_files("[not a manifest]").is_err());
        // No manifest at all: nothing is added, nothing fails.
        let root = std::env::temp_dir().join(format!("tessera-nomanifest-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("hash.txt"), "js: a\nmanifest: gone\n").unwrap();
        let read = read_hashes(&root, Some(&root.join("hash.txt")));
        assert!(read.split_files.is_empty() && read.all.contains("a"));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[tokio::test]
    async fn hashed_files_are_immutable_and_precompressed_when_accepted() {
        let root = site("serve");
        let hash_file = find_hash_file(&root).unwrap();
        assert!(hash_file.is_absolute());
        let router: Router = pkg_router(&root, Some(&hash_file));
        let wasm = "/tessera.dEf_2.wasm";

        let resp = get(&router, wasm, "gzip, deflate, br").await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()[header::CONTENT_ENCODING], "br");
        assert_eq!(resp.headers()[header::CACHE_CONTROL], IMMUTABLE);
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/wasm");

        let resp = get(&router, wasm, "gzip").await;
        assert_eq!(resp.headers()[header::CONTENT_ENCODING], "gzip");

        let resp = get(&router, wasm, "identity").await;
        assert!(!resp.headers().contains_key(header::CONTENT_ENCODING));
        assert_eq!(resp.headers()[header::CACHE_CONTROL], IMMUTABLE);

        let resp = get(&router, "/extra.js", "br").await;
        assert_eq!(resp.headers()[header::CACHE_CONTROL], REVALIDATE);
        // A lazy island's chunk, hashed as the split manifest names it; one
        // the manifest does not name is revalidated.
        let resp = get(&router, "/chunk_4.cHk6.wasm", "br").await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()[header::CACHE_CONTROL], IMMUTABLE);
        let resp = get(&router, "/chunk_9.wasm", "br").await;
        assert_eq!(resp.headers()[header::CACHE_CONTROL], REVALIDATE);
        // Pages outside the app link the stylesheet without its hash.
        let resp = get(&router, STYLESHEET, "identity").await;
        assert_eq!(resp.status(), StatusCode::OK);
        assert_eq!(resp.headers()[header::CONTENT_TYPE], "text/css");
        assert_eq!(resp.headers()[header::CACHE_CONTROL], REVALIDATE);
        let resp = get(&router, "/missing.dEf_2.js", "br").await;
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        assert!(!resp.headers().contains_key(header::CACHE_CONTROL));

        assert_eq!(
            site_files(&root).into_iter().collect::<Vec<_>>(),
            vec!["/hash.txt"]
        );
        std::fs::remove_dir_all(&root).unwrap();
    }
}
