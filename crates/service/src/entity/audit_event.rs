//! `audit_events`: append-only record of every state change.
use sea_orm::entity::prelude::*;
use tessera_core::audit::{AuditAction, AuditTarget};
use tessera_core::ids::{TenantId, UserId};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "audit_events")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub at: DateTimeUtc,
    pub actor_user_id: Option<UserId>,
    pub actor: String,
    pub tenant_id: Option<TenantId>,
    pub action: AuditAction,
    pub target_type: AuditTarget,
    pub target_id: String,
    pub before: Option<Json>,
    pub after: Option<Json>,
    /// SHA-256 (hex) of the previous row's hash and this row's content
    /// (see [`crate::audit_chain`]); `None` before the chain began.
    pub hash: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
