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
        let ms = if ms > i64::MAX as u64 {
            i64::MAX
        } else {
            ms as i64
        };
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
            return Err(TimestampError {
                input: truncate(s),
                why: "date and time must be separated by `T`".into(),
            });
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
        let mut buf = [0u8; 24];
        match self.write_rfc3339(&mut buf) {
            Some(s) => s.to_owned(),
            None => self.to_rfc3339_slow(),
        }
    }

    /// Writes `YYYY-MM-DDTHH:MM:SS.mmmZ` into `buf` without allocating; `None` outside the years
    /// 0000–9999 that RFC 3339 can express.
    fn write_rfc3339(self, buf: &mut [u8; 24]) -> Option<&str> {
        let days = self.0.div_euclid(86_400_000);
        let ms_of_day = self.0.rem_euclid(86_400_000);
        // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z.rem_euclid(146_097);
        let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let year = yoe + era * 400 + i64::from(month <= 2);
        if !(0..=9999).contains(&year) {
            return None;
        }
        let put = |buf: &mut [u8; 24], at: usize, width: usize, mut v: i64| {
            for i in (0..width).rev() {
                buf[at + i] = b'0' + (v % 10) as u8;
                v /= 10;
            }
        };
        put(buf, 0, 4, year);
        put(buf, 5, 2, month);
        put(buf, 8, 2, day);
        put(buf, 11, 2, ms_of_day / 3_600_000);
        put(buf, 14, 2, ms_of_day / 60_000 % 60);
        put(buf, 17, 2, ms_of_day / 1_000 % 60);
        put(buf, 20, 3, ms_of_day % 1_000);
        for (at, c) in [
            (4, b'-'),
            (7, b'-'),
            (10, b'T'),
            (13, b':'),
            (16, b':'),
            (19, b'.'),
            (23, b'Z'),
        ] {
            buf[at] = c;
        }
        std::str::from_utf8(buf).ok()
    }

    fn to_rfc3339_slow(self) -> String {
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
        let mut buf = [0u8; 24];
        match self.write_rfc3339(&mut buf) {
            Some(text) => s.serialize_str(text),
            None => s.serialize_str(&self.to_rfc3339_slow()),
        }
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
        assert_eq!(
            Timestamp::from_millis(0).to_rfc3339(),
            "1970-01-01T00:00:00.000Z"
        );
        let before = Timestamp::parse_rfc3339("1969-12-31T23:59:59.999Z").unwrap();
        assert_eq!(before.millis(), -1);
        assert_eq!(before.to_rfc3339(), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn rejects_non_rfc3339_with_a_helpful_message() {
        let e = Timestamp::parse_rfc3339("yesterday")
            .unwrap_err()
            .to_string();
        assert!(e.contains("yesterday") && e.contains("RFC 3339"), "{e}");
        assert!(Timestamp::parse_rfc3339("2026-05-10 10:35:00").is_err());
    }

    #[test]
    fn fast_formatting_agrees_with_the_time_crate() {
        let mut ms: i64 = -62_135_596_800_000; // 0001-01-01
        while ms < 253_402_300_799_999 {
            let t = Timestamp(ms);
            assert_eq!(t.to_rfc3339(), t.to_rfc3339_slow(), "{ms}");
            assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339()).unwrap(), t);
            ms += 86_399_937_123; // about 1,000 days, drifting through the times of day
        }
        // Years RFC 3339 cannot write fall back to the slow path instead of printing nonsense.
        assert_eq!(
            Timestamp(i64::MAX).to_rfc3339(),
            Timestamp(i64::MAX).to_rfc3339_slow()
        );
    }

    #[test]
    fn arithmetic_saturates() {
        let t = Timestamp::from_millis(i64::MAX - 1);
        assert_eq!(t.plus_millis(10).millis(), i64::MAX);
        assert_eq!(Timestamp(5).millis_since(Timestamp(9)), 0);
        assert_eq!(Timestamp(9).millis_since(Timestamp(5)), 4);
    }
}
