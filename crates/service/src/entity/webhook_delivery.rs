//! `webhook_deliveries`: the outbox of webhook calls, retried with backoff.
use sea_orm::entity::prelude::*;
use tessera_core::ids::TenantId;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_deliveries")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub tenant_id: TenantId,
    pub event: tessera_core::notify::NotificationKind,
    pub payload: String,
    pub attempts: i32,
    /// `None` once delivered or given up.
    pub next_attempt_at: Option<DateTimeUtc>,
    pub delivered_at: Option<DateTimeUtc>,
    pub failed_at: Option<DateTimeUtc>,
    /// What the tenant is told of the last failure (coarse).
    pub last_error: Option<String>,
    /// Why it failed, exactly (platform admins only).
    pub last_error_detail: Option<String>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
