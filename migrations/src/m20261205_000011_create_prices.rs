//! Prices per pool with the date they take effect: chargeback prices each
//! moment of use with the price in force then, so a new price never
//! rewrites a past period.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Prices {
    Table,
    Id,
    Pool,
    Currency,
    GpuHourMicros,
    GibHourMicros,
    EffectiveFrom,
    CreatedBy,
    CreatedAt,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Prices::Table)
                    .col(
                        ColumnDef::new(Prices::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(ColumnDef::new(Prices::Pool).string_len(64).not_null())
                    .col(ColumnDef::new(Prices::Currency).string_len(3).not_null())
                    .col(
                        ColumnDef::new(Prices::GpuHourMicros)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Prices::GibHourMicros)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Prices::EffectiveFrom)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .col(ColumnDef::new(Prices::CreatedBy).string_len(300).not_null())
                    .col(
                        ColumnDef::new(Prices::CreatedAt)
                            .timestamp_with_time_zone()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("prices_pool_effective_from")
                    .table(Prices::Table)
                    .col(Prices::Pool)
                    .col(Prices::EffectiveFrom)
                    .unique()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Prices::Table).to_owned())
            .await
    }
}
