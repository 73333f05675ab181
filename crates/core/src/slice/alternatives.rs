//! "What would start now": for a request that waits, the shapes in any
//! pool that the fleet has room for at once and the quota allows, closest
//! to what was asked first.

use serde::{Deserialize, Serialize};

use crate::quota::Demand;
use crate::sharing::SliceShape;

/// A shape that would start at once instead.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartsNow {
    /// The pool.
    pub pool: String,
    /// The shape.
    pub shape: SliceShape,
    /// The shape in words.
    pub label: String,
    /// What it costs against the quota.
    pub demand: Demand,
}

/// Most alternatives offered.
pub const MAX_ALTERNATIVES: usize = 3;

/// The alternatives worth offering for a request of `asked` in `pool` that
/// waits, from `fits` (shapes that fit now and within quota): not the
/// request itself; first those with at least the memory asked for (the
/// work still fits), the smallest first; then smaller ones, the largest
/// first; the request's own pool before others at equal size. At most
/// [`MAX_ALTERNATIVES`].
pub fn rank(
    pool: &str,
    shape: &SliceShape,
    asked: &Demand,
    fits: Vec<StartsNow>,
) -> Vec<StartsNow> {
    let mut out: Vec<StartsNow> = fits
        .into_iter()
        .filter(|s| !(s.pool == pool && s.shape == *shape))
        .collect();
    out.sort_by_key(|s| {
        let enough = s.demand.memory >= asked.memory;
        (
            !enough,
            if enough {
                s.demand.memory.0
            } else {
                u64::MAX - s.demand.memory.0
            },
            s.demand.compute.0,
            s.pool != pool,
            s.label.clone(),
        )
    });
    out.dedup_by(|a, b| a.pool == b.pool && a.shape == b.shape);
    out.truncate(MAX_ALTERNATIVES);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{ComputeMilli, MemMiB};

    fn alt(pool: &str, profile: &str, compute: u32, gib: u64) -> StartsNow {
        StartsNow {
            pool: pool.into(),
            shape: SliceShape::Mig {
                profile: profile.into(),
            },
            label: format!("MIG {profile}"),
            demand: Demand {
                compute: ComputeMilli(compute),
                memory: MemMiB(gib * 1024),
                slices: 1,
            },
        }
    }

    #[test]
    fn enough_memory_first_then_the_largest_smaller_ones() {
        let asked = alt("h100-mig", "4g.40gb", 571, 40);
        let fits = vec![
            alt("h100-mig", "1g.10gb", 142, 10),
            alt("h100-mig", "2g.20gb", 285, 20),
            alt("h100-mig", "7g.80gb", 1000, 80),
            alt("a100-mig", "3g.40gb", 428, 40),
            alt("h100-mig", "4g.40gb", 571, 40),
            alt("h100-mig", "3g.40gb", 428, 40),
        ];
        let got: Vec<(String, String)> = rank("h100-mig", &asked.shape, &asked.demand, fits)
            .into_iter()
            .map(|s| (s.pool, s.label))
            .collect();
        assert_eq!(
            got,
            vec![
                ("h100-mig".to_owned(), "MIG 3g.40gb".to_owned()),
                ("a100-mig".to_owned(), "MIG 3g.40gb".to_owned()),
                ("h100-mig".to_owned(), "MIG 7g.80gb".to_owned()),
            ]
        );
    }

    #[test]
    fn without_enough_memory_anywhere_the_largest_smaller_shape_leads() {
        let asked = alt("h100-mig", "7g.80gb", 1000, 80);
        let fits = vec![
            alt("h100-mig", "1g.10gb", 142, 10),
            alt("h100-mig", "2g.20gb", 285, 20),
        ];
        let got = rank("h100-mig", &asked.shape, &asked.demand, fits);
        assert_eq!(got[0].label, "MIG 2g.20gb");
        assert_eq!(got.len(), 2);
        assert!(rank("h100-mig", &asked.shape, &asked.demand, Vec::new()).is_empty());
    }
}
