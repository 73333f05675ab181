//! What the agent stopped when a slice was released: processes that exited
//! on SIGTERM and those that needed SIGKILL after the grace period (null
//! until the host reports the slice gone, and for slices released before
//! it counted). One column per `ALTER TABLE` (SQLite).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden, Clone, Copy)]
enum Allocations {
    Table,
    ProcessesTerminated,
    ProcessesKilled,
}

const COLUMNS: [Allocations; 2] = [
    Allocations::ProcessesTerminated,
    Allocations::ProcessesKilled,
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let columns = COLUMNS
            .into_iter()
            .map(|c| ColumnDef::new(c).integer().null().to_owned())
            .collect();
        crate::alter::add_columns(manager, Allocations::Table, columns).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::drop_columns(manager, Allocations::Table, COLUMNS).await
    }
}
