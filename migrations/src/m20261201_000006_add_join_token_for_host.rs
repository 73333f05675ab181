//! Re-enrolment tokens: a join token an admin made for one existing host.
//! Only such a token may replace that host's credential.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum JoinTokens {
    Table,
    ForHostId,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // No foreign key: SQLite cannot add one to an existing table. The
        // service checks the host exists when it makes the token.
        manager
            .alter_table(
                Table::alter()
                    .table(JoinTokens::Table)
                    .add_column(ColumnDef::new(JoinTokens::ForHostId).big_integer().null())
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(JoinTokens::Table)
                    .drop_column(JoinTokens::ForHostId)
                    .to_owned(),
            )
            .await
    }
}
