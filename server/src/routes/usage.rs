//! `/api/v1/usage` (and its FOCUS CSV), `/api/v1/prices`, `/api/v1/ledger`
//! and `/api/v1/budgets`: allocated GPU-hours and cost per period, the
//! prices behind them, the fleet ledger, and budgets. Signed-in
//! people: a tenant's members see their tenant's usage, platform admins
//! everyone's; platform admins set prices.

use super::extract::{JsonBody, PathParams, QueryParams};
use super::openapi::{BadRequest, Conflict, Forbidden, NotFound, Unauthorized};
use crate::auth::extract::Person;
use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use tessera_protocol::views::{
    BudgetDecision, BudgetQuery, BudgetRequestView, BudgetView, LedgerQuery, LedgerReport,
    NewBudget, NewBudgetRequest, NewPrice, PriceView, StatementQuery, StatementView, UsageQuery,
    UsageReport,
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

/// Monthly budgets with this month's spend and forecast: all of them
/// (platform admins), or a tenant's and its cost centre's (`tenant`, for
/// its members).
#[utoipa::path(
    get, path = "/budgets", tag = "usage",
    params(BudgetQuery),
    responses((status = 200, description = "Budgets", body = Vec<BudgetView>),
              BadRequest, Unauthorized, NotFound),
    security(("session" = [])),
)]
pub async fn list_budgets(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<BudgetQuery>,
    Person(p): Person,
) -> Result<Json<Vec<BudgetView>>, ApiError> {
    Ok(Json(state.service.budgets(&p, &q).await?))
}

/// Sets the monthly budget of a tenant (its tenant admins or platform
/// admins) or a cost centre (platform admins). Only platform admins make
/// a budget block requests once spent, and change one that does.
#[utoipa::path(
    put, path = "/budgets", tag = "usage",
    request_body = NewBudget,
    responses((status = 200, description = "The budget", body = BudgetView),
              BadRequest, Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn set_budget(
    State(state): State<AppState>,
    Person(p): Person,
    JsonBody(new): JsonBody<NewBudget>,
) -> Result<Json<BudgetView>, ApiError> {
    Ok(Json(state.service.set_budget(&p, &new).await?))
}

/// Removes a budget.
#[utoipa::path(
    delete, path = "/budgets/{id}", tag = "usage",
    params(("id" = i64, Path, description = "Budget id")),
    responses((status = 204, description = "Removed"), Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn delete_budget(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(id): PathParams<i64>,
) -> Result<StatusCode, ApiError> {
    state.service.delete_budget(&p, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A month's statement of a tenant (its members, platform admins) or a
/// cost centre (platform admins): each tenant's direct cost and overhead
/// share per pool, the recovery policies and prices used, the budgets, and
/// a tenant's slices.
#[utoipa::path(
    get, path = "/statements", tag = "usage",
    params(StatementQuery),
    responses((status = 200, description = "The statement", body = StatementView),
              BadRequest, Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn get_statement(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<StatementQuery>,
    Person(p): Person,
) -> Result<Json<StatementView>, ApiError> {
    Ok(Json(state.service.statement(&p, &q).await?))
}

/// The same statement as CSV.
#[utoipa::path(
    get, path = "/statements.csv", tag = "usage",
    params(StatementQuery),
    responses((status = 200, description = "Statement CSV", content_type = "text/csv", body = String),
              BadRequest, Unauthorized, Forbidden, NotFound),
    security(("session" = [])),
)]
pub async fn get_statement_csv(
    State(state): State<AppState>,
    QueryParams(q): QueryParams<StatementQuery>,
    Person(p): Person,
) -> Result<impl IntoResponse, ApiError> {
    let body = state.service.statement_csv(&p, &q).await?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (
                header::CONTENT_DISPOSITION,
                "attachment; filename=\"tessera-statement.csv\"",
            ),
        ],
        body,
    ))
}

/// Asks the platform admins for a larger budget (the tenant's admins; one
/// request waits per budget).
#[utoipa::path(
    post, path = "/budgets/{id}/requests", tag = "usage",
    params(("id" = i64, Path, description = "Budget id")),
    request_body = NewBudgetRequest,
    responses((status = 200, description = "The request", body = BudgetRequestView),
              BadRequest, Unauthorized, Forbidden, NotFound, Conflict),
    security(("session" = [])),
)]
pub async fn request_budget(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(id): PathParams<i64>,
    JsonBody(new): JsonBody<NewBudgetRequest>,
) -> Result<Json<BudgetRequestView>, ApiError> {
    Ok(Json(state.service.request_budget(&p, id, &new).await?))
}

/// Approves (the budget becomes the amount asked for) or rejects a budget
/// request (platform admins other than the one who asked).
#[utoipa::path(
    post, path = "/budget-requests/{id}/decision", tag = "usage",
    params(("id" = i64, Path, description = "Budget request id")),
    request_body = BudgetDecision,
    responses((status = 200, description = "The decided request", body = BudgetRequestView),
              BadRequest, Unauthorized, Forbidden, NotFound, Conflict),
    security(("session" = [])),
)]
pub async fn decide_budget_request(
    State(state): State<AppState>,
    Person(p): Person,
    PathParams(id): PathParams<i64>,
    JsonBody(d): JsonBody<BudgetDecision>,
) -> Result<Json<BudgetRequestView>, ApiError> {
    let admin = p.require_platform_admin()?;
    Ok(Json(
        state.service.decide_budget_request(&admin, id, &d).await?,
    ))
}
