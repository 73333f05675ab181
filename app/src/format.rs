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

/// Thousandths of a GPU as GPUs with two decimals ("3.25").
pub fn gpu_milli(m: u64) -> String {
    format!("{}.{:02}", m / 1000, (m % 1000) / 10)
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

/// `part` as a whole percentage of `total`, not capped (over-commitment shows
/// as more than 100); `None` when there is no total.
pub fn share_of(part: u64, total: u64) -> Option<u64> {
    part.saturating_mul(100).checked_div(total)
}

/// A timestamp as "2026-11-29 17:30 UTC".
pub fn when(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// GPU memory in GiB with up to two decimals: "40 GiB", "9.75 GiB", "0.5 GiB".
pub fn gib(m: tessera_core::units::MemMiB) -> String {
    let hundredths = (m.0.saturating_mul(100) + 512) / 1024;
    let (whole, frac) = (hundredths / 100, hundredths % 100);
    match frac {
        0 => format!("{whole} GiB"),
        f if f % 10 == 0 => format!("{whole}.{} GiB", f / 10),
        f => format!("{whole}.{f:02} GiB"),
    }
}

/// A quota or an amount of quota: "1.500 GPU · 40 GiB · 2 slices".
pub fn quota(q: &tessera_core::quota::Quota) -> String {
    format!(
        "{} · {} · {} slice{}",
        q.compute,
        gib(q.memory),
        q.max_slices,
        if q.max_slices == 1 { "" } else { "s" }
    )
}

/// A number for a form field: "1.5", "40", "9.7265625" — the shortest text
/// that reads back as the same number, so an unchanged field changes nothing.
pub fn number(x: f64) -> String {
    format!("{x}")
}

/// An amount the API gives exactly (`"14400.123456"`) as people read money:
/// rounded half up to cents, thousands grouped (`"14,400.12"`). Text that
/// is not an amount is shown as it is.
pub fn money(decimal: &str) -> String {
    let Some(micros) = tessera_core::metering::parse_micros(decimal) else {
        return decimal.to_owned();
    };
    let cents = (micros + 5_000) / 10_000;
    let whole = (cents / 100).to_string();
    let mut grouped = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    format!("{grouped}.{:02}", cents % 100)
}

/// The day of a timestamp, as a date input wants it: "2026-11-29".
pub fn day(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d").to_string()
}

/// A date input's value ("2026-11-29") as the end of that day in UTC; `None`
/// when the field was left empty.
pub fn end_of_day(value: &str) -> Result<Option<DateTime<Utc>>, String> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    chrono::NaiveDate::parse_from_str(value, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(23, 59, 59))
        .map(|t| Some(t.and_utc()))
        .ok_or_else(|| format!("'{value}' is not a date; use YYYY-MM-DD"))
}

/// A person's roles in words: "Platform admin · Vision admin · NLP" (empty
/// when they have none).
pub fn roles(platform_admin: bool, tenants: &[tessera_protocol::views::MembershipView]) -> String {
    use tessera_protocol::views::TenantRole;
    let tenants = tenants.iter().map(|m| match m.role {
        TenantRole::TenantAdmin => format!("{} admin", m.name),
        TenantRole::Member => m.name.clone(),
    });
    platform_admin
        .then(|| "Platform admin".to_owned())
        .into_iter()
        .chain(tenants)
        .collect::<Vec<_>>()
        .join(" · ")
}

/// "s" unless `n` is one, for "3 GPUs" and "1 GPU".
pub fn plural(n: u32) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
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
        assert_eq!(share_of(3000, 2000), Some(150));
        assert_eq!(share_of(1, 0), None);
    }

    #[test]
    fn money_is_rounded_to_cents_and_grouped() {
        assert_eq!(money("34.377733"), "34.38");
        assert_eq!(money("14400"), "14,400.00");
        assert_eq!(money("1234567.004999"), "1,234,567.00");
        assert_eq!(money("0.005"), "0.01");
        assert_eq!(money("0.00"), "0.00");
        assert_eq!(money("n/a"), "n/a");
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

    #[test]
    fn quota_amounts() {
        use tessera_core::quota::Quota;
        use tessera_core::units::{ComputeMilli, MemMiB};
        assert_eq!(gib(MemMiB(40 * 1024)), "40 GiB");
        assert_eq!(gib(MemMiB(9984)), "9.75 GiB");
        assert_eq!(gib(MemMiB(512)), "0.5 GiB");
        let q = Quota {
            compute: ComputeMilli(1500),
            memory: MemMiB(10_000),
            max_slices: 1,
        };
        assert_eq!(quota(&q), "1.500 GPU · 9.77 GiB · 1 slice");
        let a = tessera_core::quota::QuotaAmount::from_quota(&q.rounded_up());
        assert_eq!((a.gpus, a.memory_gib, a.max_slices), (1.5, 10.0, 1));
        assert_eq!(number(a.gpus), "1.5");
        assert_eq!(number(40.0), "40");
        assert_eq!(number(0.001), "0.001");
        assert_eq!(number(9960.0 / 1024.0), "9.7265625");
    }

    #[test]
    fn days() {
        let end = end_of_day("2026-12-01").unwrap_or_default();
        assert_eq!(end.map(when).as_deref(), Some("2026-12-01 23:59 UTC"));
        assert_eq!(end.map(day).as_deref(), Some("2026-12-01"));
        assert_eq!(end_of_day(" "), Ok(None));
        assert!(end_of_day("tomorrow").is_err());
    }

    #[test]
    fn roles_read_platform_first_then_tenants() {
        use tessera_protocol::views::{MembershipView, TenantRole};
        let m = |name: &str, role| MembershipView {
            slug: name.to_lowercase(),
            name: name.into(),
            role,
        };
        let tenants = [
            m("Vision", TenantRole::TenantAdmin),
            m("NLP", TenantRole::Member),
        ];
        assert_eq!(roles(true, &tenants), "Platform admin · Vision admin · NLP");
        assert_eq!(roles(false, &tenants[1..]), "NLP");
        assert_eq!(roles(false, &[]), "");
    }
}
