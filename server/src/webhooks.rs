//! The webhook delivery task: posts due events from the outbox to each
//! tenant's URL, signed with its secret, and records the outcome (the
//! service schedules retries with backoff).

use crate::state::stopped;
use std::time::Duration;
use tessera_service::notifications::{sign, DueDelivery, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use tessera_service::Service;

/// Deliveries posted per pass at most.
const BATCH: u64 = 50;

/// Delivery settings.
#[derive(Debug, Clone, Copy)]
pub struct DeliveryConfig {
    /// A receiver that does not answer within this failed.
    pub timeout: Duration,
    /// First retry delay in seconds (doubles each try).
    pub retry_base_s: u64,
}

/// Posts one delivery; `Err` says why it failed, for the tenant admin.
pub async fn post(client: &reqwest::Client, d: &DueDelivery) -> Result<(), String> {
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
            if e.is_timeout() {
                "the receiver did not answer in time".to_owned()
            } else if e.is_connect() {
                "could not connect to the receiver".to_owned()
            } else {
                format!("the call failed: {e}")
            }
        })?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("the receiver answered HTTP {}", status.as_u16()))
    }
}

/// One pass: posts every due delivery. Returns how many were tried.
pub async fn deliver_due(
    service: &Service,
    client: &reqwest::Client,
    config: DeliveryConfig,
) -> Result<usize, tessera_service::ServiceError> {
    let due = service.due_webhook_deliveries(BATCH).await?;
    for d in &due {
        let outcome = post(client, d).await;
        if let Err(e) = &outcome {
            tracing::info!(
                delivery = d.id,
                attempts = d.attempts + 1,
                "webhook delivery failed: {e}"
            );
        }
        service
            .finish_webhook_delivery(d.id, outcome, config.retry_base_s)
            .await?;
    }
    Ok(due.len())
}

/// Runs delivery passes every second until the task is dropped.
pub async fn run_deliveries(
    service: Service,
    config: DeliveryConfig,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let client = match reqwest::Client::builder()
        .timeout(config.timeout)
        .redirect(reqwest::redirect::Policy::none())
        // A receiver that closed an idle connection must not fail the next call.
        .pool_max_idle_per_host(0)
        .build()
    {
        Ok(c) => c,
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
            () = stopped(&mut stop) => return,
        }
        if let Err(e) = deliver_due(&service, &client, config).await {
            tracing::warn!("webhook deliveries: {e:?}");
        }
    }
}
