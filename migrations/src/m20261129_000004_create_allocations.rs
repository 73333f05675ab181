//! Quotas, allocations, tenant API tokens, and the desired-state generation
//! each host has been asked to reach.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Tenants {
    Table,
    Id,
}

#[derive(DeriveIden)]
enum Hosts {
    Table,
    Id,
    DesiredGeneration,
    AppliedGeneration,
}

#[derive(DeriveIden)]
enum Gpus {
    Table,
    MigDevices,
    ApplyError,
}

#[derive(DeriveIden)]
enum Quotas {
    Table,
    Id,
    TenantId,
    Pool,
    ComputeMilli,
    MemoryMib,
    MaxSlices,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Allocations {
    Table,
    Id,
    TenantId,
    Pool,
    RequestedBy,
    State,
    StateData,
    Shape,
    ShapeLabel,
    DemandComputeMilli,
    DemandMemoryMib,
    DemandSlices,
    Priority,
    Purpose,
    LeaseHours,
    LeaseEndsAt,
    HostId,
    Placement,
    Generation,
    MigDeviceUuid,
    CreatedAt,
    PlacedAt,
    ActiveAt,
    EndedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ApiTokens {
    Table,
    Id,
    TenantId,
    Name,
    TokenHash,
    Prefix,
    CreatedBy,
    CreatedAt,
    LastUsedAt,
    RevokedAt,
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

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Hosts::Table)
                    .add_column(
                        ColumnDef::new(Hosts::DesiredGeneration)
                            .big_integer()
                            .not_null()
                            .default(1),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Hosts::Table)
                    .add_column(
                        ColumnDef::new(Hosts::AppliedGeneration)
                            .big_integer()
                            .null(),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Gpus::Table)
                    .add_column(ColumnDef::new(Gpus::MigDevices).json().null())
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Gpus::Table)
                    .add_column(ColumnDef::new(Gpus::ApplyError).text().null())
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Quotas::Table)
                    .col(id_col(Quotas::Id))
                    .col(ColumnDef::new(Quotas::TenantId).big_integer().not_null())
                    .col(ColumnDef::new(Quotas::Pool).string_len(64).not_null())
                    .col(
                        ColumnDef::new(Quotas::ComputeMilli)
                            .big_integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(Quotas::MemoryMib).big_integer().not_null())
                    .col(ColumnDef::new(Quotas::MaxSlices).integer().not_null())
                    .col(ts(Quotas::UpdatedAt, false))
                    .foreign_key(
                        ForeignKey::create()
                            .from(Quotas::Table, Quotas::TenantId)
                            .to(Tenants::Table, Tenants::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("quotas_tenant_pool")
                    .table(Quotas::Table)
                    .col(Quotas::TenantId)
                    .col(Quotas::Pool)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Allocations::Table)
                    .col(id_col(Allocations::Id))
                    .col(
                        ColumnDef::new(Allocations::TenantId)
                            .big_integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(Allocations::Pool).string_len(64).not_null())
                    .col(
                        ColumnDef::new(Allocations::RequestedBy)
                            .string_len(300)
                            .not_null(),
                    )
                    .col(ColumnDef::new(Allocations::State).string_len(20).not_null())
                    .col(ColumnDef::new(Allocations::StateData).json().not_null())
                    .col(ColumnDef::new(Allocations::Shape).json().not_null())
                    .col(
                        ColumnDef::new(Allocations::ShapeLabel)
                            .string_len(100)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Allocations::DemandComputeMilli)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Allocations::DemandMemoryMib)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Allocations::DemandSlices)
                            .integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(Allocations::Priority)
                            .integer()
                            .not_null()
                            .default(0),
                    )
                    .col(
                        ColumnDef::new(Allocations::Purpose)
                            .string_len(500)
                            .not_null(),
                    )
                    .col(ColumnDef::new(Allocations::LeaseHours).integer().not_null())
                    .col(ts(Allocations::LeaseEndsAt, true))
                    .col(ColumnDef::new(Allocations::HostId).big_integer().null())
                    .col(ColumnDef::new(Allocations::Placement).json().null())
                    .col(ColumnDef::new(Allocations::Generation).big_integer().null())
                    .col(
                        ColumnDef::new(Allocations::MigDeviceUuid)
                            .string_len(100)
                            .null(),
                    )
                    .col(ts(Allocations::CreatedAt, false))
                    .col(ts(Allocations::PlacedAt, true))
                    .col(ts(Allocations::ActiveAt, true))
                    .col(ts(Allocations::EndedAt, true))
                    .col(ts(Allocations::UpdatedAt, false))
                    .foreign_key(
                        ForeignKey::create()
                            .from(Allocations::Table, Allocations::TenantId)
                            .to(Tenants::Table, Tenants::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(Allocations::Table, Allocations::HostId)
                            .to(Hosts::Table, Hosts::Id)
                            .on_delete(ForeignKeyAction::SetNull),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, col) in [
            ("allocations_state", Allocations::State),
            ("allocations_tenant", Allocations::TenantId),
            ("allocations_host", Allocations::HostId),
        ] {
            manager
                .create_index(
                    Index::create()
                        .name(name)
                        .table(Allocations::Table)
                        .col(col)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .create_table(
                Table::create()
                    .table(ApiTokens::Table)
                    .col(id_col(ApiTokens::Id))
                    .col(ColumnDef::new(ApiTokens::TenantId).big_integer().not_null())
                    .col(ColumnDef::new(ApiTokens::Name).string_len(100).not_null())
                    .col(
                        ColumnDef::new(ApiTokens::TokenHash)
                            .string_len(64)
                            .not_null()
                            .unique_key(),
                    )
                    .col(ColumnDef::new(ApiTokens::Prefix).string_len(16).not_null())
                    .col(
                        ColumnDef::new(ApiTokens::CreatedBy)
                            .string_len(300)
                            .not_null(),
                    )
                    .col(ts(ApiTokens::CreatedAt, false))
                    .col(ts(ApiTokens::LastUsedAt, true))
                    .col(ts(ApiTokens::RevokedAt, true))
                    .foreign_key(
                        ForeignKey::create()
                            .from(ApiTokens::Table, ApiTokens::TenantId)
                            .to(Tenants::Table, Tenants::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for t in [
            ApiTokens::Table.into_iden(),
            Allocations::Table.into_iden(),
            Quotas::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(t).to_owned())
                .await?;
        }
        for c in [Gpus::MigDevices.into_iden(), Gpus::ApplyError.into_iden()] {
            manager
                .alter_table(Table::alter().table(Gpus::Table).drop_column(c).to_owned())
                .await?;
        }
        for c in [
            Hosts::DesiredGeneration.into_iden(),
            Hosts::AppliedGeneration.into_iden(),
        ] {
            manager
                .alter_table(Table::alter().table(Hosts::Table).drop_column(c).to_owned())
                .await?;
        }
        Ok(())
    }
}
