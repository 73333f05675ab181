//! Weighted fair share: how much of a pool a tenant has had lately, against
//! its weight. Usage decays with a half-life (as in Slurm's multifactor
//! priority and Kueue's fair sharing), so a tenant that used the pool heavily
//! yesterday is not punished forever, and one that has been waiting goes
//! ahead of one that has just had a lot.

use serde::{Deserialize, Serialize};

/// A stretch of GPU use: `milli` thousandths of a GPU from `start` until
/// `end` (ms; `None`: still held).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UseSpan {
    /// When it started holding (ms).
    pub start: i64,
    /// When it stopped (ms), if it has.
    pub end: Option<i64>,
    /// GPU compute held, in thousandths of a GPU.
    pub milli: u64,
}

/// Largest half-life accepted, a year in ms (longer makes no difference a
/// platform would notice, and keeps the arithmetic in range).
pub const MAX_HALF_LIFE_MS: i64 = 365 * 24 * 3_600_000;

/// A tenant's recent use of a pool, in milli-GPU-seconds, each moment of use
/// counted with weight `2^(-age / half_life)`. With a half-life of 0 it is
/// the compute held right now (in thousandths of a GPU): no memory at all.
/// Spans (or their parts) after `now` do not count.
pub fn decayed_usage(spans: &[UseSpan], now: i64, half_life_ms: i64) -> u64 {
    if half_life_ms <= 0 {
        return spans
            .iter()
            .filter(|s| s.start <= now && s.end.is_none_or(|e| e > now))
            .map(|s| s.milli)
            .sum();
    }
    let h = half_life_ms.min(MAX_HALF_LIFE_MS) as f64;
    // ∫ 2^(-(now - t)/h) dt over [a, b] = h / ln 2 · (2^(-(now-b)/h) − 2^(-(now-a)/h)).
    let weight_at = |t: i64| (-((now - t) as f64) / h).exp2();
    let total: f64 = spans
        .iter()
        .filter_map(|s| {
            let end = s.end.unwrap_or(now).min(now);
            (end > s.start).then(|| {
                let ms = h / std::f64::consts::LN_2 * (weight_at(end) - weight_at(s.start));
                s.milli as f64 * ms / 1000.0
            })
        })
        .sum();
    total.round().clamp(0.0, u64::MAX as f64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: i64 = 3_600_000;

    #[test]
    fn without_a_half_life_only_what_is_held_now_counts() {
        let spans = [
            UseSpan {
                start: 0,
                end: None,
                milli: 500,
            },
            UseSpan {
                start: 0,
                end: Some(10),
                milli: 1000,
            },
            UseSpan {
                start: 50,
                end: None,
                milli: 250,
            },
        ];
        assert_eq!(decayed_usage(&spans, 20, 0), 500);
    }

    #[test]
    fn use_long_ago_weighs_less_by_the_half_life() {
        // One GPU for one hour, ending now: ∫ over the last hour of 2^(-age/h).
        let recent = [UseSpan {
            start: -HOUR,
            end: Some(0),
            milli: 1000,
        }];
        let h = 24 * HOUR;
        // (1,000 milli-GPU × h / ln 2 × (1 − 2^(−1/24)) ms) / 1,000 ms per s.
        let expected = (h as f64 / std::f64::consts::LN_2) * (1.0 - (-1.0f64 / 24.0).exp2());
        assert_eq!(decayed_usage(&recent, 0, h), expected.round() as u64);
        // Roughly 3,600 GPU-seconds × 1000, a little less for the decay.
        let v = decayed_usage(&recent, 0, h);
        assert!((3_500_000..3_600_000).contains(&v), "{v}");
        // The same hour, one half-life earlier, counts half.
        let old = [UseSpan {
            start: -HOUR - h,
            end: Some(-h),
            milli: 1000,
        }];
        let half = decayed_usage(&old, 0, h) as f64 / v as f64;
        assert!((half - 0.5).abs() < 1e-6, "{half}");
        // Running spans count up to now; future parts do not count.
        let running = [UseSpan {
            start: -HOUR,
            end: None,
            milli: 1000,
        }];
        assert_eq!(decayed_usage(&running, 0, h), v);
        let future = [UseSpan {
            start: -HOUR,
            end: Some(HOUR),
            milli: 1000,
        }];
        assert_eq!(decayed_usage(&future, 0, h), v);
        assert_eq!(
            decayed_usage(
                &[UseSpan {
                    start: 10,
                    end: None,
                    milli: 1000
                }],
                0,
                h
            ),
            0
        );
    }

    #[test]
    fn twice_the_compute_is_twice_the_usage() {
        let one = [UseSpan {
            start: -5 * HOUR,
            end: Some(-HOUR),
            milli: 1000,
        }];
        let two = [UseSpan {
            start: -5 * HOUR,
            end: Some(-HOUR),
            milli: 2000,
        }];
        let (a, b) = (
            decayed_usage(&one, 0, 6 * HOUR),
            decayed_usage(&two, 0, 6 * HOUR),
        );
        assert!(b.abs_diff(2 * a) <= 1, "{a} {b}");
    }
}
