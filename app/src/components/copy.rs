//! A button that copies a value to the clipboard.

use leptos::prelude::*;

/// "Copy" → "Copied" after a click: an island (the page around it may be
/// server-only).
#[cfg_attr(feature = "islands", island)]
#[cfg_attr(not(feature = "islands"), component)]
pub fn CopyButton(
    /// What to copy.
    text: String,
    /// Names the value for tests and screen readers.
    #[prop(into)]
    what: String,
) -> impl IntoView {
    crate::components::hydrated::island_hydrated();
    let (copied, set_copied) = signal(false);
    let label = format!("Copy {what}");
    view! {
        <button
            type="button"
            class="button ghost copy"
            data-test=format!("copy-{what}")
            aria-label=label
            on:click=move |_| {
                let _ = window().navigator().clipboard().write_text(&text);
                set_copied.set(true);
            }
        >
            {move || if copied.get() { "Copied ✓" } else { "Copy" }}
        </button>
    }
}
