//! `notifications`: a user's in-app notifications.
use sea_orm::entity::prelude::*;
use tessera_core::ids::{NotificationId, TenantId, UserId};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "notifications")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: NotificationId,
    pub user_id: UserId,
    pub tenant_id: Option<TenantId>,
    pub kind: tessera_core::notify::NotificationKind,
    pub title: String,
    pub body: String,
    pub link: Option<String>,
    pub created_at: DateTimeUtc,
    pub read_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
