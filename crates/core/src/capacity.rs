//! Capacity planning and queue statistics for the fleet's insights page:
//! a least-squares trend through a pool's daily allocation, the day that
//! trend reaches the pool's capacity, and the days of a period.

/// Milliseconds in a day.
pub const DAY_MS: i64 = 86_400_000;

/// A straight line `value = intercept + slope × day`, fitted by least
/// squares, with `day` counted from the first point's day.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Trend {
    /// Start of the first day (ms).
    pub origin_ms: i64,
    /// Value at the origin.
    pub intercept: f64,
    /// Change per day.
    pub slope_per_day: f64,
}

impl Trend {
    /// Fits `points` (day start in ms, value); `None` with fewer than two
    /// distinct days.
    pub fn fit(points: &[(i64, f64)]) -> Option<Self> {
        let origin_ms = points.iter().map(|p| p.0).min()?;
        let xs: Vec<(f64, f64)> = points
            .iter()
            .map(|(t, v)| ((t - origin_ms) as f64 / DAY_MS as f64, *v))
            .collect();
        let n = xs.len() as f64;
        let mean_x = xs.iter().map(|p| p.0).sum::<f64>() / n;
        let mean_y = xs.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = xs.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
        if sxx <= f64::EPSILON {
            return None;
        }
        let sxy: f64 = xs.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
        let slope_per_day = sxy / sxx;
        Some(Self {
            origin_ms,
            intercept: mean_y - slope_per_day * mean_x,
            slope_per_day,
        })
    }

    /// The line's value at `at_ms`.
    pub fn at(&self, at_ms: i64) -> f64 {
        self.intercept + self.slope_per_day * (at_ms - self.origin_ms) as f64 / DAY_MS as f64
    }
}

/// When a pool fills up at its current trend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Projection {
    /// Not enough history for a trend (fewer than two days).
    Unknown,
    /// The trend is already at or above capacity.
    FullNow,
    /// Flat or falling: it never fills at this trend.
    Never,
    /// The trend reaches capacity on the day starting at this time (ms).
    FullOn(i64),
    /// Rising, but it would take longer than the horizon.
    BeyondHorizon,
}

/// Projects when `trend` reaches `capacity`, looking from `now_ms` up to
/// `horizon_days` ahead: the start of the day in which it is reached.
pub fn project_full(
    trend: Option<&Trend>,
    capacity: f64,
    now_ms: i64,
    horizon_days: i64,
) -> Projection {
    let Some(t) = trend else {
        return Projection::Unknown;
    };
    if t.at(now_ms) >= capacity {
        return Projection::FullNow;
    }
    if t.slope_per_day <= 0.0 {
        return Projection::Never;
    }
    let days_from_origin = (capacity - t.intercept) / t.slope_per_day;
    let at_ms = t.origin_ms + (days_from_origin * DAY_MS as f64).ceil() as i64;
    let day = at_ms.div_euclid(DAY_MS) * DAY_MS;
    if day > now_ms + horizon_days * DAY_MS {
        Projection::BeyondHorizon
    } else {
        Projection::FullOn(day)
    }
}

/// The start (ms) of each day in `[from_ms, to_ms)`, from the day
/// `from_ms` is in.
pub fn day_starts(from_ms: i64, to_ms: i64) -> Vec<i64> {
    let first = from_ms.div_euclid(DAY_MS) * DAY_MS;
    (0..)
        .map(|i| first + i * DAY_MS)
        .take_while(|d| *d < to_ms)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: i64 = DAY_MS;

    #[test]
    fn a_rising_trend_fills_the_pool_on_the_day_it_crosses() {
        // 2, 3, 4, 5 GPUs on days 0..3: one GPU a day more.
        let points: Vec<(i64, f64)> = (0..4).map(|d| (d * D, 2.0 + d as f64)).collect();
        let t = Trend::fit(&points).unwrap();
        assert!((t.slope_per_day - 1.0).abs() < 1e-9);
        assert!((t.intercept - 2.0).abs() < 1e-9);
        assert!((t.at(10 * D) - 12.0).abs() < 1e-9);
        // 8 GPUs: reached on day 6.
        assert_eq!(
            project_full(Some(&t), 8.0, 3 * D, 90),
            Projection::FullOn(6 * D)
        );
        // 7.5 GPUs: reached half way through day 5, so full on day 5.
        assert_eq!(
            project_full(Some(&t), 7.5, 3 * D, 90),
            Projection::FullOn(5 * D)
        );
        assert_eq!(project_full(Some(&t), 5.0, 3 * D, 90), Projection::FullNow);
        assert_eq!(
            project_full(Some(&t), 1000.0, 3 * D, 90),
            Projection::BeyondHorizon
        );
    }

    #[test]
    fn flat_or_short_histories_never_fill() {
        let flat = Trend::fit(&[(0, 3.0), (D, 3.0), (2 * D, 3.0)]).unwrap();
        assert_eq!(project_full(Some(&flat), 8.0, 2 * D, 90), Projection::Never);
        let falling = Trend::fit(&[(0, 5.0), (D, 4.0)]).unwrap();
        assert_eq!(project_full(Some(&falling), 8.0, D, 90), Projection::Never);
        assert_eq!(Trend::fit(&[(D, 3.0)]), None);
        assert_eq!(Trend::fit(&[]), None);
        assert_eq!(project_full(None, 8.0, 0, 90), Projection::Unknown);
    }

    #[test]
    fn days_cover_the_period() {
        assert_eq!(day_starts(D / 2, 3 * D), vec![0, D, 2 * D]);
        assert_eq!(day_starts(D, D), Vec::<i64>::new());
    }
}
