//! Opening another page from an event handler or an effect.

/// A function that opens `path` by loading the page: islands hydrate outside
/// any router, so there is no client-side navigation to ask.
pub fn navigator() -> impl Fn(&str) + Clone {
    |path: &str| {
        let _ = leptos::prelude::window().location().set_href(path);
    }
}
