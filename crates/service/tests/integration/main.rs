//! The service's integration tests, one binary: the use-cases against a
//! real database (SQLite by default; PostgreSQL when
//! `TESSERA_TEST_POSTGRES_URL` is set), each module one area.

mod allocations;
mod budgets;
mod common;
mod fleet_ops;
mod kubernetes;
mod ledger;
mod people;
mod policy;
mod quotas;
mod rightsizing;
mod service;
mod usage;
