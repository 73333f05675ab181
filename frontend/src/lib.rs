//! The browser entry point: hydrates the server-rendered pages.

/// Called by the generated JS once the WASM bundle has loaded.
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(tessera_app::App);
}
