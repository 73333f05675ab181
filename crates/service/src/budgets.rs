//! Monthly budgets per tenant or cost centre: spend so far is what the
//! ledger charges (direct plus overhead share, [`crate::ledger`]); the
//! forecast adds what the running slices cost until the month ends;
//! crossing 80 % and 100 % tells the tenant's admins and webhook (the
//! platform admins for a cost centre) once a month; a budget that blocks
//! turns away all but guaranteed requests once spent
//! ([`tessera_core::budget`]).

use crate::audit::Actor;
use crate::entity::{allocation, budget, budget_alert, budget_request, tenant};
use crate::events::{DomainEvent, TenantRef};
use crate::ledger::TenantCharges;
use crate::usage::{held_of, month_of, ms, next_month, GpuModels};
use crate::{PlatformAdmin, Principal, Service, ServiceError};
use chrono::{DateTime, Utc};
use sea_orm::sea_query::OnConflict;
use sea_orm::{
    ActiveModelTrait, ColumnTrait, Condition, EntityTrait, QueryFilter, QueryOrder, Set,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use tessera_core::budget::{to_tell, BudgetAlert, BudgetRequestState, BudgetScope, Spend};
use tessera_core::ids::TenantId;
use tessera_core::ledger::PARTS_PER_GPU;
use tessera_core::metering::{format_micros, parse_micros, price_at};
use tessera_core::role::TenantRole;
use tessera_core::schedule::QosClass;
use tessera_core::telemetry::MINUTE_MS;
use tessera_protocol::views::{
    BudgetDecision, BudgetQuery, BudgetRequestView, BudgetView, NewBudget, NewBudgetRequest,
};

/// The longest cost-centre name (as tenants store it).
const MAX_COST_CENTRE_CHARS: usize = 64;

/// The longest reason or note on a budget request.
const MAX_REASON_CHARS: usize = 500;

fn request_view(r: &budget_request::Model) -> BudgetRequestView {
    BudgetRequestView {
        id: r.id,
        budget_id: r.budget_id,
        amount: format_micros(u128::try_from(r.amount_micros).unwrap_or(0)),
        reason: r.reason.clone(),
        state: r.state,
        requested_by: r.requested_by.clone(),
        created_at: r.created_at,
        decided_by: r.decided_by.clone(),
        note: r.note.clone(),
    }
}

/// This month so far: what each tenant was charged and what its running
/// slices cost per hour now, per currency (millionths).
struct MonthSpend {
    month: String,
    now: i64,
    end: i64,
    charges: TenantCharges,
    hourly: BTreeMap<(TenantId, String), u128>,
}

impl MonthSpend {
    fn of_tenants(&self, tenants: &[TenantId], currency: &str, budget: u128) -> Spend {
        let c = self.charges.currencies.get(currency);
        let actual = tenants
            .iter()
            .filter_map(|t| c.and_then(|c| c.tenants.get(t)))
            .map(|ch| ch.total())
            .sum();
        let hourly = tenants
            .iter()
            .filter_map(|t| self.hourly.get(&(*t, currency.to_owned())))
            .sum();
        Spend::new(budget, actual, hourly, self.now, self.end)
    }
}

/// `tenant:<slug>` or `cost_centre:<name>`, for the audit log.
fn target_of(b: &budget::Model, tenants: &BTreeMap<TenantId, tenant::Model>) -> String {
    match (b.scope, b.tenant_id, &b.cost_centre) {
        (BudgetScope::Tenant, Some(id), _) => format!(
            "tenant:{}",
            tenants
                .get(&id)
                .map_or_else(|| id.to_string(), |t| t.slug.to_string())
        ),
        (_, _, Some(cc)) => format!("cost_centre:{cc}"),
        _ => format!("budget:{}", b.id),
    }
}

/// Tenant `slug`, if `who` may see it (a member, or a platform admin);
/// anyone else is told it does not exist, so tenant names do not leak.
pub(crate) fn visible_tenant<'a>(
    tenants: &'a BTreeMap<TenantId, tenant::Model>,
    who: &Principal,
    slug: &str,
) -> Result<&'a tenant::Model, ServiceError> {
    tenants
        .values()
        .find(|t| t.slug.as_str() == slug)
        .filter(|t| who.platform_admin || who.role_in(t.id).is_some())
        .ok_or_else(|| ServiceError::not_found(format!("tenant '{slug}'")))
}

fn state_json(b: &budget::Model) -> serde_json::Value {
    json!({
        "amount": format_micros(u128::try_from(b.amount_micros).unwrap_or(0)),
        "currency": b.currency,
        "block_when_exceeded": b.block_when_exceeded,
    })
}

impl Service {
    /// Every tenant, by id.
    pub(crate) async fn tenants_by_id(
        &self,
    ) -> Result<BTreeMap<TenantId, tenant::Model>, ServiceError> {
        Ok(tenant::Entity::find()
            .all(&self.db)
            .await?
            .into_iter()
            .map(|t| (t.id, t))
            .collect())
    }

    /// The month so far.
    async fn month_spend(&self, now: DateTime<Utc>) -> Result<MonthSpend, ServiceError> {
        let from = month_of(now);
        let (charges, _) = self.charges(ms(from), ms(now)).await?;
        let prices = self.price_list().await?;
        let running = allocation::Entity::find()
            .filter(allocation::Column::ActiveAt.is_not_null())
            .filter(allocation::Column::EndedAt.is_null())
            .all(&self.db)
            .await?;
        let models = GpuModels::load(&self.db).await?;
        let mut hourly = BTreeMap::new();
        for a in &running {
            let (Some(h), Some(p)) = (
                held_of(a, &models),
                price_at(&prices, a.pool.as_str(), ms(now)),
            ) else {
                continue;
            };
            let per_hour = u128::from(h.share.0) * u128::from(p.gpu_hour_micros)
                / u128::from(PARTS_PER_GPU)
                + u128::from(h.memory_mib) * u128::from(p.gib_hour_micros) / 1024;
            *hourly
                .entry((a.tenant_id, p.currency.clone()))
                .or_insert(0u128) += per_hour;
        }
        Ok(MonthSpend {
            month: from.format("%Y-%m").to_string(),
            now: ms(now),
            end: ms(next_month(from)),
            charges,
            hourly,
        })
    }

    /// The tenants a budget covers.
    fn covered(b: &budget::Model, tenants: &BTreeMap<TenantId, tenant::Model>) -> Vec<TenantId> {
        match b.scope {
            BudgetScope::Tenant => b.tenant_id.into_iter().collect(),
            BudgetScope::CostCentre => tenants
                .values()
                .filter(|t| t.cost_centre.is_some() && t.cost_centre == b.cost_centre)
                .map(|t| t.id)
                .collect(),
        }
    }

    fn spend_of(
        b: &budget::Model,
        tenants: &BTreeMap<TenantId, tenant::Model>,
        month: &MonthSpend,
    ) -> Spend {
        month.of_tenants(
            &Self::covered(b, tenants),
            &b.currency,
            u128::try_from(b.amount_micros).unwrap_or(0),
        )
    }

    async fn told(&self, budget_id: i64, month: &str) -> Result<Vec<BudgetAlert>, ServiceError> {
        let mut told: Vec<BudgetAlert> = budget_alert::Entity::find()
            .filter(budget_alert::Column::BudgetId.eq(budget_id))
            .filter(budget_alert::Column::Month.eq(month))
            .all(&self.db)
            .await?
            .iter()
            .filter_map(|a| BudgetAlert::parse(&a.alert))
            .collect();
        told.sort_unstable();
        Ok(told)
    }

    fn budget_view(
        b: &budget::Model,
        tenants: &BTreeMap<TenantId, tenant::Model>,
        month: &MonthSpend,
        alerts: Vec<BudgetAlert>,
        pending_request: Option<BudgetRequestView>,
    ) -> BudgetView {
        let spend = Self::spend_of(b, tenants, month);
        let t = b.tenant_id.and_then(|id| tenants.get(&id));
        let pct = |v: u128| {
            if spend.budget == 0 {
                0.0
            } else {
                v as f64 * 100.0 / spend.budget as f64
            }
        };
        BudgetView {
            id: b.id,
            scope: b.scope,
            tenant: t.map(|t| t.slug.to_string()),
            tenant_name: t.map(|t| t.name.clone()),
            cost_centre: b.cost_centre.clone(),
            amount: format_micros(spend.budget),
            currency: b.currency.clone(),
            block_when_exceeded: b.block_when_exceeded,
            month: month.month.clone(),
            spent: format_micros(spend.actual),
            forecast: format_micros(spend.forecast),
            percent: pct(spend.actual),
            forecast_percent: pct(spend.forecast),
            blocking: b.block_when_exceeded && spend.blocks(QosClass::BestEffort),
            alerts,
            pending_request,
            set_by: b.set_by.clone(),
            updated_at: b.updated_at,
        }
    }

    /// The budgets `who` may see: all (platform admins), or their
    /// tenant's and its cost centre's (`q.tenant`, which members name).
    pub async fn budgets(
        &self,
        who: &Principal,
        q: &BudgetQuery,
    ) -> Result<Vec<BudgetView>, ServiceError> {
        let tenants = self.tenants_by_id().await?;
        let mut find = budget::Entity::find().order_by_asc(budget::Column::Id);
        match &q.tenant {
            Some(slug) => {
                let t = visible_tenant(&tenants, who, slug)?;
                let mut c = Condition::any().add(budget::Column::TenantId.eq(t.id));
                if let Some(cc) = &t.cost_centre {
                    c = c.add(budget::Column::CostCentre.eq(cc.clone()));
                }
                find = find.filter(c);
            }
            None if who.platform_admin => {}
            None => {
                return Err(ServiceError::invalid(
                    "tenant",
                    "name your tenant (only platform admins see every budget)",
                ))
            }
        }
        let rows = find.all(&self.db).await?;
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let month = self.month_spend(self.now()).await?;
        let mut out = Vec::with_capacity(rows.len());
        for b in &rows {
            let told = self.told(b.id, &month.month).await?;
            let pending = self.pending_request(b.id).await?;
            out.push(Self::budget_view(b, &tenants, &month, told, pending));
        }
        Ok(out)
    }

    /// Sets a tenant's or a cost centre's monthly budget. Platform admins
    /// set any, and alone decide whether it blocks; a tenant's admins set
    /// their tenant's, unless a platform admin made it block (then raising
    /// it is the platform admins' call).
    pub async fn set_budget(
        &self,
        who: &Principal,
        new: &NewBudget,
    ) -> Result<BudgetView, ServiceError> {
        let tenants = self.tenants_by_id().await?;
        let (scope, tenant, cost_centre) = match (&new.tenant, &new.cost_centre) {
            (Some(slug), None) => {
                let t = visible_tenant(&tenants, who, slug)?;
                (BudgetScope::Tenant, Some(t.clone()), None)
            }
            (None, Some(cc)) => {
                let cc = cc.trim();
                if cc.is_empty() || cc.chars().count() > MAX_COST_CENTRE_CHARS {
                    return Err(ServiceError::invalid(
                        "cost_centre",
                        format!("must be 1 to {MAX_COST_CENTRE_CHARS} characters"),
                    ));
                }
                if !who.platform_admin {
                    return Err(ServiceError::Forbidden(
                        "only platform admins set a cost centre's budget".to_owned(),
                    ));
                }
                (BudgetScope::CostCentre, None, Some(cc.to_owned()))
            }
            _ => {
                return Err(ServiceError::invalid(
                    "tenant",
                    "name either a tenant or a cost centre",
                ))
            }
        };
        if let Some(t) = &tenant {
            if !who.platform_admin && who.role_in(t.id) != Some(TenantRole::TenantAdmin) {
                return Err(ServiceError::Forbidden(
                    "only the tenant's admins and platform admins set its budget".to_owned(),
                ));
            }
        }
        let amount = parse_micros(new.amount.trim())
            .filter(|a| *a > 0 && i64::try_from(*a).is_ok())
            .ok_or_else(|| {
                ServiceError::invalid(
                    "amount",
                    format!(
                        "'{}' is not an amount above zero such as 1500 or 1500.00",
                        new.amount
                    ),
                )
            })?;
        let currency = new.currency.trim().to_ascii_uppercase();
        if currency.len() != 3 || !currency.chars().all(|c| c.is_ascii_uppercase()) {
            return Err(ServiceError::invalid(
                "currency",
                format!("'{}' is not an ISO 4217 code such as EUR", new.currency),
            ));
        }
        let now = self.now();
        let mut w = self.begin_write().await?;
        let existing = budget::Entity::find()
            .filter(match &tenant {
                Some(t) => budget::Column::TenantId.eq(t.id),
                None => budget::Column::CostCentre.eq(cost_centre.clone()),
            })
            .one(w.db())
            .await?;
        let was_blocking = existing.as_ref().is_some_and(|b| b.block_when_exceeded);
        if !who.platform_admin {
            if new.block_when_exceeded.is_some_and(|b| b != was_blocking) {
                return Err(ServiceError::Forbidden(
                    "only platform admins decide whether a budget blocks requests".to_owned(),
                ));
            }
            if was_blocking {
                return Err(ServiceError::Forbidden(
                    "this budget blocks requests once spent, so only platform admins change it; ask them on the tenant's Budget page".to_owned(),
                ));
            }
        }
        let block = new.block_when_exceeded.unwrap_or(was_blocking);
        let before = existing.as_ref().map(state_json);
        let row = match existing {
            Some(b) => {
                // A new amount or currency starts the month's thresholds
                // afresh: they are told for the new figure.
                if b.amount_micros != i64::try_from(amount).unwrap_or(i64::MAX)
                    || b.currency != currency
                {
                    budget_alert::Entity::delete_many()
                        .filter(budget_alert::Column::BudgetId.eq(b.id))
                        .exec(w.db())
                        .await?;
                }
                let mut a: budget::ActiveModel = b.into();
                a.amount_micros = Set(i64::try_from(amount).unwrap_or(i64::MAX));
                a.currency = Set(currency);
                a.block_when_exceeded = Set(block);
                a.set_by = Set(who.audit_name());
                a.updated_at = Set(now);
                a.update(w.db()).await?
            }
            None => {
                budget::ActiveModel {
                    scope: Set(scope),
                    tenant_id: Set(tenant.as_ref().map(|t| t.id)),
                    cost_centre: Set(cost_centre),
                    amount_micros: Set(i64::try_from(amount).unwrap_or(i64::MAX)),
                    currency: Set(currency),
                    block_when_exceeded: Set(block),
                    set_by: Set(who.audit_name()),
                    updated_at: Set(now),
                    ..Default::default()
                }
                .insert(w.db())
                .await
                .map_err(|e| match e.sql_err() {
                    // Another replica created it since we looked.
                    Some(sea_orm::SqlErr::UniqueConstraintViolation(_)) => ServiceError::Conflict(
                        "the budget was set by someone else just now; look at it and try again"
                            .to_owned(),
                    ),
                    _ => e.into(),
                })?
            }
        };
        w.emit(DomainEvent::BudgetSet {
            target: target_of(&row, &tenants),
            tenant: tenant.as_ref().map(TenantRef::of),
            before,
            after: state_json(&row),
        });
        w.commit(self, &Actor::User(who)).await?;
        // A budget set below what is spent tells at once.
        self.evaluate_budgets(now, Some(row.id)).await?;
        let month = self.month_spend(now).await?;
        let told = self.told(row.id, &month.month).await?;
        let pending = self.pending_request(row.id).await?;
        Ok(Self::budget_view(&row, &tenants, &month, told, pending))
    }

    /// The request waiting on a budget, if any.
    async fn pending_request(
        &self,
        budget_id: i64,
    ) -> Result<Option<BudgetRequestView>, ServiceError> {
        Ok(budget_request::Entity::find()
            .filter(budget_request::Column::BudgetId.eq(budget_id))
            .filter(budget_request::Column::State.eq(BudgetRequestState::Pending))
            .one(&self.db)
            .await?
            .as_ref()
            .map(request_view))
    }

    /// A tenant admin asks the platform admins for a larger budget (one
    /// request waits per budget).
    pub async fn request_budget(
        &self,
        who: &Principal,
        budget_id: i64,
        new: &NewBudgetRequest,
    ) -> Result<BudgetRequestView, ServiceError> {
        let tenants = self.tenants_by_id().await?;
        let b = budget::Entity::find_by_id(budget_id)
            .one(&self.db)
            .await?
            .filter(|b| who.platform_admin || b.tenant_id.is_some_and(|t| who.role_in(t).is_some()))
            .ok_or_else(|| ServiceError::not_found(format!("budget {budget_id}")))?;
        let t = b
            .tenant_id
            .and_then(|id| tenants.get(&id))
            .filter(|t| who.role_in(t.id) == Some(TenantRole::TenantAdmin))
            .ok_or_else(|| {
                ServiceError::Forbidden(
                    "only the tenant's admins ask for a larger budget of their tenant".to_owned(),
                )
            })?;
        let amount = parse_micros(new.amount.trim())
            .filter(|a| *a > u64::try_from(b.amount_micros).unwrap_or(0))
            .filter(|a| i64::try_from(*a).is_ok())
            .ok_or_else(|| {
                ServiceError::invalid(
                    "amount",
                    format!(
                        "'{}' is not an amount above the budget now ({} {})",
                        new.amount,
                        format_micros(u128::try_from(b.amount_micros).unwrap_or(0)),
                        b.currency
                    ),
                )
            })?;
        let reason = new.reason.trim().to_owned();
        if reason.is_empty() || reason.chars().count() > MAX_REASON_CHARS {
            return Err(ServiceError::invalid(
                "reason",
                format!("say why, in 1 to {MAX_REASON_CHARS} characters"),
            ));
        }
        let now = self.now();
        let mut w = self.begin_write().await?;
        let waiting = budget_request::Entity::find()
            .filter(budget_request::Column::BudgetId.eq(b.id))
            .filter(budget_request::Column::State.eq(BudgetRequestState::Pending))
            .one(w.db())
            .await?;
        if let Some(r) = waiting {
            return Err(ServiceError::Conflict(format!(
                "{} already asked for {} {} on {}; wait for the platform admins' decision",
                r.requested_by,
                format_micros(u128::try_from(r.amount_micros).unwrap_or(0)),
                b.currency,
                r.created_at.format("%Y-%m-%d %H:%M UTC")
            )));
        }
        let row = budget_request::ActiveModel {
            budget_id: Set(b.id),
            amount_micros: Set(i64::try_from(amount).unwrap_or(i64::MAX)),
            reason: Set(reason.clone()),
            state: Set(BudgetRequestState::Pending),
            requested_by: Set(who.audit_name()),
            requested_by_user_id: Set(who.user_id),
            created_at: Set(now),
            ..Default::default()
        }
        .insert(w.db())
        .await
        .map_err(|e| match e.sql_err() {
            // Another replica filed one since we looked.
            Some(sea_orm::SqlErr::UniqueConstraintViolation(_)) => ServiceError::Conflict(
                "a request for this budget is already waiting for the platform admins".to_owned(),
            ),
            _ => e.into(),
        })?;
        w.emit(DomainEvent::BudgetRequested {
            request_id: row.id,
            target: target_of(&b, &tenants),
            tenant: TenantRef::of(t),
            current: format_micros(u128::try_from(b.amount_micros).unwrap_or(0)),
            amount: format_micros(u128::from(amount)),
            currency: b.currency.clone(),
            reason,
            by: who.name.clone(),
        });
        w.commit(self, &Actor::User(who)).await?;
        Ok(request_view(&row))
    }

    /// A platform admin other than the one who asked approves (the budget
    /// becomes the amount asked for) or rejects a budget request.
    pub async fn decide_budget_request(
        &self,
        admin: &PlatformAdmin<'_>,
        id: i64,
        d: &BudgetDecision,
    ) -> Result<BudgetRequestView, ServiceError> {
        let who = admin.principal();
        let note = d.note.trim().to_owned();
        if note.chars().count() > MAX_REASON_CHARS {
            return Err(ServiceError::invalid(
                "note",
                format!("must be at most {MAX_REASON_CHARS} characters"),
            ));
        }
        let tenants = self.tenants_by_id().await?;
        let now = self.now();
        let mut w = self.begin_write().await?;
        let r = budget_request::Entity::find_by_id(id)
            .one(w.db())
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("budget request {id}")))?;
        if r.state != BudgetRequestState::Pending {
            return Err(ServiceError::Conflict(format!(
                "budget request {id} was already {}",
                r.state
            )));
        }
        if r.requested_by_user_id == who.user_id {
            return Err(ServiceError::Forbidden(
                "you asked for this budget: another platform admin decides it".to_owned(),
            ));
        }
        let b = budget::Entity::find_by_id(r.budget_id)
            .one(w.db())
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("budget {}", r.budget_id)))?;
        let t = b
            .tenant_id
            .and_then(|id| tenants.get(&id))
            .ok_or_else(|| ServiceError::not_found(format!("budget {}", r.budget_id)))?;
        let state = if d.approve {
            BudgetRequestState::Approved
        } else {
            BudgetRequestState::Rejected
        };
        // Decided once: the update only matches a request still pending.
        let updated = budget_request::Entity::update_many()
            .col_expr(
                budget_request::Column::State,
                sea_orm::sea_query::Expr::value(state.as_str()),
            )
            .col_expr(
                budget_request::Column::DecidedBy,
                sea_orm::sea_query::Expr::value(who.audit_name()),
            )
            .col_expr(
                budget_request::Column::DecidedAt,
                sea_orm::sea_query::Expr::value(now),
            )
            .col_expr(
                budget_request::Column::Note,
                sea_orm::sea_query::Expr::value((!note.is_empty()).then(|| note.clone())),
            )
            .filter(budget_request::Column::Id.eq(id))
            .filter(budget_request::Column::State.eq(BudgetRequestState::Pending))
            .exec(w.db())
            .await?;
        if updated.rows_affected != 1 {
            return Err(ServiceError::Conflict(format!(
                "budget request {id} was decided meanwhile"
            )));
        }
        if d.approve {
            let before = state_json(&b);
            budget_alert::Entity::delete_many()
                .filter(budget_alert::Column::BudgetId.eq(b.id))
                .exec(w.db())
                .await?;
            let mut a: budget::ActiveModel = b.clone().into();
            a.amount_micros = Set(r.amount_micros);
            a.set_by = Set(who.audit_name());
            a.updated_at = Set(now);
            let row = a.update(w.db()).await?;
            w.emit(DomainEvent::BudgetSet {
                target: target_of(&row, &tenants),
                tenant: Some(TenantRef::of(t)),
                before: Some(before),
                after: state_json(&row),
            });
        }
        w.emit(DomainEvent::BudgetRequestDecided {
            request_id: id,
            target: target_of(&b, &tenants),
            tenant: TenantRef::of(t),
            approved: d.approve,
            amount: format_micros(u128::try_from(r.amount_micros).unwrap_or(0)),
            currency: b.currency.clone(),
            note,
            by: who.name.clone(),
        });
        w.commit(self, &Actor::User(who)).await?;
        if d.approve {
            self.evaluate_budgets(now, Some(b.id)).await?;
        }
        let r = budget_request::Entity::find_by_id(id)
            .one(&self.db)
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("budget request {id}")))?;
        Ok(request_view(&r))
    }

    /// Removes a budget (who may set it may remove it).
    pub async fn delete_budget(&self, who: &Principal, id: i64) -> Result<(), ServiceError> {
        let tenants = self.tenants_by_id().await?;
        let b = budget::Entity::find_by_id(id)
            .one(&self.db)
            .await?
            .filter(|b| who.platform_admin || b.tenant_id.is_some_and(|t| who.role_in(t).is_some()))
            .ok_or_else(|| ServiceError::not_found(format!("budget {id}")))?;
        if !who.platform_admin {
            let admin = b
                .tenant_id
                .is_some_and(|t| who.role_in(t) == Some(TenantRole::TenantAdmin));
            if !admin || b.block_when_exceeded {
                return Err(ServiceError::Forbidden(
                    "only platform admins remove a budget that blocks requests, and only tenant admins their tenant's".to_owned(),
                ));
            }
        }
        let mut w = self.begin_write().await?;
        budget_alert::Entity::delete_many()
            .filter(budget_alert::Column::BudgetId.eq(id))
            .exec(w.db())
            .await?;
        budget::Entity::delete_by_id(id).exec(w.db()).await?;
        w.emit(DomainEvent::BudgetDeleted {
            target: target_of(&b, &tenants),
            tenant: b.tenant_id.and_then(|t| tenants.get(&t)).map(TenantRef::of),
            before: state_json(&b),
        });
        w.commit(self, &Actor::User(who)).await
    }

    /// Tells each budget's newly crossed thresholds (once a minute per
    /// process from the timer, and right after a budget is set). Each
    /// threshold is recorded once a month, so replicas never tell twice.
    /// Returns how many notices went out.
    pub(crate) async fn evaluate_budgets(
        &self,
        now: DateTime<Utc>,
        only: Option<i64>,
    ) -> Result<u32, ServiceError> {
        if only.is_none() {
            let minute = now.timestamp_millis().div_euclid(MINUTE_MS);
            if self.budget_minute.swap(minute, Ordering::Relaxed) == minute {
                return Ok(0);
            }
        }
        let mut find = budget::Entity::find();
        if let Some(id) = only {
            find = find.filter(budget::Column::Id.eq(id));
        }
        let rows = find.all(&self.db).await?;
        if rows.is_empty() {
            return Ok(0);
        }
        let tenants = self.tenants_by_id().await?;
        let month = self.month_spend(now).await?;
        let mut told_now = 0;
        for b in &rows {
            let spend = Self::spend_of(b, &tenants, &month);
            let told = self.told(b.id, &month.month).await?;
            let new: Vec<BudgetAlert> = spend
                .alerts()
                .into_iter()
                .filter(|a| !told.contains(a))
                .collect();
            if new.is_empty() {
                continue;
            }
            let mut w = self.begin_write().await?;
            let mut recorded = Vec::new();
            for a in &new {
                let inserted = budget_alert::Entity::insert(budget_alert::ActiveModel {
                    budget_id: Set(b.id),
                    month: Set(month.month.clone()),
                    alert: Set(a.as_str().to_owned()),
                    at: Set(now),
                })
                .on_conflict(
                    OnConflict::columns([
                        budget_alert::Column::BudgetId,
                        budget_alert::Column::Month,
                        budget_alert::Column::Alert,
                    ])
                    .do_nothing()
                    .to_owned(),
                )
                .exec_without_returning(w.db())
                .await?;
                if inserted == 1 {
                    recorded.push(*a);
                }
            }
            let tenant = b.tenant_id.and_then(|t| tenants.get(&t)).map(TenantRef::of);
            for alert in to_tell(&recorded, &told) {
                told_now += 1;
                w.emit(DomainEvent::BudgetThresholdCrossed {
                    target: target_of(b, &tenants),
                    tenant: tenant.clone(),
                    alert,
                    month: month.month.clone(),
                    spent: format_micros(spend.actual),
                    forecast: format_micros(spend.forecast),
                    amount: format_micros(spend.budget),
                    currency: b.currency.clone(),
                    blocks: b.block_when_exceeded,
                });
            }
            w.commit(self, &Actor::System).await?;
        }
        Ok(told_now)
    }

    /// Refuses a request that is not guaranteed when a budget covering
    /// `tenant_id` blocks and its month is spent.
    pub(crate) async fn check_budget(
        &self,
        tenant_id: TenantId,
        qos: QosClass,
    ) -> Result<(), ServiceError> {
        if qos == QosClass::Guaranteed {
            return Ok(());
        }
        // Budgets that block are few: read them all, then the tenants.
        let blocking = budget::Entity::find()
            .filter(budget::Column::BlockWhenExceeded.eq(true))
            .all(&self.db)
            .await?;
        if blocking.is_empty() {
            return Ok(());
        }
        let tenants = self.tenants_by_id().await?;
        let Some(t) = tenants.get(&tenant_id) else {
            return Ok(());
        };
        let blocking: Vec<&budget::Model> = blocking
            .iter()
            .filter(|b| Self::covered(b, &tenants).contains(&tenant_id))
            .collect();
        if blocking.is_empty() {
            return Ok(());
        }
        let month = self.month_spend(self.now()).await?;
        for b in blocking {
            let spend = Self::spend_of(b, &tenants, &month);
            if spend.blocks(qos) {
                let whose = match &b.cost_centre {
                    Some(cc) if b.scope == BudgetScope::CostCentre => format!("cost centre {cc}"),
                    _ => t.name.clone(),
                };
                return Err(ServiceError::BudgetExceeded(format!(
                    "the {month} budget of {whose} is spent ({} of {} {}), so only guaranteed requests go through until the month ends; request a guaranteed slice within your quota, or ask a platform admin to raise the budget (your tenant's Budget page, /t/{}/budget, has the request form)",
                    format_micros(spend.actual),
                    format_micros(spend.budget),
                    b.currency,
                    t.slug,
                    month = month.month,
                )));
            }
        }
        Ok(())
    }
}
