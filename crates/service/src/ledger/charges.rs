//! The ledger priced: each pool's GPU-hours × the price in force at each
//! moment, split by the recovery policy in force then
//! ([`tessera_core::ledger::recovery`]) into each tenant's direct cost and
//! overhead share and what stays with the platform. A price or policy
//! change cuts the period, so past stretches keep the terms they had.

use super::ExactLedger;
use crate::entity::allocation;
use crate::usage::at;
use crate::{Service, ServiceError};
use sea_orm::{ColumnTrait, Condition, EntityTrait, QueryFilter};
use std::collections::BTreeMap;
use tessera_core::ids::TenantId;
use tessera_core::ledger::recovery::{recover, Charge, PricedStretch, RecoveryPolicy, TenantTime};
use tessera_core::ledger::PARTS_PER_GPU;
use tessera_core::metering::price_at;
use tessera_protocol::views::{LedgerGrouping, LedgerStep};

/// One currency's charges over a period (millionths of the currency).
#[derive(Clone, Debug, Default)]
pub(crate) struct CurrencyCharges {
    /// Every priced GPU-hour × its price.
    pub cost: u128,
    /// Per tenant.
    pub tenants: BTreeMap<TenantId, Charge>,
    /// Per tenant and pool: the charge and the GPU-part-ms held.
    pub lines: BTreeMap<(TenantId, String), (Charge, u128)>,
    /// What no tenant pays.
    pub platform: u128,
    /// (pool, from, policy, GPU-hour price) as used, in time order.
    pub terms: Vec<(String, i64, RecoveryPolicy, u64)>,
}

/// A period's charges.
#[derive(Clone, Debug, Default)]
pub(crate) struct TenantCharges {
    /// Per currency.
    pub currencies: BTreeMap<String, CurrencyCharges>,
    /// GPU-part-ms in pools without a price.
    pub unpriced_part_ms: u128,
    /// GPU-part-ms slices held but telemetry found unused (all of it where
    /// no telemetry came), priced or not.
    pub idle_part_ms: u128,
}

impl Service {
    /// The charges of `[from, to)` (cut at now), and the ledger by pool
    /// they were priced from.
    pub(crate) async fn charges(
        &self,
        from: i64,
        to: i64,
    ) -> Result<(TenantCharges, ExactLedger), ServiceError> {
        let prices = self.price_list().await?;
        let changes: Vec<i64> = prices.iter().map(|p| p.effective_from).collect();
        let exact = self
            .ledger_cut(from, to, LedgerStep::Month, &changes, LedgerGrouping::Pool)
            .await?;
        let used = self.used_per_stretch(&exact).await?;
        let mut out = TenantCharges::default();
        for ((start, pool), b) in &exact.rows {
            for (t, held) in &b.tenants {
                let used = used.get(&(*start, pool.clone(), *t)).copied().unwrap_or(0);
                let used_parts = used * u128::from(PARTS_PER_GPU) / 1000;
                out.idle_part_ms += held.saturating_sub(used_parts);
            }
            let Some(p) = price_at(&prices, pool, *start) else {
                out.unpriced_part_ms += b.total();
                continue;
            };
            let stretch = PricedStretch {
                gpu_hour_micros: p.gpu_hour_micros,
                policy: p.recovery,
                physical_part_ms: b.total(),
                tenants: b
                    .tenants
                    .iter()
                    .map(|(t, held)| {
                        let used_milli_ms =
                            used.get(&(*start, pool.clone(), *t)).copied().unwrap_or(0);
                        (
                            *t,
                            TenantTime {
                                held_part_ms: *held,
                                used_milli_ms,
                            },
                        )
                    })
                    .collect(),
            };
            let r = recover(&stretch);
            let c = out.currencies.entry(p.currency.clone()).or_default();
            c.cost += r.cost;
            c.platform += r.platform;
            for (t, ch) in &r.tenants {
                c.tenants.entry(*t).or_default().add(ch);
                let line = c.lines.entry((*t, pool.clone())).or_default();
                line.0.add(ch);
                line.1 += b.tenants.get(t).copied().unwrap_or(0);
            }
            let term = (
                pool.clone(),
                p.effective_from.max(from),
                p.recovery,
                p.gpu_hour_micros,
            );
            if !c.terms.contains(&term) {
                c.terms.push(term);
            }
        }
        for c in out.currencies.values_mut() {
            c.terms.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        }
        Ok((out, exact))
    }

    /// Measured use per (stretch start, pool, tenant), in milli-GPU-ms.
    async fn used_per_stretch(
        &self,
        exact: &ExactLedger,
    ) -> Result<BTreeMap<(i64, String, TenantId), u128>, ServiceError> {
        let rows = allocation::Entity::find()
            .filter(allocation::Column::ActiveAt.is_not_null())
            .filter(allocation::Column::ActiveAt.lt(at(exact.to)))
            .filter(
                Condition::any()
                    .add(allocation::Column::EndedAt.is_null())
                    .add(allocation::Column::EndedAt.gt(at(exact.from))),
            )
            .all(&self.db)
            .await?;
        let owner: BTreeMap<_, _> = rows
            .iter()
            .map(|a| (a.id, (a.tenant_id, a.pool.to_string())))
            .collect();
        let ids: Vec<_> = owner.keys().copied().collect();
        let measured = self.measured(&ids, at(exact.from), at(exact.to)).await?;
        let mut used = BTreeMap::new();
        for m in measured {
            let (Some((tenant, pool)), Some(i)) = (
                owner.get(&m.allocation),
                exact.cuts.partition_point(|c| *c <= m.start).checked_sub(1),
            ) else {
                continue;
            };
            *used
                .entry((exact.cuts[i], pool.clone(), *tenant))
                .or_insert(0u128) += u128::from(m.used_milli_ms);
        }
        Ok(used)
    }
}
