//! The browser entry point: hydrates the islands of the server-rendered
//! pages.

// Links the app, whose islands export their hydration functions.
extern crate tessera_app;

use tessera_app::components::hydrated::{islands_on_page, HYDRATED};

/// Called by the generated JS once the WASM bundle has loaded.
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_islands();
    // Lets tests see when the page has become interactive: at once on a page
    // without islands, else when the last island has hydrated.
    if islands_on_page() == 0 {
        if let Some(body) = leptos::prelude::document().body() {
            let _ = body.set_attribute(HYDRATED, "true");
        }
    }
}
