//! Fleet operations: platform admins' decisions about hosts and GPUs
//! (cordoned, draining with a deadline, in maintenance: who, when and why),
//! the reasons behind a GPU's health verdict, and the mark on slices whose
//! GPU or host was lost.
//!
//! `gpus.health` keeps its name and now holds only the verdict (`healthy`,
//! `degraded`, `unhealthy`); free text an older agent sent becomes
//! `unhealthy`, as it only ever said something other than `healthy` when a
//! GPU was in trouble.

use sea_orm_migration::prelude::*;

#[derive(DeriveIden)]
enum Hosts {
    Table,
}

#[derive(DeriveIden)]
enum Gpus {
    Table,
    Health,
    HealthFindings,
}

#[derive(DeriveIden)]
enum Allocations {
    Table,
    CapacityLostAt,
    CapacityLostReason,
}

#[derive(DeriveIden)]
enum OperationColumns {
    OpsMode,
    OpsReason,
    OpsBy,
    OpsAt,
    DrainDeadline,
}

fn ops_columns() -> Vec<ColumnDef> {
    vec![
        ColumnDef::new(OperationColumns::OpsMode)
            .string()
            .not_null()
            .default("available")
            .to_owned(),
        ColumnDef::new(OperationColumns::OpsReason)
            .string()
            .null()
            .to_owned(),
        ColumnDef::new(OperationColumns::OpsBy)
            .string()
            .null()
            .to_owned(),
        ColumnDef::new(OperationColumns::OpsAt)
            .timestamp_with_time_zone()
            .null()
            .to_owned(),
        ColumnDef::new(OperationColumns::DrainDeadline)
            .timestamp_with_time_zone()
            .null()
            .to_owned(),
    ]
}

#[derive(DeriveMigrationName)]
pub struct Migration;

/// Adds one column (SQLite alters one column per statement).
async fn add(
    manager: &SchemaManager<'_>,
    table: impl IntoIden,
    mut col: ColumnDef,
) -> Result<(), DbErr> {
    manager
        .alter_table(
            Table::alter()
                .table(table.into_iden())
                .add_column(&mut col)
                .to_owned(),
        )
        .await
}

async fn drop(
    manager: &SchemaManager<'_>,
    table: impl IntoIden,
    col: impl IntoIden,
) -> Result<(), DbErr> {
    manager
        .alter_table(
            Table::alter()
                .table(table.into_iden())
                .drop_column(col.into_iden())
                .to_owned(),
        )
        .await
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for col in ops_columns() {
            add(manager, Hosts::Table, col).await?;
        }
        for col in ops_columns() {
            add(manager, Gpus::Table, col).await?;
        }
        add(
            manager,
            Gpus::Table,
            ColumnDef::new(Gpus::HealthFindings)
                .json()
                .null()
                .to_owned(),
        )
        .await?;
        manager
            .exec_stmt(
                Query::update()
                    .table(Gpus::Table)
                    .value(Gpus::Health, "unhealthy")
                    .and_where(Expr::col(Gpus::Health).is_not_in([
                        "healthy",
                        "degraded",
                        "unhealthy",
                    ]))
                    .to_owned(),
            )
            .await?;
        add(
            manager,
            Allocations::Table,
            ColumnDef::new(Allocations::CapacityLostAt)
                .timestamp_with_time_zone()
                .null()
                .to_owned(),
        )
        .await?;
        add(
            manager,
            Allocations::Table,
            ColumnDef::new(Allocations::CapacityLostReason)
                .string()
                .null()
                .to_owned(),
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        drop(manager, Allocations::Table, Allocations::CapacityLostReason).await?;
        drop(manager, Allocations::Table, Allocations::CapacityLostAt).await?;
        drop(manager, Gpus::Table, Gpus::HealthFindings).await?;
        for table in [Gpus::Table.into_iden(), Hosts::Table.into_iden()] {
            for col in [
                OperationColumns::DrainDeadline,
                OperationColumns::OpsAt,
                OperationColumns::OpsBy,
                OperationColumns::OpsReason,
                OperationColumns::OpsMode,
            ] {
                drop(manager, table.clone(), col).await?;
            }
        }
        Ok(())
    }
}
