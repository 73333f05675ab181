//! The audit log as a hash chain: every row's `hash` is the SHA-256 of the
//! previous row's hash and the row's own content, and the chain's head (the
//! last hash and the number of chained rows) is kept in `audit_chain`. A
//! write locks the head while it appends its rows, so the chain follows the
//! rows' id order on every replica. [`Service::verify_audit_chain`] walks the
//! rows and names the first one whose content no longer matches, or says the
//! end of the log was cut off. Editing a row and recomputing every later
//! hash (and the head) is not detected here: that is what the independent
//! copy of the export is for.

use crate::entity::{audit_chain, audit_event};
use crate::{Service, ServiceError};
use chrono::{DateTime, SecondsFormat, SubsecRound, Utc};
use sea_orm::sea_query::Expr;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseTransaction, DbBackend, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Statement,
};
use serde_json::json;
use sha2::{Digest, Sha256};

/// Rows read per round while verifying.
const VERIFY_BATCH: u64 = 2_000;

/// The instant an audit row stores: whole microseconds, which both
/// databases keep exactly, so the hash of a row read back matches.
pub(crate) fn stored_instant(at: DateTime<Utc>) -> DateTime<Utc> {
    at.trunc_subsecs(6)
}

/// The hash of `row` after `prev` (hex SHA-256 of the previous hash, a
/// newline, and the row's content as JSON with sorted keys; the id is not
/// part of it, the order is).
pub(crate) fn link(prev: &str, row: &audit_event::Model) -> String {
    let content = json!({
        "at": row.at.to_rfc3339_opts(SecondsFormat::Micros, true),
        "actor_user_id": row.actor_user_id.map(|u| u.get()),
        "actor": row.actor,
        "tenant_id": row.tenant_id.map(|t| t.get()),
        "action": row.action.as_str(),
        "target_type": row.target_type.as_str(),
        "target_id": row.target_id,
        "before": row.before,
        "after": row.after,
    });
    let mut h = Sha256::new();
    h.update(prev.as_bytes());
    h.update(b"\n");
    h.update(content.to_string().as_bytes());
    hex::encode(h.finalize())
}

/// The chain's head, locked until the transaction ends. PostgreSQL: the
/// row lock orders appenders (and retention); a waiting one reads the head
/// its predecessor wrote. SQLite: the write already holds the lock.
pub(crate) async fn locked_head(
    txn: &DatabaseTransaction,
) -> Result<audit_chain::Model, ServiceError> {
    let backend = txn.get_database_backend();
    let sql = match backend {
        DbBackend::Postgres => "SELECT * FROM audit_chain WHERE id = 1 FOR UPDATE",
        _ => "SELECT * FROM audit_chain WHERE id = 1",
    };
    audit_chain::Entity::find()
        .from_raw_sql(Statement::from_string(backend, sql))
        .one(txn)
        .await?
        .ok_or_else(|| ServiceError::internal("the audit chain has no head row"))
}

/// Chains `rows` (in order) after the head, which stays locked until the
/// transaction ends, and moves the head past them.
pub(crate) async fn append(
    txn: &DatabaseTransaction,
    rows: &mut [audit_event::Model],
) -> Result<(), ServiceError> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut last = locked_head(txn).await?.last_hash;
    for row in rows.iter_mut() {
        let hash = link(&last, row);
        row.hash = Some(hash.clone());
        last = hash;
    }
    audit_chain::Entity::update_many()
        .col_expr(audit_chain::Column::LastHash, Expr::value(last))
        .col_expr(
            audit_chain::Column::Rows,
            Expr::col(audit_chain::Column::Rows).add(rows.len() as i64),
        )
        .filter(audit_chain::Column::Id.eq(1))
        .exec(txn)
        .await?;
    Ok(())
}

/// What a walk of the audit chain found.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AuditChainReport {
    /// Chained rows whose hash matched.
    pub verified: u64,
    /// The last of them.
    pub verified_up_to: Option<i64>,
    /// Rows written before the chain began (no hash).
    pub unchained: u64,
    /// Chained rows retention deleted (the walk starts from the last one's hash).
    pub pruned: u64,
    /// The last row retention deleted.
    pub pruned_through: Option<i64>,
    /// The first break, if any.
    pub broken: Option<BrokenLink>,
}

/// Where the chain breaks.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BrokenLink {
    /// The row (for a cut-off end: the last row present).
    pub row: Option<i64>,
    /// What is wrong.
    pub reason: String,
}

impl Service {
    /// Walks the whole audit log in id order and checks every link of the
    /// chain, and that the last one is the head (nothing cut off the end).
    pub async fn verify_audit_chain(&self) -> Result<AuditChainReport, ServiceError> {
        // The head first: rows appended after it are not this walk's.
        let head = audit_chain::Entity::find_by_id(1)
            .one(&self.db)
            .await?
            .ok_or_else(|| ServiceError::internal("the audit chain has no head row"))?;
        let pruned = u64::try_from(head.pruned_rows).unwrap_or(0);
        let mut report = AuditChainReport {
            verified: 0,
            verified_up_to: None,
            unchained: 0,
            pruned,
            pruned_through: head.pruned_through,
            broken: None,
        };
        // The rows kept chain on from the last one retention deleted.
        let chained = u64::try_from(head.rows).unwrap_or(0).saturating_sub(pruned);
        let mut last = head.pruned_hash.clone();
        let mut after = head.pruned_through.unwrap_or(0);
        let mut started = !last.is_empty();
        'walk: while report.verified < chained {
            let rows = audit_event::Entity::find()
                .filter(audit_event::Column::Id.gt(after))
                .order_by_asc(audit_event::Column::Id)
                .limit(VERIFY_BATCH)
                .all(&self.db)
                .await?;
            let Some(end) = rows.last().map(|r| r.id) else {
                break;
            };
            after = end;
            for row in rows {
                match &row.hash {
                    None if !started => report.unchained += 1,
                    None => {
                        report.broken = Some(BrokenLink {
                            row: Some(row.id),
                            reason: "its hash was removed".to_owned(),
                        });
                        break 'walk;
                    }
                    Some(stored) => {
                        started = true;
                        if *stored != link(&last, &row) {
                            report.broken = Some(BrokenLink {
                                row: Some(row.id),
                                reason: "its content or order does not match its hash (edited, or a row before it removed)".to_owned(),
                            });
                            break 'walk;
                        }
                        last = stored.clone();
                        report.verified += 1;
                        report.verified_up_to = Some(row.id);
                        if report.verified == chained {
                            break 'walk;
                        }
                    }
                }
            }
        }
        if report.broken.is_none() && (report.verified != chained || head.last_hash != last) {
            report.broken = Some(BrokenLink {
                row: report.verified_up_to,
                reason: format!(
                    "the log ends before the chain's head ({chained} rows chained, {} found): rows were removed at the end",
                    report.verified
                ),
            });
        }
        Ok(report)
    }
}

impl From<AuditChainReport> for tessera_protocol::views::AuditChainStatus {
    fn from(r: AuditChainReport) -> Self {
        Self {
            verified: r.verified,
            verified_up_to: r.verified_up_to,
            unchained: r.unchained,
            pruned: r.pruned,
            pruned_through: r.pruned_through,
            keep_days: None,
            broken: r.broken.map(|b| (b.row, b.reason)),
        }
    }
}
