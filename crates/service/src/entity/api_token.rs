//! `api_tokens`: tenant-scoped tokens for the REST API (stored hashed).
use sea_orm::entity::prelude::*;
use tessera_core::ids::{ApiTokenId, TenantId, UserId};
use tessera_core::role::TokenScope;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "api_tokens")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: ApiTokenId,
    pub tenant_id: TenantId,
    pub name: String,
    #[sea_orm(unique)]
    pub token_hash: String,
    pub prefix: String,
    pub created_by: String,
    /// The person who made it: the token works only while they still
    /// belong to the tenant, are active, and sign in now and then (`None`:
    /// made on the server's command line).
    pub created_by_user_id: Option<UserId>,
    pub created_at: DateTimeUtc,
    pub last_used_at: Option<DateTimeUtc>,
    pub revoked_at: Option<DateTimeUtc>,
    /// When it stops working; `None` only for a row written by an older
    /// server after the migration (then `created_at` plus the default lifetime).
    pub expires_at: Option<DateTimeUtc>,
    /// What it may do.
    pub scope: TokenScope,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
