//! `audit_chain`: the audit log's hash chain head (one row, id 1).
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "audit_chain")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: i32,
    /// The newest chained row's hash ("" before the first).
    pub last_hash: String,
    /// Chained rows so far.
    pub rows: i64,
    /// Chained rows deleted by retention.
    pub pruned_rows: i64,
    /// The hash of the last row retention deleted: the rows kept chain on
    /// from it ("" while none was deleted).
    pub pruned_hash: String,
    /// The id of that row.
    pub pruned_through: Option<i64>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
