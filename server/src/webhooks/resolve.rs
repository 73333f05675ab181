//! The webhook client's resolver: every name is resolved here and only the
//! addresses the [`EgressPolicy`] permits are handed to the connector, so the
//! address checked is the address connected to (a rebinding DNS server cannot
//! answer differently between a check and the connection: there is only one
//! lookup). IP literals in the URL never reach a resolver; [`permitted_url`]
//! checks them before each call.

use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::SocketAddr;
use std::sync::Arc;
use tessera_service::notifications::EgressPolicy;

/// Why a call was not made.
#[derive(Debug, thiserror::Error)]
#[error("the receiver's address is private or internal")]
pub struct Refused;

/// A resolver that drops the addresses webhooks may not reach.
#[derive(Debug, Clone)]
pub struct EgressResolver {
    policy: Arc<EgressPolicy>,
}

impl EgressResolver {
    /// A resolver enforcing `policy`.
    pub fn new(policy: Arc<EgressPolicy>) -> Self {
        Self { policy }
    }
}

impl Resolve for EgressResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let found = tokio::net::lookup_host((name.as_str(), 0)).await?;
            let allowed: Vec<SocketAddr> = found.filter(|a| policy.permits(a.ip())).collect();
            if allowed.is_empty() {
                return Err(Box::new(Refused) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

/// `Err` when the URL names an address (in any spelling the URL parser
/// accepts) that webhooks may not reach, or does not parse.
pub fn permitted_url(url: &str, policy: &EgressPolicy) -> Result<(), Refused> {
    match url::Url::parse(url) {
        Ok(parsed) if policy.permits_url(&parsed) => Ok(()),
        _ => Err(Refused),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn address_literals_are_checked_in_every_spelling() {
        let policy = EgressPolicy::default();
        for url in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f.0.0.1/",
            "http://[::1]/",
            "http://[::ffff:127.0.0.1]/",
            "http://169.254.169.254/latest/meta-data/",
        ] {
            assert!(permitted_url(url, &policy).is_err(), "{url}");
        }
        assert!(permitted_url("http://8.8.8.8/", &policy).is_ok());
        assert!(permitted_url("https://hooks.example.com/x", &policy).is_ok());
    }

    #[tokio::test]
    async fn names_that_resolve_inside_are_dropped() {
        let strict = EgressResolver::new(Arc::new(EgressPolicy::default()));
        let name: Name = "localhost".parse().unwrap();
        assert!(strict.resolve(name).await.is_err(), "localhost is internal");
        let open = EgressResolver::new(Arc::new(EgressPolicy::allowing(vec![
            "127.0.0.0/8".parse().unwrap(),
            "::1/128".parse().unwrap(),
        ])));
        let addrs: Vec<SocketAddr> = open
            .resolve("localhost".parse().unwrap())
            .await
            .unwrap()
            .collect();
        assert!(!addrs.is_empty());
        assert!(addrs.iter().all(|a| a.ip().is_loopback()));
    }
}
