//! Tenants asking for more quota: members propose, tenant admins submit (or
//! submit a member's proposal), and either may withdraw before a decision.

use super::admin::{amount, reason_text};
use super::quota_columns;
use crate::audit::{self, Actor, Event};
use crate::entity::{quota_request, tenant};
use crate::notifications::{self, Notice};
use crate::{Principal, Service, ServiceError};
use sea_orm::sea_query::Expr;
use sea_orm::{ActiveModelTrait, ColumnTrait, EntityTrait, QueryFilter, Set};
use serde_json::json;
use tessera_core::lifecycle::{quota_request_transition, QuotaRequestEvent, QuotaRequestState};
use tessera_core::slice::label;
use tessera_protocol::quotas::{NewQuotaRequest, QuotaRequestView};
use tessera_protocol::views::TenantRole;

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
        let spec = self.pool_spec("pool", &req.pool)?.clone();
        let q = amount(&req.amount)?;
        if q.is_zero() {
            return Err(ServiceError::invalid(
                "amount",
                "ask for more GPU compute, memory or slices than nothing",
            ));
        }
        let now = self.now();
        if req.ends_at.is_some_and(|e| e <= now) {
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
        let (compute, memory, slices) = quota_columns(&q);
        let (txn, _turn) = self.write_txn().await?;
        let admin_submits = state == QuotaRequestState::Pending;
        let row = quota_request::ActiveModel {
            tenant_id: Set(t.id),
            pool: Set(spec.name.clone()),
            compute_milli: Set(compute),
            memory_mib: Set(memory),
            max_slices: Set(slices),
            ends_at: Set(req.ends_at),
            justification: Set(justification.clone()),
            state: Set(state.name().to_owned()),
            reject_reason: Set(None),
            requested_by_user_id: Set(Some(who.user_id)),
            requested_by: Set(who.audit_name()),
            submitted_by_user_id: Set(admin_submits.then_some(who.user_id)),
            submitted_by: Set(admin_submits.then(|| who.audit_name())),
            slice: Set(req.slice.as_ref().map(|s| json!(s))),
            slice_user_id: Set(req.slice.as_ref().map(|_| who.user_id)),
            slice_requested_by: Set(req.slice.as_ref().map(|_| who.audit_name())),
            created_at: Set(now),
            updated_at: Set(now),
            ..Default::default()
        }
        .insert(&txn)
        .await?;
        audit::record(
            &txn,
            Event {
                actor: Actor::User(who),
                tenant_id: Some(t.id),
                action: "quota_request.create",
                target_type: "quota_request",
                target_id: row.id.to_string(),
                before: None,
                after: Some(json!({
                    "state": state.name(), "pool": spec.name, "amount": q,
                    "ends_at": req.ends_at, "justification": justification,
                    "slice": req.slice.as_ref().map(|s| label(&s.shape)),
                })),
            },
            now,
        )
        .await?;
        let (recipients, title) = if admin_submits {
            (
                notifications::platform_admins(&txn).await?,
                format!("{} asks for +{} in {}", t.name, q, spec.name),
            )
        } else {
            (
                notifications::tenant_admins(&txn, t.id).await?,
                format!(
                    "{} proposes a quota request: +{} in {}",
                    who.name, q, spec.name
                ),
            )
        };
        self.tell_others(
            &txn,
            who,
            recipients,
            &t,
            &row,
            "quota_request.created",
            title,
            now,
        )
        .await?;
        txn.commit().await?;
        self.quota_request_view(who, row.id).await
    }

    /// A tenant admin submits a member's proposal to the platform admins.
    pub async fn submit_quota_request(
        &self,
        who: &Principal,
        id: i64,
    ) -> Result<QuotaRequestView, ServiceError> {
        let (row, t) = self.visible_quota_request(who, id).await?;
        if who.role_in(t.id) != Some(TenantRole::TenantAdmin) {
            return Err(ServiceError::Forbidden(
                "only the tenant's admins submit quota requests; ask one of them".to_owned(),
            ));
        }
        let now = self.now();
        let (txn, _turn) = self.write_txn().await?;
        let next = Self::check_quota_request_event(&row, &QuotaRequestEvent::Submit)?;
        let changed = quota_request::Entity::update_many()
            .col_expr(quota_request::Column::State, Expr::value(next.name()))
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
            .filter(quota_request::Column::State.eq("proposed"))
            .exec(&txn)
            .await?
            .rows_affected;
        if changed == 0 {
            return Err(Self::already_moved(&txn, id).await);
        }
        audit::record(
            &txn,
            Event {
                actor: Actor::User(who),
                tenant_id: Some(t.id),
                action: "quota_request.submit",
                target_type: "quota_request",
                target_id: id.to_string(),
                before: Some(json!({"state": "proposed"})),
                after: Some(json!({"state": "pending"})),
            },
            now,
        )
        .await?;
        let mut recipients = notifications::platform_admins(&txn).await?;
        recipients.extend(row.requested_by_user_id);
        let title = format!(
            "{} asks for +{} in {}",
            t.name,
            super::quota_from_columns(row.compute_milli, row.memory_mib, row.max_slices),
            row.pool
        );
        self.tell_others(
            &txn,
            who,
            recipients,
            &t,
            &row,
            "quota_request.submitted",
            title,
            now,
        )
        .await?;
        txn.commit().await?;
        self.quota_request_view(who, id).await
    }

    /// The requester or a tenant admin takes a request back before a decision.
    pub async fn withdraw_quota_request(
        &self,
        who: &Principal,
        id: i64,
    ) -> Result<QuotaRequestView, ServiceError> {
        let (row, t) = self.visible_quota_request(who, id).await?;
        let mine = row.requested_by_user_id == Some(who.user_id);
        if !mine && who.role_in(t.id) != Some(TenantRole::TenantAdmin) {
            return Err(ServiceError::Forbidden(
                "only the requester or a tenant admin can withdraw this request".to_owned(),
            ));
        }
        let now = self.now();
        let (txn, _turn) = self.write_txn().await?;
        let next = Self::check_quota_request_event(&row, &QuotaRequestEvent::Withdraw)?;
        let changed = quota_request::Entity::update_many()
            .col_expr(quota_request::Column::State, Expr::value(next.name()))
            .col_expr(quota_request::Column::UpdatedAt, Expr::value(now))
            .filter(quota_request::Column::Id.eq(id))
            .filter(quota_request::Column::State.eq(row.state.clone()))
            .exec(&txn)
            .await?
            .rows_affected;
        if changed == 0 {
            return Err(Self::already_moved(&txn, id).await);
        }
        audit::record(
            &txn,
            Event {
                actor: Actor::User(who),
                tenant_id: Some(t.id),
                action: "quota_request.withdraw",
                target_type: "quota_request",
                target_id: id.to_string(),
                before: Some(json!({"state": row.state})),
                after: Some(json!({"state": "withdrawn"})),
            },
            now,
        )
        .await?;
        let title = format!("Quota request #{id} was withdrawn by {}", who.name);
        self.tell_others(
            &txn,
            who,
            row.requested_by_user_id,
            &t,
            &row,
            "quota_request.withdrawn",
            title,
            now,
        )
        .await?;
        txn.commit().await?;
        self.quota_request_view(who, id).await
    }

    /// The request if the caller may see it: its tenant's members and the
    /// platform admins; anyone else gets a 404.
    pub(crate) async fn visible_quota_request(
        &self,
        who: &Principal,
        id: i64,
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
        id: i64,
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

    /// Notifies `recipients` other than the actor about a quota request.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn tell_others<C: sea_orm::ConnectionTrait>(
        &self,
        conn: &C,
        who: &Principal,
        recipients: impl IntoIterator<Item = i64>,
        t: &tenant::Model,
        row: &quota_request::Model,
        kind: &'static str,
        title: String,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<(), ServiceError> {
        let others: Vec<i64> = recipients
            .into_iter()
            .filter(|u| *u != who.user_id)
            .collect();
        notifications::send(
            conn,
            others,
            &Notice {
                tenant_id: Some(t.id),
                kind,
                title,
                body: format!("Pool {}: {}", row.pool, row.justification),
                link: Some(format!("/t/{}/quota#request-{}", t.slug, row.id)),
                data: json!({"quota_request": row.id, "pool": row.pool}),
            },
            now,
        )
        .await?;
        Ok(())
    }
}

/// The stored state as core's enum.
pub(crate) fn stored_state(row: &quota_request::Model) -> QuotaRequestState {
    match row.state.as_str() {
        "proposed" => QuotaRequestState::Proposed,
        "pending" => QuotaRequestState::Pending,
        "approved" => QuotaRequestState::Approved,
        "rejected" => QuotaRequestState::Rejected {
            reason: row.reject_reason.clone().unwrap_or_default(),
        },
        _ => QuotaRequestState::Withdrawn,
    }
}

/// A conflict message that says who decided, when someone did.
fn decided_message(row: &quota_request::Model, fallback: &str) -> String {
    match (&row.decided_by, row.state.as_str()) {
        (Some(by), "approved" | "rejected") => format!(
            "quota request {} was already {} by {by}; reload to see the decision",
            row.id, row.state
        ),
        _ => fallback.to_owned(),
    }
}
