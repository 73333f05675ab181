//! QoS and preemption: each allocation's QoS class (`guaranteed`,
//! `burstable`, `best-effort`), and, for a slice told to give way, when it
//! is preempted, for which request and why, and when it was. One column per
//! `ALTER TABLE` (SQLite).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden, Clone, Copy)]
enum Allocations {
    Table,
    Qos,
    PreemptDeadline,
    PreemptFor,
    PreemptReason,
    PreemptedAt,
}

const COLUMNS: [Allocations; 5] = [
    Allocations::Qos,
    Allocations::PreemptDeadline,
    Allocations::PreemptFor,
    Allocations::PreemptReason,
    Allocations::PreemptedAt,
];

fn column(c: Allocations) -> ColumnDef {
    let mut d = ColumnDef::new(c);
    match c {
        Allocations::Qos => d.string().not_null().default("guaranteed"),
        Allocations::PreemptFor => d.big_integer().null(),
        Allocations::PreemptReason => d.text().null(),
        _ => d.timestamp_with_time_zone().null(),
    };
    d
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let columns = COLUMNS.into_iter().map(column).collect();
        crate::alter::add_columns(manager, Allocations::Table, columns).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::drop_columns(manager, Allocations::Table, COLUMNS).await
    }
}
