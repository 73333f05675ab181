//! A pool's capacity epoch: a fresh random value written by every commit
//! that changes what the placer sees in the pool (slices placed or ended,
//! hosts and GPUs joining, leaving or changing health, the pool's policy).
//! A replica keeps each pool's indexed fleet in memory between admissions
//! and trusts it only while the epoch it was built at is still stored.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden, Clone, Copy)]
enum Pools {
    Table,
    CapacityEpoch,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let column = ColumnDef::new(Pools::CapacityEpoch)
            .big_integer()
            .not_null()
            .default(0)
            .to_owned();
        crate::alter::add_columns(manager, Pools::Table, vec![column]).await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::drop_columns(manager, Pools::Table, [Pools::CapacityEpoch]).await
    }
}
