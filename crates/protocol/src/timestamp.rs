//! Instants people enter (a quota grant's end, a request's end, a filter's
//! range): checked once, where they come in, to lie between 1970-01-01 and
//! 9999-12-31. Beyond that the databases disagree: SQLite stores a time as
//! text, and `+10000-01-01` sorts before `2026-…`, so a grant ending then
//! would be approved and never be in force.

use chrono::{DateTime, TimeZone, Utc};
use serde::{Deserialize, Serialize};

/// An instant a person entered, within [`Timestamp::EARLIEST`] and
/// [`Timestamp::LATEST`]. Serialized as RFC 3339, like `DateTime<Utc>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "DateTime<Utc>", into = "DateTime<Utc>")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(value_type = String, format = DateTime))]
pub struct Timestamp(DateTime<Utc>);

/// Why an entered instant was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOfRange(pub String);

impl std::fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is out of range: use a time between 1970-01-01 and 9999-12-31",
            self.0
        )
    }
}

impl std::error::Error for OutOfRange {}

impl Timestamp {
    /// The earliest instant accepted: 1970-01-01T00:00:00Z.
    pub const EARLIEST: DateTime<Utc> = DateTime::UNIX_EPOCH;

    /// The latest instant accepted: 9999-12-31T23:59:59Z.
    pub fn latest() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59)
            .single()
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    /// `t`, when it lies in the accepted range.
    pub fn new(t: DateTime<Utc>) -> Result<Self, OutOfRange> {
        if t < Self::EARLIEST || t > Self::latest() {
            return Err(OutOfRange(t.to_rfc3339()));
        }
        Ok(Self(t))
    }

    /// The instant.
    pub fn get(self) -> DateTime<Utc> {
        self.0
    }
}

impl TryFrom<DateTime<Utc>> for Timestamp {
    type Error = OutOfRange;

    fn try_from(t: DateTime<Utc>) -> Result<Self, OutOfRange> {
        Self::new(t)
    }
}

impl From<Timestamp> for DateTime<Utc> {
    fn from(t: Timestamp) -> Self {
        t.0
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_instants_both_databases_order_alike_are_accepted() {
        let ok = Utc.with_ymd_and_hms(2027, 1, 31, 23, 59, 59).unwrap();
        assert_eq!(Timestamp::new(ok).unwrap().get(), ok);
        assert!(Timestamp::new(Timestamp::latest()).is_ok());
        assert!(Timestamp::new(Timestamp::EARLIEST).is_ok());
        let after = Timestamp::latest() + chrono::Duration::seconds(1);
        assert!(Timestamp::new(after).is_err());
        let before = Timestamp::EARLIEST - chrono::Duration::seconds(1);
        assert!(Timestamp::new(before).is_err());
        // Through serde, as a request body carries it.
        let parsed: Timestamp = serde_json::from_str("\"2027-01-31T23:59:59Z\"").unwrap();
        assert_eq!(parsed.get(), ok);
        let err = serde_json::from_str::<Timestamp>("\"+10000-01-01T00:00:00Z\"")
            .map(|t| t.get())
            .unwrap_err();
        assert!(
            err.to_string().contains("out of range") || err.to_string().contains("input"),
            "{err}"
        );
        assert_eq!(
            serde_json::to_string(&Timestamp::new(ok).unwrap()).unwrap(),
            "\"2027-01-31T23:59:59Z\""
        );
    }
}
