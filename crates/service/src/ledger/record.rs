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
    /// and opens the next; opens the first span of a new GPU (see
    /// [`Self::first_span_start`]) and closes the span of a GPU that is
    /// gone. A host that fell silent is silent from its last heartbeat plus
    /// the offline limit, and heard again from the latest heartbeat when
    /// the timer notices. Several replicas may run this at once:
    /// a span is closed by the one whose update found it still open, and
    /// (GPU, start) is the key, so each change is recorded once. Returns
    /// the spans opened or closed.
    pub(crate) async fn record_gpu_conditions(
        &self,
        now: DateTime<Utc>,
    ) -> Result<u32, ServiceError> {
        let db = &self.db;
        // The open spans first, then the state they are compared with: a
        // replica that read the state before another's change then finds
        // the span that change closed already closed, and leaves it.
        let mut open: BTreeMap<String, gpu_condition::Model> = gpu_condition::Entity::find()
            .filter(gpu_condition::Column::UntilMs.is_null())
            .all(db)
            .await?
            .into_iter()
            .map(|s| (s.gpu_uuid.clone(), s))
            .collect();
        // When the ledger began (its first span), if it has.
        let began: Option<i64> = gpu_condition::Entity::find()
            .order_by_asc(gpu_condition::Column::FromMs)
            .one(db)
            .await?
            .map(|s| s.from_ms);
        let hosts: BTreeMap<_, host::Model> = host::Entity::find()
            .all(db)
            .await?
            .into_iter()
            .map(|h| (h.id, h))
            .collect();
        let gpus = gpu::Entity::find().all(db).await?;
        let pools = self.pools(db).await?;
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
                    let last = gpu_condition::Entity::find()
                        .filter(gpu_condition::Column::GpuUuid.eq(&g.uuid))
                        .order_by_desc(gpu_condition::Column::FromMs)
                        .one(db)
                        .await?;
                    let from_ms = match last {
                        // Another replica opened it after we looked.
                        Some(s) if s.until_ms.is_none() => continue,
                        // Closed by a replica that opens the next one at
                        // its end too, so the two agree on the key.
                        Some(s) => s.until_ms.unwrap_or(now_ms),
                        None => self.first_span_start(h, began, now_ms).await?,
                    };
                    changed += self
                        .open_span(gpu_condition::Model {
                            from_ms: from_ms.min(now_ms),
                            ..next
                        })
                        .await?;
                }
                Some(span)
                    if span.condition != next.condition
                        || span.pool != next.pool
                        || span.host_id != next.host_id =>
                {
                    // Silence starts at the last heartbeat plus the offline
                    // limit and ends at the latest heartbeat the timer saw;
                    // a decision (maintenance, resume) takes effect now.
                    let planned = span.condition == GpuCondition::Maintenance
                        || condition == GpuCondition::Maintenance;
                    let when = match (span.condition, condition) {
                        _ if planned => now,
                        (GpuCondition::Silent, GpuCondition::Silent) => now,
                        (_, GpuCondition::Silent) => h.last_seen_at.map_or(now, |s| s + offline),
                        (GpuCondition::Silent, _) => h.last_seen_at.unwrap_or(now),
                        _ => now,
                    };
                    let mut at = when.timestamp_millis().min(now_ms);
                    if at <= span.from_ms {
                        at = now_ms.max(span.from_ms + 1);
                    }
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

    /// Where a GPU's history starts when it has none: its host's enrolment
    /// for a host that enrolled after the ledger began and has no history
    /// yet (its GPUs came with it); now for a GPU added to a host the
    /// ledger knows (a replacement must not count the old one's time
    /// twice), and for every GPU when the ledger begins (nothing is
    /// invented for the time before: slices of that time are *unrecorded*).
    async fn first_span_start(
        &self,
        h: &host::Model,
        began: Option<i64>,
        now_ms: i64,
    ) -> Result<i64, ServiceError> {
        let Some(began) = began else {
            return Ok(now_ms);
        };
        let known = gpu_condition::Entity::find()
            .filter(gpu_condition::Column::HostId.eq(h.id))
            .one(&self.db)
            .await?
            .is_some();
        let enrolled = h.enrolled_at.timestamp_millis();
        Ok(if known || enrolled < began {
            now_ms
        } else {
            enrolled
        })
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
