//! Keeps each GPU's condition history (`gpu_conditions`) for the ledger:
//! the timer and every fleet decision record what changed since.

use crate::entity::{gpu, gpu_condition, host};
use crate::pools::pool_of;
use crate::{Service, ServiceError};
use chrono::{DateTime, Utc};
use sea_orm::sea_query::{Expr, OnConflict};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, Set};
use std::collections::BTreeMap;
use tessera_core::availability::OpsMode;
use tessera_core::ledger::GpuCondition;

impl Service {
    /// Closes the open span of every GPU whose condition or pool changed
    /// and opens the next; opens the first span of a new GPU (from its
    /// host's enrolment) and closes the span of a GPU that is gone. A host
    /// that fell silent is silent from its last heartbeat plus the offline
    /// limit, and heard again from the heartbeat that ended the silence,
    /// whenever the timer notices. Several replicas may run this at once:
    /// a span is closed by the one whose update found it still open, and
    /// (GPU, start) is the key, so each change is recorded once. Returns
    /// the spans opened or closed.
    pub(crate) async fn record_gpu_conditions(
        &self,
        now: DateTime<Utc>,
    ) -> Result<u32, ServiceError> {
        let db = &self.db;
        let hosts: BTreeMap<_, host::Model> = host::Entity::find()
            .all(db)
            .await?
            .into_iter()
            .map(|h| (h.id, h))
            .collect();
        let gpus = gpu::Entity::find().all(db).await?;
        let pools = self.pools(db).await?;
        let mut open: BTreeMap<String, gpu_condition::Model> = gpu_condition::Entity::find()
            .filter(gpu_condition::Column::UntilMs.is_null())
            .all(db)
            .await?
            .into_iter()
            .map(|s| (s.gpu_uuid.clone(), s))
            .collect();
        let offline = self.settings.host_offline_after;
        let now_ms = now.timestamp_millis();
        let mut changed = 0;
        for g in &gpus {
            let Some(h) = hosts.get(&g.host_id) else {
                continue;
            };
            let heard = h.last_seen_at.is_some_and(|s| now - s <= offline);
            let ops = OpsMode::effective(h.ops_mode, g.ops_mode);
            let condition = GpuCondition::of(g.health, ops, heard);
            let pool = pool_of(&pools, h.hostname.as_str(), &g.model).map(|p| p.name.to_string());
            let next = gpu_condition::Model {
                gpu_uuid: g.uuid.clone(),
                from_ms: now_ms,
                until_ms: None,
                condition,
                host_id: h.id,
                hostname: h.hostname.to_string(),
                model: g.model.clone(),
                pool,
            };
            match open.remove(&g.uuid) {
                None => {
                    // From the end of its last span (a replica that closed
                    // it opens the next one there too, so the two agree),
                    // else from its host's enrolment.
                    let last = gpu_condition::Entity::find()
                        .filter(gpu_condition::Column::GpuUuid.eq(&g.uuid))
                        .order_by_desc(gpu_condition::Column::FromMs)
                        .one(db)
                        .await?;
                    let from_ms = last
                        .and_then(|s| s.until_ms)
                        .unwrap_or_else(|| h.enrolled_at.timestamp_millis())
                        .min(now_ms);
                    changed += self
                        .open_span(gpu_condition::Model { from_ms, ..next })
                        .await?;
                }
                Some(span)
                    if span.condition != next.condition
                        || span.pool != next.pool
                        || span.host_id != next.host_id =>
                {
                    let when = match (span.condition, condition) {
                        (_, GpuCondition::Silent) => h.last_seen_at.map_or(now, |s| s + offline),
                        (GpuCondition::Silent, _) => h.last_seen_at.unwrap_or(now),
                        _ => now,
                    };
                    let at = when.timestamp_millis().min(now_ms).max(span.from_ms + 1);
                    if self.close_span(&span, at).await? {
                        changed += 1 + self
                            .open_span(gpu_condition::Model {
                                from_ms: at,
                                ..next
                            })
                            .await?;
                    }
                }
                Some(_) => {}
            }
        }
        // GPUs that are gone (decommissioned hosts, GPUs no longer reported).
        for span in open.values() {
            if self.close_span(span, now_ms.max(span.from_ms + 1)).await? {
                changed += 1;
            }
        }
        Ok(changed)
    }

    /// Ends `span` at `at` if it is still open; false when another replica
    /// got there first.
    async fn close_span(&self, span: &gpu_condition::Model, at: i64) -> Result<bool, ServiceError> {
        let done = gpu_condition::Entity::update_many()
            .col_expr(gpu_condition::Column::UntilMs, Expr::value(at))
            .filter(gpu_condition::Column::GpuUuid.eq(&span.gpu_uuid))
            .filter(gpu_condition::Column::FromMs.eq(span.from_ms))
            .filter(gpu_condition::Column::UntilMs.is_null())
            .exec(&self.db)
            .await?;
        Ok(done.rows_affected == 1)
    }

    /// Inserts `span` unless a replica already did (same GPU and start).
    async fn open_span(&self, span: gpu_condition::Model) -> Result<u32, ServiceError> {
        let row = gpu_condition::ActiveModel {
            gpu_uuid: Set(span.gpu_uuid),
            from_ms: Set(span.from_ms),
            until_ms: Set(None),
            condition: Set(span.condition),
            host_id: Set(span.host_id),
            hostname: Set(span.hostname),
            model: Set(span.model),
            pool: Set(span.pool),
        };
        let done = gpu_condition::Entity::insert(row)
            .on_conflict(
                OnConflict::columns([
                    gpu_condition::Column::GpuUuid,
                    gpu_condition::Column::FromMs,
                ])
                .do_nothing()
                .to_owned(),
            )
            .exec_without_returning(&self.db)
            .await?;
        Ok(u32::try_from(done).unwrap_or(0))
    }
}
