//! Scoped API tokens and audit retention.
//!
//! `api_tokens.scope`: what a token may do (`read`: look only; `request`:
//! a member's rights, what every earlier token had).
//!
//! `audit_chain.pruned_rows`, `pruned_hash`, `pruned_through`: retention
//! deletes the oldest audit rows; the head keeps how many chained rows were
//! deleted, the hash of the last one (the anchor the remaining chain starts
//! from) and its id, so the rows kept still verify.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden, Clone, Copy)]
enum ApiTokens {
    Table,
    Scope,
}

#[derive(DeriveIden, Clone, Copy)]
enum AuditChain {
    Table,
    PrunedRows,
    PrunedHash,
    PrunedThrough,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::add_columns(
            manager,
            ApiTokens::Table,
            vec![ColumnDef::new(ApiTokens::Scope)
                .string_len(16)
                .not_null()
                .default("request")
                .to_owned()],
        )
        .await?;
        crate::alter::add_columns(
            manager,
            AuditChain::Table,
            vec![
                ColumnDef::new(AuditChain::PrunedRows)
                    .big_integer()
                    .not_null()
                    .default(0i64)
                    .to_owned(),
                ColumnDef::new(AuditChain::PrunedHash)
                    .string_len(64)
                    .not_null()
                    .default("")
                    .to_owned(),
                ColumnDef::new(AuditChain::PrunedThrough)
                    .big_integer()
                    .null()
                    .to_owned(),
            ],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::drop_columns(
            manager,
            AuditChain::Table,
            [
                AuditChain::PrunedRows,
                AuditChain::PrunedHash,
                AuditChain::PrunedThrough,
            ],
        )
        .await?;
        crate::alter::drop_columns(manager, ApiTokens::Table, [ApiTokens::Scope]).await
    }
}
