//! What a change to the pools does: the fields it sets, shown for review,
//! and the GPUs it moves to another pool or sharing mode.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::{pool_of, PoolSpec};
use crate::idle::IdlePolicy;
use crate::sharing::SharingMode;

impl PoolSpec {
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
            "placement",
            before.placement.as_str().to_owned(),
            self.placement.as_str().to_owned(),
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
        let weights = |w: &BTreeMap<super::TenantSlug, u32>| {
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
    pub from_pool: Option<super::PoolName>,
    /// The pool after.
    pub to_pool: Option<super::PoolName>,
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
        let side = |p: &Option<super::PoolName>, m: &Option<SharingMode>| match (p, m) {
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
