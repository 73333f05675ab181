//! GPU pools: named sets of GPUs (by model) with a sharing policy and an
//! isolation class. Configured for now; the admin UI will edit them later.

use crate::ServiceError;
use serde::{Deserialize, Serialize};
use tessera_core::catalogue;
use tessera_core::schedule::Discipline;
pub use tessera_core::sharing::IsolationClass;
use tessera_core::sharing::{PoolPolicy, SharingMode};

/// One pool as configured (`[[pools]]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    /// Name (lower-case letters, digits, dashes).
    pub name: String,
    /// What the pool is for, shown to tenants.
    #[serde(default)]
    pub description: String,
    /// How its GPUs are shared.
    pub sharing: SharingMode,
    /// Isolation class.
    #[serde(default)]
    pub isolation: IsolationClass,
    /// Catalogue models whose GPUs join the pool (first matching pool wins).
    pub models: Vec<String>,
    /// Replicas per GPU (time-slicing pools).
    #[serde(default = "one")]
    pub time_slice_replicas: u32,
    /// MIG profiles tenants may ask for (MIG pools); empty means all.
    #[serde(default)]
    pub allowed_mig_profiles: Vec<String>,
    /// Longest lease a tenant may ask for.
    #[serde(default = "default_max_lease_hours")]
    pub max_lease_hours: u32,
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
    pub fair_share_weights: std::collections::BTreeMap<String, u32>,
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
}

/// What happens to the processes of a released slice.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReleasePolicy {
    /// The agent stops them, then tears the slice down.
    #[default]
    Stop,
    /// The agent refuses to tear down a slice in use; an admin stops the
    /// processes and the next pass continues.
    Refuse,
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

fn default_usage_half_life_hours() -> u32 {
    24
}

impl PoolSpec {
    /// The pool's sharing policy in core's terms.
    pub fn policy(&self) -> PoolPolicy {
        PoolPolicy {
            mode: self.sharing,
            time_slice_replicas: self.time_slice_replicas,
            allowed_mig_profiles: self.allowed_mig_profiles.clone(),
        }
    }
}

/// Checks `[[priority_classes]]`: the list itself, then that the tenants
/// and pools each class names exist.
pub fn priority_classes(
    classes: Vec<tessera_core::schedule::PriorityClass>,
    pools: &[PoolSpec],
    directory: &crate::identity::Directory,
) -> Result<tessera_core::schedule::PriorityClasses, ServiceError> {
    for (i, c) in classes.iter().enumerate() {
        if let Some(p) = c
            .pools
            .iter()
            .find(|p| !pools.iter().any(|x| &x.name == *p))
        {
            return Err(ServiceError::invalid(
                format!("priority_classes[{i}].pools"),
                format!("there is no pool '{p}'"),
            ));
        }
        if let Some(t) = c
            .tenants
            .iter()
            .find(|t| !directory.tenants.iter().any(|x| &x.slug == *t))
        {
            return Err(ServiceError::invalid(
                format!("priority_classes[{i}].tenants"),
                format!("there is no tenant '{t}'"),
            ));
        }
    }
    tessera_core::schedule::PriorityClasses::new(classes).map_err(|e| match e {
        tessera_core::schedule::PriorityClassError::Invalid {
            index,
            field,
            reason,
        } => ServiceError::invalid(format!("priority_classes[{index}].{field}"), reason),
        other => ServiceError::invalid("priority_classes", other.to_string()),
    })
}

/// Checks what pools say about tenants: fair-share weights name tenants
/// that exist, and the usage half-life stays within a year.
pub fn validate_pool_tenants(
    pools: &[PoolSpec],
    directory: &crate::identity::Directory,
) -> Result<(), ServiceError> {
    for (i, p) in pools.iter().enumerate() {
        if let Some(t) = p
            .fair_share_weights
            .keys()
            .find(|t| !directory.tenants.iter().any(|x| &x.slug == *t))
        {
            return Err(ServiceError::invalid(
                format!("pools[{i}].fair_share_weights"),
                format!("there is no tenant '{t}'"),
            ));
        }
        let max_hours = tessera_core::schedule::MAX_HALF_LIFE_MS / 3_600_000;
        if i64::from(p.usage_half_life_hours) > max_hours {
            return Err(ServiceError::invalid(
                format!("pools[{i}].usage_half_life_hours"),
                format!(
                    "{} is more than a year ({max_hours} hours)",
                    p.usage_half_life_hours
                ),
            ));
        }
    }
    Ok(())
}

/// Checks pools for mistakes a config author would make; names the field.
pub fn validate_pools(pools: &[PoolSpec]) -> Result<(), ServiceError> {
    let mut names = std::collections::BTreeSet::new();
    for (i, p) in pools.iter().enumerate() {
        let field = |f: &str| format!("pools[{i}].{f}");
        let name_ok = !p.name.is_empty()
            && p.name.len() <= 64
            && p.name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !name_ok {
            return Err(ServiceError::invalid(
                field("name"),
                format!(
                    "'{}' must be 1-64 lower-case letters, digits or dashes",
                    p.name
                ),
            ));
        }
        if !names.insert(p.name.as_str()) {
            return Err(ServiceError::invalid(
                field("name"),
                format!("'{}' appears twice", p.name),
            ));
        }
        if p.models.is_empty() {
            return Err(ServiceError::invalid(
                field("models"),
                "list at least one GPU model",
            ));
        }
        if p.max_lease_hours == 0 || p.max_lease_hours > 24 * 90 {
            return Err(ServiceError::invalid(
                field("max_lease_hours"),
                "must be between 1 and 2160 (90 days)",
            ));
        }
        for m in &p.models {
            let model = catalogue::lookup(m, 0);
            if model.generic {
                let known: Vec<&str> = catalogue::all_models().iter().map(|m| m.name).collect();
                return Err(ServiceError::invalid(
                    field("models"),
                    format!(
                        "'{m}' is not a known model; use one of {}",
                        known.join(", ")
                    ),
                ));
            }
            p.policy().validate(&model).map_err(|e| {
                ServiceError::invalid(field("sharing"), format!("{}: {e}", model.name))
            })?;
        }
    }
    Ok(())
}

/// The pool a GPU of `model` (catalogue name) belongs to: the first whose
/// models include it.
pub fn pool_of<'a>(pools: &'a [PoolSpec], model: &str) -> Option<&'a PoolSpec> {
    pools.iter().find(|p| {
        p.models
            .iter()
            .any(|m| catalogue::lookup(m, 0).name == model || m == model)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(name: &str, sharing: SharingMode, models: &[&str]) -> PoolSpec {
        PoolSpec {
            name: name.into(),
            description: String::new(),
            sharing,
            isolation: IsolationClass::Production,
            models: models.iter().map(|m| m.to_string()).collect(),
            time_slice_replicas: 1,
            allowed_mig_profiles: vec![],
            max_lease_hours: 72,
            queue: Default::default(),
            reserve_after_minutes: 30,
            fair_share_weights: Default::default(),
            usage_half_life_hours: 24,
            on_release: Default::default(),
        }
    }

    #[test]
    fn valid_pools_and_membership() {
        let pools = vec![
            pool("h100-mig", SharingMode::Mig, &["H100-80GB"]),
            pool("inference", SharingMode::TimeSlicing, &["L4", "T4"]),
        ];
        validate_pools(&pools).unwrap();
        assert_eq!(
            pool_of(&pools, "H100-80GB").map(|p| p.name.as_str()),
            Some("h100-mig")
        );
        assert_eq!(
            pool_of(&pools, "T4").map(|p| p.name.as_str()),
            Some("inference")
        );
        assert!(pool_of(&pools, "A100-80GB").is_none());
    }

    #[test]
    fn mistakes_name_the_field() {
        let err = validate_pools(&[pool("l4-mig", SharingMode::Mig, &["L4"])]).unwrap_err();
        assert!(err.to_string().starts_with("pools[0].sharing: L4"), "{err}");
        let err =
            validate_pools(&[pool("x", SharingMode::Exclusive, &["Mystery9000"])]).unwrap_err();
        assert!(err.to_string().starts_with("pools[0].models:"), "{err}");
        let twice = vec![
            pool("a", SharingMode::Exclusive, &["L4"]),
            pool("a", SharingMode::Mps, &["T4"]),
        ];
        assert!(validate_pools(&twice)
            .unwrap_err()
            .to_string()
            .starts_with("pools[1].name"));
        let mut replicas = pool("ts", SharingMode::TimeSlicing, &["L4"]);
        replicas.time_slice_replicas = 0;
        assert!(validate_pools(&[replicas])
            .unwrap_err()
            .to_string()
            .starts_with("pools[0].sharing"));
        let mut profile = pool("m", SharingMode::Mig, &["A100-SXM4-40GB"]);
        profile.allowed_mig_profiles = vec!["9g.99gb".into()];
        assert!(validate_pools(&[profile]).is_err());
    }
}
