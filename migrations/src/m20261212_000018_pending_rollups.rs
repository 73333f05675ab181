//! Which rollups are due, as rows of their own (`gpu_rollup_pending`: one per
//! device and minute, or device and hour), instead of two flags on every raw
//! sample. Storing a telemetry batch marks its minutes due; rolling a minute
//! up marks its hour due. Each sample is then written once, not once and
//! updated twice (each update touching every index of the table).
//!
//! Samples not yet counted when this runs have their minutes (and hours)
//! marked due here.

use sea_orm_migration::prelude::*;

#[derive(DeriveIden, Clone, Copy)]
enum GpuRollupPending {
    Table,
    PeriodMs,
    DeviceUuid,
    StartMs,
    Marks,
}

#[derive(DeriveIden, Clone, Copy)]
enum GpuSamples {
    Table,
    Rolled,
    HourRolled,
}

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(GpuRollupPending::Table)
                    .col(
                        ColumnDef::new(GpuRollupPending::PeriodMs)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(GpuRollupPending::DeviceUuid)
                            .string()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(GpuRollupPending::StartMs)
                            .big_integer()
                            .not_null(),
                    )
                    .col(
                        ColumnDef::new(GpuRollupPending::Marks)
                            .big_integer()
                            .not_null()
                            .default(1),
                    )
                    .primary_key(
                        Index::create()
                            .col(GpuRollupPending::PeriodMs)
                            .col(GpuRollupPending::DeviceUuid)
                            .col(GpuRollupPending::StartMs),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("gpu_rollup_pending_due")
                    .table(GpuRollupPending::Table)
                    .col(GpuRollupPending::PeriodMs)
                    .col(GpuRollupPending::StartMs)
                    .to_owned(),
            )
            .await?;
        // What the flags said was not counted yet (start = at - at mod period;
        // `at_ms` is never negative).
        let db = manager.get_connection();
        for (period, flag) in [(60_000_i64, "rolled"), (3_600_000, "hour_rolled")] {
            db.execute_unprepared(&format!(
                "INSERT INTO gpu_rollup_pending (period_ms, device_uuid, start_ms, marks) \
                 SELECT {period}, device_uuid, at_ms - (at_ms % {period}), 1 FROM gpu_samples \
                 WHERE {flag} = false GROUP BY device_uuid, at_ms - (at_ms % {period})"
            ))
            .await?;
        }
        for index in ["gpu_samples_rolled", "gpu_samples_hour_rolled"] {
            manager
                .drop_index(
                    Index::drop()
                        .name(index)
                        .table(GpuSamples::Table)
                        .to_owned(),
                )
                .await?;
        }
        crate::alter::drop_columns(
            manager,
            GpuSamples::Table,
            [GpuSamples::Rolled, GpuSamples::HourRolled],
        )
        .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Back to flags: everything counted except what is still due.
        let flag = |c: GpuSamples| {
            ColumnDef::new(c)
                .boolean()
                .not_null()
                .default(true)
                .to_owned()
        };
        crate::alter::add_columns(
            manager,
            GpuSamples::Table,
            vec![flag(GpuSamples::Rolled), flag(GpuSamples::HourRolled)],
        )
        .await?;
        let db = manager.get_connection();
        for (period, flag) in [(60_000_i64, "rolled"), (3_600_000, "hour_rolled")] {
            db.execute_unprepared(&format!(
                "UPDATE gpu_samples SET {flag} = false WHERE EXISTS (SELECT 1 FROM gpu_rollup_pending p \
                 WHERE p.period_ms = {period} AND p.device_uuid = gpu_samples.device_uuid \
                 AND p.start_ms = gpu_samples.at_ms - (gpu_samples.at_ms % {period}))"
            ))
            .await?;
        }
        for (name, col) in [
            ("gpu_samples_rolled", GpuSamples::Rolled),
            ("gpu_samples_hour_rolled", GpuSamples::HourRolled),
        ] {
            manager
                .create_index(
                    Index::create()
                        .name(name)
                        .table(GpuSamples::Table)
                        .col(col)
                        .col(Alias::new("at_ms"))
                        .to_owned(),
                )
                .await?;
        }
        manager
            .drop_table(Table::drop().table(GpuRollupPending::Table).to_owned())
            .await
    }
}
