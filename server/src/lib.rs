//! Tessera's server: configuration, sign-in, the agent API and the pages, wired
//! into one axum app.
#![recursion_limit = "256"]

pub mod app;
pub mod auth;
pub mod bundle;
pub mod config;
pub mod error;
pub mod routes;
pub mod security;
pub mod state;
pub mod webhooks;
