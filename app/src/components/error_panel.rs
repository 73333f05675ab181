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
    let title = tessera_protocol::views::error_title(err.status);
    view! {
        <div class="card error-card" data-test="error-panel" data-status=err.status.to_string()>
            <p class="eyebrow">{format!("Error {}", err.status)}</p>
            <h2>{title}</h2>
            <p data-test="error-message">{sentence(&err.message)}</p>
            {if err.status == 401 {
                // The session ended (timeout or the periodic re-check of
                // roles): signing in again goes through the IdP.
                view! { <p><a class="button primary" href="/auth/login" rel="external" data-test="sign-in-again">"Sign in again"</a></p> }.into_any()
            } else {
                view! { <p><a class="button" href="/">"Back to home"</a></p> }.into_any()
            }}
        </div>
    }
}

/// A refused or failed form submission, under the form.
#[component]
pub fn FormError(err: AppError) -> impl IntoView {
    view! {
        <p class="callout danger" role="alert" data-test="form-error" data-code=err.code.as_str() data-status=err.status.to_string()>
            {sentence(&err.message)}
        </p>
    }
}

/// Capitalises the first letter: service messages are written to be composed
/// ("field: message"), the panel shows them as a sentence.
fn sentence(message: &str) -> String {
    let mut chars = message.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sentences_start_with_a_capital() {
        assert_eq!(
            super::sentence("this page is for admins"),
            "This page is for admins"
        );
        assert_eq!(super::sentence(""), "");
    }
}
