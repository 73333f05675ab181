//! One module per page.

pub mod fleet;
pub mod home;
pub mod join_tokens;
pub mod not_found;
pub mod signed_out;
pub mod tenant;
