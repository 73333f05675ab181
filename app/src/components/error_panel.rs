//! Shows an [`AppError`] and sets the page's HTTP status during server rendering.

use crate::error::AppError;
use leptos::prelude::*;

/// A card explaining the error; answers the request with the error's status.
#[component]
pub fn ErrorPanel(err: AppError) -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(opts) = use_context::<leptos_axum::ResponseOptions>() {
        if let Ok(status) = axum::http::StatusCode::from_u16(err.status) {
            opts.set_status(status);
        }
    }
    let title = match err.status {
        401 => "Sign-in required",
        403 => "Not allowed",
        404 => "Not found",
        400 => "Check your input",
        409 => "Conflict",
        _ => "Something went wrong",
    };
    view! {
        <div class="card error-card" data-test="error-panel" data-status=err.status.to_string()>
            <p class="eyebrow">{format!("Error {}", err.status)}</p>
            <h2>{title}</h2>
            <p data-test="error-message">{err.message.clone()}</p>
            <p><a class="button" href="/">"Back to home"</a></p>
        </div>
    }
}
