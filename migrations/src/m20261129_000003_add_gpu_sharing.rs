//! The sharing state (MIG instances, MPS, replicas) each GPU last reported.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Gpus {
    Table,
    Sharing,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Gpus::Table)
                    .add_column(ColumnDef::new(Gpus::Sharing).json().null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Gpus::Table)
                    .drop_column(Gpus::Sharing)
                    .to_owned(),
            )
            .await
    }
}
