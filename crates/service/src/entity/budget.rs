//! `budgets`: a monthly budget for a tenant or a cost centre.
use sea_orm::entity::prelude::*;
use tessera_core::ids::TenantId;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "budgets")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub scope: tessera_core::budget::BudgetScope,
    /// For a tenant's budget.
    pub tenant_id: Option<TenantId>,
    /// For a cost centre's budget.
    pub cost_centre: Option<String>,
    /// Millionths of the currency per calendar month.
    pub amount_micros: i64,
    /// ISO 4217.
    pub currency: String,
    /// Once spent, only guaranteed requests go through.
    pub block_when_exceeded: bool,
    pub set_by: String,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
