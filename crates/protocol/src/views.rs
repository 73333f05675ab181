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
    /// The tenant's allocations (newest first).
    pub allocations: Vec<AllocationSummary>,
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

/// One allocation in a list.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AllocationSummary {
    /// Allocation id.
    pub id: i64,
    /// Lifecycle state.
    pub state: String,
    /// Human description of the shape (e.g. `MIG 1g.10gb`).
    pub shape: String,
    /// Where it runs, once placed.
    pub gpu: Option<String>,
    /// When it was requested.
    pub created_at: DateTime<Utc>,
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
    /// `exclusive`, `mig`, `mps` or `time-slicing`.
    pub sharing: String,
    /// `production`, `batch` or `development`.
    pub isolation: String,
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
    /// `active`, `used`, `expired` or `revoked`.
    pub status: String,
    /// Host that used it.
    pub used_by_host: Option<String>,
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
