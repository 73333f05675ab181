//! An audit log you can prove: each `audit_events` row carries `hash`, the
//! SHA-256 of the previous row's hash and its own content (a hash chain per
//! deployment; null for rows written before the chain began), and
//! `audit_chain` holds the chain's head (one row, id 1): the last hash. A
//! write locks the head while it appends, so chained rows follow one another
//! in id order on every replica.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden, Clone, Copy)]
enum AuditEvents {
    Table,
    Hash,
}

#[derive(DeriveIden, Clone, Copy)]
enum AuditChain {
    Table,
    Id,
    LastHash,
    Rows,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::add_columns(
            manager,
            AuditEvents::Table,
            vec![ColumnDef::new(AuditEvents::Hash)
                .string_len(64)
                .null()
                .to_owned()],
        )
        .await?;
        manager
            .create_table(
                Table::create()
                    .table(AuditChain::Table)
                    .col(
                        ColumnDef::new(AuditChain::Id)
                            .integer()
                            .not_null()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(AuditChain::LastHash)
                            .string_len(64)
                            .not_null(),
                    )
                    .col(ColumnDef::new(AuditChain::Rows).big_integer().not_null())
                    .to_owned(),
            )
            .await?;
        manager
            .exec_stmt(
                Query::insert()
                    .into_table(AuditChain::Table)
                    .columns([AuditChain::Id, AuditChain::LastHash, AuditChain::Rows])
                    .values_panic([1.into(), "".into(), 0i64.into()])
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(AuditChain::Table).to_owned())
            .await?;
        crate::alter::drop_columns(manager, AuditEvents::Table, [AuditEvents::Hash]).await
    }
}
