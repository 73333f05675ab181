//! A server-rendered part of a page that stays current while the page is
//! open: the page is fetched again every so often and the part swapped in,
//! so the part itself needs no WASM (no views, no data types in the
//! bundle), only this small island. Forms in it are plain forms that post
//! and come back to the page.

use leptos::prelude::*;

/// Reloads the element with id `region` from the server every `every_ms`
/// milliseconds, except while a form field in it has the focus (a filter
/// being typed into) or an element matching `hold` is on the page (an open
/// form), so what is being typed or chosen stays. Renders nothing.
#[island]
pub fn LiveRegion(
    /// The id of the element to keep current.
    region: String,
    /// How often, in milliseconds.
    every_ms: u64,
    /// A CSS selector: while it matches, the region is left alone.
    #[prop(optional, into)]
    hold: Option<String>,
) -> impl IntoView {
    crate::components::hydrated::island_hydrated();
    // Effects run only in the browser.
    Effect::new(move |_| {
        let (region, hold) = (region.clone(), hold.clone());
        let busy = RwSignal::new(false);
        let tick = move || {
            let held = hold
                .as_deref()
                .is_some_and(|hold| document().query_selector(hold).ok().flatten().is_some())
                || focused_in(&region);
            if held || busy.get_untracked() {
                return;
            }
            busy.set(true);
            let region = region.clone();
            leptos::task::spawn_local(async move {
                let _ = refresh(&region).await;
                busy.set(false);
            });
        };
        if let Ok(handle) =
            set_interval_with_handle(tick, std::time::Duration::from_millis(every_ms))
        {
            on_cleanup(move || handle.clear());
        }
    });
}

/// Whether a form field inside `region` has the focus.
fn focused_in(region: &str) -> bool {
    let doc = document();
    match (doc.get_element_by_id(region), doc.active_element()) {
        (Some(region), Some(active)) => {
            matches!(active.tag_name().as_str(), "INPUT" | "SELECT" | "TEXTAREA")
                && region.contains(Some(&active))
        }
        _ => false,
    }
}

/// Fetches this page again and swaps in its element `region`. A failed or
/// refused fetch (offline, signed out) leaves the page as it is.
async fn refresh(region: &str) -> Result<(), wasm_bindgen::JsValue> {
    use wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;
    let href = window().location().href()?;
    let response: web_sys::Response = JsFuture::from(window().fetch_with_str(&href))
        .await?
        .dyn_into()?;
    if !response.ok() || response.redirected() {
        return Ok(());
    }
    let html = JsFuture::from(response.text()?)
        .await?
        .as_string()
        .unwrap_or_default();
    // A template parses the page without running its scripts.
    let template: web_sys::HtmlTemplateElement =
        document().create_element("template")?.dyn_into()?;
    template.set_inner_html(&html);
    if let (Some(fresh), Some(shown)) = (
        template.content().get_element_by_id(region),
        document().get_element_by_id(region),
    ) {
        shown.set_inner_html(&fresh.inner_html());
    }
    Ok(())
}
