//! Audit retention: rows older than `[audit] keep_days` are deleted, oldest
//! first, and the chain stays verifiable. The head keeps the hash of the
//! last deleted row (the anchor the rows kept chain on from), its id, and
//! how many chained rows were deleted; each round that deletes writes an
//! `audit.prune` row saying so, itself chained. Without `keep_days` nothing
//! is deleted.

use crate::audit::Actor;
use crate::audit_chain::locked_head;
use crate::entity::{audit_chain, audit_event};
use crate::events::DomainEvent;
use crate::{Service, ServiceError};
use chrono::TimeDelta;
use sea_orm::sea_query::Expr;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde::{Deserialize, Serialize};

/// Rows deleted per round at most (a long backlog goes over several rounds).
pub const PRUNE_BATCH: u64 = 5_000;

/// The longest retention a configuration may set: a hundred years.
const MAX_KEEP_DAYS: u32 = 36_500;

/// `[audit]`: how long audit rows are kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditRetention {
    /// Rows older than this many days are deleted; unset: kept forever.
    pub keep_days: Option<u32>,
}

impl AuditRetention {
    /// Checks the setting (1 day to a hundred years).
    pub fn validate(&self) -> Result<(), ServiceError> {
        match self.keep_days {
            Some(d) if d == 0 || d > MAX_KEEP_DAYS => Err(ServiceError::invalid(
                "audit.keep_days",
                format!(
                    "must be between 1 and {MAX_KEEP_DAYS} days, or left out to keep every row"
                ),
            )),
            _ => Ok(()),
        }
    }
}

/// The id and hash of a row retention deletes.
#[derive(Debug, sea_orm::FromQueryResult)]
struct Doomed {
    id: i64,
    hash: Option<String>,
}

impl Service {
    /// One retention round: deletes up to [`PRUNE_BATCH`] of the oldest
    /// rows written before the retention (every row before the first one
    /// still within it), moves the chain's anchor past them and records
    /// `audit.prune`. Returns how many rows it deleted (none without a
    /// retention, or when the oldest row is still within it).
    pub async fn prune_audit(&self) -> Result<u64, ServiceError> {
        let Some(days) = self.settings.audit.keep_days else {
            return Ok(0);
        };
        let cutoff = self.now() - TimeDelta::days(i64::from(days));
        // Most rounds find nothing to do: find that out without a write.
        let oldest = audit_event::Entity::find()
            .order_by_asc(audit_event::Column::Id)
            .one(&self.db)
            .await?;
        if oldest.is_none_or(|r| r.at >= cutoff) {
            return Ok(0);
        }
        let mut w = self.begin_write().await?;
        let head = locked_head(w.db()).await?;
        // Rows go in id order (the chain's order): everything before the
        // first row still within the retention, even a row whose clock ran
        // a little behind.
        let keep_from = audit_event::Entity::find()
            .filter(audit_event::Column::At.gte(cutoff))
            .order_by_asc(audit_event::Column::Id)
            .one(w.db())
            .await?
            .map(|r| r.id);
        let mut doomed = audit_event::Entity::find()
            .select_only()
            .column(audit_event::Column::Id)
            .column(audit_event::Column::Hash)
            .order_by_asc(audit_event::Column::Id)
            .limit(PRUNE_BATCH);
        if let Some(id) = keep_from {
            doomed = doomed.filter(audit_event::Column::Id.lt(id));
        }
        let doomed: Vec<Doomed> = doomed.into_model().all(w.db()).await?;
        let Some(last) = doomed.last() else {
            return Ok(0);
        };
        let through = last.id;
        let chained = doomed.iter().filter(|d| d.hash.is_some()).count() as i64;
        let anchor = last
            .hash
            .clone()
            .unwrap_or_else(|| head.pruned_hash.clone());
        let deleted = audit_event::Entity::delete_many()
            .filter(audit_event::Column::Id.lte(through))
            .exec(w.db())
            .await?
            .rows_affected;
        audit_chain::Entity::update_many()
            .col_expr(audit_chain::Column::PrunedHash, Expr::value(anchor.clone()))
            .col_expr(audit_chain::Column::PrunedThrough, Expr::value(through))
            .col_expr(
                audit_chain::Column::PrunedRows,
                Expr::col(audit_chain::Column::PrunedRows).add(chained),
            )
            .filter(audit_chain::Column::Id.eq(1))
            .exec(w.db())
            .await?;
        w.emit(DomainEvent::AuditPruned {
            rows: deleted,
            through,
            anchor,
            keep_days: days,
        });
        w.commit(self, &Actor::System).await?;
        Ok(deleted)
    }
}
