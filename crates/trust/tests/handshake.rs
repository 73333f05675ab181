//! Real TLS handshakes against a server whose certificate a CA made in the
//! test signed: refused (with the reason) on the system roots, accepted with
//! the CA bundle, accepted by the right pin and refused by a wrong one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use tessera_test_kit::tls::TestPki;
use tessera_trust::{certificate_problem, Trust};

async fn get(trust: &Trust, url: &str) -> Result<String, reqwest::Error> {
    let client = trust.build(reqwest::Client::builder()).unwrap();
    client.get(url).send().await?.text().await
}

#[tokio::test]
async fn an_internal_ca_is_trusted_only_when_configured() {
    let pki = TestPki::new();
    let (url, answered) = pki.serve().await;

    let refused = get(&Trust::system(), &url).await.unwrap_err();
    let why = certificate_problem(&refused).expect("a certificate error");
    assert!(why.contains("UnknownIssuer"), "{why}");
    assert_eq!(answered.load(std::sync::atomic::Ordering::SeqCst), 0);

    let dir = tessera_test_kit::scratch_dir("trust-ca");
    let trust = Trust::with_ca_bundle(&pki.write_ca(&dir)).unwrap();
    assert_eq!(get(&trust, &url).await.unwrap(), "ok");
    // The bundle adds to the system roots; it does not pin.
    assert!(!trust.is_pinned());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_pin_accepts_exactly_its_certificate() {
    use sha2::{Digest, Sha256};
    let pki = TestPki::new();
    let (url, _) = pki.serve().await;
    let fingerprint = hex::encode(Sha256::digest(&pki.leaf_der));
    let pinned = Trust::pinned(&fingerprint).unwrap();
    assert_eq!(get(&pinned, &url).await.unwrap(), "ok");

    let other = Trust::pinned(&"00".repeat(32)).unwrap();
    let refused = get(&other, &url).await.unwrap_err();
    let why = certificate_problem(&refused).expect("a certificate error");
    assert!(why.contains("not the pinned one"), "{why}");
}
