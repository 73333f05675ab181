//! Telling people what happened: in-app notifications per user and, where a
//! tenant has one, a call to its outgoing webhook. Both are written in the
//! transaction of the change they describe (the webhook through an outbox
//! that the server's delivery task empties).

mod inbox;
mod webhooks;

pub use webhooks::{sign, DueDelivery, SIGNATURE_HEADER, TIMESTAMP_HEADER};

use crate::entity::{membership, notification, user, webhook, webhook_delivery};
use chrono::{DateTime, Utc};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, Set,
};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use tessera_protocol::views::TenantRole;

/// Something to tell: one notification per recipient, one webhook event.
#[derive(Debug, Clone)]
pub(crate) struct Notice {
    /// The tenant concerned (its webhook gets the event).
    pub tenant_id: Option<i64>,
    /// Machine-readable kind, e.g. `allocation.active`.
    pub kind: &'static str,
    /// One line.
    pub title: String,
    /// Detail.
    pub body: String,
    /// Where to look (a path in the portal).
    pub link: Option<String>,
    /// Extra fields for the webhook payload.
    pub data: Value,
}

/// Writes `notice` for each of `recipients` (deduplicated) and queues it for
/// the tenant's webhook, using `conn` (pass the transaction of the change).
pub(crate) async fn send<C: ConnectionTrait>(
    conn: &C,
    recipients: impl IntoIterator<Item = i64>,
    notice: &Notice,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let unique: BTreeSet<i64> = recipients.into_iter().collect();
    for user_id in unique {
        notification::ActiveModel {
            user_id: Set(user_id),
            tenant_id: Set(notice.tenant_id),
            kind: Set(notice.kind.to_owned()),
            title: Set(clip(&notice.title, 300)),
            body: Set(clip(&notice.body, 2000)),
            link: Set(notice.link.clone()),
            created_at: Set(now),
            read_at: Set(None),
            ..Default::default()
        }
        .insert(conn)
        .await?;
    }
    let Some(tenant_id) = notice.tenant_id else {
        return Ok(());
    };
    let hook = webhook::Entity::find()
        .filter(webhook::Column::TenantId.eq(tenant_id))
        .one(conn)
        .await?;
    if hook.is_some() {
        let tenant = crate::entity::tenant::Entity::find_by_id(tenant_id)
            .one(conn)
            .await?
            .map(|t| t.slug)
            .unwrap_or_default();
        let payload = json!({
            "event": notice.kind,
            "at": now,
            "tenant": tenant,
            "title": notice.title,
            "body": notice.body,
            "link": notice.link,
            "data": notice.data,
        });
        webhook_delivery::ActiveModel {
            tenant_id: Set(tenant_id),
            event: Set(notice.kind.to_owned()),
            payload: Set(payload.to_string()),
            attempts: Set(0),
            next_attempt_at: Set(Some(now)),
            delivered_at: Set(None),
            failed_at: Set(None),
            last_error: Set(None),
            created_at: Set(now),
            ..Default::default()
        }
        .insert(conn)
        .await?;
    }
    Ok(())
}

/// Users who administer `tenant_id`.
pub(crate) async fn tenant_admins<C: ConnectionTrait>(
    conn: &C,
    tenant_id: i64,
) -> Result<Vec<i64>, DbErr> {
    Ok(membership::Entity::find()
        .filter(membership::Column::TenantId.eq(tenant_id))
        .filter(membership::Column::Role.eq(TenantRole::TenantAdmin.as_str()))
        .all(conn)
        .await?
        .into_iter()
        .map(|m| m.user_id)
        .collect())
}

/// Users who are platform admins (as of their latest login).
pub(crate) async fn platform_admins<C: ConnectionTrait>(conn: &C) -> Result<Vec<i64>, DbErr> {
    Ok(user::Entity::find()
        .filter(user::Column::PlatformAdmin.eq(true))
        .all(conn)
        .await?
        .into_iter()
        .map(|u| u.id)
        .collect())
}

fn clip(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// Tells whoever requested `row` (a person; API-token requests reach the
/// tenant's webhook only) what happened to their slice.
pub(crate) async fn about_allocation<C: ConnectionTrait>(
    conn: &C,
    row: &crate::entity::allocation::Model,
    kind: &'static str,
    title: String,
    body: String,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    let slug = crate::entity::tenant::Entity::find_by_id(row.tenant_id)
        .one(conn)
        .await?
        .map(|t| t.slug)
        .unwrap_or_default();
    send(
        conn,
        row.requested_by_user_id,
        &Notice {
            tenant_id: Some(row.tenant_id),
            kind,
            title,
            body,
            link: Some(format!("/t/{slug}/a/{}", row.id)),
            data: json!({
                "allocation": row.id,
                "pool": row.pool,
                "shape": row.shape_label,
                "requested_by": row.requested_by,
            }),
        },
        now,
    )
    .await
}
