//! `budget_requests`: a tenant admin's request for a larger budget.
use sea_orm::entity::prelude::*;
use tessera_core::ids::UserId;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "budget_requests")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub budget_id: i64,
    /// The amount asked for (millionths per month).
    pub amount_micros: i64,
    pub reason: String,
    pub state: tessera_core::budget::BudgetRequestState,
    pub requested_by: String,
    pub requested_by_user_id: UserId,
    pub created_at: DateTimeUtc,
    pub decided_by: Option<String>,
    pub decided_at: Option<DateTimeUtc>,
    pub note: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
