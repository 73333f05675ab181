//! GPU pools: a named set of GPUs (by model, optionally by host) with a
//! sharing policy, an isolation class and queue rules; which pool a GPU
//! belongs to; and what a change to the pools does to the fleet (GPUs that
//! move to another pool or change sharing mode must be emptied first).
//!
//! The configuration seeds pools on first start; after that the database
//! owns them and platform admins edit them. Both go through
//! [`PoolSpec::validate`], and the browser runs the same checks.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::catalogue;
use crate::idle::IdlePolicy;
use crate::schedule::{Discipline, MAX_HALF_LIFE_MS};
use crate::sharing::{IsolationClass, PoolPolicy, SharingMode};

mod changes;
mod form;
#[cfg(test)]
mod tests;

pub use changes::{moves, FieldChange, FleetGpu, GpuMove};
pub use form::{split_list, PoolForm};

/// Longest lease a pool may allow: 90 days.
pub const MAX_LEASE_HOURS: u32 = 24 * 90;

/// One pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    /// Name (lower-case letters, digits, dashes); never changes.
    pub name: PoolName,
    /// What the pool is for, shown to tenants.
    #[serde(default)]
    pub description: String,
    /// How its GPUs are shared.
    pub sharing: SharingMode,
    /// Isolation class.
    #[serde(default)]
    pub isolation: IsolationClass,
    /// Catalogue models whose GPUs join the pool (the first matching pool
    /// wins).
    pub models: Vec<String>,
    /// Hosts whose GPUs join the pool: names, or prefixes ending in `*`
    /// (`gpu-a100-*`). Empty: every host.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Replicas per GPU (time-slicing pools).
    #[serde(default = "one")]
    pub time_slice_replicas: u32,
    /// MIG profiles tenants may ask for (MIG pools); empty means all.
    #[serde(default)]
    pub allowed_mig_profiles: Vec<String>,
    /// Longest lease a tenant may ask for.
    #[serde(default = "default_max_lease_hours")]
    pub max_lease_hours: u32,
    /// Where a request goes among the places it fits: `pack` (the
    /// default), `spread`, `best-fit` or `first-fit`.
    #[serde(default)]
    pub placement: PoolPlacement,
    /// How the pool's queue treats a request that does not fit: `backfill`
    /// (the default: what fits starts) or `fifo` (strict order).
    #[serde(default)]
    pub queue: Discipline,
    /// With `backfill`: a queued request that has waited this long and still does not fit
    /// gets a reservation: the host where it fits first is kept for it, so
    /// smaller requests behind it (which otherwise start as soon as they
    /// fit) cannot starve it. 0 reserves at once.
    #[serde(default = "default_reserve_after_minutes")]
    pub reserve_after_minutes: u32,
    /// Fair-share weights by tenant slug (tenants not listed get 1). Empty:
    /// each tenant's weight is its compute quota in the pool.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub fair_share_weights: BTreeMap<TenantSlug, u32>,
    /// Half-life of past use in fair share, in hours (0: only what a tenant
    /// holds right now counts).
    #[serde(default = "default_usage_half_life_hours")]
    pub usage_half_life_hours: u32,
    /// What the host agent does with processes still running in a slice
    /// that is released, expires or is drained: `stop` them (SIGTERM, a
    /// grace period, SIGKILL; the default) or `refuse` and leave the
    /// teardown to an admin (the slice stays `releasing`, with the reason).
    #[serde(default)]
    pub on_release: ReleasePolicy,
    /// What the host agent does with an MPS client that does not keep to
    /// its slice's grant (no `TESSERA_ALLOCATION`, or variables missing or
    /// above its share): `report` it on the fleet page (the default) or
    /// `stop` it (`terminate_client`, then SIGTERM, a grace period,
    /// SIGKILL). MPS pools only.
    #[serde(default)]
    pub mps_strays: MpsStrayPolicy,
    /// Idle reclaim: slices idle this long are warned and then released
    /// unless their owner keeps them (`None`: off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_reclaim: Option<IdlePolicy>,
    /// Notice a burstable or best-effort slice gets before it is preempted
    /// for a request that needs its room, in minutes (0: at once).
    #[serde(default = "default_preemption_grace_minutes")]
    pub preemption_grace_minutes: u32,
}

/// What happens to the processes of a released slice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ReleasePolicy {
    /// The agent stops them, then tears the slice down.
    #[default]
    Stop,
    /// The agent refuses to tear down a slice in use; an admin stops the
    /// processes and the next pass continues.
    Refuse,
}

impl ReleasePolicy {
    /// The configured and displayed name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Refuse => "refuse",
        }
    }
}

/// What happens to an MPS client that does not keep to its slice's grant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Deserialize, Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum MpsStrayPolicy {
    /// The agent reports it on the fleet page and in its log.
    #[default]
    Report,
    /// The agent also stops it: its GPU work through the MPS control
    /// daemon (`terminate_client`), then the process.
    Stop,
}

impl MpsStrayPolicy {
    /// The configured and displayed name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Report => "report",
            Self::Stop => "stop",
        }
    }

    /// True for the default, [`MpsStrayPolicy::Report`].
    pub fn is_report(&self) -> bool {
        *self == Self::Report
    }
}

fn one() -> u32 {
    1
}

fn default_max_lease_hours() -> u32 {
    72
}

fn default_reserve_after_minutes() -> u32 {
    30
}

fn default_preemption_grace_minutes() -> u32 {
    5
}

/// Longest preemption notice a pool may give: a day.
pub const MAX_PREEMPTION_GRACE_MINUTES: u32 = 24 * 60;

fn default_usage_half_life_hours() -> u32 {
    24
}

/// A mistake in a pool, naming the field (`models`, `hosts`, …).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct PoolSpecError {
    /// The field, as in the configuration and the API.
    pub field: String,
    /// What is wrong, and what would be right.
    pub reason: String,
}

impl PoolSpecError {
    pub(crate) fn new(field: &str, reason: impl Into<String>) -> Self {
        Self {
            field: field.to_owned(),
            reason: reason.into(),
        }
    }

    /// The same mistake, its field prefixed (`pools[2].models`).
    pub fn within(self, prefix: &str) -> Self {
        Self {
            field: format!("{prefix}.{}", self.field),
            reason: self.reason,
        }
    }
}

pub use crate::checked::{is_slug, PoolName, TenantSlug};
pub use crate::placement::PoolPlacement;

impl PoolSpec {
    /// A pool with the defaults for everything but its name, mode and models.
    pub fn new(name: PoolName, sharing: SharingMode, models: &[&str]) -> Self {
        Self {
            name,
            description: String::new(),
            sharing,
            isolation: IsolationClass::default(),
            models: models.iter().map(|m| (*m).to_owned()).collect(),
            hosts: Vec::new(),
            time_slice_replicas: one(),
            allowed_mig_profiles: Vec::new(),
            max_lease_hours: default_max_lease_hours(),
            placement: PoolPlacement::default(),
            queue: Discipline::default(),
            reserve_after_minutes: default_reserve_after_minutes(),
            fair_share_weights: BTreeMap::new(),
            usage_half_life_hours: default_usage_half_life_hours(),
            on_release: ReleasePolicy::default(),
            mps_strays: MpsStrayPolicy::default(),
            idle_reclaim: None,
            preemption_grace_minutes: default_preemption_grace_minutes(),
        }
    }

    /// The pool's sharing policy.
    pub fn policy(&self) -> PoolPolicy {
        PoolPolicy {
            mode: self.sharing,
            time_slice_replicas: self.time_slice_replicas,
            allowed_mig_profiles: self.allowed_mig_profiles.clone(),
        }
    }

    /// Checks one pool for the mistakes an author would make; names the field.
    pub fn validate(&self) -> Result<(), PoolSpecError> {
        if self.description.chars().count() > 500 {
            return Err(PoolSpecError::new(
                "description",
                "must be at most 500 characters",
            ));
        }
        if self.models.is_empty() {
            return Err(PoolSpecError::new("models", "list at least one GPU model"));
        }
        if self.max_lease_hours == 0 || self.max_lease_hours > MAX_LEASE_HOURS {
            return Err(PoolSpecError::new(
                "max_lease_hours",
                format!("must be between 1 and {MAX_LEASE_HOURS} (90 days)"),
            ));
        }
        if self.reserve_after_minutes > 7 * 24 * 60 {
            return Err(PoolSpecError::new(
                "reserve_after_minutes",
                "must be at most 10080 (a week)",
            ));
        }
        if self.preemption_grace_minutes > MAX_PREEMPTION_GRACE_MINUTES {
            return Err(PoolSpecError::new(
                "preemption_grace_minutes",
                format!("must be at most {MAX_PREEMPTION_GRACE_MINUTES} (a day)"),
            ));
        }
        if self.mps_strays == MpsStrayPolicy::Stop && self.sharing != SharingMode::Mps {
            return Err(PoolSpecError::new(
                "mps_strays",
                format!(
                    "'stop' applies to MPS pools only; this pool is {}: use 'report'",
                    self.sharing
                ),
            ));
        }
        if let Some(idle) = &self.idle_reclaim {
            idle.validate()
                .map_err(|e| PoolSpecError::new(&format!("idle_reclaim.{}", e.field), e.reason))?;
        }
        let max_hours = MAX_HALF_LIFE_MS / 3_600_000;
        if i64::from(self.usage_half_life_hours) > max_hours {
            return Err(PoolSpecError::new(
                "usage_half_life_hours",
                format!(
                    "{} is more than a year ({max_hours} hours)",
                    self.usage_half_life_hours
                ),
            ));
        }
        for h in &self.hosts {
            host_pattern_ok(h).map_err(|reason| PoolSpecError::new("hosts", reason))?;
        }
        let mut seen = std::collections::BTreeSet::new();
        for m in &self.models {
            let model = catalogue::lookup(m, 0);
            if model.generic {
                let known: Vec<&str> = catalogue::all_models().iter().map(|m| m.name).collect();
                return Err(PoolSpecError::new(
                    "models",
                    format!(
                        "'{m}' is not a known model; use one of {}",
                        known.join(", ")
                    ),
                ));
            }
            if !seen.insert(model.name) {
                return Err(PoolSpecError::new("models", format!("'{m}' appears twice")));
            }
            self.policy()
                .validate(&model)
                .map_err(|e| PoolSpecError::new("sharing", format!("{}: {e}", model.name)))?;
        }
        Ok(())
    }

    /// Whether a GPU of `model` (catalogue name) on `host` joins this pool.
    pub fn takes(&self, host: &str, model: &str) -> bool {
        self.models
            .iter()
            .any(|m| m == model || catalogue::lookup(m, 0).name == model)
            && (self.hosts.is_empty() || self.hosts.iter().any(|p| host_matches(p, host)))
    }
}

fn host_pattern_ok(p: &str) -> Result<(), String> {
    let body = p.strip_suffix('*').unwrap_or(p);
    let ok = !p.is_empty()
        && p.len() <= 253
        && body
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "'{p}' must be a host name, or a prefix followed by '*' (gpu-a100-*)"
        ))
    }
}

fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => host.starts_with(prefix),
        None => pattern == host,
    }
}

/// Checks a list of pools: each pool, then that names are unique.
pub fn validate_pools(pools: &[PoolSpec]) -> Result<(), PoolSpecError> {
    let mut names = std::collections::BTreeSet::new();
    for (i, p) in pools.iter().enumerate() {
        let prefix = format!("pools[{i}]");
        p.validate().map_err(|e| e.within(&prefix))?;
        if !names.insert(p.name.as_str()) {
            return Err(
                PoolSpecError::new("name", format!("'{}' appears twice", p.name)).within(&prefix),
            );
        }
    }
    Ok(())
}

/// The pool a GPU of `model` (catalogue name) on `host` belongs to: the
/// first, in order, that takes it.
pub fn pool_of<'a>(pools: &'a [PoolSpec], host: &str, model: &str) -> Option<&'a PoolSpec> {
    pools.iter().find(|p| p.takes(host, model))
}
