//! `gpu_conditions`: each GPU's history for the fleet ledger, as spans of
//! one condition (schedulable, draining, maintenance, unhealthy, silent)
//! in one pool. The span still open has no `until_ms`. The key (GPU,
//! start) lets several server replicas record the same change once.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum GpuConditions {
    Table,
    GpuUuid,
    FromMs,
    UntilMs,
    Condition,
    HostId,
    Hostname,
    Model,
    Pool,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(GpuConditions::Table)
                    .col(
                        ColumnDef::new(GpuConditions::GpuUuid)
                            .string_len(96)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(GpuConditions::FromMs)
                            .big_integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(GpuConditions::UntilMs).big_integer().null())
                    .col(
                        ColumnDef::new(GpuConditions::Condition)
                            .string_len(16)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(GpuConditions::HostId)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(GpuConditions::Hostname)
                            .string_len(253)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(GpuConditions::Model)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(ColumnDef::new(GpuConditions::Pool).string_len(64).null())
                    .primary_key(
                        Index::create()
                            .col(GpuConditions::GpuUuid)
                            .col(GpuConditions::FromMs),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("gpu_conditions_until")
                    .table(GpuConditions::Table)
                    .col(GpuConditions::UntilMs)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(GpuConditions::Table).to_owned())
            .await
    }
}
