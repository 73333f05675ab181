//! A tenant's outgoing webhook: set up and removed by its tenant admins;
//! events wait in an outbox that the server's delivery task posts, signed,
//! retrying with backoff.

use crate::audit::Actor;
use crate::entity::{tenant, webhook, webhook_delivery};
use crate::events::{DomainEvent, TenantRef};
use crate::metrics::DeliveryOutcome;
use crate::{secret, Principal, Service, ServiceError};
use chrono::Duration;
use hmac::{Hmac, Mac};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Set,
};
use tessera_core::ids::TenantId;

use sha2::Sha256;
use tessera_core::notify::{webhook_retry_delay_s, NotificationKind};
use tessera_protocol::quotas::{
    CreatedWebhook, WebhookDeliveryStatus, WebhookDeliveryView, WebhookView,
};
use tessera_protocol::views::TenantRole;

use super::egress::EgressPolicy;

/// Header with `sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`.
pub const SIGNATURE_HEADER: &str = "X-Tessera-Signature";
/// Header with the Unix time the signature covers.
pub const TIMESTAMP_HEADER: &str = "X-Tessera-Timestamp";

/// Longest webhook URL.
const MAX_URL: usize = 500;

/// How long a claimed delivery is left to its claimer before it is due again.
const CLAIM_SECONDS: i64 = 120;

/// Test events a tenant may queue per [`TEST_WINDOW_SECONDS`].
pub const TEST_EVENTS_PER_WINDOW: u64 = 5;
/// The window of [`TEST_EVENTS_PER_WINDOW`].
pub const TEST_WINDOW_SECONDS: i64 = 60;

/// The signature of `body` sent at `timestamp` (Unix seconds): what a
/// receiver recomputes with the shared secret to trust the call.
pub fn sign(secret: &str, timestamp: i64, body: &str) -> String {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
    mac.update(format!("{timestamp}.{body}").as_bytes());
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// A delivery that is due, with what the delivery task needs to post it.
/// Its `Debug` leaves the signing secret out.
#[derive(Clone)]
pub struct DueDelivery {
    /// Outbox id.
    pub id: i64,
    /// The tenant whose webhook it is (deliveries are bounded per tenant).
    pub tenant_id: TenantId,
    /// Event kind (`X-Tessera-Event`).
    pub event: NotificationKind,
    /// Where to post.
    pub url: String,
    /// Signing key.
    pub secret: String,
    /// The JSON body.
    pub payload: String,
    /// Tries so far.
    pub attempts: u32,
}

impl std::fmt::Debug for DueDelivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DueDelivery")
            .field("id", &self.id)
            .field("tenant_id", &self.tenant_id)
            .field("event", &self.event)
            .field("url", &self.url)
            .field("secret", &"***")
            .field("attempts", &self.attempts)
            .finish_non_exhaustive()
    }
}

/// Why a webhook call failed: `shown` to the tenant (the same words for a
/// name that does not resolve, one that resolves inside, a refused port and
/// a timeout), `detail` exactly (platform admins and the server log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryFailure {
    /// What the tenant's admins see.
    pub shown: String,
    /// What happened, exactly.
    pub detail: String,
}

impl DeliveryFailure {
    /// A failure whose exact reason is no secret (an HTTP status, a URL
    /// the policy refuses, a removed webhook).
    pub fn plain(text: impl Into<String>) -> Self {
        let text = text.into();
        Self {
            shown: text.clone(),
            detail: text,
        }
    }
}

impl Service {
    /// The tenant (by slug) if the caller administers it, or (`reading`)
    /// is a platform admin, who may look but not change; members get 403,
    /// others 404.
    async fn webhook_tenant(
        &self,
        who: &Principal,
        slug: &tessera_core::checked::TenantSlug,
        reading: bool,
    ) -> Result<tenant::Model, ServiceError> {
        let t = Self::tenant_by_slug(&self.db, slug).await?;
        match who.role_in(t.id) {
            Some(TenantRole::TenantAdmin) => Ok(t),
            _ if reading && who.platform_admin => Ok(t),
            Some(TenantRole::Member) => Err(ServiceError::Forbidden(
                "only tenant admins can manage the tenant's webhook".to_owned(),
            )),
            None if who.platform_admin => Err(ServiceError::Forbidden(
                "the webhook belongs to the tenant; ask one of its tenant admins".to_owned(),
            )),
            None => Err(ServiceError::not_found(format!("tenant '{slug}'"))),
        }
    }

    /// The tenant's webhook and its latest deliveries (`None` when not set
    /// up). Platform admins may look: they see why calls failed, exactly,
    /// where the tenant's admins see one coarse text.
    pub async fn webhook_view(
        &self,
        who: &Principal,
        slug: &tessera_core::checked::TenantSlug,
    ) -> Result<Option<WebhookView>, ServiceError> {
        let t = self.webhook_tenant(who, slug, true).await?;
        self.webhook_view_of(t.id, who.platform_admin).await
    }

    async fn webhook_view_of(
        &self,
        tenant_id: TenantId,
        exact: bool,
    ) -> Result<Option<WebhookView>, ServiceError> {
        let Some(hook) = webhook::Entity::find()
            .filter(webhook::Column::TenantId.eq(tenant_id))
            .one(&self.db)
            .await?
        else {
            return Ok(None);
        };
        let deliveries = webhook_delivery::Entity::find()
            .filter(webhook_delivery::Column::TenantId.eq(tenant_id))
            .order_by_desc(webhook_delivery::Column::Id)
            .limit(20)
            .all(&self.db)
            .await?
            .into_iter()
            .map(|d| WebhookDeliveryView {
                id: d.id,
                event: d.event,
                status: if d.delivered_at.is_some() {
                    WebhookDeliveryStatus::Delivered
                } else if d.failed_at.is_some() {
                    WebhookDeliveryStatus::Failed
                } else {
                    WebhookDeliveryStatus::Pending
                },
                attempts: u32::try_from(d.attempts).unwrap_or(0),
                last_error: d.last_error,
                detail: d.last_error_detail.filter(|_| exact),
                created_at: d.created_at,
            })
            .collect();
        Ok(Some(WebhookView {
            url: hook.url,
            created_at: hook.created_at,
            created_by: hook.created_by,
            deliveries,
        }))
    }

    /// Sets (or replaces) the tenant's webhook; a new signing secret is made
    /// and returned once.
    pub async fn set_webhook(
        &self,
        who: &Principal,
        slug: &tessera_core::checked::TenantSlug,
        url: &str,
    ) -> Result<CreatedWebhook, ServiceError> {
        let t = self.webhook_tenant(who, slug, false).await?;
        let url = validate_url(url, &self.settings.webhook_egress)?;
        let now = self.now();
        let secret = secret::generate("whsec");
        let mut w = self.begin_write().await?;
        let existing = webhook::Entity::find()
            .filter(webhook::Column::TenantId.eq(t.id))
            .one(w.db())
            .await?;
        let before_url = existing.as_ref().map(|h| h.url.clone());
        if let Some(h) = existing {
            webhook::Entity::delete_by_id(h.id).exec(w.db()).await?;
        }
        webhook::ActiveModel {
            tenant_id: Set(t.id),
            url: Set(url.clone()),
            secret: Set(secret.clone()),
            created_by: Set(who.audit_name()),
            created_at: Set(now),
            ..Default::default()
        }
        .insert(w.db())
        .await?;
        w.emit(DomainEvent::WebhookSet {
            tenant: TenantRef::of(&t),
            before_url,
            url,
        });
        w.commit(self, &Actor::User(who)).await?;
        let webhook = self
            .webhook_view_of(t.id, who.platform_admin)
            .await?
            .ok_or_else(|| ServiceError::not_found("webhook"))?;
        Ok(CreatedWebhook { webhook, secret })
    }

    /// Removes the tenant's webhook; undelivered events are dropped.
    pub async fn delete_webhook(
        &self,
        who: &Principal,
        slug: &tessera_core::checked::TenantSlug,
    ) -> Result<(), ServiceError> {
        let t = self.webhook_tenant(who, slug, false).await?;
        let mut w = self.begin_write().await?;
        let hook = webhook::Entity::find()
            .filter(webhook::Column::TenantId.eq(t.id))
            .one(w.db())
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("a webhook for tenant '{slug}'")))?;
        webhook::Entity::delete_by_id(hook.id).exec(w.db()).await?;
        webhook_delivery::Entity::delete_many()
            .filter(webhook_delivery::Column::TenantId.eq(t.id))
            .filter(webhook_delivery::Column::DeliveredAt.is_null())
            .filter(webhook_delivery::Column::FailedAt.is_null())
            .exec(w.db())
            .await?;
        w.emit(DomainEvent::WebhookDeleted {
            tenant: TenantRef::of(&t),
            url: hook.url,
        });
        w.commit(self, &Actor::User(who)).await?;
        Ok(())
    }

    /// Queues a `webhook.test` event, so a tenant admin can check the receiver.
    pub async fn test_webhook(
        &self,
        who: &Principal,
        slug: &tessera_core::checked::TenantSlug,
    ) -> Result<(), ServiceError> {
        let t = self.webhook_tenant(who, slug, false).await?;
        let mut w = self.begin_write().await?;
        let hook = webhook::Entity::find()
            .filter(webhook::Column::TenantId.eq(t.id))
            .one(w.db())
            .await?;
        if hook.is_none() {
            return Err(ServiceError::Conflict(
                "set up the webhook first, then send a test event".to_owned(),
            ));
        }
        let window_start = self.now() - Duration::seconds(TEST_WINDOW_SECONDS);
        let recent = webhook_delivery::Entity::find()
            .filter(webhook_delivery::Column::TenantId.eq(t.id))
            .filter(webhook_delivery::Column::Event.eq(NotificationKind::WebhookTest))
            .filter(webhook_delivery::Column::CreatedAt.gt(window_start))
            .order_by_asc(webhook_delivery::Column::CreatedAt)
            .all(w.db())
            .await?;
        if recent.len() as u64 >= TEST_EVENTS_PER_WINDOW {
            let oldest = recent.first().map_or(window_start, |d| d.created_at);
            let retry_after_s = (oldest - window_start).num_seconds().max(1);
            return Err(ServiceError::RateLimited {
                what: format!("at most {TEST_EVENTS_PER_WINDOW} test events a minute per tenant"),
                retry_after_s: u64::try_from(retry_after_s).unwrap_or(1),
            });
        }
        w.emit(DomainEvent::WebhookTested {
            tenant: TenantRef::of(&t),
            by: who.name.clone(),
        });
        w.commit(self, &Actor::User(who)).await?;
        Ok(())
    }

    /// Deliveries due now, fairly: tenants in the order of their oldest due
    /// delivery, each with at most `room(tenant_id)` of its oldest (the
    /// delivery task passes how many more it may post to that tenant's
    /// receiver at once). Each is claimed, so with several server replicas
    /// only one posts it. Events of a tenant whose webhook was removed are
    /// given up.
    pub async fn due_webhook_deliveries(
        &self,
        room: impl Fn(TenantId) -> u64,
    ) -> Result<Vec<DueDelivery>, ServiceError> {
        let now = self.now();
        let tenants: Vec<(TenantId, i64)> = webhook_delivery::Entity::find()
            .select_only()
            .column(webhook_delivery::Column::TenantId)
            .column_as(webhook_delivery::Column::Id.min(), "oldest")
            .filter(webhook_delivery::Column::NextAttemptAt.lte(now))
            .group_by(webhook_delivery::Column::TenantId)
            .into_tuple()
            .all(&self.db)
            .await?;
        let mut tenants = tenants;
        tenants.sort_by_key(|(_, oldest)| *oldest);
        let mut due = Vec::new();
        for (tenant_id, _) in tenants {
            let room = room(tenant_id);
            if room == 0 {
                continue;
            }
            let rows = webhook_delivery::Entity::find()
                .filter(webhook_delivery::Column::TenantId.eq(tenant_id))
                .filter(webhook_delivery::Column::NextAttemptAt.lte(now))
                .order_by_asc(webhook_delivery::Column::Id)
                .limit(room)
                .all(&self.db)
                .await?;
            if rows.is_empty() {
                continue;
            }
            let hook = webhook::Entity::find()
                .filter(webhook::Column::TenantId.eq(tenant_id))
                .one(&self.db)
                .await?;
            // Claim them, in one write (on SQLite in the writer turn, so a
            // claim never makes a use case's write wait or fail). A claim
            // that is never finished (the server died) runs out and the
            // delivery is tried again.
            let w = self.begin_write().await?;
            let mut claimed = Vec::with_capacity(rows.len());
            for d in rows {
                let won = webhook_delivery::Entity::update_many()
                    .col_expr(
                        webhook_delivery::Column::NextAttemptAt,
                        Expr::value(now + Duration::seconds(CLAIM_SECONDS)),
                    )
                    .filter(webhook_delivery::Column::Id.eq(d.id))
                    .filter(webhook_delivery::Column::NextAttemptAt.lte(now))
                    .exec(w.db())
                    .await?
                    .rows_affected;
                if won == 1 {
                    claimed.push(d);
                }
            }
            w.commit(self, &Actor::System).await?;
            for d in claimed {
                match &hook {
                    Some(h) => due.push(DueDelivery {
                        id: d.id,
                        tenant_id,
                        event: d.event,
                        url: h.url.clone(),
                        secret: h.secret.clone(),
                        payload: d.payload,
                        attempts: u32::try_from(d.attempts).unwrap_or(0),
                    }),
                    None => {
                        self.finish_webhook_delivery(
                            d.id,
                            Err(DeliveryFailure::plain("the webhook was removed")),
                            1,
                        )
                        .await?;
                    }
                }
            }
        }
        Ok(due)
    }

    /// The networks webhooks may reach besides the public internet.
    pub fn webhook_egress(&self) -> &EgressPolicy {
        &self.settings.webhook_egress
    }

    /// Records the outcome of one try: delivered, or failed and retried after
    /// `retry_base_s · 2^(tries-1)` seconds until the tries run out.
    pub async fn finish_webhook_delivery(
        &self,
        id: i64,
        outcome: Result<(), DeliveryFailure>,
        retry_base_s: u64,
    ) -> Result<(), ServiceError> {
        let now = self.now();
        let w = self.begin_write().await?;
        let Some(d) = webhook_delivery::Entity::find_by_id(id).one(w.db()).await? else {
            return Ok(());
        };
        let attempts = u32::try_from(d.attempts).unwrap_or(0).saturating_add(1);
        let mut a: webhook_delivery::ActiveModel = d.into();
        a.attempts = Set(i32::try_from(attempts).unwrap_or(i32::MAX));
        let counted = match outcome {
            Ok(()) => {
                a.delivered_at = Set(Some(now));
                a.next_attempt_at = Set(None);
                a.last_error = Set(None);
                a.last_error_detail = Set(None);
                DeliveryOutcome::Delivered
            }
            Err(e) => {
                a.last_error = Set(Some(e.shown.chars().take(1000).collect()));
                a.last_error_detail = Set(Some(e.detail.chars().take(1000).collect()));
                match webhook_retry_delay_s(attempts, retry_base_s) {
                    Some(s) => {
                        a.next_attempt_at = Set(Some(
                            now + Duration::seconds(i64::try_from(s).unwrap_or(3600)),
                        ));
                        DeliveryOutcome::Retrying
                    }
                    None => {
                        a.next_attempt_at = Set(None);
                        a.failed_at = Set(Some(now));
                        DeliveryOutcome::GaveUp
                    }
                }
            }
        };
        a.update(w.db()).await?;
        w.commit(self, &Actor::System).await?;
        self.metrics.delivered(counted);
        Ok(())
    }
}

/// What a tenant is told about an address webhooks may not reach.
pub const INTERNAL_ADDRESS: &str = "points at a private or internal address; webhooks go to public receivers only (the platform team can allow an internal network)";

/// An absolute http(s) URL whose host, if it is an address, may be reached;
/// or a 400 that says what is wrong. (Names are checked when they are
/// resolved, at each delivery.)
fn validate_url(raw: &str, egress: &EgressPolicy) -> Result<String, ServiceError> {
    let raw = raw.trim();
    let bad = |m: &str| ServiceError::invalid("url", m);
    if raw.len() > MAX_URL {
        return Err(bad("must be at most 500 characters"));
    }
    let parsed = url::Url::parse(raw).map_err(|e| {
        bad(&format!(
            "is not a valid URL ({e}); e.g. https://chat.example.com/hooks/gpu"
        ))
    })?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(bad("must be an http:// or https:// URL with a host"));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad(
            "must not carry a user name or password; the signature authenticates Tessera",
        ));
    }
    if !egress.permits_url(&parsed) {
        return Err(bad(INTERNAL_ADDRESS));
    }
    Ok(parsed.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_is_hmac_sha256_of_timestamp_and_body() {
        // Known answer: HMAC-SHA256("key", "1.{}").
        let s = sign("key", 1, "{}");
        assert_eq!(
            s,
            "sha256=1ba6b8171186efc613e8bcc0cbdab2748f24984d7c5a84faa2637afa0e40d224"
        );
        assert_ne!(s, sign("key", 2, "{}"));
        assert_ne!(s, sign("other", 1, "{}"));
    }

    #[test]
    fn urls_are_checked() {
        assert_eq!(
            validate_url(" https://chat.example.com/hook ", &EgressPolicy::default())
                .ok()
                .as_deref(),
            Some("https://chat.example.com/hook")
        );
        for bad in [
            "",
            "ftp://x",
            "not a url",
            "https://u:p@x.example/",
            "http://127.0.0.1:8080/hook",
            "http://2130706433/",
            "http://[::ffff:169.254.169.254]/latest/meta-data",
            "http://10.0.0.1/",
        ] {
            let err = validate_url(bad, &EgressPolicy::default()).unwrap_err();
            assert_eq!(err.status(), 400, "{bad}");
        }
        let internal = EgressPolicy::allowing(vec!["10.0.0.0/8".parse().unwrap()]);
        assert!(validate_url("http://10.0.0.1/", &internal).is_ok());
    }
}
