//! API tokens expire. Tokens made before this migration get the default
//! lifetime from the moment it runs, so no token stays valid for ever.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum ApiTokens {
    Table,
    ExpiresAt,
}

/// The lifetime given to tokens that had none (the server's default
/// `[api_tokens] default_days`).
const LEGACY_TOKEN_DAYS: i64 = 90;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ApiTokens::Table)
                    .add_column(
                        ColumnDef::new(ApiTokens::ExpiresAt)
                            .timestamp_with_time_zone()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        // A migration runs once, against real time (no service clock yet).
        #[allow(clippy::disallowed_methods)]
        let expiry: chrono::DateTime<chrono::Utc> =
            chrono::Utc::now() + chrono::TimeDelta::days(LEGACY_TOKEN_DAYS);
        manager
            .exec_stmt(
                Query::update()
                    .table(ApiTokens::Table)
                    .value(ApiTokens::ExpiresAt, expiry)
                    .and_where(Expr::col(ApiTokens::ExpiresAt).is_null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ApiTokens::Table)
                    .drop_column(ApiTokens::ExpiresAt)
                    .to_owned(),
            )
            .await
    }
}
