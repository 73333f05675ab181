//! A company's own PKI in miniature: a CA made for the test, a server
//! certificate for 127.0.0.1 and `localhost` signed by it, and an HTTPS
//! server on loopback presenting it.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A CA and a server certificate it signed.
pub struct TestPki {
    /// The CA's certificate, PEM (what an operator puts in a CA bundle).
    pub ca_pem: String,
    /// The server certificate, DER.
    pub leaf_der: Vec<u8>,
    leaf_key_der: Vec<u8>,
}

impl TestPki {
    /// A new CA ("Example Corp Internal CA") and server certificate.
    pub fn new() -> Self {
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
        Self {
            ca_pem: ca_cert.pem(),
            leaf_der: leaf_cert.der().to_vec(),
            leaf_key_der: leaf_key.serialize_der(),
        }
    }

    /// Writes the CA's PEM to `dir/company-ca.pem` and returns the path.
    pub fn write_ca(&self, dir: &std::path::Path) -> std::path::PathBuf {
        let path = dir.join("company-ca.pem");
        std::fs::write(&path, &self.ca_pem).unwrap();
        path
    }

    /// An HTTPS server on 127.0.0.1 presenting the server certificate and
    /// answering every request `200 ok`: its base URL (`https://127.0.0.1:PORT`)
    /// and how many requests it answered.
    pub async fn serve(&self) -> (String, Arc<AtomicUsize>) {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![self.leaf_der.clone().into()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(self.leaf_key_der.clone().into()),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let answered = Arc::new(AtomicUsize::new(0));
        let count = answered.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (acceptor, count) = (acceptor.clone(), count.clone());
                tokio::spawn(async move {
                    // A refused handshake is the client's business.
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tls.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => seen.extend_from_slice(&buf[..n]),
                        }
                    }
                    count.fetch_add(1, Ordering::SeqCst);
                    let _ = tls
                        .write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
                        )
                        .await;
                    let _ = tls.shutdown().await;
                });
            }
        });
        (format!("https://127.0.0.1:{port}"), answered)
    }
}

impl Default for TestPki {
    fn default() -> Self {
        Self::new()
    }
}
