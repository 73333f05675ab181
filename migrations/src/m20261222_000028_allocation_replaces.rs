//! `allocations.replaces_id`: the tenant's slice a request replaces (a
//! right-sized request, or any request that says `replaces`). Once the new
//! slice is active, the scheduler releases the old one.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden, Clone, Copy)]
enum Allocations {
    Table,
    ReplacesId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::add_columns(
            manager,
            Allocations::Table,
            vec![ColumnDef::new(Allocations::ReplacesId)
                .big_integer()
                .null()
                .to_owned()],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::drop_columns(manager, Allocations::Table, [Allocations::ReplacesId]).await
    }
}
