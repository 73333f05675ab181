//! Monthly statements per tenant or cost centre: what the ledger charges
//! each tenant in each pool (direct and overhead share, by the pool's
//! recovery policy), the budgets that cover it, and (for a tenant) each
//! slice; as a view and as CSV.

use crate::audit_log::csv_field;
use crate::usage::{at, ms, period};
use crate::{Principal, Service, ServiceError};
use tessera_core::ledger::gpu_hours;
use tessera_core::ledger::recovery::Charge;
use tessera_core::metering::format_micros;
use tessera_protocol::views::{
    BudgetQuery, PoolRecovery, StatementLine, StatementQuery, StatementTotal, StatementView,
    UsageGrouping, UsageQuery,
};

impl Service {
    /// A month's statement: a tenant's (its members, platform admins) or
    /// a cost centre's (platform admins).
    pub async fn statement(
        &self,
        who: &Principal,
        q: &StatementQuery,
    ) -> Result<StatementView, ServiceError> {
        let now = self.now();
        let usage = UsageQuery {
            month: q.month.clone(),
            ..UsageQuery::default()
        };
        let (from, to) = period(&usage, now)?;
        let tenants = self.tenants_by_id().await?;
        let (subject, tenant, cost_centre, covered) = match (&q.tenant, &q.cost_centre) {
            (Some(slug), None) => {
                let t = crate::budgets::visible_tenant(&tenants, who, slug)?;
                (
                    t.name.clone(),
                    Some(t.slug.to_string()),
                    t.cost_centre.clone(),
                    vec![t.id],
                )
            }
            (None, Some(cc)) => {
                who.require_platform_admin()?;
                let ids: Vec<_> = tenants
                    .values()
                    .filter(|t| t.cost_centre.as_deref() == Some(cc.as_str()))
                    .map(|t| t.id)
                    .collect();
                if ids.is_empty() {
                    return Err(ServiceError::not_found(format!("cost centre '{cc}'")));
                }
                (format!("Cost centre {cc}"), None, Some(cc.clone()), ids)
            }
            _ => {
                return Err(ServiceError::invalid(
                    "tenant",
                    "name either a tenant or a cost centre",
                ))
            }
        };
        let (charges, _) = self.charges(ms(from), ms(to)).await?;
        let mut lines = Vec::new();
        let mut totals = Vec::new();
        let mut terms = Vec::new();
        for (currency, c) in &charges.currencies {
            let mut sum = Charge::default();
            for ((tid, pool), (ch, held)) in &c.lines {
                if !covered.contains(tid) {
                    continue;
                }
                sum.add(ch);
                let t = tenants.get(tid);
                lines.push(StatementLine {
                    tenant: t.map_or_else(|| tid.to_string(), |t| t.slug.to_string()),
                    tenant_name: t.map_or_else(|| tid.to_string(), |t| t.name.clone()),
                    pool: pool.clone(),
                    currency: currency.clone(),
                    gpu_hours: gpu_hours(*held),
                    direct: format_micros(ch.direct),
                    overhead: format_micros(ch.overhead),
                    total: format_micros(ch.total()),
                });
                for (p, from, policy, price) in &c.terms {
                    let term = PoolRecovery {
                        pool: p.clone(),
                        from: at(*from),
                        policy: *policy,
                        gpu_hour: format_micros(u128::from(*price)),
                    };
                    if p == pool && !terms.contains(&term) {
                        terms.push(term);
                    }
                }
            }
            if sum != Charge::default() {
                totals.push(StatementTotal {
                    currency: currency.clone(),
                    direct: format_micros(sum.direct),
                    overhead: format_micros(sum.overhead),
                    total: format_micros(sum.total()),
                });
            }
        }
        let budgets = match &tenant {
            Some(slug) => {
                self.budgets(
                    who,
                    &BudgetQuery {
                        tenant: Some(slug.clone()),
                    },
                )
                .await?
            }
            None => self
                .budgets(who, &BudgetQuery::default())
                .await?
                .into_iter()
                .filter(|b| b.cost_centre == cost_centre && b.tenant.is_none())
                .collect(),
        };
        let slices =
            match &tenant {
                Some(slug) => {
                    self.usage_report(
                        who,
                        &UsageQuery {
                            month: Some(from.format("%Y-%m").to_string()),
                            tenant: Some(slug.parse().map_err(|_| {
                                ServiceError::invalid("tenant", "not a tenant slug")
                            })?),
                            group_by: Some(UsageGrouping::Allocation),
                            ..UsageQuery::default()
                        },
                    )
                    .await?
                    .rows
                }
                None => Vec::new(),
            };
        Ok(StatementView {
            month: from.format("%Y-%m").to_string(),
            from,
            to: to.min(now),
            subject,
            tenant,
            cost_centre,
            lines,
            totals,
            terms,
            budgets,
            slices,
            generated_at: now,
        })
    }

    /// The statement's lines as CSV (one row per tenant, pool and
    /// currency, then one total row per currency).
    pub async fn statement_csv(
        &self,
        who: &Principal,
        q: &StatementQuery,
    ) -> Result<String, ServiceError> {
        let s = self.statement(who, q).await?;
        let mut out = String::from(
            "month,tenant,tenant_name,cost_centre,pool,currency,gpu_hours,direct,overhead,total\n",
        );
        let cc = s.cost_centre.clone().unwrap_or_default();
        for l in &s.lines {
            out.push_str(&format!(
                "{},{},{},{},{},{},{:.6},{},{},{}\n",
                s.month,
                csv_field(&l.tenant),
                csv_field(&l.tenant_name),
                csv_field(&cc),
                csv_field(&l.pool),
                l.currency,
                l.gpu_hours,
                l.direct,
                l.overhead,
                l.total
            ));
        }
        for t in &s.totals {
            out.push_str(&format!(
                "{},{},{},{},{},{},,{},{},{}\n",
                s.month,
                "",
                csv_field(&s.subject),
                csv_field(&cc),
                "(total)",
                t.currency,
                t.direct,
                t.overhead,
                t.total
            ));
        }
        Ok(out)
    }
}
