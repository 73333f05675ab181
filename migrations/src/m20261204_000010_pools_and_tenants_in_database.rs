//! Pools and tenants owned by the database: the configuration seeds them on
//! first start, platform admins edit them after that.
//!
//! `pools` holds each pool's whole definition as JSON (core's `PoolSpec`)
//! in the order that decides which pool a GPU joins, with a revision for
//! optimistic concurrency and, while GPUs are being emptied for it, the
//! planned change. Tenants gain their IdP group mapping (null until the
//! database owns it: the configuration's applies) and a revision.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Pools {
    Table,
    Id,
    Name,
    Position,
    Spec,
    Revision,
    PendingSpec,
    PendingGpus,
    PendingReason,
    PendingBy,
    PendingAt,
    DrainDeadline,
    CreatedAt,
    UpdatedAt,
    UpdatedBy,
}

#[derive(DeriveIden)]
enum Tenants {
    Table,
    MemberGroups,
    AdminGroups,
    Revision,
}

fn ts(col: impl IntoIden, null: bool) -> ColumnDef {
    let mut c = ColumnDef::new(col);
    c.timestamp_with_time_zone();
    if null {
        c.null();
    } else {
        c.not_null();
    }
    c
}

fn text(col: impl IntoIden, len: u32, null: bool) -> ColumnDef {
    let mut c = ColumnDef::new(col);
    c.string_len(len);
    if null {
        c.null();
    } else {
        c.not_null();
    }
    c
}

fn json(col: impl IntoIden, null: bool) -> ColumnDef {
    let mut c = ColumnDef::new(col);
    c.json();
    if null {
        c.null();
    } else {
        c.not_null();
    }
    c
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Pools::Table)
                    .col(
                        ColumnDef::new(Pools::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(text(Pools::Name, 64, false).unique_key().to_owned())
                    .col(ColumnDef::new(Pools::Position).integer().not_null())
                    .col(json(Pools::Spec, false))
                    .col(
                        ColumnDef::new(Pools::Revision)
                            .big_integer()
                            .not_null()
                            .default(1),
                    )
                    .col(json(Pools::PendingSpec, true))
                    .col(json(Pools::PendingGpus, true))
                    .col(text(Pools::PendingReason, 1000, true))
                    .col(text(Pools::PendingBy, 300, true))
                    .col(ts(Pools::PendingAt, true))
                    .col(ts(Pools::DrainDeadline, true))
                    .col(ts(Pools::CreatedAt, false))
                    .col(ts(Pools::UpdatedAt, false))
                    .col(text(Pools::UpdatedBy, 300, true))
                    .to_owned(),
            )
            .await?;
        for col in [
            json(Tenants::MemberGroups, true),
            json(Tenants::AdminGroups, true),
            ColumnDef::new(Tenants::Revision)
                .big_integer()
                .not_null()
                .default(1)
                .to_owned(),
        ] {
            let mut col = col;
            manager
                .alter_table(
                    Table::alter()
                        .table(Tenants::Table)
                        .add_column(&mut col)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for col in [
            Tenants::Revision,
            Tenants::AdminGroups,
            Tenants::MemberGroups,
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Tenants::Table)
                        .drop_column(col)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .drop_table(Table::drop().table(Pools::Table).to_owned())
            .await
    }
}
