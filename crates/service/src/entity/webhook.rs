//! `webhooks`: a tenant's outgoing webhook (one per tenant).
use sea_orm::entity::prelude::*;
use tessera_core::ids::{TenantId, WebhookId};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "webhooks")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: WebhookId,
    pub tenant_id: TenantId,
    pub url: String,
    /// HMAC key; needed in clear to sign, so it is shown once and never listed.
    pub secret: String,
    pub created_by: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
