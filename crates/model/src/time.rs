//! Event time: milliseconds since the Unix epoch, RFC 3339 on the wire.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// A point in time in milliseconds since the Unix epoch (UTC).
///
/// On the wire a timestamp is an RFC 3339 string (`2026-05-10T10:35:00.123Z`); any offset is accepted
/// on input, output is always UTC with millisecond precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub const fn from_millis(ms: i64) -> Self {
        Self(ms)
    }

    pub const fn millis(self) -> i64 {
        self.0
    }

    /// Adds a duration in milliseconds, saturating at the ends of the range.
    pub const fn plus_millis(self, ms: u64) -> Self {
        let ms = if ms > i64::MAX as u64 { i64::MAX } else { ms as i64 };
        Self(self.0.saturating_add(ms))
    }

    /// Milliseconds from `earlier` to `self`, zero when `earlier` is later.
    pub fn millis_since(self, earlier: Timestamp) -> u64 {
        u64::try_from(self.0.saturating_sub(earlier.0)).unwrap_or(0)
    }

    /// Parses an RFC 3339 timestamp.
    pub fn parse_rfc3339(s: &str) -> Result<Self, TimestampError> {
        // The `time` crate takes any byte between date and time; RFC 3339 takes `T` (or `t`).
        if !matches!(s.as_bytes().get(10), Some(b'T' | b't')) {
            return Err(TimestampError { input: truncate(s), why: "date and time must be separated by `T`".into() });
        }
        let dt = OffsetDateTime::parse(s, &Rfc3339).map_err(|e| TimestampError {
            input: truncate(s),
            why: e.to_string(),
        })?;
        let ms = dt.unix_timestamp_nanos().div_euclid(1_000_000);
        i64::try_from(ms).map(Self).map_err(|_| TimestampError {
            input: truncate(s),
            why: "out of range".into(),
        })
    }

    /// The RFC 3339 form in UTC with millisecond precision.
    pub fn to_rfc3339(self) -> String {
        let dt = OffsetDateTime::from_unix_timestamp_nanos(i128::from(self.0) * 1_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
            dt.year(),
            u8::from(dt.month()),
            dt.day(),
            dt.hour(),
            dt.minute(),
            dt.second(),
            dt.millisecond()
        )
    }
}

fn truncate(s: &str) -> String {
    s.chars().take(64).collect()
}

/// A timestamp that is not RFC 3339.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("time `{input}` is not an RFC 3339 timestamp ({why}); send e.g. 2026-05-10T10:35:00.123Z")]
pub struct TimestampError {
    input: String,
    why: String,
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Timestamp::parse_rfc3339(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_normalises_offsets() {
        let t = Timestamp::parse_rfc3339("2026-05-10T10:35:00.123Z").unwrap();
        assert_eq!(t.to_rfc3339(), "2026-05-10T10:35:00.123Z");
        let o = Timestamp::parse_rfc3339("2026-05-10T12:35:00.123+02:00").unwrap();
        assert_eq!(o, t);
        let micro = Timestamp::parse_rfc3339("2026-05-10T10:35:00.123999Z").unwrap();
        assert_eq!(micro, t, "sub-millisecond digits are truncated");
        assert_eq!(Timestamp::from_millis(0).to_rfc3339(), "1970-01-01T00:00:00.000Z");
        let before = Timestamp::parse_rfc3339("1969-12-31T23:59:59.999Z").unwrap();
        assert_eq!(before.millis(), -1);
        assert_eq!(before.to_rfc3339(), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn rejects_non_rfc3339_with_a_helpful_message() {
        let e = Timestamp::parse_rfc3339("yesterday").unwrap_err().to_string();
        assert!(e.contains("yesterday") && e.contains("RFC 3339"), "{e}");
        assert!(Timestamp::parse_rfc3339("2026-05-10 10:35:00").is_err());
    }

    #[test]
    fn arithmetic_saturates() {
        let t = Timestamp::from_millis(i64::MAX - 1);
        assert_eq!(t.plus_millis(10).millis(), i64::MAX);
        assert_eq!(Timestamp(5).millis_since(Timestamp(9)), 0);
        assert_eq!(Timestamp(9).millis_since(Timestamp(5)), 4);
    }
}
