//! `memberships`: a user's role in a tenant, refreshed from IdP groups at each login.
use sea_orm::entity::prelude::*;
use tessera_core::ids::{TenantId, UserId};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "memberships")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub user_id: UserId,
    pub tenant_id: TenantId,
    pub role: tessera_core::role::TenantRole,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
