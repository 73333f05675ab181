//! `webhook_deliveries.last_error_detail`: why the last try failed, exactly
//! (a name that does not resolve, one that resolves inside, a refused port,
//! a timeout). Tenants see only `last_error`, the same coarse text for all
//! of these (telling them apart would map the internal network); platform
//! admins see this too.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden, Clone, Copy)]
enum WebhookDeliveries {
    Table,
    LastErrorDetail,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::add_columns(
            manager,
            WebhookDeliveries::Table,
            vec![ColumnDef::new(WebhookDeliveries::LastErrorDetail)
                .text()
                .null()
                .to_owned()],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        crate::alter::drop_columns(
            manager,
            WebhookDeliveries::Table,
            [WebhookDeliveries::LastErrorDetail],
        )
        .await
    }
}
