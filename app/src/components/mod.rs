//! Reusable pieces of the pages.

pub mod error_panel;
pub mod layout;
