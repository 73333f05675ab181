//! Where a person may be sent after signing in: only a path on Tessera itself.
//!
//! The candidate is resolved the way a browser would resolve it (the WHATWG
//! URL parser strips tabs and newlines, reads `\` as `/`, decodes nothing
//! else) against a stand-in origin; it is accepted only when it started as an
//! absolute path, contains no control character or backslash, and still names
//! that origin after resolution. What is returned is the *normalised* path, so
//! the `Location` header carries exactly what was checked.

use url::{Position, Url};

/// The stand-in origin paths are resolved against.
const BASE: &str = "https://tessera.invalid/";

/// The post-login destination for `next`, or `/` when it is missing or could
/// lead anywhere but a page of Tessera (an open redirect).
pub fn safe_next(next: Option<&str>) -> String {
    next.and_then(local_path).unwrap_or_else(|| "/".to_owned())
}

fn local_path(next: &str) -> Option<String> {
    let plain = next.starts_with('/')
        && !next.starts_with("//")
        && !next
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == '\\');
    if !plain {
        return None;
    }
    let base = Url::parse(BASE).ok()?;
    let resolved = base.join(next).ok()?;
    if resolved.origin() != base.origin() {
        return None;
    }
    let path = &resolved[Position::BeforePath..];
    // The sign-in routes themselves would loop.
    if path.starts_with("/auth/") || path.starts_with("//") {
        return None;
    }
    Some(path.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_pass_normalised() {
        assert_eq!(safe_next(Some("/fleet?x=1")), "/fleet?x=1");
        assert_eq!(safe_next(Some("/t/vision#slices")), "/t/vision#slices");
        assert_eq!(safe_next(Some("/a/../fleet")), "/fleet");
        assert_eq!(safe_next(Some("/%2F/evil.example")), "/%2F/evil.example");
        assert_eq!(safe_next(None), "/");
    }

    /// The usual open-redirect bypass corpus: each would leave the origin in
    /// some browser, or loops through sign-in.
    #[test]
    fn the_bypass_corpus_is_refused() {
        let corpus = [
            "//evil.example",
            "///evil.example",
            "////evil.example",
            "https://evil.example",
            "http:evil.example",
            "javascript:alert(1)",
            "data:text/html,x",
            "evil.example",
            "/\\evil.example",
            "\\/evil.example",
            "\\\\evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/\r\n/evil.example",
            "\t//evil.example",
            " //evil.example",
            "/ /evil.example",
            "/\u{0}/evil.example",
            "/\u{0b}/evil.example",
            "/\u{a0}/evil.example",
            "/\u{3000}/evil.example",
            "/.\\evil.example",
            "/auth/login",
            "/auth/callback?code=x",
            "",
            "?next=//evil",
            "#//evil",
        ];
        for bad in corpus {
            assert_eq!(safe_next(Some(bad)), "/", "{bad:?} must not pass");
        }
    }

    /// Percent-encoded forms stay encoded: the browser requests them as a
    /// path on Tessera, never as another host.
    #[test]
    fn encoded_forms_stay_on_the_origin() {
        for encoded in [
            "/%09/evil.example",
            "/%2F%2Fevil.example",
            "/%5Cevil.example",
        ] {
            let out = safe_next(Some(encoded));
            let resolved = Url::parse(BASE)
                .unwrap_or_else(|_| unreachable!())
                .join(&out);
            assert_eq!(
                resolved.map(|u| u.host_str().map(str::to_owned)),
                Ok(Some("tessera.invalid".to_owned())),
                "{encoded:?} -> {out:?}"
            );
        }
    }
}
