//! The host filters (name, pool, status) and the pager, as the fleet page
//! and the insights' heat map both list hosts.

use leptos::prelude::*;
use leptos_router::params::ParamsMap;
use tessera_protocol::views::{FleetQuery, HostFilter, HOSTS_PER_PAGE};

/// The host filters in a page's query string (`?q=&pool=&status=&page=`).
pub fn host_query(params: &ParamsMap) -> FleetQuery {
    FleetQuery {
        q: params.get("q").unwrap_or_default(),
        pool: params.get("pool").unwrap_or_default(),
        status: params.get("status").unwrap_or_default(),
        page: params.get("page").unwrap_or_default(),
    }
}

/// Whether any filter is set.
pub fn filtered(q: &FleetQuery) -> bool {
    !(q.q.is_empty() && q.pool.is_empty() && q.status.is_empty())
}

/// What one page of the listing shows: "51–53 of 53 hosts matching · page
/// 2 of 2".
pub fn shown_text(q: &FleetQuery, matching: u32, page: u32, pages: u32, on_page: usize) -> String {
    let first = (page.max(1) - 1) * HOSTS_PER_PAGE + 1;
    format!(
        "{}–{} of {} host{}{} · page {page} of {pages}",
        first.min(matching),
        (first + u32::try_from(on_page).unwrap_or(0)).saturating_sub(1),
        matching,
        if matching == 1 { "" } else { "s" },
        if filtered(q) { " matching" } else { "" }
    )
}

/// The filter form: a GET to `action`, carrying `keep` (another query
/// parameter of the page, such as the insights' period) along; `flat`
/// inside another card.
#[component]
pub fn HostFilterForm(
    action: &'static str,
    q: FleetQuery,
    pools: Vec<String>,
    test: &'static str,
    #[prop(optional)] keep: Option<(&'static str, String)>,
    #[prop(optional)] flat: bool,
) -> impl IntoView {
    let clear = match &keep {
        Some((name, value)) => format!("{action}?{name}={value}"),
        None => action.to_owned(),
    };
    let is_filtered = filtered(&q);
    view! {
        <form class=if flat { "form-row" } else { "card form-row" } method="get" action=action role="search" data-test=test>
            {keep.map(|(name, value)| view! { <input type="hidden" name=name value=value/> })}
            <label class="field grow">
                <span>"Host name"</span>
                <input type="search" name="q" value=q.q.clone() maxlength="253" placeholder="gpu-node-17" data-test="filter-host"/>
            </label>
            <label class="field">
                <span>"Pool"</span>
                <select name="pool" data-test="filter-pool">
                    <option value="">"All"</option>
                    {pools.into_iter().map(|name| {
                        let selected = name == q.pool;
                        view! { <option value=name.clone() selected=selected>{name.clone()}</option> }
                    }).collect_view()}
                </select>
            </label>
            <label class="field">
                <span>"Status"</span>
                <select name="status" data-test="filter-status">
                    <option value="">"All"</option>
                    {HostFilter::ALL.into_iter().map(|status| {
                        let selected = status.as_str() == q.status;
                        view! { <option value=status.as_str() selected=selected>{status.label()}</option> }
                    }).collect_view()}
                </select>
            </label>
            <button class="button primary" type="submit" data-test="filter-apply">"Filter"</button>
            {is_filtered.then(|| view! { <a class="button ghost" href=clear data-test="filter-clear">"Clear"</a> })}
        </form>
    }
}

/// Previous and next page links (none on a single page); `test` names
/// them (`{test}-prev`, `{test}-next`).
#[component]
pub fn HostPager(prev: Option<String>, next: Option<String>, test: &'static str) -> impl IntoView {
    (prev.is_some() || next.is_some()).then(|| {
        view! {
            <nav class="pager" aria-label="Pages of hosts">
                {prev.map(|h| view! { <a class="button ghost" href=h data-test=format!("{test}-prev")>"← Previous"</a> })}
                {next.map(|h| view! { <a class="button ghost" href=h data-test=format!("{test}-next")>"Next →"</a> })}
            </nav>
        }
    })
}
