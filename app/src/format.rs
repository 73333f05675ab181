//! Formatting for display. Pure, so the server and the browser render the same text.

use chrono::{DateTime, Utc};

/// "12 s ago", "5 min ago", "3 h ago", "2 d ago", relative to `now`.
pub fn ago(then: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let s = (now - then).num_seconds().max(0);
    match s {
        0..=59 => format!("{s} s ago"),
        60..=3599 => format!("{} min ago", s / 60),
        3600..=86_399 => format!("{} h ago", s / 3600),
        _ => format!("{} d ago", s / 86_400),
    }
}

/// "in 45 min", "in 3 h", "in 2 d"; "expired" when past.
pub fn until(then: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let s = (then - now).num_seconds();
    match s {
        i64::MIN..=0 => "expired".to_owned(),
        1..=59 => format!("in {s} s"),
        60..=3599 => format!("in {} min", s / 60),
        3600..=86_399 => format!("in {} h", s / 3600),
        _ => format!("in {} d", s / 86_400),
    }
}

/// MiB as GiB with one decimal ("80.0 GiB"), or MiB below 1 GiB.
pub fn mib(m: i64) -> String {
    if m >= 1024 {
        format!("{}.{} GiB", m / 1024, (m % 1024) * 10 / 1024)
    } else {
        format!("{m} MiB")
    }
}

/// GPU memory for people: "9.7 GiB", "160.0 GiB", "512 MiB".
pub fn mem(m: tessera_core::units::MemMiB) -> String {
    mib(i64::try_from(m.0).unwrap_or(i64::MAX))
}

/// "1 GPU", "3 GPUs".
pub fn gpus(n: u32) -> String {
    if n == 1 {
        "1 GPU".to_owned()
    } else {
        format!("{n} GPUs")
    }
}

/// Thousandths of a CPU as cores ("96 cores", "0.5 cores").
pub fn cores(milli: i64) -> String {
    if milli % 1000 == 0 {
        format!("{} cores", milli / 1000)
    } else {
        format!("{}.{} cores", milli / 1000, (milli % 1000) / 100)
    }
}

/// `used` as a whole percentage of `limit`, capped at 100 (100 when there is no limit).
pub fn percent_of(used: u64, limit: u64) -> u64 {
    used.saturating_mul(100)
        .checked_div(limit)
        .map_or(100, |p| p.min(100))
}

/// A timestamp as "2026-11-29 17:30 UTC".
pub fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn percentages_are_capped_and_safe() {
        assert_eq!(percent_of(142, 2000), 7);
        assert_eq!(percent_of(3000, 2000), 100);
        assert_eq!(percent_of(1, 0), 100);
        assert_eq!(percent_of(0, 10), 0);
    }

    #[test]
    fn relative_times() {
        let now = Utc
            .with_ymd_and_hms(2026, 11, 29, 12, 0, 0)
            .single()
            .unwrap_or_default();
        assert_eq!(ago(now - chrono::Duration::seconds(5), now), "5 s ago");
        assert_eq!(ago(now - chrono::Duration::minutes(5), now), "5 min ago");
        assert_eq!(ago(now - chrono::Duration::hours(3), now), "3 h ago");
        assert_eq!(ago(now + chrono::Duration::hours(3), now), "0 s ago");
        assert_eq!(until(now + chrono::Duration::minutes(45), now), "in 45 min");
        assert_eq!(until(now - chrono::Duration::minutes(1), now), "expired");
    }

    #[test]
    fn sizes() {
        assert_eq!(mib(81_920), "80.0 GiB");
        assert_eq!(mib(23_034), "22.4 GiB");
        assert_eq!(mib(512), "512 MiB");
        assert_eq!(cores(96_000), "96 cores");
        assert_eq!(cores(1_500), "1.5 cores");
    }
}
