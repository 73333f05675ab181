//! The request form's *workload profile* helper: from what a tenant says
//! about the work (a notebook, an inference service, fine-tuning or
//! training; the model's parameters and precision), the memory and compute
//! it needs by the usual rules of thumb, and the smallest shape on offer
//! that covers them ([`crate::rightsize::smallest_cover`]), with the
//! reasoning in words. Pure: it runs in the browser as the tenant types.
//!
//! The rules (weights = parameters × bytes per parameter of the precision):
//!
//! | work | memory | compute |
//! |---|---|---|
//! | notebook | weights × 1.2 + 1 GiB | 0.1 GPU (mostly idle, bursts) |
//! | inference service | weights × 1.2 + 1 GiB (KV cache, activations) | 0.25 GPU |
//! | fine-tuning (adapters) | weights × 1.3 + 2 GiB (adapters, their optimizer, activations) | 0.5 GPU |
//! | training (full) | parameters × 16 B × 1.2 + 1 GiB (weights, gradients, FP32 master copy, Adam's two moments, activations) | 1 GPU per GPU |
//!
//! Memory beyond the largest GPU on offer asks for whole GPUs, enough of
//! them to hold it (the framework shards the model). The right-sizing
//! advice corrects the guess once the slice has run.

use serde::{Deserialize, Serialize};

use crate::catalogue::lookup;
use crate::names::stable_names;
use crate::rightsize::{gib, smallest_cover, Offer};
use crate::sharing::{SharingMode, SliceShape};
use crate::slice::{label, PoolOffer, MAX_WHOLE_GPUS};
use crate::units::MemMiB;

stable_names! {
    /// What the slice is for.
    pub enum WorkKind ("work_kind") {
        /// An interactive notebook.
        Notebook = "notebook",
        /// A model served for inference.
        Inference = "inference",
        /// Fine-tuning with adapters (LoRA and the like).
        FineTuning = "fine_tuning",
        /// Training all of a model's weights.
        Training = "training",
    }
}

stable_names! {
    /// The precision of the model's weights.
    pub enum Precision ("precision") {
        /// 32-bit floats: 4 bytes a parameter.
        Fp32 = "fp32",
        /// BF16 or FP16: 2 bytes a parameter.
        Bf16 = "bf16",
        /// FP8 or INT8: 1 byte a parameter.
        Int8 = "int8",
        /// 4-bit quantised: half a byte a parameter.
        Int4 = "int4",
    }
}

impl Precision {
    /// Tenths of a byte per parameter.
    fn tenth_bytes(self) -> u64 {
        match self {
            Self::Fp32 => 40,
            Self::Bf16 => 20,
            Self::Int8 => 10,
            Self::Int4 => 5,
        }
    }
}

impl WorkKind {
    /// In words, for the form.
    pub fn label(self) -> &'static str {
        match self {
            Self::Notebook => "Interactive notebook",
            Self::Inference => "Inference service",
            Self::FineTuning => "Fine-tuning (adapters)",
            Self::Training => "Training (all weights)",
        }
    }
}

/// What the tenant says about the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sketch {
    /// What it is for.
    pub kind: WorkKind,
    /// The model's size in millions of parameters (7,000 for a 7B model).
    pub params_millions: u64,
    /// The weights' precision.
    pub precision: Precision,
}

/// What the sketch needs, with the reasoning.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Need {
    /// Memory per GPU (or in all, for one GPU).
    pub memory: MemMiB,
    /// Compute, thousandths of a GPU (per GPU).
    pub compute_milli: u32,
    /// Each step in words.
    pub reasons: Vec<String>,
}

/// The memory and compute the sketch needs on one GPU.
pub fn need(s: &Sketch) -> Need {
    // Millions of parameters × tenths of a byte / 10 = MB; as MiB.
    let weights = s.params_millions * s.precision.tenth_bytes() * 1_000_000 / 10 / (1024 * 1024);
    let mut reasons = vec![format!(
        "{} M parameters at {} are {} of weights",
        s.params_millions,
        s.precision.as_str(),
        gib(weights)
    )];
    let (memory, compute) = match s.kind {
        WorkKind::Notebook | WorkKind::Inference => {
            reasons.push(
                "+20 % for the KV cache and activations, +1 GiB for the CUDA context".to_owned(),
            );
            (
                weights * 12 / 10 + 1024,
                if s.kind == WorkKind::Notebook {
                    100
                } else {
                    250
                },
            )
        }
        WorkKind::FineTuning => {
            reasons.push(
                "+30 % for the adapters, their optimizer state and activations, +2 GiB".to_owned(),
            );
            (weights * 13 / 10 + 2048, 500)
        }
        WorkKind::Training => {
            let state = s.params_millions * 16 * 1_000_000 / (1024 * 1024);
            reasons.push(format!(
                "full training keeps weights, gradients, an FP32 master copy and Adam's two moments: 16 bytes a parameter, {}; +20 % for activations, +1 GiB",
                gib(state)
            ));
            (state * 12 / 10 + 1024, 1000)
        }
    };
    reasons.push(format!(
        "needs {} of GPU memory and about {} % of a GPU's compute ({})",
        gib(memory),
        compute / 10,
        match s.kind {
            WorkKind::Notebook => "a notebook is mostly idle between bursts",
            WorkKind::Inference => "a service under moderate load",
            WorkKind::FineTuning => "adapters train on part of the work",
            WorkKind::Training => "training keeps a GPU busy",
        }
    ));
    Need {
        memory: MemMiB(memory),
        compute_milli: compute,
        reasons,
    }
}

/// A shape to ask for, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Suggestion {
    /// The pool.
    pub pool: String,
    /// The shape.
    pub shape: SliceShape,
    /// The shape in words.
    pub label: String,
    /// The reasoning, step by step.
    pub reasons: Vec<String>,
}

/// The smallest shape among `pools` that the sketch's need fits, or `Err`
/// with the reasoning and why nothing fits.
pub fn suggest(s: &Sketch, pools: &[PoolOffer]) -> Result<Suggestion, Vec<String>> {
    let need = need(s);
    let mut reasons = need.reasons.clone();
    let offers: Vec<Offer<'_>> = pools
        .iter()
        .map(|pool| Offer {
            pool,
            gpu_hour_micros: None,
        })
        .collect();
    let mut models: Vec<_> = pools
        .iter()
        .flat_map(|p| p.models.iter().map(|m| lookup(m, 0)))
        .filter(|m| !m.generic)
        .collect();
    models.sort_by_key(|m| m.name);
    models.dedup_by_key(|m| m.name);
    // One GPU, the smallest share over every model on offer.
    let best = models
        .iter()
        .filter_map(|m| {
            smallest_cover(
                &offers,
                m,
                need.compute_milli,
                need.memory,
                None,
                &|_, _| true,
            )
            .map(|c| {
                (
                    c.share,
                    m.memory_mib,
                    c.offer.pool.pool.clone(),
                    c.shape,
                    c.label,
                )
            })
        })
        .min_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    if let Some((_, _, pool, shape, label)) = best {
        reasons.push(format!(
            "the smallest shape on offer that holds it: {label} in {pool}"
        ));
        return Ok(Suggestion {
            pool,
            shape,
            label,
            reasons,
        });
    }
    // Several whole GPUs of the model with the most memory.
    let whole = pools
        .iter()
        .filter(|p| p.policy.mode == SharingMode::Exclusive)
        .flat_map(|p| p.models.iter().map(move |m| (p, lookup(m, 0))))
        .filter(|(_, m)| !m.generic && m.memory_mib > 0)
        .max_by_key(|(_, m)| m.memory_mib);
    let Some((pool, model)) = whole else {
        reasons.push(
            "no pool on offer has a GPU with that much memory, and none gives whole GPUs"
                .to_owned(),
        );
        return Err(reasons);
    };
    let count = u32::try_from(need.memory.0.div_ceil(model.memory_mib)).unwrap_or(u32::MAX);
    if count > MAX_WHOLE_GPUS {
        reasons.push(format!(
            "it would take {count} {}s, more than one host has; talk to the platform team",
            model.name
        ));
        return Err(reasons);
    }
    let shape = SliceShape::Whole {
        count,
        nvlink_local: count > 1,
    };
    reasons.push(format!(
        "more than one GPU holds: {count} × {} ({} each) on one NVLink island, the model sharded across them",
        model.name,
        gib(model.memory_mib)
    ));
    Ok(Suggestion {
        pool: pool.pool.clone(),
        label: label(&shape),
        shape,
        reasons,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sharing::PoolPolicy;

    fn pool(name: &str, mode: SharingMode, model: &str) -> PoolOffer {
        PoolOffer {
            pool: name.to_owned(),
            policy: PoolPolicy::new(mode),
            models: vec![model.to_owned()],
            max_lease_hours: 72,
        }
    }

    fn fleet() -> Vec<PoolOffer> {
        vec![
            pool("h100-mig", SharingMode::Mig, "H100-80GB"),
            pool("h100", SharingMode::Exclusive, "H100-80GB"),
        ]
    }

    fn sketch(kind: WorkKind, params_millions: u64, precision: Precision) -> Sketch {
        Sketch {
            kind,
            params_millions,
            precision,
        }
    }

    #[test]
    fn a_7b_model_served_in_bf16_takes_a_2g_20gb() {
        // 14 GB of weights = 13.0 GiB, × 1.2 + 1 GiB = 16.6 GiB: more than
        // a 1g.10gb; a 1g.20gb would hold it but has a seventh of the
        // compute (0.142 < 0.25); a 2g.20gb has both.
        let s = suggest(
            &sketch(WorkKind::Inference, 7_000, Precision::Bf16),
            &fleet(),
        )
        .unwrap();
        assert_eq!(s.label, "MIG 2g.20gb");
        assert_eq!(s.pool, "h100-mig");
        assert_eq!(
            s.reasons[0],
            "7000 M parameters at bf16 are 13.0 GiB of weights"
        );
        assert!(
            s.reasons
                .last()
                .unwrap()
                .contains("MIG 2g.20gb in h100-mig"),
            "{s:?}"
        );
    }

    #[test]
    fn a_small_notebook_takes_the_smallest_instance() {
        let s = suggest(
            &sketch(WorkKind::Notebook, 1_000, Precision::Bf16),
            &fleet(),
        )
        .unwrap();
        assert_eq!(s.label, "MIG 1g.10gb");
    }

    #[test]
    fn full_training_of_a_7b_model_takes_several_whole_gpus() {
        // 7B × 16 B = 104.3 GiB × 1.2 + 1 GiB = 126 GiB: two H100s.
        let s = suggest(
            &sketch(WorkKind::Training, 7_000, Precision::Bf16),
            &fleet(),
        )
        .unwrap();
        assert_eq!(
            s.shape,
            SliceShape::Whole {
                count: 2,
                nvlink_local: true
            }
        );
        assert_eq!(s.pool, "h100");
    }

    #[test]
    fn quantisation_shrinks_the_need() {
        let bf16 = need(&sketch(WorkKind::FineTuning, 13_000, Precision::Bf16));
        let int4 = need(&sketch(WorkKind::FineTuning, 13_000, Precision::Int4));
        assert!(int4.memory.0 * 3 < bf16.memory.0, "{int4:?} vs {bf16:?}");
        let s = suggest(
            &sketch(WorkKind::FineTuning, 13_000, Precision::Int4),
            &fleet(),
        )
        .unwrap();
        // 13B at 4 bits = 6.1 GiB × 1.3 + 2 GiB = 9.9 GiB, half a GPU of
        // compute: a 4g.40gb (4/7).
        assert_eq!(s.label, "MIG 4g.40gb");
    }

    #[test]
    fn nothing_fits_without_whole_gpus_and_the_reasons_say_so() {
        let only_mig = vec![pool("h100-mig", SharingMode::Mig, "H100-80GB")];
        let err = suggest(
            &sketch(WorkKind::Training, 70_000, Precision::Bf16),
            &only_mig,
        )
        .unwrap_err();
        assert!(
            err.last().unwrap().contains("none gives whole GPUs"),
            "{err:?}"
        );
        let err = suggest(
            &sketch(WorkKind::Training, 700_000, Precision::Bf16),
            &fleet(),
        )
        .unwrap_err();
        assert!(
            err.last().unwrap().contains("more than one host has"),
            "{err:?}"
        );
    }
}
