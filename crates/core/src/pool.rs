//! GPU pools: a named set of GPUs (by model, optionally by host) with a
//! sharing policy, an isolation class and queue rules; which pool a GPU
//! belongs to; and what a change to the pools does to the fleet (GPUs that
//! move to another pool or change sharing mode must be emptied first).
//!
//! The configuration seeds pools on first start; after that the database
//! owns them and platform admins edit them. Both go through
//! [`PoolSpec::validate`], and the browser runs the same checks.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::catalogue;
use crate::idle::IdlePolicy;
use crate::schedule::{Discipline, MAX_HALF_LIFE_MS};
use crate::sharing::{IsolationClass, PoolPolicy, SharingMode};

/// Longest lease a pool may allow: 90 days.
pub const MAX_LEASE_HOURS: u32 = 24 * 90;

/// One pool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PoolSpec {
    /// Name (lower-case letters, digits, dashes); never changes.
    pub name: String,
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
    pub fair_share_weights: BTreeMap<String, u32>,
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
    fn new(field: &str, reason: impl Into<String>) -> Self {
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

/// Whether `name` is a valid pool or tenant name: 1-64 lower-case letters,
/// digits or dashes.
pub fn is_slug(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

impl PoolSpec {
    /// A pool with the defaults for everything but its name, mode and models.
    pub fn new(name: &str, sharing: SharingMode, models: &[&str]) -> Self {
        Self {
            name: name.to_owned(),
            description: String::new(),
            sharing,
            isolation: IsolationClass::default(),
            models: models.iter().map(|m| (*m).to_owned()).collect(),
            hosts: Vec::new(),
            time_slice_replicas: one(),
            allowed_mig_profiles: Vec::new(),
            max_lease_hours: default_max_lease_hours(),
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
        if !is_slug(&self.name) {
            return Err(PoolSpecError::new(
                "name",
                format!(
                    "'{}' must be 1-64 lower-case letters, digits or dashes",
                    self.name
                ),
            ));
        }
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

    /// What differs from `before`, field by field, as displayed.
    pub fn differences(&self, before: &PoolSpec) -> Vec<FieldChange> {
        let mut out = Vec::new();
        let mut diff = |field: &'static str, b: String, a: String| {
            if b != a {
                out.push(FieldChange {
                    field: field.to_owned(),
                    before: b,
                    after: a,
                });
            }
        };
        let list = |v: &[String]| {
            if v.is_empty() {
                "—".to_owned()
            } else {
                v.join(", ")
            }
        };
        diff(
            "description",
            before.description.clone(),
            self.description.clone(),
        );
        diff(
            "sharing",
            before.sharing.to_string(),
            self.sharing.to_string(),
        );
        diff(
            "isolation",
            before.isolation.to_string(),
            self.isolation.to_string(),
        );
        diff("models", list(&before.models), list(&self.models));
        diff("hosts", list(&before.hosts), list(&self.hosts));
        diff(
            "time_slice_replicas",
            before.time_slice_replicas.to_string(),
            self.time_slice_replicas.to_string(),
        );
        diff(
            "allowed_mig_profiles",
            list(&before.allowed_mig_profiles),
            list(&self.allowed_mig_profiles),
        );
        diff(
            "max_lease_hours",
            before.max_lease_hours.to_string(),
            self.max_lease_hours.to_string(),
        );
        diff(
            "queue",
            before.queue.name().to_owned(),
            self.queue.name().to_owned(),
        );
        diff(
            "reserve_after_minutes",
            before.reserve_after_minutes.to_string(),
            self.reserve_after_minutes.to_string(),
        );
        let weights = |w: &BTreeMap<String, u32>| {
            let v: Vec<String> = w.iter().map(|(t, n)| format!("{t}={n}")).collect();
            list(&v)
        };
        diff(
            "fair_share_weights",
            weights(&before.fair_share_weights),
            weights(&self.fair_share_weights),
        );
        diff(
            "usage_half_life_hours",
            before.usage_half_life_hours.to_string(),
            self.usage_half_life_hours.to_string(),
        );
        diff(
            "on_release",
            before.on_release.as_str().to_owned(),
            self.on_release.as_str().to_owned(),
        );
        diff(
            "mps_strays",
            before.mps_strays.as_str().to_owned(),
            self.mps_strays.as_str().to_owned(),
        );
        diff(
            "idle_reclaim",
            idle_text(before.idle_reclaim.as_ref()),
            idle_text(self.idle_reclaim.as_ref()),
        );
        diff(
            "preemption_grace_minutes",
            before.preemption_grace_minutes.to_string(),
            self.preemption_grace_minutes.to_string(),
        );
        out
    }
}

/// An idle policy as the pool's change review shows it.
fn idle_text(p: Option<&IdlePolicy>) -> String {
    p.map_or_else(
        || "off".to_owned(),
        |p| {
            format!(
                "below {} % for {} min, {} min notice, {} keeps",
                p.below_pct, p.idle_minutes, p.notice_minutes, p.max_keeps
            )
        },
    )
}

/// A pool as a web form sends it: lists comma- or newline-separated,
/// choices by name. [`PoolForm::spec`] turns it into a [`PoolSpec`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolForm {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// `exclusive`, `mig`, `mps` or `time-slicing`.
    pub sharing: String,
    /// `production`, `batch` or `development`.
    pub isolation: String,
    /// Model names.
    pub models: String,
    /// Host names or prefixes ending in `*`.
    pub hosts: String,
    /// Replicas per GPU.
    pub time_slice_replicas: u32,
    /// MIG profile names.
    pub allowed_mig_profiles: String,
    /// Longest lease.
    pub max_lease_hours: u32,
    /// `backfill` or `fifo`.
    pub queue: String,
    /// Minutes before a waiting request gets a reservation.
    pub reserve_after_minutes: u32,
    /// `tenant=weight` pairs.
    pub fair_share_weights: String,
    /// Half-life of past use, hours.
    pub usage_half_life_hours: u32,
    /// `stop` or `refuse`.
    pub on_release: String,
    /// `report` or `stop` (MPS pools; empty: `report`).
    #[serde(default)]
    pub mps_strays: String,
    /// Idle reclaim: minutes idle before the warning (0: off).
    #[serde(default)]
    pub idle_minutes: u32,
    /// Idle reclaim: a minute below this mean utilisation (%) is idle.
    #[serde(default)]
    pub idle_below_pct: u8,
    /// Idle reclaim: minutes between the warning and the release.
    #[serde(default)]
    pub idle_notice_minutes: u32,
    /// Idle reclaim: how often an owner may keep one slice.
    #[serde(default)]
    pub idle_max_keeps: u32,
    /// Minutes of notice before a slice is preempted.
    #[serde(default)]
    pub preemption_grace_minutes: u32,
}

/// Splits a comma- or newline-separated list, dropping blanks.
pub fn split_list(text: &str) -> Vec<String> {
    text.split([',', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn choose<T: Copy>(field: &str, value: &str, options: &[(&str, T)]) -> Result<T, PoolSpecError> {
    options
        .iter()
        .find(|(n, _)| *n == value.trim())
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = options.iter().map(|(n, _)| *n).collect();
            PoolSpecError::new(
                field,
                format!("'{value}' is not one of {}", names.join(", ")),
            )
        })
}

impl PoolForm {
    /// The form of an existing pool, for editing.
    pub fn of(spec: &PoolSpec) -> Self {
        Self {
            name: spec.name.clone(),
            description: spec.description.clone(),
            sharing: spec.sharing.to_string(),
            isolation: spec.isolation.to_string(),
            models: spec.models.join(", "),
            hosts: spec.hosts.join(", "),
            time_slice_replicas: spec.time_slice_replicas,
            allowed_mig_profiles: spec.allowed_mig_profiles.join(", "),
            max_lease_hours: spec.max_lease_hours,
            queue: spec.queue.name().to_owned(),
            reserve_after_minutes: spec.reserve_after_minutes,
            fair_share_weights: spec
                .fair_share_weights
                .iter()
                .map(|(t, w)| format!("{t}={w}"))
                .collect::<Vec<_>>()
                .join(", "),
            usage_half_life_hours: spec.usage_half_life_hours,
            on_release: spec.on_release.as_str().to_owned(),
            mps_strays: spec.mps_strays.as_str().to_owned(),
            idle_minutes: spec.idle_reclaim.map_or(0, |p| p.idle_minutes),
            idle_below_pct: spec.idle_reclaim.map_or(15, |p| p.below_pct),
            idle_notice_minutes: spec.idle_reclaim.map_or(60, |p| p.notice_minutes),
            idle_max_keeps: spec.idle_reclaim.map_or(2, |p| p.max_keeps),
            preemption_grace_minutes: spec.preemption_grace_minutes,
        }
    }

    /// The pool the form describes (checked with [`PoolSpec::validate`]).
    pub fn spec(&self) -> Result<PoolSpec, PoolSpecError> {
        let mut weights = BTreeMap::new();
        for pair in split_list(&self.fair_share_weights) {
            let parsed = pair
                .split_once('=')
                .and_then(|(t, w)| Some((t.trim().to_owned(), w.trim().parse::<u32>().ok()?)));
            match parsed {
                Some((t, w)) if !t.is_empty() && w > 0 => {
                    weights.insert(t, w);
                }
                _ => {
                    return Err(PoolSpecError::new(
                        "fair_share_weights",
                        format!("'{pair}' is not tenant=weight (a whole number above 0)"),
                    ))
                }
            }
        }
        let spec = PoolSpec {
            name: self.name.trim().to_owned(),
            description: self.description.trim().to_owned(),
            sharing: choose(
                "sharing",
                &self.sharing,
                &[
                    ("exclusive", SharingMode::Exclusive),
                    ("mig", SharingMode::Mig),
                    ("mps", SharingMode::Mps),
                    ("time-slicing", SharingMode::TimeSlicing),
                ],
            )?,
            isolation: choose(
                "isolation",
                &self.isolation,
                &[
                    ("production", IsolationClass::Production),
                    ("batch", IsolationClass::Batch),
                    ("development", IsolationClass::Development),
                ],
            )?,
            models: split_list(&self.models),
            hosts: split_list(&self.hosts),
            time_slice_replicas: self.time_slice_replicas,
            allowed_mig_profiles: split_list(&self.allowed_mig_profiles),
            max_lease_hours: self.max_lease_hours,
            queue: choose(
                "queue",
                &self.queue,
                &[
                    ("backfill", Discipline::Backfill),
                    ("fifo", Discipline::Fifo),
                ],
            )?,
            reserve_after_minutes: self.reserve_after_minutes,
            fair_share_weights: weights,
            usage_half_life_hours: self.usage_half_life_hours,
            on_release: choose(
                "on_release",
                &self.on_release,
                &[
                    ("stop", ReleasePolicy::Stop),
                    ("refuse", ReleasePolicy::Refuse),
                ],
            )?,
            mps_strays: if self.mps_strays.trim().is_empty() {
                MpsStrayPolicy::default()
            } else {
                choose(
                    "mps_strays",
                    &self.mps_strays,
                    &[
                        ("report", MpsStrayPolicy::Report),
                        ("stop", MpsStrayPolicy::Stop),
                    ],
                )?
            },
            idle_reclaim: (self.idle_minutes > 0).then_some(IdlePolicy {
                below_pct: self.idle_below_pct,
                idle_minutes: self.idle_minutes,
                notice_minutes: self.idle_notice_minutes,
                max_keeps: self.idle_max_keeps,
            }),
            preemption_grace_minutes: self.preemption_grace_minutes,
        };
        spec.validate()?;
        Ok(spec)
    }
}

/// One field of a pool that a change sets to a new value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FieldChange {
    /// The field's name, as in the configuration and the API.
    pub field: String,
    /// The value before, as displayed.
    pub before: String,
    /// The value after.
    pub after: String,
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

/// A GPU of the fleet, as a change to the pools sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetGpu {
    /// Its host's name.
    pub host: String,
    /// Index on the host.
    pub index: u32,
    /// Catalogue model name.
    pub model: String,
    /// Slices on it that still hold it (placed to releasing).
    pub live_slices: u32,
}

/// What a change to the pools does to one GPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GpuMove {
    /// Its host's name.
    pub host: String,
    /// Index on the host.
    pub index: u32,
    /// Catalogue model name.
    pub model: String,
    /// The pool before (`None`: in no pool).
    pub from_pool: Option<String>,
    /// The pool after.
    pub to_pool: Option<String>,
    /// Its sharing mode before.
    pub from_mode: Option<SharingMode>,
    /// Its sharing mode after.
    pub to_mode: Option<SharingMode>,
    /// Slices on it now: each must end before the GPU can change.
    pub live_slices: u32,
}

impl GpuMove {
    /// Whether the GPU must be emptied before the change applies.
    pub fn needs_drain(&self) -> bool {
        self.live_slices > 0
    }
}

impl fmt::Display for GpuMove {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = |p: &Option<String>, m: &Option<SharingMode>| match (p, m) {
            (Some(p), Some(m)) => format!("{p} ({m})"),
            _ => "no pool".to_owned(),
        };
        write!(
            f,
            "{} GPU {}: {} → {}",
            self.host,
            self.index,
            side(&self.from_pool, &self.from_mode),
            side(&self.to_pool, &self.to_mode)
        )
    }
}

/// The GPUs whose pool or sharing mode differs between `before` and
/// `after`: a GPU with slices on it keeps its old pool until they end
/// (the change is planned, the GPU drained); an empty one changes at once.
pub fn moves(before: &[PoolSpec], after: &[PoolSpec], fleet: &[FleetGpu]) -> Vec<GpuMove> {
    fleet
        .iter()
        .filter_map(|g| {
            let from = pool_of(before, &g.host, &g.model);
            let to = pool_of(after, &g.host, &g.model);
            let same = match (from, to) {
                (Some(a), Some(b)) => a.name == b.name && a.sharing == b.sharing,
                (None, None) => true,
                _ => false,
            };
            (!same).then(|| GpuMove {
                host: g.host.clone(),
                index: g.index,
                model: g.model.clone(),
                from_pool: from.map(|p| p.name.clone()),
                to_pool: to.map(|p| p.name.clone()),
                from_mode: from.map(|p| p.sharing),
                to_mode: to.map(|p| p.sharing),
                live_slices: g.live_slices,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(host: &str, index: u32, model: &str, live: u32) -> FleetGpu {
        FleetGpu {
            host: host.into(),
            index,
            model: model.into(),
            live_slices: live,
        }
    }

    #[test]
    fn membership_by_model_then_host_first_match_wins() {
        let mut special = PoolSpec::new("a100-lab", SharingMode::Exclusive, &["A100-SXM4-80GB"]);
        special.hosts = vec!["lab-*".into(), "gpu-7".into()];
        let pools = vec![
            special,
            PoolSpec::new("a100-mig", SharingMode::Mig, &["A100-SXM4-80GB"]),
            PoolSpec::new("inference", SharingMode::TimeSlicing, &["L4", "T4"]),
        ];
        validate_pools(&pools).unwrap();
        let name = |h: &str, m: &str| pool_of(&pools, h, m).map(|p| p.name.as_str());
        assert_eq!(name("lab-01", "A100-SXM4-80GB"), Some("a100-lab"));
        assert_eq!(name("gpu-7", "A100-SXM4-80GB"), Some("a100-lab"));
        assert_eq!(name("gpu-70", "A100-SXM4-80GB"), Some("a100-mig"));
        assert_eq!(name("x", "T4"), Some("inference"));
        assert_eq!(name("lab-01", "H100-80GB"), None);
    }

    #[test]
    fn mistakes_name_the_field() {
        let err =
            validate_pools(&[PoolSpec::new("l4-mig", SharingMode::Mig, &["L4"])]).unwrap_err();
        assert!(err.to_string().starts_with("pools[0].sharing: L4"), "{err}");
        let err = PoolSpec::new("x", SharingMode::Exclusive, &["Mystery9000"])
            .validate()
            .unwrap_err();
        assert_eq!(err.field, "models");
        let twice = vec![
            PoolSpec::new("a", SharingMode::Exclusive, &["L4"]),
            PoolSpec::new("a", SharingMode::Mps, &["T4"]),
        ];
        assert_eq!(validate_pools(&twice).unwrap_err().field, "pools[1].name");
        let mut replicas = PoolSpec::new("ts", SharingMode::TimeSlicing, &["L4"]);
        replicas.time_slice_replicas = 0;
        assert_eq!(replicas.validate().unwrap_err().field, "sharing");
        let mut profile = PoolSpec::new("m", SharingMode::Mig, &["A100-SXM4-40GB"]);
        profile.allowed_mig_profiles = vec!["9g.99gb".into()];
        assert_eq!(profile.validate().unwrap_err().field, "sharing");
        let mut hosts = PoolSpec::new("h", SharingMode::Exclusive, &["L4"]);
        hosts.hosts = vec!["a*b".into()];
        assert_eq!(hosts.validate().unwrap_err().field, "hosts");
        hosts.hosts = vec![String::new()];
        assert_eq!(hosts.validate().unwrap_err().field, "hosts");
        let mut name = PoolSpec::new("Big Pool", SharingMode::Exclusive, &["L4"]);
        assert_eq!(name.validate().unwrap_err().field, "name");
        name.name = "big-pool".into();
        name.max_lease_hours = MAX_LEASE_HOURS + 1;
        assert_eq!(name.validate().unwrap_err().field, "max_lease_hours");
        let dup = PoolSpec::new("d", SharingMode::Exclusive, &["L4", "L4"]);
        assert_eq!(dup.validate().unwrap_err().field, "models");
    }

    #[test]
    fn stopping_mps_strays_is_an_mps_pool_setting() {
        let mut mps = PoolSpec::new("l4-mps", SharingMode::Mps, &["L4"]);
        mps.mps_strays = MpsStrayPolicy::Stop;
        mps.validate().unwrap();
        let form = PoolForm::of(&mps);
        assert_eq!(form.mps_strays, "stop");
        assert_eq!(form.spec(), Ok(mps.clone()));
        // A form that leaves it out reports; one that misspells it is refused.
        let blank = PoolForm {
            mps_strays: String::new(),
            ..form.clone()
        };
        assert_eq!(blank.spec().unwrap().mps_strays, MpsStrayPolicy::Report);
        let bad = PoolForm {
            mps_strays: "kill".into(),
            ..form.clone()
        };
        assert_eq!(bad.spec().unwrap_err().field, "mps_strays");
        let changes = mps.differences(&PoolSpec::new("l4-mps", SharingMode::Mps, &["L4"]));
        assert_eq!(changes.len(), 1);
        assert_eq!(
            (
                changes[0].field.as_str(),
                changes[0].before.as_str(),
                changes[0].after.as_str()
            ),
            ("mps_strays", "report", "stop")
        );
        // Elsewhere there are no MPS clients to stop.
        let mut ts = PoolSpec::new("ts", SharingMode::TimeSlicing, &["L4"]);
        ts.time_slice_replicas = 4;
        ts.mps_strays = MpsStrayPolicy::Stop;
        assert_eq!(ts.validate().unwrap_err().field, "mps_strays");
    }

    #[test]
    fn a_form_round_trips_and_names_its_mistakes() {
        let mut spec = PoolSpec::new("ts", SharingMode::TimeSlicing, &["L4", "T4"]);
        spec.hosts = vec!["edge-*".into()];
        spec.time_slice_replicas = 4;
        spec.fair_share_weights = BTreeMap::from([("nlp".to_owned(), 3)]);
        spec.on_release = ReleasePolicy::Refuse;
        spec.idle_reclaim = Some(IdlePolicy::new(10, 240));
        let form = PoolForm::of(&spec);
        assert_eq!(form.models, "L4, T4");
        assert_eq!(form.spec(), Ok(spec.clone()));
        // Idle reclaim off: 0 minutes.
        let off = PoolForm {
            idle_minutes: 0,
            ..form.clone()
        };
        assert_eq!(off.spec().unwrap().idle_reclaim, None);
        let bad = PoolForm {
            idle_below_pct: 0,
            ..form.clone()
        };
        assert_eq!(bad.spec().unwrap_err().field, "idle_reclaim.below_pct");
        let changes = spec.differences(&PoolSpec {
            idle_reclaim: None,
            ..spec.clone()
        });
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].field, "idle_reclaim");
        assert_eq!(changes[0].before, "off");
        assert_eq!(
            changes[0].after,
            "below 10 % for 240 min, 60 min notice, 2 keeps"
        );
        let bad = PoolForm {
            sharing: "mig-ish".into(),
            ..form.clone()
        };
        assert_eq!(bad.spec().unwrap_err().field, "sharing");
        let bad = PoolForm {
            fair_share_weights: "nlp=0".into(),
            ..form.clone()
        };
        assert_eq!(bad.spec().unwrap_err().field, "fair_share_weights");
        let bad = PoolForm {
            models: " , ".into(),
            ..form
        };
        assert_eq!(bad.spec().unwrap_err().field, "models");
        assert_eq!(split_list("a,\n b ,,c"), ["a", "b", "c"]);
    }

    #[test]
    fn a_mode_change_moves_every_gpu_and_only_busy_ones_need_a_drain() {
        let before = vec![PoolSpec::new("a30", SharingMode::Mig, &["A30"])];
        let mut after = before.clone();
        after[0].sharing = SharingMode::Mps;
        let fleet = vec![
            gpu("h1", 0, "A30", 2),
            gpu("h1", 1, "A30", 0),
            gpu("h2", 0, "L4", 1),
        ];
        let m = moves(&before, &after, &fleet);
        assert_eq!(m.len(), 2, "{m:?}");
        assert!(m[0].needs_drain() && !m[1].needs_drain());
        assert_eq!(m[0].from_mode, Some(SharingMode::Mig));
        assert_eq!(m[0].to_mode, Some(SharingMode::Mps));
        assert_eq!(m[0].to_string(), "h1 GPU 0: a30 (mig) → a30 (mps)");
        // Other fields move nothing.
        let mut lease = before.clone();
        lease[0].max_lease_hours = 1;
        lease[0].description = "short".into();
        assert!(moves(&before, &lease, &fleet).is_empty());
        assert_eq!(lease[0].differences(&before[0]).len(), 2);
    }

    #[test]
    fn a_host_selector_moves_that_hosts_gpus_between_pools() {
        let shared = PoolSpec::new("l4-shared", SharingMode::TimeSlicing, &["L4"]);
        let mut dedicated = PoolSpec::new("l4-whole", SharingMode::Exclusive, &["L4"]);
        dedicated.hosts = vec!["h9".into()];
        let before = vec![shared.clone(), dedicated.clone()];
        let mut narrowed = shared.clone();
        narrowed.hosts = vec!["h1".into()];
        let after = vec![narrowed, dedicated];
        let fleet = vec![
            gpu("h1", 0, "L4", 1),
            gpu("h9", 0, "L4", 1),
            gpu("h9", 1, "L4", 0),
        ];
        let m = moves(&before, &after, &fleet);
        let moved: Vec<String> = m.iter().map(|m| m.to_string()).collect();
        assert_eq!(
            moved,
            [
                "h9 GPU 0: l4-shared (time-slicing) → l4-whole (exclusive)",
                "h9 GPU 1: l4-shared (time-slicing) → l4-whole (exclusive)",
            ]
        );
        // A GPU that leaves every pool moves too.
        let m = moves(&before, &[], &fleet);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].to_pool, None);
        assert_eq!(
            m[0].to_string(),
            "h1 GPU 0: l4-shared (time-slicing) → no pool"
        );
    }
}
