//! A shape against a pool with one or more GPU models.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::catalogue::{self, GpuModel};
use crate::placement;
use crate::quota::Demand;
use crate::sharing::{cost, PoolPolicy, ShapeError, SliceShape};
use crate::units::{ComputeMilli, MemMiB};

/// What a pool offers: its policy and the models of its GPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolOffer {
    /// Pool name.
    pub pool: String,
    /// Sharing policy.
    pub policy: PoolPolicy,
    /// Catalogue model names of the pool's GPUs.
    pub models: Vec<String>,
    /// Longest lease, in hours.
    pub max_lease_hours: u32,
}

/// Why a shape cannot be asked for in a pool.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PoolShapeError {
    /// No model of the pool can serve the shape; the reason from the first model.
    #[error("{0}")]
    Shape(ShapeError),
    /// The pool lists no GPU models.
    #[error("this pool has no GPU models configured")]
    NoModels,
    /// Lease outside 1..=max.
    #[error("a lease must be between 1 and {max} hours in this pool, not {hours}")]
    LeaseOutOfRange {
        /// Asked for.
        hours: u32,
        /// Pool maximum.
        max: u32,
    },
    /// Whole GPUs beyond what one host can have.
    #[error("at most {max} whole GPUs fit on one host; ask for fewer")]
    TooManyGpus {
        /// The limit.
        max: u32,
    },
}

/// Most whole GPUs one request may ask for (one host; NVLink islands are at most 8 today, hosts 16).
pub const MAX_WHOLE_GPUS: u32 = 16;

/// A MIG profile a pool offers, with the GPU it comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OfferedMigProfile {
    /// The profile.
    pub profile: &'static crate::catalogue::MigProfile,
    /// Compute slices of the GPU it comes from (7 on A100/H100).
    pub of_compute_slices: u8,
}

impl PoolOffer {
    /// The MIG profiles tenants may ask for here: each profile of the pool's
    /// models that the policy allows, once, in catalogue order.
    pub fn mig_profiles(&self) -> Vec<OfferedMigProfile> {
        let mut out: Vec<OfferedMigProfile> = Vec::new();
        for model in self.catalogue_models() {
            let Some(spec) = model.mig else { continue };
            for profile in spec.profiles {
                if self.policy.allows_mig_profile(profile.name)
                    && !out.iter().any(|o| o.profile.name == profile.name)
                {
                    out.push(OfferedMigProfile {
                        profile,
                        of_compute_slices: spec.compute_slices,
                    });
                }
            }
        }
        out
    }

    fn catalogue_models(&self) -> Vec<GpuModel> {
        self.models
            .iter()
            .map(|m| catalogue::lookup(m, 0))
            .filter(|m| !m.generic)
            .collect()
    }

    /// The models of the pool that can serve `shape`, or the first model's
    /// reason when none can.
    pub fn models_for(&self, shape: &SliceShape) -> Result<Vec<GpuModel>, PoolShapeError> {
        let models = self.catalogue_models();
        if models.is_empty() {
            return Err(PoolShapeError::NoModels);
        }
        if let SliceShape::Whole { count, .. } = shape {
            if *count > MAX_WHOLE_GPUS {
                return Err(PoolShapeError::TooManyGpus {
                    max: MAX_WHOLE_GPUS,
                });
            }
        }
        let mut first_err = None;
        let mut ok = Vec::new();
        for m in models {
            match crate::sharing::validate_shape(shape, &m, &self.policy) {
                Ok(()) => ok.push(m),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        match (ok.is_empty(), first_err) {
            (true, Some(e)) => Err(PoolShapeError::Shape(e)),
            _ => Ok(ok),
        }
    }

    /// Checks the shape and the lease; returns what the slice costs against
    /// the quota: the most it costs on any of the pool's models that can
    /// serve it (so a slice never costs more once placed than it was charged).
    pub fn admit(&self, shape: &SliceShape, lease_hours: u32) -> Result<Demand, PoolShapeError> {
        if lease_hours == 0 || lease_hours > self.max_lease_hours {
            return Err(PoolShapeError::LeaseOutOfRange {
                hours: lease_hours,
                max: self.max_lease_hours,
            });
        }
        let models = self.models_for(shape)?;
        let mut worst = Demand::default();
        for m in &models {
            let d = cost(shape, m, &self.policy).map_err(PoolShapeError::Shape)?;
            worst = Demand {
                compute: worst.compute.max(d.compute),
                memory: worst.memory.max(d.memory),
                slices: worst.slices.max(d.slices),
            };
        }
        Ok(worst)
    }

    /// The shapes worth checking against the live pool ("what cannot be
    /// placed anywhere right now"): every MIG profile the pool allows on its
    /// models (no `+me` variants), one time-sliced replica, an MPS quarter of
    /// the smallest model, or 1, 2, 4 and 8 whole GPUs, as the mode offers;
    /// only shapes the pool accepts.
    pub fn probe_shapes(&self) -> Vec<SliceShape> {
        use crate::sharing::SharingMode;
        let models: Vec<GpuModel> = self
            .models
            .iter()
            .map(|m| catalogue::lookup(m, 0))
            .collect();
        let mut shapes = Vec::new();
        match self.policy.mode {
            SharingMode::Mig => {
                for spec in models.iter().filter_map(|m| m.mig) {
                    for p in spec.profiles.iter().filter(|p| !p.media_extensions) {
                        let shape = SliceShape::Mig {
                            profile: p.name.to_owned(),
                        };
                        if !shapes.contains(&shape) {
                            shapes.push(shape);
                        }
                    }
                }
            }
            SharingMode::TimeSlicing => shapes.push(SliceShape::TimeSlice {}),
            SharingMode::Mps => {
                if let Some(smallest) = models.iter().map(|m| m.memory_mib).min() {
                    shapes.push(SliceShape::Mps {
                        compute_percent: 25,
                        memory_mib: MemMiB(smallest / 4),
                    });
                }
            }
            SharingMode::Exclusive => {
                for count in [1, 2, 4, 8] {
                    shapes.push(SliceShape::Whole {
                        count,
                        nvlink_local: false,
                    });
                }
            }
        }
        shapes.retain(|s| self.placement_request(s).is_ok());
        shapes
    }

    /// The placer's view of the request (the pool and the models that can serve it).
    pub fn placement_request(
        &self,
        shape: &SliceShape,
    ) -> Result<placement::PlacementRequest, PoolShapeError> {
        let models = self.models_for(shape)?;
        let demand = match shape {
            SliceShape::Mig { profile } => {
                // The catalogue's spelling, so the placer and the agent agree.
                let name = models
                    .iter()
                    .filter_map(|m| m.mig.and_then(|s| s.profile(profile)))
                    .map(|p| p.name.to_string())
                    .next()
                    .unwrap_or_else(|| profile.clone());
                placement::Demand::Mig { profile: name }
            }
            SliceShape::Mps {
                compute_percent,
                memory_mib,
            } => placement::Demand::Fraction {
                compute: ComputeMilli(u32::from(*compute_percent) * 10),
                memory: Some(*memory_mib),
            },
            SliceShape::TimeSlice {} => {
                let n = self.policy.time_slice_replicas.max(1);
                let memory = models.iter().map(|m| m.memory_mib).min().unwrap_or(0) / u64::from(n);
                placement::Demand::Fraction {
                    compute: ComputeMilli(1000 / n),
                    memory: Some(MemMiB(memory)),
                }
            }
            SliceShape::Whole { count, .. } => placement::Demand::Whole { count: *count },
        };
        let mut req = placement::PlacementRequest::new(demand)
            .in_pool(self.pool.clone())
            .with_models(models.iter().map(|m| m.name.to_string()));
        if let SliceShape::Whole {
            nvlink_local: true,
            count,
        } = shape
        {
            if *count > 1 {
                req = req.nvlink();
            }
        }
        Ok(req)
    }
}

/// A short description of a shape, e.g. `MIG 1g.10gb`, `MPS 25% · 20 GiB`.
pub fn label(shape: &SliceShape) -> String {
    match shape {
        SliceShape::Mig { profile } => format!("MIG {profile}"),
        SliceShape::Mps {
            compute_percent,
            memory_mib,
        } => format!("MPS {compute_percent}% · {memory_mib}"),
        SliceShape::TimeSlice {} => "Time-sliced replica".to_string(),
        SliceShape::Whole {
            count,
            nvlink_local,
        } => {
            let gpus = if *count == 1 { "GPU" } else { "GPUs" };
            let link = if *nvlink_local && *count > 1 {
                " (NVLink)"
            } else {
                ""
            };
            format!("{count} whole {gpus}{link}")
        }
    }
}
