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
        leptos::mount::hydrate_islands();
        // Lets tests see when the page has become interactive (the full app
        // says so from `App`).
        if let Some(body) = leptos::prelude::document().body() {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    }
    #[cfg(not(feature = "islands"))]
    leptos::mount::hydrate_body(tessera_app::App);
}
