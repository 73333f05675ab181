//! Server functions of budgets and monthly statements.

use super::*;

/// A tenant's budget page: its statement for a month and what the viewer
/// may change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BudgetPageData {
    /// The month's statement (with the budgets that cover the tenant).
    pub statement: tessera_protocol::views::StatementView,
    /// The viewer is one of the tenant's admins.
    pub tenant_admin: bool,
    /// The viewer is a platform admin.
    pub platform_admin: bool,
}

/// The statement of a tenant or cost centre for a month (`""`: this one).
#[server(prefix = "/api/ui", endpoint = "get_statement")]
pub async fn get_statement(
    #[server(default)] tenant: String,
    #[server(default)] cost_centre: String,
    #[server(default)] month: String,
) -> Result<BudgetPageData, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    let q = tessera_protocol::views::StatementQuery {
        tenant: (!tenant.is_empty()).then_some(tenant.clone()),
        cost_centre: (!cost_centre.is_empty()).then_some(cost_centre),
        month: (!month.is_empty()).then_some(month),
    };
    let statement = service.statement(who, &q).await?;
    let tenant_admin = who.memberships().iter().any(|(_, m)| {
        m.slug == tenant && m.role == tessera_protocol::views::TenantRole::TenantAdmin
    });
    Ok(BudgetPageData {
        statement,
        tenant_admin,
        platform_admin: who.is_platform_admin(),
    })
}

/// Every budget (platform admins).
#[server(prefix = "/api/ui", endpoint = "list_budgets")]
pub async fn list_budgets() -> Result<Vec<tessera_protocol::views::BudgetView>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    Ok(service
        .budgets(who, &tessera_protocol::views::BudgetQuery::default())
        .await?)
}

/// Sets a tenant's or cost centre's monthly budget. `block` is a
/// checkbox's `on`; `block_shown` says the form had the checkbox (only
/// platform admins see it), so a tenant admin's form leaves it as it is.
#[server(prefix = "/api/ui", endpoint = "set_budget")]
pub async fn set_budget(
    #[server(default)] tenant: String,
    #[server(default)] cost_centre: String,
    amount: String,
    currency: String,
    #[server(default)] block: String,
    #[server(default)] block_shown: String,
) -> Result<(), AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    let new = tessera_protocol::views::NewBudget {
        tenant: (!tenant.trim().is_empty()).then(|| tenant.trim().to_owned()),
        cost_centre: (!cost_centre.trim().is_empty()).then(|| cost_centre.trim().to_owned()),
        amount,
        currency,
        block_when_exceeded: (!block_shown.is_empty()).then_some(!block.is_empty()),
    };
    service.set_budget(who, &new).await?;
    Ok(())
}

/// Removes a budget.
#[server(prefix = "/api/ui", endpoint = "delete_budget")]
pub async fn delete_budget(id: i64) -> Result<(), AppError> {
    let (service, viewer) = ssr::ctx().await?;
    service.delete_budget(viewer.require()?, id).await?;
    Ok(())
}

/// Asks the platform admins for a larger budget (tenant admins).
#[server(prefix = "/api/ui", endpoint = "request_budget")]
pub async fn request_budget(
    budget_id: i64,
    amount: String,
    reason: String,
) -> Result<(), AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let new = tessera_protocol::views::NewBudgetRequest { amount, reason };
    service
        .request_budget(viewer.require()?, budget_id, &new)
        .await?;
    Ok(())
}

/// Decides a budget request (platform admins); `decision` is `approve`
/// or `reject`.
#[server(prefix = "/api/ui", endpoint = "decide_budget_request")]
pub async fn decide_budget_request(
    id: i64,
    decision: String,
    #[server(default)] note: String,
) -> Result<(), AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let approve = match decision.as_str() {
        "approve" => true,
        "reject" => false,
        _ => return Err(AppError::invalid("decision", "choose approve or reject")),
    };
    let d = tessera_protocol::views::BudgetDecision { approve, note };
    service.decide_budget_request(&admin, id, &d).await?;
    Ok(())
}
