//! Telling people what happened: in-app notifications per user and, where a
//! tenant has one, a call to its outgoing webhook. Both are derived from the
//! domain events of a write and written in its transaction (the webhook
//! through an outbox that the server's delivery task empties); see
//! [`crate::write`].

mod egress;
mod inbox;
mod webhooks;

pub use egress::EgressPolicy;
pub use webhooks::{
    sign, DeliveryFailure, DueDelivery, INTERNAL_ADDRESS, SIGNATURE_HEADER, TEST_EVENTS_PER_WINDOW,
    TIMESTAMP_HEADER,
};

use crate::entity::{membership, user};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};
use tessera_core::ids::{TenantId, UserId};
use tessera_protocol::views::TenantRole;

/// Users who administer `tenant_id`.
pub(crate) async fn tenant_admins<C: ConnectionTrait>(
    conn: &C,
    tenant_id: TenantId,
) -> Result<Vec<UserId>, DbErr> {
    Ok(membership::Entity::find()
        .filter(membership::Column::TenantId.eq(tenant_id))
        .filter(membership::Column::Role.eq(TenantRole::TenantAdmin))
        .all(conn)
        .await?
        .into_iter()
        .map(|m| m.user_id)
        .collect())
}

/// Users who are platform admins (as of their latest login).
pub(crate) async fn platform_admins<C: ConnectionTrait>(conn: &C) -> Result<Vec<UserId>, DbErr> {
    Ok(user::Entity::find()
        .filter(user::Column::PlatformAdmin.eq(true))
        .all(conn)
        .await?
        .into_iter()
        .map(|u| u.id)
        .collect())
}
