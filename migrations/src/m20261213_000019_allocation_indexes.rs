//! Allocations are found by tenant and pool (quota use, in the admission
//! turn) and by host (what holds a host's GPUs) among their open states,
//! while a tenant's or a host's history of ended slices only grows. The
//! single-column indexes on `tenant_id` and `host_id` made those reads
//! visit every ended slice of the tenant or host; these include the pool
//! and the state, so the reads visit only the open ones. (They still serve
//! every read by tenant or host alone.)

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden, Clone, Copy)]
enum Allocations {
    Table,
    TenantId,
    Pool,
    State,
    HostId,
}

/// (new index, its columns, the index it replaces, that one's column).
fn changes() -> [(&'static str, Vec<Allocations>, &'static str, Allocations); 2] {
    [
        (
            "allocations_tenant_pool_state",
            vec![Allocations::TenantId, Allocations::Pool, Allocations::State],
            "allocations_tenant",
            Allocations::TenantId,
        ),
        (
            "allocations_host_state",
            vec![Allocations::HostId, Allocations::State],
            "allocations_host",
            Allocations::HostId,
        ),
    ]
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for (name, columns, old, _) in changes() {
            let mut index = Index::create();
            index.name(name).table(Allocations::Table);
            for c in columns {
                index.col(c);
            }
            manager.create_index(index.to_owned()).await?;
            manager
                .drop_index(Index::drop().name(old).table(Allocations::Table).to_owned())
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for (name, _, old, column) in changes() {
            manager
                .create_index(
                    Index::create()
                        .name(old)
                        .table(Allocations::Table)
                        .col(column)
                        .to_owned(),
                )
                .await?;
            manager
                .drop_index(
                    Index::drop()
                        .name(name)
                        .table(Allocations::Table)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
