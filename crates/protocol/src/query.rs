//! Query strings of pages: the audit log's filters, parsed from and written
//! back to the URL, and the one percent-encoder every URL Tessera builds uses.

use chrono::{DateTime, Utc};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::{Deserialize, Serialize};

/// Every byte but RFC 3986's unreserved characters (`A-Z a-z 0-9 - . _ ~`).
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `s` percent-encoded (UTF-8) as a query value or a path segment: only
/// unreserved characters stay as they are, a space becomes `%20`.
pub fn encode_component(s: &str) -> String {
    utf8_percent_encode(s, COMPONENT).to_string()
}

/// A page number from a query string: empty is none, else a number from 1.
fn page_of(s: &str) -> Result<Option<u32>, (&'static str, String)> {
    match s.trim() {
        "" => Ok(None),
        p => p
            .parse::<u32>()
            .ok()
            .filter(|n| *n >= 1)
            .map(Some)
            .ok_or(("page", format!("'{p}' is not a page number"))),
    }
}

/// A text filter from a query string: trimmed, and none when empty.
fn text_of(s: &str) -> Option<String> {
    Some(s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// Filters of the audit log (all optional).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditFilter {
    /// Tenant slug.
    #[serde(default)]
    pub tenant: Option<String>,
    /// Part of the actor's name or e-mail.
    #[serde(default)]
    pub actor: Option<String>,
    /// Action, or its prefix (`allocation.` for every allocation event).
    #[serde(default)]
    pub action: Option<String>,
    /// From (inclusive).
    #[serde(default)]
    pub from: Option<DateTime<Utc>>,
    /// Until (exclusive).
    #[serde(default)]
    pub until: Option<DateTime<Utc>>,
    /// Page, from 1.
    #[serde(default)]
    pub page: Option<u32>,
}

/// The audit log's filters as a page's query string carries them
/// (`?tenant=&actor=&action=&from=YYYY-MM-DD&until=YYYY-MM-DD&page=`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditQuery {
    /// Tenant slug.
    #[serde(default)]
    pub tenant: String,
    /// Part of the actor's name.
    #[serde(default)]
    pub actor: String,
    /// Action prefix.
    #[serde(default)]
    pub action: String,
    /// First day (UTC), inclusive.
    #[serde(default)]
    pub from: String,
    /// Last day (UTC), inclusive.
    #[serde(default)]
    pub until: String,
    /// Page, from 1.
    #[serde(default)]
    pub page: String,
}

impl AuditQuery {
    /// The filter, or the field that does not parse and why.
    pub fn filter(&self) -> Result<AuditFilter, (&'static str, String)> {
        let day = |field: &'static str, s: &str, plus_days: u64| {
            let s = s.trim();
            if s.is_empty() {
                return Ok(None);
            }
            let d = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .map_err(|_| (field, format!("'{s}' is not a date like 2026-11-29")))?;
            d.checked_add_days(chrono::Days::new(plus_days))
                .map(|d| d.and_time(chrono::NaiveTime::MIN).and_utc())
                .and_then(|t| {
                    // Through the one check of entered instants, so the
                    // filter orders alike on both databases.
                    crate::timestamp::Timestamp::new(t.min(crate::timestamp::Timestamp::latest()))
                        .ok()
                })
                .map(|t| Some(t.get()))
                .ok_or_else(|| {
                    (
                        field,
                        format!("'{s}' is not between 1970-01-01 and 9999-12-31"),
                    )
                })
        };
        let page = page_of(&self.page)?;
        Ok(AuditFilter {
            tenant: text_of(&self.tenant),
            actor: text_of(&self.actor),
            action: text_of(&self.action),
            from: day("from", &self.from, 0)?,
            until: day("until", &self.until, 1)?,
            page,
        })
    }

    /// The same query for another page, as a query string.
    pub fn to_query_string(&self, page: u32) -> String {
        let enc = encode_component;
        format!(
            "tenant={}&actor={}&action={}&from={}&until={}&page={page}",
            enc(&self.tenant),
            enc(&self.actor),
            enc(&self.action),
            enc(&self.from),
            enc(&self.until)
        )
    }
}

/// Which hosts the fleet page lists.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostFilter {
    /// Reported within the grace period.
    Online,
    /// Silent for longer than the grace period.
    Offline,
    /// Needs an admin's eye: offline, a GPU not healthy, or cordoned,
    /// draining or in maintenance (the host or one of its GPUs).
    Attention,
}

impl HostFilter {
    /// Every filter, in the order the page offers them.
    pub const ALL: [Self; 3] = [Self::Online, Self::Offline, Self::Attention];

    /// Its name in URLs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Online => "online",
            Self::Offline => "offline",
            Self::Attention => "attention",
        }
    }

    /// What the page calls it.
    pub fn label(self) -> &'static str {
        match self {
            Self::Online => "Online",
            Self::Offline => "Offline",
            Self::Attention => "Needs attention",
        }
    }
}

/// `GET /api/v1/fleet`: which hosts, and which page of them (all optional).
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams))]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetFilter {
    /// Part of the host name (case-insensitive).
    #[serde(default)]
    pub q: Option<String>,
    /// Hosts with a GPU in this pool.
    #[serde(default)]
    pub pool: Option<String>,
    /// online, offline or attention.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", param(inline))]
    pub status: Option<HostFilter>,
    /// Page, from 1 (hosts by name, 50 a page).
    #[serde(default)]
    pub page: Option<u32>,
}

/// The fleet page's filters as its query string carries them
/// (`?q=&pool=&status=&page=`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetQuery {
    /// Part of the host name.
    #[serde(default)]
    pub q: String,
    /// Pool name.
    #[serde(default)]
    pub pool: String,
    /// online, offline or attention.
    #[serde(default)]
    pub status: String,
    /// Page, from 1.
    #[serde(default)]
    pub page: String,
}

impl FleetQuery {
    /// The filter, or the field that does not parse and why.
    pub fn filter(&self) -> Result<FleetFilter, (&'static str, String)> {
        let status = match self.status.trim() {
            "" => None,
            s => Some(
                HostFilter::ALL
                    .into_iter()
                    .find(|f| f.as_str() == s)
                    .ok_or((
                        "status",
                        format!("'{s}' is not one of online, offline, attention"),
                    ))?,
            ),
        };
        let page = page_of(&self.page)?;
        Ok(FleetFilter {
            q: text_of(&self.q),
            pool: text_of(&self.pool),
            status,
            page,
        })
    }

    /// The same query for another page, as a query string.
    pub fn to_query_string(&self, page: u32) -> String {
        let enc = encode_component;
        format!(
            "q={}&pool={}&status={}&page={page}",
            enc(&self.q),
            enc(&self.pool),
            enc(&self.status)
        )
    }
}

#[cfg(test)]
mod fleet_query_tests {
    use super::*;

    #[test]
    fn filters_parse_and_bad_input_names_the_field() {
        let q = FleetQuery {
            q: " gpu-0 ".into(),
            status: "attention".into(),
            page: "3".into(),
            ..Default::default()
        };
        let f = q.filter().unwrap();
        assert_eq!(f.q.as_deref(), Some("gpu-0"));
        assert_eq!(f.pool, None);
        assert_eq!(f.status, Some(HostFilter::Attention));
        assert_eq!(f.page, Some(3));
        let bad = |status: &str, page: &str| {
            FleetQuery {
                status: status.into(),
                page: page.into(),
                ..Default::default()
            }
            .filter()
            .unwrap_err()
            .0
        };
        assert_eq!(bad("sick", ""), "status");
        assert_eq!(bad("", "0"), "page");
        assert_eq!(bad("", "two"), "page");
        assert_eq!(
            FleetQuery {
                q: "rack b".into(),
                ..Default::default()
            }
            .to_query_string(2),
            "q=rack%20b&pool=&status=&page=2"
        );
    }
}

#[cfg(test)]
mod audit_query_tests {
    use super::*;

    #[test]
    fn days_become_a_half_open_range_and_bad_input_names_the_field() {
        let q = AuditQuery {
            from: "2026-11-01".into(),
            until: "2026-11-29".into(),
            action: " allocation. ".into(),
            ..Default::default()
        };
        let f = q.filter().unwrap();
        assert_eq!(f.from.unwrap().to_rfc3339(), "2026-11-01T00:00:00+00:00");
        assert_eq!(f.until.unwrap().to_rfc3339(), "2026-11-30T00:00:00+00:00");
        assert_eq!(f.action.as_deref(), Some("allocation."));
        assert_eq!(f.tenant, None);
        let bad = AuditQuery {
            from: "yesterday".into(),
            ..Default::default()
        };
        assert_eq!(bad.filter().unwrap_err().0, "from");
        let page = AuditQuery {
            page: "0".into(),
            ..Default::default()
        };
        assert_eq!(page.filter().unwrap_err().0, "page");
        // The last date chrono knows has no next day: an error, not a panic.
        let last = AuditQuery {
            until: "+262142-12-31".into(),
            ..Default::default()
        };
        assert_eq!(last.filter().unwrap_err().0, "until");
        let first = AuditQuery {
            from: "+262142-12-31".into(),
            ..Default::default()
        };
        assert_eq!(
            first.filter().unwrap().from.unwrap().to_rfc3339(),
            "9999-12-31T23:59:59+00:00",
            "beyond the year 9999: the last instant both databases order alike"
        );
        let last_day = AuditQuery {
            until: "9999-12-31".into(),
            ..Default::default()
        };
        assert_eq!(
            last_day.filter().unwrap().until.unwrap().to_rfc3339(),
            "9999-12-31T23:59:59+00:00"
        );
        let early = AuditQuery {
            from: "1969-12-31".into(),
            ..Default::default()
        };
        assert_eq!(early.filter().unwrap_err().0, "from");
        let q = AuditQuery {
            actor: "Bob B".into(),
            ..Default::default()
        };
        assert!(q.to_query_string(2).contains("actor=Bob%20B&"));
        assert!(q.to_query_string(2).ends_with("page=2"));
    }

    #[test]
    fn components_keep_only_unreserved_characters() {
        assert_eq!(encode_component("a-Z_0.9~"), "a-Z_0.9~");
        assert_eq!(encode_component("Bob B"), "Bob%20B");
        assert_eq!(encode_component("/fleet?tab=gpus"), "%2Ffleet%3Ftab%3Dgpus");
        assert_eq!(encode_component("+&=#%*'"), "%2B%26%3D%23%25%2A%27");
        assert_eq!(encode_component("Zoë"), "Zo%C3%AB");
        assert_eq!(encode_component(""), "");
    }
}
