//! A pool as a web form sends it, and back: the browser and the server
//! parse it with the same code.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{
    MpsStrayPolicy, PoolName, PoolPlacement, PoolSpec, PoolSpecError, ReleasePolicy, TenantSlug,
};
use crate::idle::IdlePolicy;
use crate::schedule::Discipline;
use crate::sharing::{IsolationClass, SharingMode};

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
    /// `pack`, `spread`, `best-fit` or `first-fit` (empty: `pack`).
    #[serde(default)]
    pub placement: String,
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
    /// A new pool's form: no name and no models, the defaults for the rest.
    pub fn blank() -> Self {
        Self {
            name: String::new(),
            models: String::new(),
            ..Self::of(&PoolSpec::new(
                PoolName::unchecked("new"),
                crate::sharing::SharingMode::Exclusive,
                &[],
            ))
        }
    }

    /// The form of an existing pool, for editing.
    pub fn of(spec: &PoolSpec) -> Self {
        Self {
            name: spec.name.to_string(),
            description: spec.description.clone(),
            sharing: spec.sharing.to_string(),
            isolation: spec.isolation.to_string(),
            models: spec.models.join(", "),
            hosts: spec.hosts.join(", "),
            time_slice_replicas: spec.time_slice_replicas,
            allowed_mig_profiles: spec.allowed_mig_profiles.join(", "),
            max_lease_hours: spec.max_lease_hours,
            placement: spec.placement.as_str().to_owned(),
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
            match parsed.and_then(|(t, w)| Some((TenantSlug::parse(&t).ok()?, w))) {
                Some((t, w)) if w > 0 => {
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
        let name = PoolName::parse(self.name.trim())
            .map_err(|e| PoolSpecError::new("name", e.to_string()))?;
        let spec = PoolSpec {
            name,
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
            placement: if self.placement.trim().is_empty() {
                PoolPlacement::default()
            } else {
                let options = PoolPlacement::ALL.map(|p| (p.as_str(), p));
                choose("placement", &self.placement, &options)?
            },
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
