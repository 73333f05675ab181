//! Server functions of usage, cost and prices.

use super::*;

/// The usage page: the report, the tenant it is for (`""`: all), and the
/// tenants the viewer may choose.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UsagePageData {
    /// The report.
    pub report: tessera_protocol::views::UsageReport,
    /// The tenant shown (`""`: every tenant, for platform admins).
    pub tenant: String,
    /// (slug, name) the viewer may choose.
    pub tenants: Vec<(String, String)>,
    /// Whether the viewer is a platform admin.
    pub admin: bool,
    /// Pool names a platform admin can price.
    pub pools: Vec<String>,
    /// The fleet ledger of the same period (platform admins).
    pub ledger: Option<tessera_protocol::views::LedgerReport>,
    /// Every budget (platform admins).
    pub budgets: Vec<tessera_protocol::views::BudgetView>,
}

/// Usage and cost for a month (`""`: this one), a tenant (`""`: all for
/// platform admins, else the viewer's first) and a grouping.
#[server(prefix = "/api/ui", endpoint = "get_usage")]
pub async fn get_usage(
    #[server(default)] month: String,
    #[server(default)] tenant: String,
    #[server(default)] group_by: String,
    #[server(default)] ledger_by: String,
) -> Result<UsagePageData, AppError> {
    use tessera_protocol::views::{LedgerGrouping, LedgerQuery, UsageGrouping, UsageQuery};
    let (service, viewer) = ssr::ctx().await?;
    let who = viewer.require()?;
    let admin = who.is_platform_admin();
    let mut tenants: Vec<(String, String)> = who
        .memberships()
        .iter()
        .map(|(_, m)| (m.slug.clone(), m.name.clone()))
        .collect();
    let mut pools = Vec::new();
    let mut ledger = None;
    let mut budgets = Vec::new();
    if admin {
        let proof = who.require_platform_admin()?;
        tenants = service
            .tenants_admin(&proof)
            .await?
            .into_iter()
            .map(|t| (t.slug, t.name))
            .collect();
        pools = service
            .pools_admin(&proof)
            .await?
            .pools
            .into_iter()
            .map(|p| p.spec.name.into())
            .collect();
        let q = LedgerQuery {
            month: (!month.is_empty()).then(|| month.clone()),
            group_by: Some(LedgerGrouping::parse(&ledger_by).unwrap_or(LedgerGrouping::Pool)),
            ..LedgerQuery::default()
        };
        ledger = Some(service.ledger(&proof, &q).await?);
        budgets = service
            .budgets(who, &tessera_protocol::views::BudgetQuery::default())
            .await?;
    }
    let tenant = match tenant {
        t if t.is_empty() && !admin => tenants.first().map(|t| t.0.clone()).unwrap_or_default(),
        t => t,
    };
    let query = UsageQuery {
        month: (!month.is_empty()).then_some(month),
        tenant: match tenant.as_str() {
            "" => None,
            t => Some(ssr::checked("tenant", t)?),
        },
        group_by: UsageGrouping::parse(&group_by),
        ..UsageQuery::default()
    };
    Ok(UsagePageData {
        report: service.usage_report(who, &query).await?,
        tenant,
        tenants,
        admin,
        pools,
        ledger,
        budgets,
    })
}

/// Every pool's prices.
#[server(prefix = "/api/ui", endpoint = "list_prices")]
pub async fn list_prices() -> Result<Vec<tessera_protocol::views::PriceView>, AppError> {
    let (service, viewer) = ssr::ctx().await?;
    Ok(service.prices(viewer.require()?).await?)
}

/// Sets a pool's price from now (platform admins).
#[server(prefix = "/api/ui", endpoint = "set_price")]
pub async fn set_price(
    pool: String,
    currency: String,
    gpu_hour: String,
    #[server(default)] gib_hour: String,
    #[server(default)] recovery: String,
) -> Result<(), AppError> {
    let (service, viewer) = ssr::ctx().await?;
    let admin = viewer.require()?.require_platform_admin()?;
    let new = tessera_protocol::views::NewPrice {
        pool: ssr::checked("pool", &pool)?,
        currency,
        gpu_hour,
        gib_hour,
        effective_from: None,
        recovery: match recovery.as_str() {
            "" => None,
            r => Some(
                tessera_core::ledger::recovery::RecoveryPolicy::parse(r).ok_or_else(|| {
                    AppError::invalid("recovery", "choose showback, full_recovery or used_based")
                })?,
            ),
        },
    };
    service.set_price(&admin, &new).await?;
    Ok(())
}
