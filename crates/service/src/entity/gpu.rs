//! `gpus`: GPUs as their host's agent last reported them.
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gpus")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub host_id: i64,
    pub idx: i32,
    #[sea_orm(unique)]
    pub uuid: String,
    pub name: String,
    pub model: String,
    pub memory_mib: i64,
    pub mig_capable: bool,
    pub mig_enabled: bool,
    pub nvlink_peers: Json,
    pub health: String,
    pub updated_at: DateTimeUtc,
    pub sharing: Option<Json>,
    pub mig_devices: Option<Json>,
    pub apply_error: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
