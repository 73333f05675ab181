//! Tessera's schema history. Each migration has `up` and `down`; the server applies
//! pending ones at start.

pub use sea_orm_migration::prelude::*;

mod alter;

mod m20261129_000001_create_identity;
mod m20261129_000002_create_fleet;
mod m20261129_000003_add_gpu_sharing;
mod m20261129_000004_create_allocations;
mod m20261130_000005_create_quota_requests;
mod m20261201_000006_add_join_token_for_host;
mod m20261201_000007_add_api_token_expiry;
mod m20261202_000008_add_allocation_priority_class;
mod m20261203_000009_add_fleet_operations;
mod m20261204_000010_pools_and_tenants_in_database;
mod m20261205_000011_create_prices;
mod m20261206_000012_create_gpu_samples;
mod m20261207_000013_create_admission_refusals;
mod m20261208_000014_add_idle_reclaim;
mod m20261209_000015_add_qos_and_preemption;
mod m20261210_000016_add_host_report_digest;
mod m20261211_000017_add_pool_capacity_epoch;
mod m20261212_000018_pending_rollups;
mod m20261213_000019_allocation_indexes;
mod m20261214_000020_add_processes_stopped;
mod m20261215_000021_people_and_token_creators;
mod m20261216_000022_audit_chain;
mod m20261217_000023_token_scopes_and_audit_retention;
mod m20261218_000024_webhook_failure_detail;
mod m20261219_000025_tenant_namespaces;
mod m20261220_000026_create_gpu_conditions;
mod m20261221_000027_budgets_and_recovery;
mod m20261222_000028_allocation_replaces;

/// All migrations, oldest first.
pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261129_000001_create_identity::Migration),
            Box::new(m20261129_000002_create_fleet::Migration),
            Box::new(m20261129_000003_add_gpu_sharing::Migration),
            Box::new(m20261129_000004_create_allocations::Migration),
            Box::new(m20261130_000005_create_quota_requests::Migration),
            Box::new(m20261201_000006_add_join_token_for_host::Migration),
            Box::new(m20261201_000007_add_api_token_expiry::Migration),
            Box::new(m20261202_000008_add_allocation_priority_class::Migration),
            Box::new(m20261203_000009_add_fleet_operations::Migration),
            Box::new(m20261204_000010_pools_and_tenants_in_database::Migration),
            Box::new(m20261205_000011_create_prices::Migration),
            Box::new(m20261206_000012_create_gpu_samples::Migration),
            Box::new(m20261207_000013_create_admission_refusals::Migration),
            Box::new(m20261208_000014_add_idle_reclaim::Migration),
            Box::new(m20261209_000015_add_qos_and_preemption::Migration),
            Box::new(m20261210_000016_add_host_report_digest::Migration),
            Box::new(m20261211_000017_add_pool_capacity_epoch::Migration),
            Box::new(m20261212_000018_pending_rollups::Migration),
            Box::new(m20261213_000019_allocation_indexes::Migration),
            Box::new(m20261214_000020_add_processes_stopped::Migration),
            Box::new(m20261215_000021_people_and_token_creators::Migration),
            Box::new(m20261216_000022_audit_chain::Migration),
            Box::new(m20261217_000023_token_scopes_and_audit_retention::Migration),
            Box::new(m20261218_000024_webhook_failure_detail::Migration),
            Box::new(m20261219_000025_tenant_namespaces::Migration),
            Box::new(m20261220_000026_create_gpu_conditions::Migration),
            Box::new(m20261221_000027_budgets_and_recovery::Migration),
            Box::new(m20261222_000028_allocation_replaces::Migration),
        ]
    }
}
