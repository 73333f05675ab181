//! The webhook delivery task: posts due events from the outbox to each
//! tenant's URL, signed with its secret, and records the outcome (the
//! service schedules retries with backoff).
//!
//! Deliveries run concurrently, at most [`DeliveryConfig::per_tenant`] at a
//! time to one tenant's receiver, and the service hands out due work fairly
//! across tenants, so a receiver that never answers delays only its own
//! tenant's events. Calls go only to addresses the egress policy permits
//! (see [`resolve`]), and what the tenant is told about a failure is coarse:
//! one text for a name that does not resolve, one that resolves to an
//! internal address, a refused port and a timeout (the exact reason goes to
//! the server log), so webhook errors cannot map the internal network.

pub mod resolve;

use crate::state::stopped;
use resolve::{permitted_url, EgressResolver};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tessera_core::ids::TenantId;
use tessera_service::notifications::{
    sign, DeliveryFailure, DueDelivery, EgressPolicy, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use tessera_service::Service;
use tokio::task::JoinSet;

/// Delivery settings.
#[derive(Debug, Clone)]
pub struct DeliveryConfig {
    /// A receiver that does not answer within this failed.
    pub timeout: Duration,
    /// First retry delay in seconds (doubles each try).
    pub retry_base_s: u64,
    /// Calls in flight to one tenant's receiver at most.
    pub per_tenant: u64,
    /// Which receivers' certificates are trusted (`[tls]`).
    pub trust: tessera_trust::Trust,
}

/// What the tenant admin is told when the receiver could not be reached.
const UNREACHABLE: &str =
    "could not deliver: the receiver did not answer (unreachable, refused or too slow)";

/// Posts one delivery; `Err` says why it failed: coarsely for the tenant
/// admin, exactly for platform admins.
pub async fn post(
    client: &reqwest::Client,
    policy: &EgressPolicy,
    d: &DueDelivery,
) -> Result<(), DeliveryFailure> {
    permitted_url(&d.url, policy)
        .map_err(|e| DeliveryFailure::plain(format!("could not deliver: {e}")))?;
    // Real time: the receiver checks the signature's timestamp against its clock.
    #[allow(clippy::disallowed_methods)]
    let timestamp = chrono::Utc::now().timestamp();
    let response = client
        .post(&d.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header("X-Tessera-Event", d.event.as_str())
        .header("X-Tessera-Delivery", d.id.to_string())
        .header(TIMESTAMP_HEADER, timestamp.to_string())
        .header(SIGNATURE_HEADER, sign(&d.secret, timestamp, &d.payload))
        .body(d.payload.clone())
        .send()
        .await
        .map_err(|e| {
            // The tenant learns the same for a name that does not resolve,
            // one that resolves inside, a refused port and a timeout: the
            // difference would map the internal network. The log has it.
            if let Some(problem) = tessera_trust::certificate_problem(&e) {
                tracing::info!(delivery = d.id, tenant = d.tenant_id.get(), %problem, "webhook not delivered: certificate refused");
                return DeliveryFailure::plain(format!(
                    "could not deliver: the receiver's TLS certificate is not trusted ({problem}); a certificate from a public CA, or the issuing CA in the platform's tls.ca_bundle, fixes it"
                ));
            }
            let detail = if caused_by_refusal(&e) {
                tracing::warn!(
                    delivery = d.id,
                    tenant = d.tenant_id.get(),
                    "webhook not delivered: its host name resolves to a private or internal address"
                );
                "its host name resolves to a private or internal address, which webhooks may not reach (webhooks.allowed_networks)".to_owned()
            } else {
                tracing::info!(delivery = d.id, tenant = d.tenant_id.get(), error = %e, "webhook call failed");
                error_chain(&e)
            };
            DeliveryFailure {
                shown: UNREACHABLE.to_owned(),
                detail,
            }
        })?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(DeliveryFailure::plain(format!(
            "the receiver answered HTTP {}",
            status.as_u16()
        )))
    }
}

/// An error and its causes, one after another (reqwest's own text stops at
/// "error sending request").
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Whether the egress policy stopped the call (somewhere in the error's causes).
fn caused_by_refusal(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.is::<resolve::Refused>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// The delivery task's state: the HTTP client and the calls in flight.
pub struct Deliverer {
    service: Service,
    client: reqwest::Client,
    policy: Arc<EgressPolicy>,
    config: DeliveryConfig,
    in_flight: Arc<Mutex<HashMap<TenantId, u64>>>,
    tasks: JoinSet<()>,
}

impl Deliverer {
    /// A deliverer for `service`'s outbox.
    pub fn new(
        service: Service,
        config: DeliveryConfig,
    ) -> Result<Self, tessera_trust::TrustError> {
        let policy = Arc::new(service.webhook_egress().clone());
        let builder = reqwest::Client::builder()
            .timeout(config.timeout)
            .redirect(reqwest::redirect::Policy::none())
            // Never through a proxy: the proxy would connect where it likes.
            .no_proxy()
            .dns_resolver(Arc::new(EgressResolver::new(policy.clone())))
            // A receiver that closed an idle connection must not fail the next call.
            .pool_max_idle_per_host(0);
        let client = config.trust.build(builder)?;
        Ok(Self {
            service,
            client,
            policy,
            config,
            in_flight: Arc::default(),
            tasks: JoinSet::new(),
        })
    }

    /// Starts posting what is due, within each tenant's bound. Returns how
    /// many calls were started.
    pub async fn start_due(&mut self) -> Result<usize, tessera_service::ServiceError> {
        // Reap finished calls (their slots were given back already).
        while self.tasks.try_join_next().is_some() {}
        let busy = self.in_flight.lock().map(|m| m.clone()).unwrap_or_default();
        let per_tenant = self.config.per_tenant.max(1);
        let due = self
            .service
            .due_webhook_deliveries(|tenant| {
                per_tenant.saturating_sub(busy.get(&tenant).copied().unwrap_or(0))
            })
            .await?;
        let started = due.len();
        for d in due {
            if let Ok(mut m) = self.in_flight.lock() {
                *m.entry(d.tenant_id).or_default() += 1;
            }
            let (service, client, policy, in_flight) = (
                self.service.clone(),
                self.client.clone(),
                self.policy.clone(),
                self.in_flight.clone(),
            );
            let retry_base_s = self.config.retry_base_s;
            self.tasks.spawn(async move {
                let outcome = post(&client, &policy, &d).await;
                if let Err(e) = &outcome {
                    tracing::info!(
                        delivery = d.id,
                        attempts = d.attempts + 1,
                        "webhook delivery failed: {}",
                        e.detail
                    );
                }
                if let Err(e) = service
                    .finish_webhook_delivery(d.id, outcome, retry_base_s)
                    .await
                {
                    tracing::warn!(delivery = d.id, "recording a webhook delivery: {e:?}");
                }
                if let Ok(mut m) = in_flight.lock() {
                    if let Some(n) = m.get_mut(&d.tenant_id) {
                        *n = n.saturating_sub(1);
                        if *n == 0 {
                            m.remove(&d.tenant_id);
                        }
                    }
                }
            });
        }
        Ok(started)
    }

    /// Waits until every call started so far has finished and been recorded.
    pub async fn finish(&mut self) {
        while self.tasks.join_next().await.is_some() {}
    }
}

/// Starts delivery passes every second until `stop`; then lets the calls in
/// flight finish.
pub async fn run_deliveries(
    service: Service,
    config: DeliveryConfig,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut deliverer = match Deliverer::new(service, config) {
        Ok(d) => d,
        Err(e) => {
            tracing::error!("webhook deliveries are off: cannot build an HTTP client: {e}");
            return;
        }
    };
    let mut interval = tokio::time::interval(Duration::from_secs(1));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            () = stopped(&mut stop) => break,
        }
        if let Err(e) = deliverer.start_due().await {
            tracing::warn!("webhook deliveries: {e:?}");
        }
    }
    deliverer.finish().await;
}
