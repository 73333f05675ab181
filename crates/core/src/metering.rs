//! Metering and chargeback: allocated GPU-hours and memory-GiB-hours of a
//! slice over a period, priced with the price in force at each moment.
//!
//! Exact and reproducible: times are milliseconds since the epoch, shares
//! are parts of a GPU by the [share model](crate::ledger::share) (what the
//! slice takes away from others, so a full GPU's slices add up to exactly
//! one GPU: seven 1g.10gb are 1.0, not 0.994), and every product is an
//! integer until the very end, so the same period always gives the same figures. A slice
//! running across a period boundary is split at it, and a span running
//! across a price change is priced in two parts, so a new price never
//! rewrites the past.

use crate::ids::AllocationId;
use crate::ledger::{GpuShare, PARTS_PER_GPU};
use serde::{Deserialize, Serialize};

/// Milliseconds in an hour.
pub const HOUR_MS: i64 = 3_600_000;

/// What one slice held, and while when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// Allocation id.
    pub allocation: AllocationId,
    /// Its pool.
    pub pool: crate::checked::PoolName,
    /// Its share, summed over its GPUs (parts of [`PARTS_PER_GPU`]).
    pub share: GpuShare,
    /// Its compute in thousandths of a GPU (the quota's count), which
    /// telemetry's used time is measured against.
    pub compute_milli: u64,
    /// GPU memory, MiB.
    pub memory_mib: u64,
    /// From (became usable), ms.
    pub start: i64,
    /// Until (ended), ms; `None`: still running.
    pub end: Option<i64>,
}

/// A price of a pool from `effective_from` on, in millionths of the
/// currency unit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Price {
    /// Pool.
    pub pool: crate::checked::PoolName,
    /// ISO 4217 code (`EUR`).
    pub currency: String,
    /// Per GPU-hour.
    pub gpu_hour_micros: u64,
    /// Per GiB-hour of GPU memory.
    pub gib_hour_micros: u64,
    /// In force from (ms).
    pub effective_from: i64,
    /// Who pays for the pool's overhead from then on.
    #[serde(default)]
    pub recovery: crate::ledger::recovery::RecoveryPolicy,
}

/// One slice's use within one period at one price.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metered {
    /// Allocation id.
    pub allocation: AllocationId,
    /// Pool.
    pub pool: crate::checked::PoolName,
    /// Start of the charged span (ms).
    pub start: i64,
    /// End of the charged span (ms).
    pub end: i64,
    /// GPU-part-milliseconds ([`PARTS_PER_GPU`]ths of a GPU × ms).
    pub gpu_part_ms: u128,
    /// Compute-thousandths × ms (what used time is a fraction of).
    pub compute_milli_ms: u128,
    /// MiB-milliseconds.
    pub mib_ms: u128,
    /// The price applied (`None`: the pool had no price then).
    pub currency: Option<String>,
    /// Cost in millionths of the currency unit (rounded half up, per line):
    /// the GPU-hours' and the GiB-hours' together.
    pub cost_micros: u128,
    /// The GPU-hours' part of it.
    pub gpu_cost_micros: u128,
    /// The GiB-hours' part of it.
    pub gib_cost_micros: u128,
    /// Used GPU time from telemetry, GPU-milli-milliseconds (busy time ×
    /// share; [`attribute_used`] fills it).
    pub used_milli_ms: u128,
    /// Time telemetry covered in this line, ms (0: not measured).
    pub measured_ms: u128,
}

impl Metered {
    /// Allocated GPU-hours.
    pub fn gpu_hours(&self) -> f64 {
        crate::ledger::gpu_hours(self.gpu_part_ms)
    }

    /// Allocated GiB-hours of GPU memory.
    pub fn gib_hours(&self) -> f64 {
        self.mib_ms as f64 / (1024.0 * HOUR_MS as f64)
    }

    /// Used GPU-hours (from telemetry).
    pub fn used_gpu_hours(&self) -> f64 {
        self.used_milli_ms as f64 / (1000.0 * HOUR_MS as f64)
    }
}

/// Measured use of one slice over one rollup period (from telemetry).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Measured {
    /// Allocation id.
    pub allocation: AllocationId,
    /// Start of the rollup period, ms.
    pub start: i64,
    /// Used GPU time, GPU-milli-milliseconds.
    pub used_milli_ms: u64,
    /// Time covered, ms.
    pub covered_ms: u64,
}

/// Adds each measured period to the line of its slice that holds the
/// period's start (a period that starts before the slice's first line, as
/// the minute it became active does, goes to that first line). Measured
/// periods of slices without lines are ignored.
pub fn attribute_used(lines: &mut [Metered], measured: &[Measured]) {
    // Per slice, its lines' indices in start order.
    let mut by_slice: std::collections::BTreeMap<AllocationId, Vec<usize>> = Default::default();
    for (i, l) in lines.iter().enumerate() {
        by_slice.entry(l.allocation).or_default().push(i);
    }
    for idx in by_slice.values_mut() {
        idx.sort_by_key(|i| lines[*i].start);
    }
    for m in measured {
        let Some(idx) = by_slice.get(&m.allocation) else {
            continue;
        };
        // The last line starting at or before the period, else the first.
        let after = idx.partition_point(|i| lines[*i].start <= m.start);
        let i = idx[after.saturating_sub(1)];
        lines[i].used_milli_ms += u128::from(m.used_milli_ms);
        lines[i].measured_ms += u128::from(m.covered_ms);
    }
}

/// Divides rounding half up.
fn div_round(n: u128, d: u128) -> u128 {
    (n + d / 2) / d
}

/// Meters `held` within `[from, to)` (`now` ends spans still running),
/// split at the `boundaries` (e.g. month starts, ms, ascending) and at
/// price changes. Lines come in allocation, then time order.
pub fn meter(
    held: &[Held],
    prices: &[Price],
    from: i64,
    to: i64,
    now: i64,
    boundaries: &[i64],
) -> Vec<Metered> {
    let mut out = Vec::new();
    let mut held: Vec<&Held> = held.iter().collect();
    held.sort_by_key(|h| (h.allocation, h.start));
    for h in held {
        let start = h.start.max(from);
        let end = h.end.unwrap_or(now).min(to).min(now);
        if end <= start {
            continue;
        }
        // Cut points: period boundaries and the pool's price changes inside.
        let mut cuts: Vec<i64> = boundaries
            .iter()
            .copied()
            .chain(
                prices
                    .iter()
                    .filter(|p| p.pool == h.pool)
                    .map(|p| p.effective_from),
            )
            .filter(|t| *t > start && *t < end)
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let mut at = start;
        for next in cuts.into_iter().chain(std::iter::once(end)) {
            let ms = u128::try_from(next - at).unwrap_or(0);
            let gpu_part_ms = ms * u128::from(h.share.0);
            let mib_ms = ms * u128::from(h.memory_mib);
            let price = prices
                .iter()
                .filter(|p| p.pool == h.pool && p.effective_from <= at)
                .max_by_key(|p| p.effective_from);
            let gpu_cost_micros = price.map_or(0, |p| {
                div_round(
                    gpu_part_ms * u128::from(p.gpu_hour_micros),
                    u128::from(PARTS_PER_GPU) * HOUR_MS as u128,
                )
            });
            let gib_cost_micros = price.map_or(0, |p| {
                div_round(
                    mib_ms * u128::from(p.gib_hour_micros),
                    1024 * HOUR_MS as u128,
                )
            });
            out.push(Metered {
                allocation: h.allocation,
                pool: h.pool.clone(),
                start: at,
                end: next,
                gpu_part_ms,
                compute_milli_ms: ms * u128::from(h.compute_milli),
                mib_ms,
                currency: price.map(|p| p.currency.clone()),
                cost_micros: gpu_cost_micros + gib_cost_micros,
                gpu_cost_micros,
                gib_cost_micros,
                used_milli_ms: 0,
                measured_ms: 0,
            });
            at = next;
        }
    }
    out
}

/// The price of `pool` in force at `at`.
pub fn price_at<'a>(prices: &'a [Price], pool: &str, at: i64) -> Option<&'a Price> {
    prices
        .iter()
        .filter(|p| p.pool == pool && p.effective_from <= at)
        .max_by_key(|p| p.effective_from)
}

/// Checks a price an admin enters.
pub fn validate_price(p: &Price) -> Result<(), (&'static str, String)> {
    let code_ok = p.currency.len() == 3 && p.currency.chars().all(|c| c.is_ascii_uppercase());
    if !code_ok {
        return Err((
            "currency",
            format!(
                "'{}' is not an ISO 4217 code such as EUR or USD",
                p.currency
            ),
        ));
    }
    // A million currency units per GPU-hour is a typo, not a price.
    const MAX: u64 = 1_000_000 * 1_000_000;
    if p.gpu_hour_micros > MAX {
        return Err(("gpu_hour", "must be at most 1000000 per GPU-hour".into()));
    }
    if p.gib_hour_micros > MAX {
        return Err(("gib_hour", "must be at most 1000000 per GiB-hour".into()));
    }
    Ok(())
}

/// Parses an amount of money (`2.5`, `0.0125`) into millionths.
pub fn parse_micros(text: &str) -> Option<u64> {
    let t = text.trim();
    let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
    if whole.is_empty() && frac.is_empty()
        || frac.len() > 6
        || !whole.chars().all(|c| c.is_ascii_digit())
        || !frac.chars().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let frac: u64 = format!("{frac:0<6}").parse().ok()?;
    whole.checked_mul(1_000_000)?.checked_add(frac)
}

/// Millionths as an amount with as many decimals as needed (2 at least).
pub fn format_micros(micros: u128) -> String {
    let whole = micros / 1_000_000;
    let frac = format!("{:06}", micros % 1_000_000);
    let trimmed = frac.trim_end_matches('0');
    let frac = if trimmed.len() < 2 {
        &frac[..2]
    } else {
        trimmed
    };
    format!("{whole}.{frac}")
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (year, month) of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m)
}

/// The starts (ms, UTC) of the calendar months that begin inside
/// `(from, to)`: where a period split by month is cut.
pub fn month_starts(from: i64, to: i64) -> Vec<i64> {
    let day = 86_400_000;
    let (mut y, mut m) = civil_from_days(from.div_euclid(day));
    let mut out = Vec::new();
    loop {
        m += 1;
        if m > 12 {
            m = 1;
            y += 1;
        }
        let start = days_from_civil(y, m, 1) * day;
        if start >= to {
            return out;
        }
        if start > from {
            out.push(start);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: i64 = HOUR_MS;
    // 2026-11-30T00:00:00Z and 2026-12-01T00:00:00Z.
    const NOV_30: i64 = 1_795_996_800_000;
    const DEC_1: i64 = 1_796_083_200_000;

    fn held(id: i64, share: GpuShare, mib: u64, start: i64, end: Option<i64>) -> Held {
        Held {
            allocation: AllocationId::new(id),
            pool: "a100".parse().unwrap(),
            share,
            compute_milli: share.0 * 1000 / PARTS_PER_GPU,
            memory_mib: mib,
            start,
            end,
        }
    }

    fn price(from: i64, gpu: &str, gib: &str) -> Price {
        Price {
            pool: "a100".parse().unwrap(),
            currency: "EUR".into(),
            gpu_hour_micros: parse_micros(gpu).unwrap(),
            gib_hour_micros: parse_micros(gib).unwrap(),
            effective_from: from,
            recovery: Default::default(),
        }
    }

    #[test]
    fn measured_use_goes_to_the_line_it_started_in() {
        // A whole GPU from 23:30 on Nov 30 to 00:30 on Dec 1: two lines.
        let h = held(
            7,
            GpuShare::WHOLE,
            80 * 1024,
            NOV_30 + 23 * H + H / 2,
            Some(DEC_1 + H / 2),
        );
        let mut lines = meter(&[h], &[], NOV_30, DEC_1 + H, DEC_1 + H, &[DEC_1]);
        assert_eq!(lines.len(), 2);
        let minute = |start: i64, busy_pct: u64| Measured {
            allocation: AllocationId::new(7),
            start,
            used_milli_ms: 60_000 * busy_pct / 100 * 1000,
            covered_ms: 60_000,
        };
        attribute_used(
            &mut lines,
            &[
                // The minute it started in began 10 s before it: first line.
                minute(NOV_30 + 23 * H + H / 2 - 10_000, 50),
                minute(NOV_30 + 23 * H + 50 * 60_000, 100),
                minute(DEC_1, 25),
                minute(DEC_1 + 60_000, 75),
                // Another slice's minute: not this slice's.
                Measured {
                    allocation: AllocationId::new(8),
                    ..minute(DEC_1, 100)
                },
            ],
        );
        assert_eq!(
            (lines[0].measured_ms, lines[1].measured_ms),
            (120_000, 120_000)
        );
        // 0.5 + 1.0 GPU-minutes, then 0.25 + 0.75.
        assert!((lines[0].used_gpu_hours() - 1.5 / 60.0).abs() < 1e-12);
        assert!((lines[1].used_gpu_hours() - 1.0 / 60.0).abs() < 1e-12);
    }

    #[test]
    fn month_starts_are_utc_calendar_months() {
        assert_eq!(month_starts(NOV_30, DEC_1 + 1), vec![DEC_1]);
        assert_eq!(month_starts(DEC_1, DEC_1 + 10 * H), Vec::<i64>::new());
        // Across a leap February: 2028-02-01, 03-01.
        let jan_15_2028 = days_from_civil(2028, 1, 15) * 86_400_000;
        let apr_2028 = days_from_civil(2028, 4, 1) * 86_400_000;
        let starts = month_starts(jan_15_2028, apr_2028);
        assert_eq!(starts.len(), 2);
        assert_eq!(starts[1] - starts[0], 29 * 86_400_000);
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2026, 12, 1) * 86_400_000, DEC_1);
    }

    #[test]
    fn a_slice_across_a_month_boundary_is_split_there_and_priced_exactly() {
        // A 3g.40gb at slices 4–7 (3/7 of an A100, 40 GiB) from 22:00 on
        // Nov 30 to 04:00 on Dec 1.
        let milli = GpuShare::fraction(3, 7);
        let h = held(1, milli, 40 * 1024, NOV_30 + 22 * H, Some(DEC_1 + 4 * H));
        let p = price(0, "2.10", "0.01");
        let lines = meter(&[h], &[p], NOV_30, DEC_1 + 24 * H, DEC_1 + 24 * H, &[DEC_1]);
        assert_eq!(lines.len(), 2);
        assert_eq!((lines[0].start, lines[0].end), (NOV_30 + 22 * H, DEC_1));
        assert_eq!((lines[1].start, lines[1].end), (DEC_1, DEC_1 + 4 * H));
        // 2 h × 3/7 GPU = 6/7 GPU-hours; 4 h → 12/7.
        assert!((lines[0].gpu_hours() - 6.0 / 7.0).abs() < 1e-12);
        assert!((lines[1].gpu_hours() - 12.0 / 7.0).abs() < 1e-12);
        assert!((lines[0].gib_hours() - 80.0).abs() < 1e-12);
        // 6/7 × 2.10 + 80 × 0.01 = 1.80 + 0.80 = 2.60 EUR, exactly.
        assert_eq!(lines[0].cost_micros, 2_600_000);
        assert_eq!(
            (lines[0].gpu_cost_micros, lines[0].gib_cost_micros),
            (1_800_000, 800_000)
        );
        assert_eq!(format_micros(lines[0].cost_micros), "2.60");
        assert_eq!(lines[0].currency.as_deref(), Some("EUR"));
        // The same period twice: the same figures.
        let again = meter(
            &[held(
                1,
                milli,
                40 * 1024,
                NOV_30 + 22 * H,
                Some(DEC_1 + 4 * H),
            )],
            &[price(0, "2.10", "0.01")],
            NOV_30,
            DEC_1 + 24 * H,
            DEC_1 + 24 * H,
            &[DEC_1],
        );
        assert_eq!(again, lines);
    }

    #[test]
    fn a_price_change_does_not_rewrite_the_past() {
        let h = held(7, GpuShare::WHOLE, 0, NOV_30, None);
        let old = price(0, "2", "0");
        let new = price(NOV_30 + 10 * H, "3", "0");
        let lines = meter(&[h], &[old, new], NOV_30, DEC_1, NOV_30 + 12 * H, &[]);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].cost_micros, 20_000_000, "10 h at 2");
        assert_eq!(lines[1].cost_micros, 6_000_000, "2 h at 3, until now");
        // Outside the window, or before it started: nothing.
        assert!(meter(
            &[held(8, GpuShare::WHOLE, 0, DEC_1, None)],
            &[],
            NOV_30,
            DEC_1,
            DEC_1 + H,
            &[]
        )
        .is_empty());
        // No price: hours but no cost.
        let free = meter(
            &[held(
                9,
                GpuShare::fraction(1, 2),
                0,
                NOV_30,
                Some(NOV_30 + 2 * H),
            )],
            &[],
            NOV_30,
            DEC_1,
            DEC_1,
            &[],
        );
        assert_eq!(free[0].cost_micros, 0);
        assert_eq!(free[0].currency, None);
        assert!((free[0].gpu_hours() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn money_parses_and_prints_in_millionths() {
        assert_eq!(parse_micros("2.5"), Some(2_500_000));
        assert_eq!(parse_micros("0.000001"), Some(1));
        assert_eq!(parse_micros(".5"), Some(500_000));
        assert_eq!(parse_micros("3"), Some(3_000_000));
        assert_eq!(parse_micros("1.0000001"), None);
        assert_eq!(parse_micros("-1"), None);
        assert_eq!(parse_micros("1e3"), None);
        assert_eq!(parse_micros(""), None);
        assert_eq!(format_micros(2_500_000), "2.50");
        assert_eq!(format_micros(1), "0.000001");
        assert_eq!(format_micros(0), "0.00");
        let bad = Price {
            currency: "euro".into(),
            ..price(0, "1", "0")
        };
        assert_eq!(validate_price(&bad).unwrap_err().0, "currency");
        assert!(validate_price(&price(0, "1", "0")).is_ok());
    }
}
