//! HTTP handlers other than pages, by area.

pub mod agent;
pub mod allocations;
pub mod audit;
pub mod extract;
pub mod fleet;
pub mod health;
pub mod kubernetes;
pub mod list_bodies;
pub mod metrics;
pub mod openapi;
pub mod people;
pub mod policy;
pub mod quotas;
pub mod rightsizing;
pub mod usage;
