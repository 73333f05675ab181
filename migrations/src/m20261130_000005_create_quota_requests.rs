//! Temporary quota grants, quota requests, in-app notifications, and the
//! per-tenant outgoing webhook with its delivery outbox.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Tenants {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum Allocations {
    Table,
    RequestedByUserId,
    LeaseWarnedAt,
}

#[derive(DeriveIden)]
enum QuotaGrants {
    Table,
    Id,
    TenantId,
    Pool,
    ComputeMilli,
    MemoryMib,
    MaxSlices,
    EndsAt,
    Reason,
    QuotaRequestId,
    CreatedBy,
    CreatedAt,
    RevokedAt,
}

#[derive(DeriveIden)]
enum QuotaRequests {
    Table,
    Id,
    TenantId,
    Pool,
    ComputeMilli,
    MemoryMib,
    MaxSlices,
    EndsAt,
    Justification,
    State,
    RejectReason,
    RequestedByUserId,
    RequestedBy,
    SubmittedByUserId,
    SubmittedBy,
    DecidedByUserId,
    DecidedBy,
    DecidedAt,
    GrantedComputeMilli,
    GrantedMemoryMib,
    GrantedMaxSlices,
    GrantedEndsAt,
    Slice,
    SliceUserId,
    SliceRequestedBy,
    AllocationId,
    SliceError,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Notifications {
    Table,
    Id,
    UserId,
    TenantId,
    Kind,
    Title,
    Body,
    Link,
    CreatedAt,
    ReadAt,
}

#[derive(DeriveIden)]
enum Webhooks {
    Table,
    Id,
    TenantId,
    Url,
    Secret,
    CreatedBy,
    CreatedAt,
}

#[derive(DeriveIden)]
enum WebhookDeliveries {
    Table,
    Id,
    TenantId,
    Event,
    Payload,
    Attempts,
    NextAttemptAt,
    DeliveredAt,
    FailedAt,
    LastError,
    CreatedAt,
}

/// A `timestamp with time zone` column.
fn ts(col: impl IntoIden, null: bool) -> ColumnDef {
    let mut c = ColumnDef::new(col);
    c.timestamp_with_time_zone();
    if null {
        c.null();
    } else {
        c.not_null();
    }
    c
}

fn id_col(col: impl IntoIden) -> ColumnDef {
    let mut c = ColumnDef::new(col);
    c.big_integer().not_null().auto_increment().primary_key();
    c
}

fn big(col: impl IntoIden, null: bool) -> ColumnDef {
    let mut c = ColumnDef::new(col);
    c.big_integer();
    if null {
        c.null();
    } else {
        c.not_null();
    }
    c
}

fn text(col: impl IntoIden, len: u32, null: bool) -> ColumnDef {
    let mut c = ColumnDef::new(col);
    c.string_len(len);
    if null {
        c.null();
    } else {
        c.not_null();
    }
    c
}

fn to_tenant(
    table: impl IntoIden + 'static,
    col: impl IntoIden + 'static,
) -> ForeignKeyCreateStatement {
    ForeignKey::create()
        .from(table, col)
        .to(Tenants::Table, Tenants::Id)
        .on_delete(ForeignKeyAction::Cascade)
        .to_owned()
}

async fn index(
    manager: &SchemaManager<'_>,
    name: &str,
    table: impl IntoIden + 'static,
    cols: Vec<Alias>,
    unique: bool,
) -> Result<(), DbErr> {
    let mut i = Index::create();
    i.name(name).table(table);
    for c in cols {
        i.col(c);
    }
    if unique {
        i.unique();
    }
    manager.create_index(i.to_owned()).await
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Allocations::Table)
                    .add_column(big(Allocations::RequestedByUserId, true))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Allocations::Table)
                    .add_column(ts(Allocations::LeaseWarnedAt, true))
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(QuotaGrants::Table)
                    .col(id_col(QuotaGrants::Id))
                    .col(big(QuotaGrants::TenantId, false))
                    .col(text(QuotaGrants::Pool, 64, false))
                    .col(big(QuotaGrants::ComputeMilli, false))
                    .col(big(QuotaGrants::MemoryMib, false))
                    .col(ColumnDef::new(QuotaGrants::MaxSlices).integer().not_null())
                    .col(ts(QuotaGrants::EndsAt, false))
                    .col(text(QuotaGrants::Reason, 1000, false))
                    .col(big(QuotaGrants::QuotaRequestId, true))
                    .col(text(QuotaGrants::CreatedBy, 300, false))
                    .col(ts(QuotaGrants::CreatedAt, false))
                    .col(ts(QuotaGrants::RevokedAt, true))
                    .foreign_key(&mut to_tenant(QuotaGrants::Table, QuotaGrants::TenantId))
                    .to_owned(),
            )
            .await?;
        index(
            manager,
            "quota_grants_tenant_pool",
            QuotaGrants::Table,
            vec![Alias::new("tenant_id"), Alias::new("pool")],
            false,
        )
        .await?;

        manager
            .create_table(
                Table::create()
                    .table(QuotaRequests::Table)
                    .col(id_col(QuotaRequests::Id))
                    .col(big(QuotaRequests::TenantId, false))
                    .col(text(QuotaRequests::Pool, 64, false))
                    .col(big(QuotaRequests::ComputeMilli, false))
                    .col(big(QuotaRequests::MemoryMib, false))
                    .col(
                        ColumnDef::new(QuotaRequests::MaxSlices)
                            .integer()
                            .not_null(),
                    )
                    .col(ts(QuotaRequests::EndsAt, true))
                    .col(text(QuotaRequests::Justification, 2000, false))
                    .col(text(QuotaRequests::State, 20, false))
                    .col(text(QuotaRequests::RejectReason, 1000, true))
                    .col(big(QuotaRequests::RequestedByUserId, true))
                    .col(text(QuotaRequests::RequestedBy, 300, false))
                    .col(big(QuotaRequests::SubmittedByUserId, true))
                    .col(text(QuotaRequests::SubmittedBy, 300, true))
                    .col(big(QuotaRequests::DecidedByUserId, true))
                    .col(text(QuotaRequests::DecidedBy, 300, true))
                    .col(ts(QuotaRequests::DecidedAt, true))
                    .col(big(QuotaRequests::GrantedComputeMilli, true))
                    .col(big(QuotaRequests::GrantedMemoryMib, true))
                    .col(
                        ColumnDef::new(QuotaRequests::GrantedMaxSlices)
                            .integer()
                            .null(),
                    )
                    .col(ts(QuotaRequests::GrantedEndsAt, true))
                    .col(ColumnDef::new(QuotaRequests::Slice).json().null())
                    .col(big(QuotaRequests::SliceUserId, true))
                    .col(text(QuotaRequests::SliceRequestedBy, 300, true))
                    .col(big(QuotaRequests::AllocationId, true))
                    .col(text(QuotaRequests::SliceError, 1000, true))
                    .col(ts(QuotaRequests::CreatedAt, false))
                    .col(ts(QuotaRequests::UpdatedAt, false))
                    .foreign_key(&mut to_tenant(
                        QuotaRequests::Table,
                        QuotaRequests::TenantId,
                    ))
                    .to_owned(),
            )
            .await?;
        index(
            manager,
            "quota_requests_state",
            QuotaRequests::Table,
            vec![Alias::new("state"), Alias::new("created_at")],
            false,
        )
        .await?;
        index(
            manager,
            "quota_requests_tenant",
            QuotaRequests::Table,
            vec![Alias::new("tenant_id")],
            false,
        )
        .await?;

        manager
            .create_table(
                Table::create()
                    .table(Notifications::Table)
                    .col(id_col(Notifications::Id))
                    .col(big(Notifications::UserId, false))
                    .col(big(Notifications::TenantId, true))
                    .col(text(Notifications::Kind, 40, false))
                    .col(text(Notifications::Title, 300, false))
                    .col(text(Notifications::Body, 2000, false))
                    .col(text(Notifications::Link, 300, true))
                    .col(ts(Notifications::CreatedAt, false))
                    .col(ts(Notifications::ReadAt, true))
                    .foreign_key(
                        ForeignKey::create()
                            .from(Notifications::Table, Notifications::UserId)
                            .to(Users::Table, Users::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        index(
            manager,
            "notifications_user",
            Notifications::Table,
            vec![Alias::new("user_id"), Alias::new("read_at")],
            false,
        )
        .await?;

        manager
            .create_table(
                Table::create()
                    .table(Webhooks::Table)
                    .col(id_col(Webhooks::Id))
                    .col(big(Webhooks::TenantId, false))
                    .col(text(Webhooks::Url, 500, false))
                    .col(text(Webhooks::Secret, 100, false))
                    .col(text(Webhooks::CreatedBy, 300, false))
                    .col(ts(Webhooks::CreatedAt, false))
                    .foreign_key(&mut to_tenant(Webhooks::Table, Webhooks::TenantId))
                    .to_owned(),
            )
            .await?;
        index(
            manager,
            "webhooks_tenant",
            Webhooks::Table,
            vec![Alias::new("tenant_id")],
            true,
        )
        .await?;

        manager
            .create_table(
                Table::create()
                    .table(WebhookDeliveries::Table)
                    .col(id_col(WebhookDeliveries::Id))
                    .col(big(WebhookDeliveries::TenantId, false))
                    .col(text(WebhookDeliveries::Event, 60, false))
                    .col(ColumnDef::new(WebhookDeliveries::Payload).text().not_null())
                    .col(
                        ColumnDef::new(WebhookDeliveries::Attempts)
                            .integer()
                            .not_null()
                            .default(0),
                    )
                    .col(ts(WebhookDeliveries::NextAttemptAt, true))
                    .col(ts(WebhookDeliveries::DeliveredAt, true))
                    .col(ts(WebhookDeliveries::FailedAt, true))
                    .col(text(WebhookDeliveries::LastError, 1000, true))
                    .col(ts(WebhookDeliveries::CreatedAt, false))
                    .foreign_key(&mut to_tenant(
                        WebhookDeliveries::Table,
                        WebhookDeliveries::TenantId,
                    ))
                    .to_owned(),
            )
            .await?;
        index(
            manager,
            "webhook_deliveries_due",
            WebhookDeliveries::Table,
            vec![Alias::new("next_attempt_at")],
            false,
        )
        .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            WebhookDeliveries::Table.into_iden(),
            Webhooks::Table.into_iden(),
            Notifications::Table.into_iden(),
            QuotaRequests::Table.into_iden(),
            QuotaGrants::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        for col in [
            Allocations::LeaseWarnedAt.into_iden(),
            Allocations::RequestedByUserId.into_iden(),
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Allocations::Table)
                        .drop_column(col)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}
