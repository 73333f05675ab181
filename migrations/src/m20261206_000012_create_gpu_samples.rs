//! GPU telemetry: raw samples from the agents (kept a short window), their
//! per-minute and per-hour rollups (kept long), and per host the time of
//! the last round stored, which makes ingest idempotent.
//!
//! Times are integer milliseconds since the epoch: samples arrive by the
//! hundred per second, are aggregated by integer division into minutes and
//! hours, and metering multiplies them exactly.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum GpuSamples {
    Table,
    Id,
    HostId,
    AtMs,
    GpuUuid,
    DeviceUuid,
    AllocationId,
    WeightMilli,
    UtilPct,
    MemUsedMib,
    PowerMw,
    TempC,
    SmClockMhz,
    CoveredMs,
    Rolled,
    HourRolled,
}

#[derive(DeriveIden)]
enum GpuRollups {
    Table,
    Id,
    PeriodMs,
    StartMs,
    HostId,
    DeviceUuid,
    AllocationId,
    Samples,
    UtilMin,
    UtilAvg,
    UtilMax,
    UtilP95,
    BusyMs,
    CoveredMs,
    UsedMilliMs,
    MemMaxMib,
}

#[derive(DeriveIden)]
enum Hosts {
    Table,
    TelemetryLastAtMs,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(GpuSamples::Table)
                    .col(
                        ColumnDef::new(GpuSamples::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(ColumnDef::new(GpuSamples::HostId).big_integer().not_null())
                    .col(ColumnDef::new(GpuSamples::AtMs).big_integer().not_null())
                    .col(
                        ColumnDef::new(GpuSamples::GpuUuid)
                            .string_len(96)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(GpuSamples::DeviceUuid)
                            .string_len(96)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(GpuSamples::AllocationId)
                            .big_integer()
                            .null(),
                    )
                    .col(
                        ColumnDef::new(GpuSamples::WeightMilli)
                            .integer()
                            .not_null()
                            .default(0),
                    )
                    .col(ColumnDef::new(GpuSamples::UtilPct).small_integer().null())
                    .col(
                        ColumnDef::new(GpuSamples::MemUsedMib)
                            .big_integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(GpuSamples::PowerMw).integer().null())
                    .col(ColumnDef::new(GpuSamples::TempC).integer().null())
                    .col(ColumnDef::new(GpuSamples::SmClockMhz).integer().null())
                    .col(ColumnDef::new(GpuSamples::CoveredMs).integer().not_null())
                    .col(
                        ColumnDef::new(GpuSamples::Rolled)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .col(
                        ColumnDef::new(GpuSamples::HourRolled)
                            .boolean()
                            .not_null()
                            .default(false),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, cols) in [
            (
                "gpu_samples_device_at",
                vec![GpuSamples::DeviceUuid, GpuSamples::AtMs],
            ),
            (
                "gpu_samples_rolled",
                vec![GpuSamples::Rolled, GpuSamples::AtMs],
            ),
            (
                "gpu_samples_hour_rolled",
                vec![GpuSamples::HourRolled, GpuSamples::AtMs],
            ),
            ("gpu_samples_at", vec![GpuSamples::AtMs]),
        ] {
            let mut index = Index::create();
            index.name(name).table(GpuSamples::Table);
            for c in cols {
                index.col(c);
            }
            manager.create_index(index.to_owned()).await?;
        }

        manager
            .create_table(
                Table::create()
                    .table(GpuRollups::Table)
                    .col(
                        ColumnDef::new(GpuRollups::Id)
                            .big_integer()
                            .not_null()
                            .auto_increment()
                            .primary_key(),
                    )
                    .col(
                        ColumnDef::new(GpuRollups::PeriodMs)
                            .big_integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(GpuRollups::StartMs).big_integer().not_null())
                    .col(ColumnDef::new(GpuRollups::HostId).big_integer().not_null())
                    .col(
                        ColumnDef::new(GpuRollups::DeviceUuid)
                            .string_len(96)
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(GpuRollups::AllocationId)
                            .big_integer()
                            .null(),
                    )
                    .col(ColumnDef::new(GpuRollups::Samples).integer().not_null())
                    .col(
                        ColumnDef::new(GpuRollups::UtilMin)
                            .small_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(GpuRollups::UtilAvg)
                            .small_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(GpuRollups::UtilMax)
                            .small_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(GpuRollups::UtilP95)
                            .small_integer()
                            .not_null(),
                    )
                    .col(ColumnDef::new(GpuRollups::BusyMs).big_integer().not_null())
                    .col(
                        ColumnDef::new(GpuRollups::CoveredMs)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(GpuRollups::UsedMilliMs)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(GpuRollups::MemMaxMib)
                            .big_integer()
                            .not_null(),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, cols) in [
            (
                "gpu_rollups_device_period_start",
                vec![
                    GpuRollups::DeviceUuid,
                    GpuRollups::PeriodMs,
                    GpuRollups::StartMs,
                ],
            ),
            (
                "gpu_rollups_allocation_period_start",
                vec![
                    GpuRollups::AllocationId,
                    GpuRollups::PeriodMs,
                    GpuRollups::StartMs,
                ],
            ),
            (
                "gpu_rollups_period_start",
                vec![GpuRollups::PeriodMs, GpuRollups::StartMs],
            ),
        ] {
            let mut index = Index::create();
            index.name(name).table(GpuRollups::Table);
            for c in cols {
                index.col(c);
            }
            manager.create_index(index.to_owned()).await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(Hosts::Table)
                    .add_column(
                        ColumnDef::new(Hosts::TelemetryLastAtMs)
                            .big_integer()
                            .null(),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Hosts::Table)
                    .drop_column(Hosts::TelemetryLastAtMs)
                    .to_owned(),
            )
            .await?;
        manager
            .drop_table(Table::drop().table(GpuRollups::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(GpuSamples::Table).to_owned())
            .await
    }
}
