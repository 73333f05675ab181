//! 404.

use crate::components::error_panel::ErrorPanel;
use crate::error::AppError;
use leptos::prelude::*;
use leptos_meta::Title;

/// Shown for paths no route matches.
#[component]
pub fn NotFound() -> impl IntoView {
    view! {
        <Title text="Not found"/>
        <ErrorPanel err=AppError { status: 404, code: crate::error::ErrorCode::NotFound, message: "There is no page at this address.".into() }/>
    }
}
