//! Chargeback, part 2: each price row names the pool's recovery policy
//! (`showback`, `full_recovery`, `used_based`) from its date on; monthly
//! budgets per tenant or cost centre; the thresholds each budget's month
//! has crossed, keyed so several replicas tell each one once; and tenant
//! admins' requests for a larger budget, which a platform admin decides.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden, Clone, Copy)]
enum Prices {
    Table,
    Recovery,
}

#[derive(DeriveIden)]
enum Budgets {
    Table,
    Id,
    Scope,
    TenantId,
    CostCentre,
    AmountMicros,
    Currency,
    BlockWhenExceeded,
    SetBy,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum BudgetAlerts {
    Table,
    BudgetId,
    Month,
    Alert,
    At,
}

#[derive(DeriveIden)]
enum BudgetRequests {
    Table,
    Id,
    BudgetId,
    AmountMicros,
    Reason,
    State,
    RequestedBy,
    RequestedByUserId,
    CreatedAt,
    DecidedBy,
    DecidedAt,
    Note,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::add_columns(
            manager,
            Prices::Table,
            vec![ColumnDef::new(Prices::Recovery)
                .string_len(16)
                .not_null()
                .default("showback")
                .to_owned()],
        )
        .await?;
        manager
            .create_table(
                Table::create()
                    .table(Budgets::Table)
                    .col(
                        ColumnDef::new(Budgets::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(ColumnDef::new(Budgets::Scope).string_len(16).not_null())
                    .col(ColumnDef::new(Budgets::TenantId).big_integer().null())
                    .col(ColumnDef::new(Budgets::CostCentre).string_len(64).null())
                    .col(
                        ColumnDef::new(Budgets::AmountMicros)
                            .big_integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(Budgets::Currency).string_len(3).not_null())
                    .col(
                        ColumnDef::new(Budgets::BlockWhenExceeded)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .col(ColumnDef::new(Budgets::SetBy).string_len(255).not_null())
                    .col(
                        ColumnDef::new(Budgets::UpdatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        // One budget per tenant and per cost centre (NULLs never collide,
        // so each scope has its own unique index).
        for (name, col) in [
            ("budgets_tenant", Budgets::TenantId),
            ("budgets_cost_centre", Budgets::CostCentre),
        ] {
            manager
                .create_index(
                    Index::create()
                        .name(name)
                        .table(Budgets::Table)
                        .col(col)
                        .unique()
                        .to_owned(),
                )
                .await?;
        }
        manager
            .create_table(
                Table::create()
                    .table(BudgetAlerts::Table)
                    .col(
                        ColumnDef::new(BudgetAlerts::BudgetId)
                            .big_integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(BudgetAlerts::Month).string_len(7).not_null())
                    .col(
                        ColumnDef::new(BudgetAlerts::Alert)
                            .string_len(16)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BudgetAlerts::At)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .primary_key(
                        Index::create()
                            .col(BudgetAlerts::BudgetId)
                            .col(BudgetAlerts::Month)
                            .col(BudgetAlerts::Alert),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(BudgetRequests::Table)
                    .col(
                        ColumnDef::new(BudgetRequests::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(BudgetRequests::BudgetId)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BudgetRequests::AmountMicros)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BudgetRequests::Reason)
                            .string_len(500)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BudgetRequests::State)
                            .string_len(16)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BudgetRequests::RequestedBy)
                            .string_len(255)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BudgetRequests::RequestedByUserId)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BudgetRequests::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(BudgetRequests::DecidedBy)
                            .string_len(255)
                            .null(),
                    )
                    .col(
                        ColumnDef::new(BudgetRequests::DecidedAt)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .col(ColumnDef::new(BudgetRequests::Note).string_len(500).null())
                    .to_owned(),
            )
            .await?;
        // One request waits per budget, whichever replica files it (a
        // partial index: SQLite and PostgreSQL both have them).
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE UNIQUE INDEX budget_requests_pending ON budget_requests (budget_id) \
                 WHERE state = 'pending'",
            )
            .await
            .map(|_| ())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(BudgetRequests::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(BudgetAlerts::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(Budgets::Table).to_owned())
            .await?;
        crate::alter::drop_columns(manager, Prices::Table, [Prices::Recovery]).await
    }
}
