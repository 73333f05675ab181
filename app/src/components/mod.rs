//! Reusable pieces of the pages.

pub mod activity_chart;
pub mod allocation_state;
pub mod copy;
pub mod error_panel;
pub mod go;
pub mod host_filter;
pub mod hydrated;
pub mod layout;
pub mod live_region;
pub mod placement_why;
pub mod quota;
pub mod quota_offer;
pub mod quota_request;
pub mod right_sizing;
