//! A button that copies a value to the clipboard.

use leptos::prelude::*;

/// "Copy" → "Copied" once a click has copied `text`. Not an island of its own: it is only
/// used inside islands (the allocation's connection details, the webhook
/// secret), and an island inside an island renders differently on the
/// server than where it hydrates.
#[component]
pub fn CopyButton(
    /// What to copy.
    text: String,
    /// Names the value for tests and screen readers.
    #[prop(into)]
    what: String,
) -> impl IntoView {
    let (copied, set_copied) = signal(false);
    let label = format!("Copy {what}");
    view! {
        <button
            type="button"
            class="button ghost copy"
            data-test=format!("copy-{what}")
            aria-label=label
            on:click=move |_| {
                // "Copied" once the browser says so (it may refuse).
                let write = window().navigator().clipboard().write_text(&text);
                leptos::task::spawn_local(async move {
                    if wasm_bindgen_futures::JsFuture::from(write).await.is_ok() {
                        set_copied.set(true);
                    }
                });
            }
        >
            {move || if copied.get() { "Copied ✓" } else { "Copy" }}
        </button>
    }
}
