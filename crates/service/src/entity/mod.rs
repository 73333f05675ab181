//! sea-orm entities, one per table (mirrors `migrations`).

pub mod admission_refusal;
pub mod allocation;
pub mod api_token;
pub mod audit_chain;
pub mod audit_event;
pub mod budget;
pub mod budget_alert;
pub mod budget_request;
pub mod gpu;
pub mod gpu_condition;
pub mod gpu_rollup;
pub mod gpu_rollup_pending;
pub mod gpu_sample;
pub mod host;
pub mod join_token;
pub mod membership;
pub mod notification;
pub mod pool;
pub mod price;
pub mod quota;
pub mod quota_grant;
pub mod quota_request;
pub mod tenant;
pub mod user;
pub mod webhook;
pub mod webhook_delivery;
