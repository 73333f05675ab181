//! The browser entry point: hydrates the server-rendered pages (with the
//! `islands` feature, only their islands).

// Links the app, whose islands export their hydration functions.
#[cfg(feature = "islands")]
extern crate tessera_app;

/// Called by the generated JS once the WASM bundle has loaded.
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    #[cfg(feature = "islands")]
    {
        use tessera_app::components::hydrated::{islands_on_page, HYDRATED};
        leptos::mount::hydrate_islands();
        // Lets tests see when the page has become interactive: at once on a
        // page without islands, else when the last island has hydrated.
        if islands_on_page() == 0 {
            if let Some(body) = leptos::prelude::document().body() {
                let _ = body.set_attribute(HYDRATED, "true");
            }
        }
    }
    #[cfg(not(feature = "islands"))]
    leptos::mount::hydrate_body(tessera_app::App);
}
