//! `tenants.namespaces`: the Kubernetes namespaces a tenant's workloads run
//! in (a JSON list of names; `NULL`: not set, the tenant's slug is used).
//! Platform admins set them; claims and the tenant's Kubernetes bundle go
//! there.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden, Clone, Copy)]
enum Tenants {
    Table,
    Namespaces,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::add_columns(
            manager,
            Tenants::Table,
            vec![ColumnDef::new(Tenants::Namespaces).json().null().to_owned()],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::drop_columns(manager, Tenants::Table, [Tenants::Namespaces]).await
    }
}
