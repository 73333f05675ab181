//! Tenants asking for more quota: members propose, tenant admins submit (or
//! submit a member's proposal), and either may withdraw before a decision.

use super::admin::{amount, reason_text};
use super::quota_columns;
use crate::audit::Actor;
use crate::entity::{quota_request, tenant};
use crate::events::{DomainEvent, QuotaRequestRef};
use crate::write::Write;
use crate::{Principal, Service, ServiceError};
use chrono::{DateTime, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
use serde_json::json;
use tessera_core::ids::QuotaRequestId;
use tessera_core::lifecycle::QuotaRequestPhase;
use tessera_core::lifecycle::{quota_request_transition, QuotaRequestEvent, QuotaRequestState};
use tessera_core::quota::Quota;
use tessera_core::slice::label;
use tessera_protocol::quotas::{NewQuotaRequest, QuotaRequestView};
use tessera_protocol::views::{NewAllocation, TenantRole};

/// A quota request about to be filed.
pub(super) struct Filing<'a> {
    /// For this tenant.
    pub tenant: &'a tenant::Model,
    /// In this pool.
    pub pool: &'a tessera_core::checked::PoolName,
    /// How much more.
    pub amount: &'a Quota,
    /// Until (`None`: permanent).
    pub ends_at: Option<DateTime<Utc>>,
    /// Why.
    pub justification: String,
    /// Proposed (a member's) or pending (for the platform admins).
    pub state: QuotaRequestState,
    /// The slice that waits for it, if any.
    pub slice: Option<&'a NewAllocation>,
}

impl Service {
    /// Files a quota request. A tenant admin's goes straight to the platform
    /// admins (`pending`); a member's is a proposal its tenant admins submit.
    pub async fn create_quota_request(
        &self,
        who: &Principal,
        req: &NewQuotaRequest,
    ) -> Result<QuotaRequestView, ServiceError> {
        let t = Self::tenant_by_slug(&self.db, &req.tenant).await?;
        let role = match who.role_in(t.id) {
            Some(role) => role,
            None if who.platform_admin => {
                return Err(ServiceError::Forbidden(
                    "only the tenant's members ask for quota; as a platform admin, set its quota on the Quotas page".to_owned(),
                ))
            }
            None => return Err(ServiceError::not_found(format!("tenant '{}'", req.tenant))),
        };
        let spec = self.pool_spec(&self.db, "pool", &req.pool).await?;
        let q = amount(&req.amount)?;
        if q.is_zero() {
            return Err(ServiceError::invalid(
                "amount",
                "ask for more GPU compute, memory or slices than nothing",
            ));
        }
        let now = self.now();
        let ends_at = req.ends_at.map(|e| e.get());
        if ends_at.is_some_and(|e| e <= now) {
            return Err(ServiceError::invalid(
                "ends_at",
                "must be in the future (or leave it empty for a permanent increase)",
            ));
        }
        let justification = reason_text("justification", &req.justification, true)?;
        if let Some(slice) = &req.slice {
            if slice.pool != spec.name {
                return Err(ServiceError::invalid(
                    "slice.pool",
                    format!("the waiting slice must be in pool '{}'", spec.name),
                ));
            }
            Self::pool_offer(&spec)
                .admit(&slice.shape, slice.lease_hours)
                .map_err(|e| ServiceError::invalid("slice", e.to_string()))?;
        }
        let state = if role == TenantRole::TenantAdmin {
            QuotaRequestState::Pending
        } else {
            QuotaRequestState::Proposed
        };
        let mut w = self.begin_write().await?;
        let filing = Filing {
            tenant: &t,
            pool: &spec.name,
            amount: &q,
            ends_at,
            justification,
            state,
            slice: req.slice.as_ref(),
        };
        let row = Self::file_request(&mut w, who, filing).await?;
        w.commit(self, &Actor::User(who)).await?;
        self.quota_request_view(who, row.id).await
    }

    /// Stores a quota request `who` files (a pending one as submitted by
    /// them too) and tells whoever decides next.
    pub(super) async fn file_request(
        w: &mut Write,
        who: &Principal,
        f: Filing<'_>,
    ) -> Result<quota_request::Model, ServiceError> {
        let (compute, memory, slices) = quota_columns(f.amount);
        let submitted = f.state == QuotaRequestState::Pending;
        let now = w.now();
        let row = quota_request::ActiveModel {
            tenant_id: Set(f.tenant.id),
            pool: Set(f.pool.clone()),
            compute_milli: Set(compute),
            memory_mib: Set(memory),
            max_slices: Set(slices),
            ends_at: Set(f.ends_at),
            justification: Set(f.justification),
            state: Set(f.state.phase()),
            reject_reason: Set(None),
            requested_by_user_id: Set(Some(who.user_id)),
            requested_by: Set(who.audit_name()),
            submitted_by_user_id: Set(submitted.then_some(who.user_id)),
            submitted_by: Set(submitted.then(|| who.audit_name())),
            slice: Set(f.slice.map(|s| json!(s))),
            slice_user_id: Set(f.slice.map(|_| who.user_id)),
            slice_requested_by: Set(f.slice.map(|_| who.audit_name())),
            created_at: Set(now),
            updated_at: Set(now),
            ..Default::default()
        }
        .insert(w.db())
        .await?;
        w.emit(DomainEvent::QuotaRequestFiled {
            request: QuotaRequestRef::of(&row, f.tenant),
            state: f.state,
            amount: *f.amount,
            ends_at: f.ends_at,
            slice: f.slice.map(|s| label(&s.shape)),
            by: who.name.clone(),
        });
        Ok(row)
    }

    /// A tenant admin submits a member's proposal to the platform admins.
    pub async fn submit_quota_request(
        &self,
        who: &Principal,
        id: QuotaRequestId,
    ) -> Result<QuotaRequestView, ServiceError> {
        let (row, t) = self.visible_quota_request(who, id).await?;
        if who.role_in(t.id) != Some(TenantRole::TenantAdmin) {
            return Err(ServiceError::Forbidden(
                "only the tenant's admins submit quota requests; ask one of them".to_owned(),
            ));
        }
        let now = self.now();
        let mut w = self.begin_write().await?;
        let next = Self::check_quota_request_event(&row, &QuotaRequestEvent::Submit)?;
        let changed = quota_request::Entity::update_many()
            .col_expr(quota_request::Column::State, Expr::value(next.phase()))
            .col_expr(
                quota_request::Column::SubmittedByUserId,
                Expr::value(who.user_id),
            )
            .col_expr(
                quota_request::Column::SubmittedBy,
                Expr::value(who.audit_name()),
            )
            .col_expr(quota_request::Column::UpdatedAt, Expr::value(now))
            .filter(quota_request::Column::Id.eq(id))
            .filter(quota_request::Column::State.eq(QuotaRequestPhase::Proposed))
            .exec(w.db())
            .await?
            .rows_affected;
        if changed == 0 {
            return Err(Self::already_moved(w.db(), id).await);
        }
        w.emit(DomainEvent::QuotaRequestSubmitted {
            request: QuotaRequestRef::of(&row, &t),
            amount: super::quota_from_columns(row.compute_milli, row.memory_mib, row.max_slices),
            requested_by_user_id: row.requested_by_user_id,
        });
        w.commit(self, &Actor::User(who)).await?;
        self.quota_request_view(who, id).await
    }

    /// The requester or a tenant admin takes a request back before a decision.
    pub async fn withdraw_quota_request(
        &self,
        who: &Principal,
        id: QuotaRequestId,
    ) -> Result<QuotaRequestView, ServiceError> {
        let (row, t) = self.visible_quota_request(who, id).await?;
        let mine = row.requested_by_user_id == Some(who.user_id);
        if !mine && who.role_in(t.id) != Some(TenantRole::TenantAdmin) {
            return Err(ServiceError::Forbidden(
                "only the requester or a tenant admin can withdraw this request".to_owned(),
            ));
        }
        let now = self.now();
        let mut w = self.begin_write().await?;
        let next = Self::check_quota_request_event(&row, &QuotaRequestEvent::Withdraw)?;
        let changed = quota_request::Entity::update_many()
            .col_expr(quota_request::Column::State, Expr::value(next.phase()))
            .col_expr(quota_request::Column::UpdatedAt, Expr::value(now))
            .filter(quota_request::Column::Id.eq(id))
            .filter(quota_request::Column::State.eq(row.state))
            .exec(w.db())
            .await?
            .rows_affected;
        if changed == 0 {
            return Err(Self::already_moved(w.db(), id).await);
        }
        w.emit(DomainEvent::QuotaRequestWithdrawn {
            request: QuotaRequestRef::of(&row, &t),
            before: stored_state(&row),
            requested_by_user_id: row.requested_by_user_id,
            by: who.name.clone(),
        });
        w.commit(self, &Actor::User(who)).await?;
        self.quota_request_view(who, id).await
    }

    /// The request if the caller may see it: its tenant's members and the
    /// platform admins; anyone else gets a 404.
    pub(crate) async fn visible_quota_request(
        &self,
        who: &Principal,
        id: QuotaRequestId,
    ) -> Result<(quota_request::Model, tenant::Model), ServiceError> {
        let not_found = || ServiceError::not_found(format!("quota request {id}"));
        let row = quota_request::Entity::find_by_id(id)
            .one(&self.db)
            .await?
            .ok_or_else(not_found)?;
        if who.role_in(row.tenant_id).is_none() && !who.platform_admin {
            return Err(not_found());
        }
        let t = tenant::Entity::find_by_id(row.tenant_id)
            .one(&self.db)
            .await?
            .ok_or_else(not_found)?;
        Ok((row, t))
    }

    /// The state after `event`, or a 409 (or 400) that says why not.
    pub(crate) fn check_quota_request_event(
        row: &quota_request::Model,
        event: &QuotaRequestEvent,
    ) -> Result<QuotaRequestState, ServiceError> {
        let state = stored_state(row);
        quota_request_transition(&state, event).map_err(|e| match e {
            tessera_core::lifecycle::QuotaRequestError::ReasonRequired => {
                ServiceError::invalid("reason", e.to_string())
            }
            other => ServiceError::Conflict(decided_message(row, &other.to_string())),
        })
    }

    /// The 409 for a request that changed state under us.
    pub(crate) async fn already_moved<C: sea_orm::ConnectionTrait>(
        conn: &C,
        id: QuotaRequestId,
    ) -> ServiceError {
        match quota_request::Entity::find_by_id(id).one(conn).await {
            Ok(Some(row)) => ServiceError::Conflict(decided_message(
                &row,
                &format!("quota request {id} is already {}", row.state),
            )),
            Ok(None) => ServiceError::not_found(format!("quota request {id}")),
            Err(e) => e.into(),
        }
    }
}

/// The stored state as core's enum.
pub(crate) fn stored_state(row: &quota_request::Model) -> QuotaRequestState {
    row.state.with_reason(row.reject_reason.as_deref())
}

/// A conflict message that says who decided, when someone did.
fn decided_message(row: &quota_request::Model, fallback: &str) -> String {
    match &row.decided_by {
        Some(by) if row.state.is_decided() => format!(
            "quota request {} was already {} by {by}; reload to see the decision",
            row.id, row.state
        ),
        _ => fallback.to_owned(),
    }
}
