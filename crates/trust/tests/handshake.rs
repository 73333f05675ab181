//! Real TLS handshakes against a server whose certificate a CA made in the
//! test signed: refused (with the reason) on the system roots, accepted with
//! the CA bundle, accepted by the right pin and refused by a wrong one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use std::sync::Arc;
use tessera_trust::{certificate_problem, Trust};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

struct Pki {
    ca_pem: String,
    leaf_der: Vec<u8>,
    leaf_key_der: Vec<u8>,
}

fn pki() -> Pki {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "Example Corp Internal CA");
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let leaf =
        CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf_cert = leaf.signed_by(&leaf_key, &ca_cert, &ca_key).unwrap();
    Pki {
        ca_pem: ca_cert.pem(),
        leaf_der: leaf_cert.der().to_vec(),
        leaf_key_der: leaf_key.serialize_der(),
    }
}

/// An HTTPS server on 127.0.0.1 answering every request `200 ok`.
async fn serve(pki: &Pki) -> String {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![pki.leaf_der.clone().into()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(pki.leaf_key_der.clone().into()),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // A refused handshake is the client's business.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut seen = Vec::new();
                let mut buf = [0u8; 1024];
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = tls
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                    )
                    .await;
                let _ = tls.shutdown().await;
            });
        }
    });
    format!("https://127.0.0.1:{}/", addr.port())
}

async fn get(trust: &Trust, url: &str) -> Result<String, reqwest::Error> {
    let client = trust
        .apply(reqwest::Client::builder())
        .unwrap()
        .build()
        .unwrap();
    client.get(url).send().await?.text().await
}

#[tokio::test]
async fn an_internal_ca_is_trusted_only_when_configured() {
    let pki = pki();
    let url = serve(&pki).await;

    let refused = get(&Trust::system(), &url).await.unwrap_err();
    let why = certificate_problem(&refused).expect("a certificate error");
    assert!(why.contains("UnknownIssuer"), "{why}");

    let dir = std::env::temp_dir().join(format!("tessera-trust-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bundle = dir.join("company-ca.pem");
    std::fs::write(&bundle, &pki.ca_pem).unwrap();
    let trust = Trust::with_ca_bundle(&bundle).unwrap();
    assert_eq!(get(&trust, &url).await.unwrap(), "ok");
    // The bundle adds to the system roots; it does not replace them.
    assert!(!trust.is_pinned());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_pin_accepts_exactly_its_certificate() {
    use sha2::{Digest, Sha256};
    let pki = pki();
    let url = serve(&pki).await;
    let fingerprint = hex::encode(Sha256::digest(&pki.leaf_der));
    let pinned = Trust::pinned(&fingerprint).unwrap();
    assert_eq!(get(&pinned, &url).await.unwrap(), "ok");

    let other = Trust::pinned(&"00".repeat(32)).unwrap();
    let refused = get(&other, &url).await.unwrap_err();
    let why = certificate_problem(&refused).expect("a certificate error");
    assert!(why.contains("not the pinned one"), "{why}");
}
