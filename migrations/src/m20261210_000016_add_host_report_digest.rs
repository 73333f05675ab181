//! What a host's last fully processed report said (a SHA-256 of it) and
//! when, so a report that repeats it only records that the host was seen.
//! One column per `ALTER TABLE` (SQLite).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden, Clone, Copy)]
enum Hosts {
    Table,
    ReportDigest,
    ReportFullAt,
}

const COLUMNS: [Hosts; 2] = [Hosts::ReportDigest, Hosts::ReportFullAt];

fn column(c: Hosts) -> ColumnDef {
    let mut d = ColumnDef::new(c);
    match c {
        Hosts::ReportDigest => d.string().null(),
        _ => d.timestamp_with_time_zone().null(),
    };
    d
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let columns = COLUMNS.into_iter().map(column).collect();
        crate::alter::add_columns(manager, Hosts::Table, columns).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::drop_columns(manager, Hosts::Table, COLUMNS).await
    }
}
