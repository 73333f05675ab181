//! People whose access can end before their IdP says so, and tokens that
//! follow the person who made them: `users.deactivated_at` (a platform admin
//! deactivated them; sign-in is refused), `users.sessions_valid_after`
//! (sessions signed in before it are over: "sign out everywhere"), and
//! `api_tokens.created_by_user_id` (whose membership the token is bound to;
//! null for tokens made on the command line). One column per `ALTER TABLE`
//! (SQLite).

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden, Clone, Copy)]
enum Users {
    Table,
    DeactivatedAt,
    SessionsValidAfter,
}

#[derive(DeriveIden, Clone, Copy)]
enum ApiTokens {
    Table,
    CreatedByUserId,
}

const USER_COLUMNS: [Users; 2] = [Users::DeactivatedAt, Users::SessionsValidAfter];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        let columns = USER_COLUMNS
            .into_iter()
            .map(|c| {
                ColumnDef::new(c)
                    .timestamp_with_time_zone()
                    .null()
                    .to_owned()
            })
            .collect();
        crate::alter::add_columns(manager, Users::Table, columns).await?;
        crate::alter::add_columns(
            manager,
            ApiTokens::Table,
            vec![ColumnDef::new(ApiTokens::CreatedByUserId)
                .big_integer()
                .null()
                .to_owned()],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::drop_columns(manager, ApiTokens::Table, [ApiTokens::CreatedByUserId]).await?;
        crate::alter::drop_columns(manager, Users::Table, USER_COLUMNS).await
    }
}
