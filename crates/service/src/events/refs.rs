//! What events refer to: tenants, allocations and quota requests as they
//! were when the event happened, and a person's roles and access changes.

use crate::entity::{allocation, quota_request, tenant};
use std::collections::BTreeMap;
use tessera_core::ids::{AllocationId, HostId, QuotaRequestId, TenantId, UserId};

/// The tenant an event concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantRef {
    /// Id.
    pub id: TenantId,
    /// Slug (for links).
    pub slug: tessera_core::checked::TenantSlug,
    /// Display name.
    pub name: String,
}

impl TenantRef {
    pub(crate) fn of(t: &tenant::Model) -> Self {
        Self {
            id: t.id,
            slug: t.slug.clone(),
            name: t.name.clone(),
        }
    }
}

/// A tenant's editable fields, as the audit log records them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TenantFields {
    /// Display name.
    pub name: String,
    /// Cost centre.
    pub cost_centre: Option<String>,
    /// IdP groups of members.
    pub member_groups: Vec<String>,
    /// IdP groups of tenant admins.
    pub admin_groups: Vec<String>,
    /// Kubernetes namespaces (empty: the slug).
    pub namespaces: Vec<tessera_core::checked::Namespace>,
}

/// The allocation an event concerns, as it was when the event happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllocationRef {
    /// Id.
    pub id: AllocationId,
    /// Tenant id.
    pub tenant_id: TenantId,
    /// Pool name.
    pub pool: tessera_core::checked::PoolName,
    /// The shape as people read it (`1g.10gb`).
    pub shape_label: String,
    /// Who asked (`Name <email>` or `token:<name>`).
    pub requested_by: String,
    /// The person who asked, when a person did.
    pub requested_by_user_id: Option<UserId>,
    /// The host it is placed on, once placed.
    pub host_id: Option<HostId>,
}

impl AllocationRef {
    pub(crate) fn of(row: &allocation::Model) -> Self {
        Self {
            id: row.id,
            tenant_id: row.tenant_id,
            pool: row.pool.clone(),
            shape_label: row.shape_label.clone(),
            requested_by: row.requested_by.clone(),
            requested_by_user_id: row.requested_by_user_id,
            host_id: row.host_id,
        }
    }
}

/// The quota request an event concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaRequestRef {
    /// Id.
    pub id: QuotaRequestId,
    /// Its tenant.
    pub tenant: TenantRef,
    /// Pool name.
    pub pool: tessera_core::checked::PoolName,
    /// Why the tenant asks.
    pub justification: String,
}

impl QuotaRequestRef {
    pub(crate) fn of(row: &quota_request::Model, tenant: &tenant::Model) -> Self {
        Self {
            id: row.id,
            tenant: TenantRef::of(tenant),
            pool: row.pool.clone(),
            justification: row.justification.clone(),
        }
    }
}

/// A user's roles as of a login.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Roles {
    /// Platform admin?
    pub platform_admin: bool,
    /// Role per tenant id.
    pub memberships: BTreeMap<TenantId, tessera_core::role::TenantRole>,
}

/// How a person's access changed outside sign-in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessChange {
    /// Every session they had is over (they sign in again).
    SignedOutEverywhere,
    /// Sign-in refused, sessions over, API tokens they made revoked.
    Deactivated,
    /// They may sign in again.
    Reactivated,
}
