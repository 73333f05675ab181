//! Requests refused for want of quota, counted per day, pool and tenant, so
//! the fleet's insights page can chart them (a refused request stores no
//! allocation).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum AdmissionRefusals {
    Table,
    DayMs,
    Pool,
    TenantId,
    Count,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(AdmissionRefusals::Table)
                    .col(
                        ColumnDef::new(AdmissionRefusals::DayMs)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(AdmissionRefusals::Pool)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(AdmissionRefusals::TenantId)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(AdmissionRefusals::Count)
                            .big_integer()
                            .not_null(),
                    )
                    .primary_key(
                        Index::create()
                            .col(AdmissionRefusals::DayMs)
                            .col(AdmissionRefusals::Pool)
                            .col(AdmissionRefusals::TenantId),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(AdmissionRefusals::Table).to_owned())
            .await
    }
}
