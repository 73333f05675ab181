//! Wire types shared by the server, the agent and the browser.
//!
//! `agent` is the agent API (`/api/agent/v1/...`); `views` are the read models
//! the pages render; `requests` and `quotas` hold what the forms and the REST
//! API take; `query` parses and writes pages' query strings and holds the
//! URL encoder. Nothing here knows about the database.

pub mod agent;
pub mod query;
pub mod quotas;
pub mod requests;
pub mod timestamp;
pub mod views;

#[cfg(test)]
mod wire_tests;
