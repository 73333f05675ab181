//! Idle reclaim: when a slice was warned that it is idle and the deadline to
//! keep it, how often its owner kept it and since when it is watched again,
//! and when it was reclaimed. One column per `ALTER TABLE` (SQLite).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden, Clone, Copy)]
enum Allocations {
    Table,
    IdleWarnedAt,
    IdleDeadline,
    IdleKeeps,
    IdleWatchFrom,
    ReclaimedAt,
}

fn columns() -> Vec<ColumnDef> {
    let ts = |c: Allocations| {
        let mut d = ColumnDef::new(c);
        d.timestamp_with_time_zone().null();
        d
    };
    let mut keeps = ColumnDef::new(Allocations::IdleKeeps);
    keeps.integer().not_null().default(0);
    vec![
        ts(Allocations::IdleWarnedAt),
        ts(Allocations::IdleDeadline),
        keeps,
        ts(Allocations::IdleWatchFrom),
        ts(Allocations::ReclaimedAt),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::add_columns(manager, Allocations::Table, columns()).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let columns = [
            Allocations::IdleWarnedAt,
            Allocations::IdleDeadline,
            Allocations::IdleKeeps,
            Allocations::IdleWatchFrom,
            Allocations::ReclaimedAt,
        ];
        crate::alter::drop_columns(manager, Allocations::Table, columns).await
    }
}
