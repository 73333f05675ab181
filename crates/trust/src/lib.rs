//! Which HTTPS servers Tessera's outbound clients trust.
//!
//! Every client (the OIDC relying party's discovery and token calls, webhook
//! deliveries, an agent's calls to the server) is built through [`Trust`]:
//!
//! - **by default** the operating system's trust store (`/etc/ssl/certs` and
//!   friends, read by `rustls-native-certs`) plus the Mozilla roots bundled
//!   with the binary (`webpki-roots`), so a public IdP works on a bare image;
//! - **with a CA bundle** (`[tls] ca_bundle` on the server, `--server-ca` on
//!   the agent) those and the bundle's certificates, for a company's internal
//!   CA;
//! - **pinned** (the agent's `--server-cert-sha256`) exactly one certificate,
//!   named by the SHA-256 of its DER (`openssl x509 -noout -fingerprint
//!   -sha256`), and nothing else: no CA, no host name check. A new server
//!   certificate needs a new pin; a CA bundle survives renewals.
//!
//! When a server's certificate is refused, [`certificate_problem`] finds the
//! TLS error inside the HTTP client's error chain, so the message names the
//! cause and the setting that fixes it instead of "error sending request".

use sha2::{Digest, Sha256};
use std::error::Error as StdError;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use thiserror::Error;

/// Why a trust setting cannot be used.
#[derive(Debug, Error)]
pub enum TrustError {
    /// The CA bundle could not be read.
    #[error("cannot read the CA bundle {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file holds no PEM certificate, or a broken one.
    #[error("the CA bundle {path} {problem}")]
    Bundle {
        /// The file.
        path: PathBuf,
        /// What is wrong, as a phrase.
        problem: String,
    },
    /// A pin is not a SHA-256 fingerprint.
    #[error("a pinned certificate is its SHA-256 fingerprint: 64 hex digits, colons allowed (openssl x509 -noout -fingerprint -sha256 -in server.pem); got {0:?}")]
    Pin(String),
    /// The TLS configuration could not be built.
    #[error("TLS setup failed: {0}")]
    Tls(String),
}

/// The servers a client trusts; see the module documentation.
#[derive(Clone, Default)]
pub struct Trust {
    extra_roots: Vec<reqwest::Certificate>,
    pin: Option<[u8; 32]>,
}

impl std::fmt::Debug for Trust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trust")
            .field("extra_roots", &self.extra_roots.len())
            .field("pin", &self.pin.map(hex::encode))
            .finish()
    }
}

impl Trust {
    /// The OS trust store and the bundled web roots.
    pub fn system() -> Self {
        Self::default()
    }

    /// The system's roots and every certificate of a PEM bundle.
    pub fn with_ca_bundle(path: &Path) -> Result<Self, TrustError> {
        let pem = std::fs::read(path).map_err(|source| TrustError::Read {
            path: path.to_owned(),
            source,
        })?;
        let bundle = |problem: String| TrustError::Bundle {
            path: path.to_owned(),
            problem,
        };
        let roots = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|e| bundle(format!("is not PEM certificates: {e}")))?;
        if roots.is_empty() {
            return Err(bundle(
                "holds no certificate (expected -----BEGIN CERTIFICATE----- blocks)".to_owned(),
            ));
        }
        Ok(Self {
            extra_roots: roots,
            pin: None,
        })
    }

    /// The system's roots, plus a bundle when one is named.
    pub fn from_optional_bundle(path: Option<&Path>) -> Result<Self, TrustError> {
        path.map_or_else(|| Ok(Self::system()), Self::with_ca_bundle)
    }

    /// Exactly the certificate whose DER has this SHA-256 (hex, colons and
    /// a `sha256:` prefix allowed).
    pub fn pinned(fingerprint: &str) -> Result<Self, TrustError> {
        let digits: String = fingerprint
            .trim()
            .trim_start_matches("sha256:")
            .trim_start_matches("SHA256:")
            .chars()
            .filter(|c| *c != ':')
            .collect();
        let bytes = hex::decode(&digits).map_err(|_| TrustError::Pin(fingerprint.to_owned()))?;
        let pin: [u8; 32] = bytes
            .try_into()
            .map_err(|_| TrustError::Pin(fingerprint.to_owned()))?;
        Ok(Self {
            extra_roots: Vec::new(),
            pin: Some(pin),
        })
    }

    /// Whether this trusts one pinned certificate only.
    pub fn is_pinned(&self) -> bool {
        self.pin.is_some()
    }

    /// `builder` set up to trust what this says.
    pub fn apply(
        &self,
        builder: reqwest::ClientBuilder,
    ) -> Result<reqwest::ClientBuilder, TrustError> {
        if let Some(pin) = self.pin {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map_err(|e| TrustError::Tls(e.to_string()))?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(PinnedCertificate { pin, provider }))
                .with_no_client_auth();
            return Ok(builder.use_preconfigured_tls(config));
        }
        // reqwest (features rustls-tls-webpki-roots and
        // rustls-tls-native-roots) starts from the bundled and the OS roots.
        Ok(self
            .extra_roots
            .iter()
            .cloned()
            .fold(builder, reqwest::ClientBuilder::add_root_certificate))
    }
}

impl Trust {
    /// A client from `builder`, trusting what this says.
    pub fn build(&self, builder: reqwest::ClientBuilder) -> Result<reqwest::Client, TrustError> {
        self.apply(builder)?
            .build()
            .map_err(|e| TrustError::Tls(e.to_string()))
    }
}

/// Accepts exactly one certificate, by the SHA-256 of its DER; signatures
/// of the handshake are still checked against that certificate's key.
#[derive(Debug)]
struct PinnedCertificate {
    pin: [u8; 32],
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for PinnedCertificate {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        let seen: [u8; 32] = Sha256::digest(end_entity.as_ref()).into();
        if seen == self.pin {
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "the server's certificate (sha256 {}) is not the pinned one (sha256 {})",
                hex::encode(seen),
                hex::encode(self.pin)
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The TLS certificate error somewhere in `err`'s chain, in words
/// ("invalid peer certificate: UnknownIssuer"), or `None` when the failure
/// was something else.
pub fn certificate_problem(err: &(dyn StdError + 'static)) -> Option<String> {
    let mut next: Option<&(dyn StdError + 'static)> = Some(err);
    while let Some(e) = next {
        // An I/O error hides the error it wraps from `source()`.
        let inner = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|inner| inner as &(dyn StdError + 'static));
        if let Some(tls) = e.downcast_ref::<rustls::Error>() {
            if matches!(
                tls,
                rustls::Error::InvalidCertificate(_) | rustls::Error::General(_)
            ) {
                return Some(tls.to_string());
            }
        }
        next = inner.or_else(|| e.source());
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn pins_are_sha256_fingerprints() {
        let hex64 = "ab".repeat(32);
        assert!(Trust::pinned(&hex64).unwrap().is_pinned());
        let colons = vec!["AB"; 32].join(":");
        assert_eq!(
            Trust::pinned(&format!("sha256:{colons}")).unwrap().pin,
            Trust::pinned(&hex64).unwrap().pin
        );
        for bad in ["", "abcd", &"zz".repeat(32), &"ab".repeat(33)] {
            assert!(
                matches!(Trust::pinned(bad), Err(TrustError::Pin(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_bundle_must_hold_certificates() {
        let dir = std::env::temp_dir().join(format!("tessera-trust-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = Trust::with_ca_bundle(&empty).unwrap_err();
        assert!(err.to_string().contains("holds no certificate"), "{err}");
        let missing = dir.join("missing.pem");
        assert!(matches!(
            Trust::with_ca_bundle(&missing),
            Err(TrustError::Read { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_certificate_error_is_found_inside_io_errors() {
        let tls = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, tls);
        #[derive(Debug, Error)]
        #[error("error sending request")]
        struct Outer(#[source] std::io::Error);
        let found = certificate_problem(&Outer(io)).unwrap();
        assert!(found.contains("UnknownIssuer"), "{found}");
        let other = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(certificate_problem(&Outer(other)), None);
    }
}
