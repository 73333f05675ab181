//! `budget_alerts`: the thresholds a budget's month has crossed (each told once).
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "budget_alerts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub budget_id: i64,
    /// `YYYY-MM`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub month: String,
    #[sea_orm(primary_key, auto_increment = false)]
    /// A [`tessera_core::budget::BudgetAlert`] name (a plain string: it is
    /// part of the key).
    pub alert: String,
    pub at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
