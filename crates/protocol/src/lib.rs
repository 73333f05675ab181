//! Wire types shared by the server, the agent and the browser.
//!
//! `agent` is the agent API (`/api/agent/v1/...`); `views` are the read models the
//! pages render. Nothing here knows about the database.

pub mod agent;
pub mod quotas;
pub mod views;

#[cfg(test)]
mod wire_tests;
