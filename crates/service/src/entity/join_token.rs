//! `join_tokens`: one-time, expiring tokens that enrol a host.
use sea_orm::entity::prelude::*;
use tessera_core::ids::{HostId, JoinTokenId};

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "join_tokens")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: JoinTokenId,
    #[sea_orm(unique)]
    pub token_hash: String,
    pub description: String,
    pub created_by: Option<String>,
    pub created_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
    pub used_at: Option<DateTimeUtc>,
    pub used_by_host_id: Option<HostId>,
    pub revoked_at: Option<DateTimeUtc>,
    /// Set on a re-enrolment token: the one existing host it may re-key.
    pub for_host_id: Option<HostId>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
