//! Platform admins decide quota requests: approve (optionally a different
//! amount or end date) or reject with a reason. The decision and the quota
//! change commit together; a request is decided once (a conditional update
//! makes the loser of a race a 409). With four-eyes on, nobody decides a
//! request they filed or submitted, or one of a tenant they administer.

use super::admin::{amount, reason_text};
use super::{quota_columns, quota_from_columns};
use crate::audit::Actor;
use crate::entity::quota_request;
use crate::events::{DomainEvent, QuotaRequestRef, TenantRef};
use crate::TenantActor;
use crate::{PlatformAdmin, Principal, Service, ServiceError};
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
use tessera_core::ids::{QuotaRequestId, UserId};
use tessera_core::lifecycle::QuotaRequestEvent;
use tessera_core::lifecycle::QuotaRequestPhase;
use tessera_protocol::quotas::{QuotaDecision, QuotaRequestView};
use tessera_protocol::views::{NewAllocation, TenantRole};

/// Why four-eyes stops `who` from deciding `row`, if it does.
pub(crate) fn four_eyes_block(who: &Principal, row: &quota_request::Model) -> Option<String> {
    if row.requested_by_user_id == Some(who.user_id) || row.slice_user_id == Some(who.user_id) {
        return Some("you filed this request; another platform admin must decide it".to_owned());
    }
    if row.submitted_by_user_id == Some(who.user_id) {
        return Some(
            "you submitted this request; another platform admin must decide it".to_owned(),
        );
    }
    if who.role_in(row.tenant_id) == Some(TenantRole::TenantAdmin) {
        return Some(
            "you administer this tenant; another platform admin must decide its requests"
                .to_owned(),
        );
    }
    None
}

impl Service {
    /// Approves or rejects a pending quota request.
    pub async fn decide_quota_request(
        &self,
        admin: &PlatformAdmin<'_>,
        id: QuotaRequestId,
        decision: &QuotaDecision,
    ) -> Result<QuotaRequestView, ServiceError> {
        let who = admin.principal();
        let (row, t) = self.visible_quota_request(who, id).await?;
        if self.settings.four_eyes {
            if let Some(why) = four_eyes_block(who, &row) {
                return Err(ServiceError::Forbidden(why));
            }
        }
        let now = self.now();
        let asked = quota_from_columns(row.compute_milli, row.memory_mib, row.max_slices);
        let event = match decision {
            QuotaDecision::Approve { .. } => QuotaRequestEvent::Approve,
            QuotaDecision::Reject { reason } => QuotaRequestEvent::Reject {
                reason: reason_text("reason", reason, true)?,
            },
        };
        let next = Self::check_quota_request_event(&row, &event)?;
        let grant = match decision {
            QuotaDecision::Approve { amount: a, ends_at } => {
                let q = match a {
                    Some(a) => amount(a)?,
                    None => asked,
                };
                if q.is_zero() {
                    return Err(ServiceError::invalid(
                        "amount",
                        "approve more than nothing, or reject the request with a reason",
                    ));
                }
                let ends = ends_at.map(|e| e.get()).or(row.ends_at);
                if ends.is_some_and(|e| e <= now) {
                    return Err(ServiceError::invalid(
                        "ends_at",
                        "must be in the future; change the end date or approve it as permanent",
                    ));
                }
                Some((q, ends))
            }
            QuotaDecision::Reject { .. } => None,
        };

        let mut w = self.begin_admission().await?;
        let mut update = quota_request::Entity::update_many()
            .col_expr(quota_request::Column::State, Expr::value(next.phase()))
            .col_expr(
                quota_request::Column::DecidedByUserId,
                Expr::value(who.user_id),
            )
            .col_expr(
                quota_request::Column::DecidedBy,
                Expr::value(who.audit_name()),
            )
            .col_expr(quota_request::Column::DecidedAt, Expr::value(now))
            .col_expr(quota_request::Column::UpdatedAt, Expr::value(now));
        if let QuotaRequestEvent::Reject { reason } = &event {
            update = update.col_expr(
                quota_request::Column::RejectReason,
                Expr::value(reason.clone()),
            );
        }
        if let Some((q, ends)) = &grant {
            let (c, m, s) = quota_columns(q);
            update = update
                .col_expr(quota_request::Column::GrantedComputeMilli, Expr::value(c))
                .col_expr(quota_request::Column::GrantedMemoryMib, Expr::value(m))
                .col_expr(quota_request::Column::GrantedMaxSlices, Expr::value(s))
                .col_expr(quota_request::Column::GrantedEndsAt, Expr::value(*ends));
        }
        // Only a still-pending request is decided: of two admins racing,
        // the second updates nothing and gets a 409.
        let changed = update
            .filter(quota_request::Column::Id.eq(id))
            .filter(quota_request::Column::State.eq(QuotaRequestPhase::Pending))
            .exec(w.db())
            .await?
            .rows_affected;
        if changed == 0 {
            return Err(Self::already_moved(w.db(), id).await);
        }
        let before = Self::quota_view(w.db(), t.id, &row.pool, now).await?;
        if let Some((q, ends)) = &grant {
            match ends {
                Some(ends) => {
                    Self::write_grant(
                        w.db(),
                        t.id,
                        &row.pool,
                        q,
                        *ends,
                        &row.justification,
                        Some(id),
                        &who.audit_name(),
                        now,
                    )
                    .await?;
                }
                None => {
                    let raised = before.base.plus(q);
                    Self::write_base_quota(w.db(), t.id, &row.pool, &raised, now).await?;
                }
            }
        }
        let after = Self::quota_view(w.db(), t.id, &row.pool, now).await?;
        let request = QuotaRequestRef::of(&row, &t);
        let people: Vec<UserId> = [
            row.requested_by_user_id,
            row.submitted_by_user_id,
            row.slice_user_id,
        ]
        .into_iter()
        .flatten()
        .collect();
        let by = who.name.clone();
        w.emit(match (&grant, event) {
            (Some((granted, ends_at)), _) => DomainEvent::QuotaRequestApproved {
                request,
                asked,
                granted: *granted,
                ends_at: *ends_at,
                before: before.quota,
                after: after.quota,
                by,
                people,
            },
            (None, QuotaRequestEvent::Reject { reason }) => DomainEvent::QuotaRequestRejected {
                request,
                asked,
                reason,
                quota: after.quota,
                by,
                people,
            },
            (None, other) => {
                return Err(ServiceError::Conflict(format!(
                    "quota request {id} cannot be decided by {}",
                    other.name()
                )))
            }
        });
        // Committing approves and retries the queue; then the slice that
        // waited for this quota is requested.
        w.commit(self, &Actor::User(who)).await?;
        if grant.is_some() {
            self.request_waiting_slice(&row, &t).await?;
        }
        self.quota_request_view(who, id).await
    }

    /// Requests the slice that waited for this quota, for the person who
    /// asked for it; records the allocation, or why it still does not fit.
    async fn request_waiting_slice(
        &self,
        row: &quota_request::Model,
        t: &crate::entity::tenant::Model,
    ) -> Result<(), ServiceError> {
        let Some(slice) = &row.slice else {
            return Ok(());
        };
        let actor = TenantActor {
            tenant_id: t.id,
            tenant_slug: t.slug.clone(),
            name: row
                .slice_requested_by
                .clone()
                .unwrap_or_else(|| row.requested_by.clone()),
            user_id: row.slice_user_id,
            rights: tessera_core::role::SliceRights::Use,
            platform_admin: false,
        };
        // A stored slice that does not read back is refused like one that
        // does not fit: the requester learns why, and the approval stands.
        let outcome = match serde_json::from_value::<NewAllocation>(slice.clone()) {
            Ok(slice) => self.request_allocation(&actor, &slice).await,
            Err(e) => {
                tracing::error!(quota_request = row.id.get(), error = %e, "the stored waiting slice is unreadable");
                Err(ServiceError::Conflict(format!(
                    "the slice stored with quota request {} can no longer be read; ask for it again",
                    row.id
                )))
            }
        };
        let (allocation_id, error) = match outcome {
            Ok(a) => (Some(a.id), None),
            Err(e) => {
                tracing::info!(quota_request = row.id.get(), error = %e, "the waiting slice could not be requested");
                (None, Some(e.public_message()))
            }
        };
        let mut w = self.begin_write().await?;
        quota_request::Entity::update_many()
            .col_expr(
                quota_request::Column::AllocationId,
                Expr::value(allocation_id),
            )
            .col_expr(
                quota_request::Column::SliceError,
                Expr::value(error.clone()),
            )
            .col_expr(quota_request::Column::UpdatedAt, Expr::value(w.now()))
            .filter(quota_request::Column::Id.eq(row.id))
            .exec(w.db())
            .await?;
        if let Some(error) = error {
            w.emit(DomainEvent::WaitingSliceRefused {
                request_id: row.id,
                tenant: TenantRef::of(t),
                user_id: row.slice_user_id,
                error,
            });
        }
        w.commit(self, &Actor::System).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::ids::TenantId;
    use tessera_protocol::views::MembershipView;

    fn row() -> quota_request::Model {
        let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
        quota_request::Model {
            id: QuotaRequestId::new(1),
            tenant_id: TenantId::new(7),
            pool: "p".parse().unwrap(),
            compute_milli: 1000,
            memory_mib: 0,
            max_slices: 1,
            ends_at: None,
            justification: "j".into(),
            state: QuotaRequestPhase::Pending,
            reject_reason: None,
            requested_by_user_id: Some(UserId::new(10)),
            requested_by: "m".into(),
            submitted_by_user_id: Some(UserId::new(11)),
            submitted_by: Some("a".into()),
            decided_by_user_id: None,
            decided_by: None,
            decided_at: None,
            granted_compute_milli: None,
            granted_memory_mib: None,
            granted_max_slices: None,
            granted_ends_at: None,
            slice: None,
            slice_user_id: None,
            slice_requested_by: None,
            allocation_id: None,
            slice_error: None,
            created_at: now,
            updated_at: now,
        }
    }

    fn admin(user_id: UserId, tenant_admin_of: Option<TenantId>) -> Principal {
        Principal {
            user_id,
            name: "A".into(),
            email: None,
            platform_admin: true,
            memberships: tenant_admin_of
                .map(|t| {
                    (
                        t,
                        MembershipView {
                            slug: "t".into(),
                            name: "T".into(),
                            role: TenantRole::TenantAdmin,
                        },
                    )
                })
                .into_iter()
                .collect(),
        }
    }

    #[test]
    fn four_eyes_blocks_requester_submitter_and_tenant_admins() {
        assert!(four_eyes_block(&admin(UserId::new(10), None), &row()).is_some());
        assert!(four_eyes_block(&admin(UserId::new(11), None), &row()).is_some());
        assert!(four_eyes_block(&admin(UserId::new(12), Some(TenantId::new(7))), &row()).is_some());
        assert_eq!(
            four_eyes_block(&admin(UserId::new(12), Some(TenantId::new(8))), &row()),
            None
        );
        assert_eq!(four_eyes_block(&admin(UserId::new(12), None), &row()), None);
    }
}
