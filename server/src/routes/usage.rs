//! `/api/v1/usage` (and its FOCUS CSV) and `/api/v1/prices`: allocated
//! GPU-hours and cost per period, and the prices behind them. Signed-in
//! people: a tenant's members see their tenant's usage, platform admins
//! everyone's; platform admins set prices.

use super::extract::{JsonBody, QueryParams};
use super::openapi::{BadRequest, Conflict, Forbidden, NotFound, Unauthorized};
use crate::auth::extract::Person;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use tessera_protocol::views::{
    LedgerQuery, LedgerReport, NewPrice, PriceView, UsageQuery, UsageReport,
};

/// Allocated GPU-hours, memory GiB-hours and cost per month, grouped by
/// tenant (default), cost centre, pool or slice.
#[utoipa::path(
    get, path = "/usage", tag = "usage",
    params(UsageQuery),
    responses((status = 200, description = "The report", body = UsageReport),
              BadRequest, Unauthorized, NotFound),
    security(("session" = [])),
)]
pub async fn get_usage(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<UsageQuery>,
    Person(p): Person,
) -> Result<Json<UsageReport>, ApiError> {
    Ok(Json(state.service.usage_report(&p, &q).await?))
}

/// The same period's charges as CSV in the FinOps FOCUS layout (one row
/// per slice, month and price).
#[utoipa::path(
    get, path = "/usage.csv", tag = "usage",
    params(UsageQuery),
    responses((status = 200, description = "FOCUS CSV", content_type = "text/csv", body = String),
              BadRequest, Unauthorized, NotFound),
    security(("session" = [])),
)]
pub async fn get_usage_csv(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<UsageQuery>,
    Person(p): Person,
) -> Result<impl IntoResponse, ApiError> {
    let body = state.service.usage_focus_csv(&p, &q).await?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"tessera-usage-focus.csv\"",
            ),
        ],
        body,
    ))
}

/// Every pool's prices, newest first.
#[utoipa::path(
    get, path = "/prices", tag = "usage",
    responses((status = 200, description = "Prices", body = Vec<PriceView>), Unauthorized),
    security(("session" = [])),
)]
pub async fn list_prices(
    State(state): State<AppState>,
    Person(p): Person,
) -> Result<Json<Vec<PriceView>>, ApiError> {
    Ok(Json(state.service.prices(&p).await?))
}

/// Sets a pool's price from now or a later moment; use before then keeps
/// the price it had (platform admins).
#[utoipa::path(
    post, path = "/prices", tag = "usage",
    request_body = NewPrice,
    responses((status = 200, description = "The new price", body = PriceView),
              BadRequest, Unauthorized, Forbidden, Conflict),
    security(("session" = [])),
)]
pub async fn set_price(
    State(state): State<AppState>,
    Person(p): Person,
    JsonBody(new): JsonBody<NewPrice>,
) -> Result<Json<PriceView>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.set_price(&admin, &new).await?))
}

/// The fleet ledger: every GPU-hour of the period, held by tenants (by
/// their slices' shares) or free: unallocated, stranded, draining,
/// maintenance, unhealthy or silent; per step and pool, model or host.
/// The buckets add up to the GPUs' recorded hours (`balanced`). Platform
/// admins.
#[utoipa::path(
    get, path = "/ledger", tag = "usage",
    params(LedgerQuery),
    responses((status = 200, description = "The ledger", body = LedgerReport),
              BadRequest, Unauthorized, Forbidden),
    security(("session" = [])),
)]
pub async fn get_ledger(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<LedgerQuery>,
    Person(p): Person,
) -> Result<Json<LedgerReport>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(state.service.ledger(&admin, &q).await?))
}
