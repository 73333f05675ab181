//! Allocations remember the priority class they were requested with (the
//! `priority` column keeps its value, which orders the queue). Rows from
//! before classes existed ran at the built-in `standard` class.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Allocations {
    Table,
    PriorityClass,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Allocations::Table)
                    .add_column(
                        ColumnDef::new(Allocations::PriorityClass)
                            .string()
                            .not_null()
                            .default("standard"),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Allocations::Table)
                    .drop_column(Allocations::PriorityClass)
                    .to_owned(),
            )
            .await
    }
}
