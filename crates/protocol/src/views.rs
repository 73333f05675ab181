//! Read models for pages and the REST API.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// A tenant role.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TenantRole {
    /// Uses the tenant's quota.
    Member,
    /// Also manages the tenant (quota requests, API tokens).
    TenantAdmin,
}

impl TenantRole {
    /// The stored and displayed name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Member => "member",
            Self::TenantAdmin => "tenant-admin",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "member" => Some(Self::Member),
            "tenant-admin" => Some(Self::TenantAdmin),
            _ => None,
        }
    }
}

/// The signed-in user as the layout shows them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewerView {
    /// User id.
    pub id: i64,
    /// Display name.
    pub name: String,
    /// E-mail, when the IdP sent one.
    pub email: Option<String>,
    /// Whether the user is a platform admin.
    pub platform_admin: bool,
    /// The user's tenants with their role in each.
    pub tenants: Vec<MembershipView>,
}

/// One of the viewer's tenants.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MembershipView {
    /// URL slug of the tenant.
    pub slug: String,
    /// Display name of the tenant.
    pub name: String,
    /// The viewer's role there.
    pub role: TenantRole,
}

/// A tenant's home page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TenantView {
    /// URL slug.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Cost centre for chargeback.
    pub cost_centre: Option<String>,
    /// Members and their roles.
    pub members: Vec<MemberView>,
    /// The tenant's allocations (live first, then newest first).
    pub allocations: Vec<AllocationView>,
    /// Quota and use per pool.
    pub quotas: Vec<QuotaView>,
    /// The viewer may request slices here (a member).
    pub can_request: bool,
    /// The viewer may manage API tokens here (a tenant admin).
    pub can_manage_tokens: bool,
}

/// One member of a tenant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberView {
    /// Display name.
    pub name: String,
    /// E-mail, when known.
    pub email: Option<String>,
    /// Role in the tenant.
    pub role: TenantRole,
    /// Last login.
    pub last_login_at: Option<DateTime<Utc>>,
}

/// Liveness of a host, derived from when it last reported.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HostStatus {
    /// Reported within the grace period.
    Online,
    /// Silent for longer than the grace period.
    Offline,
}

impl HostStatus {
    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Online => "online",
            Self::Offline => "offline",
        }
    }
}

/// The fleet page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetView {
    /// Pools with their GPU counts.
    pub pools: Vec<PoolView>,
    /// Hosts, by name.
    pub hosts: Vec<HostView>,
    /// When the view was computed (server clock).
    pub as_of: DateTime<Utc>,
}

/// A GPU pool as the fleet page shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolView {
    /// Name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// How its GPUs are shared.
    pub sharing: tessera_core::sharing::SharingMode,
    /// Who it is for.
    pub isolation: tessera_core::sharing::IsolationClass,
    /// GPUs in the pool.
    pub gpus: u32,
    /// Of those, on hosts that are online.
    pub gpus_online: u32,
}

/// One host and its GPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostView {
    /// Host id.
    pub id: i64,
    /// Host name.
    pub hostname: String,
    /// Derived liveness.
    pub status: HostStatus,
    /// Last report, if any.
    pub last_seen_at: Option<DateTime<Utc>>,
    /// CPUs in thousandths.
    pub cpu_milli: i64,
    /// Host memory in MiB.
    pub memory_mib: i64,
    /// Agent version.
    pub agent_version: Option<String>,
    /// Backend (`nvml` or `simulated`).
    pub backend: Option<String>,
    /// Driver version.
    pub driver_version: Option<String>,
    /// GPUs, by index.
    pub gpus: Vec<GpuView>,
}

/// One GPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuView {
    /// NVML index.
    pub index: i32,
    /// UUID.
    pub uuid: String,
    /// Catalogue model name (or the driver's name for an unknown model).
    pub model: String,
    /// Memory in MiB.
    pub memory_mib: i64,
    /// MIG-capable.
    pub mig_capable: bool,
    /// MIG mode on.
    pub mig_enabled: bool,
    /// Health text.
    pub health: String,
    /// MIG instances the agent last saw (empty when none or unknown).
    pub mig_instances: Vec<MigInstanceView>,
    /// The pool the GPU belongs to, if any.
    pub pool: Option<String>,
    /// Who holds slices on it that are not MIG instances (`vision: 1 whole GPU`).
    pub holders: Vec<String>,
}

/// One MIG GPU instance on a GPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigInstanceView {
    /// Profile, e.g. `3g.40gb`.
    pub profile: String,
    /// Start memory slice.
    pub start: u8,
    /// Processes running in it.
    pub in_use: bool,
    /// The tenant whose allocation it is (none: made outside Tessera).
    pub tenant: Option<String>,
}

/// A join token as listed (never the secret).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinTokenView {
    /// Id.
    pub id: i64,
    /// What it is for.
    pub description: String,
    /// Who created it.
    pub created_by: Option<String>,
    /// When.
    pub created_at: DateTime<Utc>,
    /// Expiry.
    pub expires_at: DateTime<Utc>,
    /// Whether it can still be used, and if not why.
    pub status: JoinTokenStatus,
    /// Host that used it.
    pub used_by_host: Option<String>,
}

/// Where a join token stands, derived from its timestamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JoinTokenStatus {
    /// Unused and unexpired: an agent can enrol with it.
    Active,
    /// An agent enrolled with it.
    Used,
    /// Its time ran out unused.
    Expired,
    /// An admin revoked it.
    Revoked,
}

impl JoinTokenStatus {
    /// Lower-case name, as serialized.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Used => "used",
            Self::Expired => "expired",
            Self::Revoked => "revoked",
        }
    }
}

impl std::fmt::Display for JoinTokenStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A join token right after creation: the only time the secret is shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedJoinToken {
    /// The listed view.
    pub token: JoinTokenView,
    /// The secret to hand to the agent.
    pub secret: String,
}

/// The heading an error page shows for an HTTP status (shared by the server's
/// standalone error pages and the app's error panel).
pub fn error_title(status: u16) -> &'static str {
    match status {
        400 => "Check your input",
        401 => "Sign-in required",
        403 => "Not allowed",
        404 => "Not found",
        409 => "Conflict",
        _ => "Something went wrong",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn error_titles() {
        assert_eq!(super::error_title(403), "Not allowed");
        assert_eq!(super::error_title(400), "Check your input");
        assert_eq!(super::error_title(502), "Something went wrong");
    }
}

/// A tenant's quota and use in one pool.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaView {
    /// Pool name.
    pub pool: String,
    /// The limit in force: permanent plus unexpired temporary grants.
    pub quota: tessera_core::quota::Quota,
    /// What live allocations (queued included) hold.
    pub usage: tessera_core::quota::Usage,
    /// The permanent part.
    #[serde(default)]
    pub base: tessera_core::quota::Quota,
    /// Temporary grants in force.
    #[serde(default)]
    pub grants: Vec<crate::quotas::QuotaGrantView>,
}

/// What a tenant asks for (UI form and `POST /api/v1/allocations`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewAllocation {
    /// Tenant slug (the API token's tenant when omitted with a token).
    #[serde(default)]
    pub tenant: Option<String>,
    /// Pool name.
    pub pool: String,
    /// The slice.
    pub shape: tessera_core::sharing::SliceShape,
    /// Lease length in hours (at most the pool's maximum).
    pub lease_hours: u32,
    /// What it is for (shown to admins; up to 500 characters).
    #[serde(default)]
    pub purpose: String,
}

/// An allocation as its tenant (and platform admins) see it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationView {
    /// Id.
    pub id: i64,
    /// Tenant slug.
    pub tenant: String,
    /// Pool.
    pub pool: String,
    /// Where it is in its life.
    pub state: tessera_core::lifecycle::AllocationPhase,
    /// Why it failed, or why the last teardown failed.
    pub reason: Option<String>,
    /// For `releasing`: the phase it will end in (`released`, `expired`, `failed`).
    pub ending_as: Option<tessera_core::lifecycle::AllocationPhase>,
    /// The slice asked for.
    pub shape: tessera_core::sharing::SliceShape,
    /// Short description of the slice.
    pub shape_label: String,
    /// What it costs against the quota.
    pub demand: tessera_core::quota::Demand,
    /// Purpose given.
    pub purpose: String,
    /// Who asked.
    pub requested_by: String,
    /// Lease length asked for, in hours.
    pub lease_hours: u32,
    /// When the lease ends (set when it becomes active).
    pub lease_ends_at: Option<DateTime<Utc>>,
    /// The pool's longest lease (for the extend form).
    pub max_lease_hours: u32,
    /// Host, once placed.
    pub host: Option<String>,
    /// GPUs (index and UUID), once placed.
    pub gpus: Vec<AllocatedGpu>,
    /// MIG start slice, for MIG slices.
    pub mig_start: Option<u8>,
    /// Place in the pool's queue (1 = next), while queued.
    pub queue_position: Option<u32>,
    /// How to use it, once active.
    pub connection: Option<tessera_core::slice::Connection>,
    /// Timestamps.
    pub created_at: DateTime<Utc>,
    /// When it was placed.
    pub placed_at: Option<DateTime<Utc>>,
    /// When it became active.
    pub active_at: Option<DateTime<Utc>>,
    /// When it ended.
    pub ended_at: Option<DateTime<Utc>>,
    /// Server time of this view.
    pub as_of: DateTime<Utc>,
}

impl AllocationView {
    /// No further change will happen.
    pub fn is_terminal(&self) -> bool {
        use tessera_core::lifecycle::AllocationPhase as P;
        matches!(self.state, P::Released | P::Failed | P::Expired)
    }
}

/// A GPU an allocation uses.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocatedGpu {
    /// Device index on the host.
    pub index: u32,
    /// GPU UUID.
    pub uuid: String,
    /// Catalogue model.
    pub model: String,
}

/// Extending a lease (`POST /api/v1/allocations/{id}/extend`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtendLease {
    /// Hours to add to the current end.
    pub hours: u32,
}

/// One pool in the request form.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolChoice {
    /// Policy, models and lease limit (the form validates with these).
    pub offer: tessera_core::slice::PoolOffer,
    /// What it is for.
    pub description: String,
    /// Isolation class.
    pub isolation: tessera_core::sharing::IsolationClass,
    /// GPUs on online hosts.
    pub gpus_online: u32,
    /// The tenant's quota here, if it has one.
    pub quota: Option<tessera_core::quota::Quota>,
    /// The tenant's use here.
    pub usage: tessera_core::quota::Usage,
    /// Requests waiting in this pool.
    pub queued: u32,
}

/// The request form's data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestOptions {
    /// Tenant slug.
    pub tenant: String,
    /// Tenant name.
    pub tenant_name: String,
    /// Pools the tenant can use.
    pub pools: Vec<PoolChoice>,
}

/// A tenant API token as listed (never the secret).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiTokenView {
    /// Id.
    pub id: i64,
    /// Name.
    pub name: String,
    /// First characters, to tell tokens apart.
    pub prefix: String,
    /// Who created it.
    pub created_by: String,
    /// When.
    pub created_at: DateTime<Utc>,
    /// Last use.
    pub last_used_at: Option<DateTime<Utc>>,
    /// Revoked, if so.
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A token right after creation: the only time the secret is shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedApiToken {
    /// The listed view.
    pub token: ApiTokenView,
    /// The secret (`tsk_...`).
    pub secret: String,
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

/// One audit event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEventView {
    /// Id (events are append-only; ids grow with time).
    pub id: i64,
    /// When.
    pub at: DateTime<Utc>,
    /// Who.
    pub actor: String,
    /// Tenant concerned, if any.
    pub tenant: Option<String>,
    /// What, e.g. `allocation.release`.
    pub action: String,
    /// Kind of target.
    pub target_type: String,
    /// Target id.
    pub target_id: String,
    /// State before, as JSON.
    pub before: Option<String>,
    /// State after, as JSON.
    pub after: Option<String>,
}

/// A page of the audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditPage {
    /// Newest first.
    pub events: Vec<AuditEventView>,
    /// Events matching the filter.
    pub total: u64,
    /// This page (from 1).
    pub page: u32,
    /// Pages.
    pub pages: u32,
    /// Tenants the viewer may filter by (slug, name).
    pub tenants: Vec<(String, String)>,
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
        let day = |field: &'static str, s: &str, plus_days: i64| {
            let s = s.trim();
            if s.is_empty() {
                return Ok(None);
            }
            chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .map(|d| {
                    Some(
                        (d + chrono::Duration::days(plus_days))
                            .and_time(chrono::NaiveTime::MIN)
                            .and_utc(),
                    )
                })
                .map_err(|_| (field, format!("'{s}' is not a date like 2026-11-29")))
        };
        let page = match self.page.trim() {
            "" => None,
            p => Some(
                p.parse::<u32>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or(("page", format!("'{p}' is not a page number")))?,
            ),
        };
        let text = |s: &str| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
        Ok(AuditFilter {
            tenant: text(&self.tenant),
            actor: text(&self.actor),
            action: text(&self.action),
            from: day("from", &self.from, 0)?,
            until: day("until", &self.until, 1)?,
            page,
        })
    }

    /// The same query for another page, as a query string.
    pub fn to_query_string(&self, page: u32) -> String {
        let enc = |s: &str| {
            s.bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect::<String>()
        };
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
        let q = AuditQuery {
            actor: "Bob B".into(),
            ..Default::default()
        };
        assert!(q.to_query_string(2).contains("actor=Bob%20B&"));
        assert!(q.to_query_string(2).ends_with("page=2"));
    }
}
