//! Opening another page from an event handler or an effect.

/// A function that opens `path`: through the router in the fully hydrated
/// app; with the `islands` feature, where islands hydrate outside any
/// router, by loading the page.
pub fn navigator() -> impl Fn(&str) + Clone {
    #[cfg(not(feature = "islands"))]
    {
        let navigate = leptos_router::hooks::use_navigate();
        move |path: &str| navigate(path, Default::default())
    }
    #[cfg(feature = "islands")]
    {
        |path: &str| {
            let _ = leptos::prelude::window().location().set_href(path);
        }
    }
}
