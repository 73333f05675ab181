//! Typed row ids: a tenant's id cannot be passed where a host's is meant.
//!
//! Each id is the row's integer key, on the wire as that integer (so the
//! API's JSON is unchanged) and in the database as the same `BIGINT` column
//! (`sea-orm` feature: a typed column, usable as a primary key).
//!
//! ```compile_fail
//! use tessera_core::ids::{HostId, TenantId};
//! fn drain(_host: HostId) {}
//! drain(TenantId::new(7)); // a tenant's id is not a host's
//! ```
//!
//! ```
//! use tessera_core::ids::HostId;
//! fn drain(host: HostId) -> i64 { host.get() }
//! assert_eq!(drain(HostId::new(7)), 7);
//! ```

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

macro_rules! ids {
    ($($(#[$doc:meta])* $name:ident,)*) => {$(
        $(#[$doc])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        #[cfg_attr(feature = "sea-orm", derive(sea_orm::DeriveValueType))]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        pub struct $name(i64);

        impl $name {
            /// The id of row `raw`.
            pub const fn new(raw: i64) -> Self {
                Self(raw)
            }

            /// The row's integer key.
            pub const fn get(self) -> i64 {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl FromStr for $name {
            type Err = std::num::ParseIntError;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                s.parse().map(Self)
            }
        }

        #[cfg(feature = "sea-orm")]
        impl sea_orm::TryFromU64 for $name {
            fn try_from_u64(n: u64) -> Result<Self, sea_orm::DbErr> {
                <i64 as sea_orm::TryFromU64>::try_from_u64(n).map(Self)
            }
        }
    )*};
}

ids! {
    /// A tenant (`tenants.id`).
    TenantId,
    /// A person who has signed in (`users.id`).
    UserId,
    /// A GPU machine (`hosts.id`).
    HostId,
    /// One GPU of a host (`gpus.id`).
    GpuId,
    /// A slice: a tenant's allocation (`allocations.id`).
    AllocationId,
    /// A quota request (`quota_requests.id`).
    QuotaRequestId,
    /// A temporary quota grant (`quota_grants.id`).
    QuotaGrantId,
    /// A pool (`pools.id`).
    PoolId,
    /// A tenant's API token (`api_tokens.id`).
    ApiTokenId,
    /// A host join token (`join_tokens.id`).
    JoinTokenId,
    /// A notification (`notifications.id`).
    NotificationId,
    /// A tenant's webhook (`webhooks.id`).
    WebhookId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_its_integer_on_the_wire_and_in_text() {
        let id = TenantId::new(42);
        assert_eq!(serde_json::to_string(&id).ok().as_deref(), Some("42"));
        assert_eq!(serde_json::from_str::<TenantId>("42").ok(), Some(id));
        assert_eq!(id.to_string(), "42");
        assert_eq!("42".parse::<TenantId>().ok(), Some(id));
        assert!("x".parse::<TenantId>().is_err());
        assert!(serde_json::from_str::<HostId>("\"42\"").is_err());
        assert_eq!(id.get(), 42);
    }
}

/// Ids named in tests: a short name (at most 7 bytes) packed into the id,
/// so `hid("a")` reads as the host called "a" and two names never share
/// one.
#[cfg(test)]
pub(crate) mod named {
    use super::{HostId, TenantId};

    fn pack(name: &str) -> i64 {
        assert!(name.len() <= 7, "{name}: at most 7 bytes");
        name.bytes().fold(0, |v, b| v * 256 + i64::from(b))
    }

    /// The host called `name`.
    pub(crate) fn hid(name: &str) -> HostId {
        HostId::new(pack(name))
    }

    /// The tenant called `name`.
    pub(crate) fn tid(name: &str) -> TenantId {
        TenantId::new(pack(name))
    }
}
