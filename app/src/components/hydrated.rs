//! When a page has become interactive: `body[data-hydrated]`, which the
//! browser tests wait for before they click.
//!
//! There is no `App` in the browser (only the islands hydrate) and lazy
//! islands load on their own, so every island counts itself in
//! `body[data-islands]` once its effects run, and the last one to do so sets
//! `data-hydrated` (a page without islands is marked by the frontend's entry
//! point).

use leptos::prelude::*;

/// The attribute the browser tests wait for.
pub const HYDRATED: &str = "data-hydrated";

/// Where the islands count themselves.
pub const ISLANDS: &str = "data-islands";

/// Counts the calling island as hydrated (in the browser; a no-op on the
/// server, where effects do not run). Every island calls it first thing.
pub fn island_hydrated() {
    Effect::new(|_| {
        let Some(body) = document().body() else {
            return;
        };
        let done = body
            .get_attribute(ISLANDS)
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(0)
            + 1;
        let _ = body.set_attribute(ISLANDS, &done.to_string());
        if done >= islands_on_page() {
            let _ = body.set_attribute(HYDRATED, "true");
        }
    });
}

/// How many islands the page has.
pub fn islands_on_page() -> u32 {
    document()
        .query_selector_all("leptos-island")
        .map(|all| all.length())
        .unwrap_or(0)
}
