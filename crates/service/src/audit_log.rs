//! Reading the audit log: platform admins see everything, tenant admins their
//! own tenants' events; filters, paging and CSV export.

use crate::entity::{audit_event, tenant};
use crate::{Principal, Service, ServiceError};
use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use sea_orm::{ColumnTrait, Condition, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder};
use std::collections::BTreeMap;
use tessera_core::ids::TenantId;
use tessera_protocol::views::{AuditEventView, AuditFilter, AuditPage, TenantRole};

/// Events per page.
pub const PAGE_SIZE: u64 = 50;
/// Most events one CSV export holds.
pub const CSV_LIMIT: u64 = 100_000;

/// The earliest date the audit filters accept.
fn first_date() -> DateTime<Utc> {
    DateTime::<Utc>::UNIX_EPOCH
}

/// The end of the last day the audit filters accept (9999-12-31): later
/// times do not fit the four-digit years the database compares.
fn last_date_end() -> DateTime<Utc> {
    NaiveDate::from_ymd_opt(10_000, 1, 1)
        .unwrap_or(NaiveDate::MAX)
        .and_time(NaiveTime::MIN)
        .and_utc()
}

/// A filter's date, if it lies between [`first_date`] and [`last_date_end`].
fn checked_date(
    field: &str,
    at: Option<DateTime<Utc>>,
) -> Result<Option<DateTime<Utc>>, ServiceError> {
    match at {
        Some(at) if at < first_date() || at > last_date_end() => Err(ServiceError::invalid(
            field,
            "must be a date between 1970-01-01 and 9999-12-31",
        )),
        other => Ok(other),
    }
}

impl Service {
    /// The tenants `who` may read events of: all for platform admins (`None`),
    /// otherwise the tenants they administer.
    fn audit_scope(who: &Principal) -> Result<Option<Vec<TenantId>>, ServiceError> {
        if who.platform_admin {
            return Ok(None);
        }
        let mine: Vec<TenantId> = who
            .memberships
            .iter()
            .filter(|(_, m)| m.role == TenantRole::TenantAdmin)
            .map(|(id, _)| *id)
            .collect();
        if mine.is_empty() {
            return Err(ServiceError::Forbidden(
                "the audit log is for platform admins and tenant admins".to_owned(),
            ));
        }
        Ok(Some(mine))
    }

    async fn audit_condition(
        &self,
        who: &Principal,
        filter: &AuditFilter,
    ) -> Result<
        (
            Condition,
            BTreeMap<TenantId, (tessera_core::checked::TenantSlug, String)>,
        ),
        ServiceError,
    > {
        let scope = Self::audit_scope(who)?;
        let tenants: BTreeMap<TenantId, (tessera_core::checked::TenantSlug, String)> =
            tenant::Entity::find()
                .all(&self.db)
                .await?
                .into_iter()
                .filter(|t| scope.as_ref().is_none_or(|s| s.contains(&t.id)))
                .map(|t| (t.id, (t.slug, t.name)))
                .collect();
        let mut cond = Condition::all();
        if let Some(ids) = &scope {
            cond = cond.add(audit_event::Column::TenantId.is_in(ids.clone()));
        }
        if let Some(slug) = filter.tenant.as_deref().filter(|s| !s.is_empty()) {
            let id = tenants
                .iter()
                .find(|(_, (s, _))| s == slug)
                .map(|(id, _)| *id)
                .ok_or_else(|| ServiceError::not_found(format!("tenant '{slug}'")))?;
            cond = cond.add(audit_event::Column::TenantId.eq(id));
        }
        if let Some(actor) = filter
            .actor
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            cond = cond.add(audit_event::Column::Actor.contains(actor));
        }
        if let Some(action) = filter
            .action
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            cond = cond.add(audit_event::Column::Action.starts_with(action));
        }
        let from = checked_date("from", filter.from)?;
        let until = checked_date("until", filter.until)?.filter(|u| *u < last_date_end());
        if let (Some(from), Some(until)) = (from, until) {
            if from >= until {
                return Err(ServiceError::invalid("from", "must be before 'until'"));
            }
        }
        if let Some(from) = from {
            cond = cond.add(audit_event::Column::At.gte(from));
        }
        if let Some(until) = until {
            cond = cond.add(audit_event::Column::At.lt(until));
        }
        Ok((cond, tenants))
    }

    fn event_view(
        e: audit_event::Model,
        tenants: &BTreeMap<TenantId, (tessera_core::checked::TenantSlug, String)>,
    ) -> AuditEventView {
        AuditEventView {
            id: e.id,
            at: e.at,
            actor: e.actor,
            tenant: e
                .tenant_id
                .and_then(|id| tenants.get(&id).map(|(slug, _)| slug.to_string())),
            action: e.action,
            target_type: e.target_type,
            target_id: e.target_id,
            before: e.before.map(|v| v.to_string()),
            after: e.after.map(|v| v.to_string()),
        }
    }

    /// One page of the audit log, newest first.
    pub async fn audit_log(
        &self,
        who: &Principal,
        filter: &AuditFilter,
    ) -> Result<AuditPage, ServiceError> {
        let (cond, tenants) = self.audit_condition(who, filter).await?;
        let page = filter.page.unwrap_or(1).max(1);
        let paginator = audit_event::Entity::find()
            .filter(cond)
            .order_by_desc(audit_event::Column::Id)
            .paginate(&self.db, PAGE_SIZE);
        let total = paginator.num_items().await?;
        let events = paginator
            .fetch_page(u64::from(page - 1))
            .await?
            .into_iter()
            .map(|e| Self::event_view(e, &tenants))
            .collect();
        let pages = u32::try_from(total.div_ceil(PAGE_SIZE).max(1)).unwrap_or(u32::MAX);
        // Platform admins see whether the whole log still proves itself.
        let chain = match who.platform_admin {
            true => {
                let mut status: tessera_protocol::views::AuditChainStatus =
                    self.verify_audit_chain().await?.into();
                status.keep_days = self.settings.audit.keep_days;
                Some(status)
            }
            false => None,
        };
        Ok(AuditPage {
            events,
            total,
            page,
            pages,
            tenants: tenants
                .into_values()
                .map(|(slug, name)| (slug.into(), name))
                .collect(),
            chain,
        })
    }

    /// Every matching event (newest first, at most [`CSV_LIMIT`]) as CSV.
    pub async fn audit_csv(
        &self,
        who: &Principal,
        filter: &AuditFilter,
    ) -> Result<String, ServiceError> {
        let (rows, tenants) = self.export_rows(who, filter).await?;
        let mut out =
            String::from("id,at,actor,tenant,action,target_type,target_id,before,after\n");
        for e in rows {
            let v = Self::event_view(e, &tenants);
            let fields = [
                v.id.to_string(),
                v.at.to_rfc3339(),
                v.actor,
                v.tenant.unwrap_or_default(),
                v.action.to_string(),
                v.target_type.to_string(),
                v.target_id,
                v.before.unwrap_or_default(),
                v.after.unwrap_or_default(),
            ];
            let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
            out.push_str(&line.join(","));
            out.push('\n');
        }
        Ok(out)
    }
}

impl Service {
    /// The newest matching events (at most [`CSV_LIMIT`]), newest first, and
    /// the tenants the caller may see, for the downloads.
    async fn export_rows(
        &self,
        who: &Principal,
        filter: &AuditFilter,
    ) -> Result<
        (
            Vec<audit_event::Model>,
            BTreeMap<TenantId, (tessera_core::checked::TenantSlug, String)>,
        ),
        ServiceError,
    > {
        let (cond, tenants) = self.audit_condition(who, filter).await?;
        let rows = audit_event::Entity::find()
            .filter(cond)
            .order_by_desc(audit_event::Column::Id)
            .paginate(&self.db, CSV_LIMIT)
            .fetch_page(0)
            .await?;
        Ok((rows, tenants))
    }

    /// The newest matching events (at most [`CSV_LIMIT`]), oldest first, as
    /// JSON lines with their chain hashes, for a SIEM to keep an independent
    /// copy.
    pub async fn audit_jsonl(
        &self,
        who: &Principal,
        filter: &AuditFilter,
    ) -> Result<String, ServiceError> {
        let (rows, tenants) = self.export_rows(who, filter).await?;
        let mut out = String::new();
        for e in rows.into_iter().rev() {
            let line = serde_json::json!({
                "id": e.id,
                "at": e.at,
                "actor": e.actor,
                "actor_user_id": e.actor_user_id.map(|u| u.get()),
                "tenant": e.tenant_id.and_then(|id| tenants.get(&id).map(|(slug, _)| slug.to_string())),
                "action": e.action.as_str(),
                "target_type": e.target_type.as_str(),
                "target_id": e.target_id,
                "before": e.before,
                "after": e.after,
                "hash": e.hash,
            });
            out.push_str(&line.to_string());
            out.push('\n');
        }
        Ok(out)
    }
}

/// Characters a spreadsheet may read as the start of a formula at the start
/// of a cell (OWASP's CSV injection list: tab and carriage return too).
const FORMULA_STARTS: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// RFC 4180 quoting; a field that starts like a formula is prefixed with `'`
/// so a spreadsheet shows it as text instead of running it.
pub(crate) fn csv_field(s: &str) -> String {
    let s = if s.starts_with(FORMULA_STARTS) {
        format!("'{s}")
    } else {
        s.to_owned()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::csv_field;

    #[test]
    fn csv_quotes_and_defuses_formulas() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("=cmd()"), "'=cmd()");
        for formula in ["+1+1", "-1+1", "@SUM(A1)", "=HYPERLINK(\"x\")"] {
            assert!(csv_field(formula).trim_start_matches('"').starts_with('\''));
        }
        // Tab and carriage return can start a formula too (OWASP).
        assert_eq!(csv_field("\t=cmd()"), "'\t=cmd()");
        assert_eq!(csv_field("\r=cmd()"), "\"'\r=cmd()\"");
        // Only at the start: inside a field they are plain characters.
        assert_eq!(csv_field("a\tb=c"), "a\tb=c");
        assert_eq!(csv_field("a@b.c"), "a@b.c");
        assert_eq!(
            csv_field("{\"state\":\"active\"}"),
            "\"{\"\"state\"\":\"\"active\"\"}\""
        );
    }
}
