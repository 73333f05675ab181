//! Usage periods, sums and timelines.

use super::*;

#[test]
fn periods_are_months_or_ranges_and_bounded() {
    let now = Utc.with_ymd_and_hms(2026, 12, 15, 10, 0, 0).unwrap();
    let q = |month: Option<&str>| UsageQuery {
        month: month.map(str::to_owned),
        ..UsageQuery::default()
    };
    let (f, t) = period(&q(None), now).unwrap();
    assert_eq!(f, Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0).unwrap());
    assert_eq!(t, Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap());
    let (f, t) = period(&q(Some("2026-02")), now).unwrap();
    assert_eq!((t - f).num_days(), 28);
    assert!(period(&q(Some("2026-13")), now).is_err());
    assert!(period(&q(Some("soon")), now).is_err());
    let long = UsageQuery {
        from: Some(now - chrono::Duration::days(500)),
        to: Some(now),
        ..UsageQuery::default()
    };
    assert!(period(&long, now).is_err());
    let backwards = UsageQuery {
        from: Some(now),
        to: Some(now - chrono::Duration::hours(1)),
        ..UsageQuery::default()
    };
    assert!(period(&backwards, now).is_err());
}
