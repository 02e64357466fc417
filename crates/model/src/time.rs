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
    /// The earliest time RFC 3339 can write: `0000-01-01T00:00:00.000Z`.
    pub const MIN_RFC3339: Timestamp = Timestamp(-62_167_219_200_000);
    /// The latest time RFC 3339 can write: `9999-12-31T23:59:59.999Z`.
    pub const MAX_RFC3339: Timestamp = Timestamp(253_402_300_799_999);

    pub const fn from_millis(ms: i64) -> Self {
        Self(ms)
    }

    /// A time read from a number in an input (seconds or milliseconds a format wrote), or `None`
    /// when it lies outside the years 0000–9999 that RFC 3339 can write: such a number is not a
    /// time, and an event must not carry one it cannot write.
    pub fn from_millis_checked(ms: i64) -> Option<Self> {
        (Self::MIN_RFC3339.0..=Self::MAX_RFC3339.0)
            .contains(&ms)
            .then_some(Self(ms))
    }

    /// The nearest time RFC 3339 can write: this time within the years 0000–9999.
    pub fn within_rfc3339(self) -> Self {
        Self(self.0.clamp(Self::MIN_RFC3339.0, Self::MAX_RFC3339.0))
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
        if let Some(ms) = parse_utc_fast(s.as_bytes()) {
            return Ok(Self(ms));
        }
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
        // An offset can move a time written in the year 0000 or 9999 out of the years RFC 3339
        // can write in UTC, as every record and changelog entry writes it.
        i64::try_from(ms)
            .ok()
            .and_then(Self::from_millis_checked)
            .ok_or_else(|| TimestampError {
                input: truncate(s),
                why: "in UTC it falls outside the years 0000-9999 that RFC 3339 can write".into(),
            })
    }

    /// The RFC 3339 form in UTC with millisecond precision.
    ///
    /// A time outside the years 0000–9999 that RFC 3339 can write is written as the nearest one it
    /// can ([`Timestamp::MIN_RFC3339`], [`Timestamp::MAX_RFC3339`]): what is written always reads
    /// back. Inputs cannot make such times (parsing refuses them, adapters drop numbers beyond
    /// them); only arithmetic that saturates can, such as a deadline past the end of time.
    pub fn to_rfc3339(self) -> String {
        let mut buf = [0u8; 24];
        match self.write_rfc3339(&mut buf) {
            Some(s) => s.to_owned(),
            None => String::from("0000-01-01T00:00:00.000Z"),
        }
    }

    /// Writes `YYYY-MM-DDTHH:MM:SS.mmmZ` into `buf` without allocating, clamped to the years
    /// 0000–9999 that RFC 3339 can express (see [`Timestamp::to_rfc3339`]); always `Some`.
    pub(crate) fn write_rfc3339(self, buf: &mut [u8; 24]) -> Option<&str> {
        let ms = self.0.clamp(Self::MIN_RFC3339.0, Self::MAX_RFC3339.0);
        let days = ms.div_euclid(86_400_000);
        let ms_of_day = ms.rem_euclid(86_400_000);
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
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction]Z` — the form nearly every producer writes — in milliseconds,
/// without the general parser; `None` for anything else (offsets, lowercase separators, leap
/// seconds, dates that do not exist, more than nine fraction digits), which the `time` crate then
/// reads or refuses.
fn parse_utc_fast(s: &[u8]) -> Option<i64> {
    if s.len() < 20 || s[4] != b'-' || s[7] != b'-' || s[10] != b'T' || s[13] != b':' {
        return None;
    }
    if s[16] != b':' || s[s.len() - 1] != b'Z' {
        return None;
    }
    let num = |at: usize, width: usize| -> Option<i64> {
        s.get(at..at + width)?.iter().try_fold(0i64, |n, &b| {
            b.is_ascii_digit().then(|| n * 10 + i64::from(b - b'0'))
        })
    };
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    let millis = match s.len() {
        20 => 0,
        // `.` and one to nine digits: the first three are the milliseconds (the rest truncated).
        n if (22..=30).contains(&n) && s[19] == b'.' => {
            let digits = &s[20..n - 1];
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            digits
                .iter()
                .chain(b"00")
                .take(3)
                .fold(0, |n, &b| n * 10 + i64::from(b - b'0'))
        }
        _ => return None,
    };
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let month_days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if day < 1 || day > month_days || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    // Days since 1970-01-01 from the civil date (H. Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1_000 + millis)
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
            None => s.serialize_str(&self.to_rfc3339()),
        }
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A visitor rather than `String`: the text is parsed where it lies, not copied first.
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Timestamp;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an RFC 3339 timestamp string")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Timestamp, E> {
                Timestamp::parse_rfc3339(s).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
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
        let slow = |t: Timestamp| {
            let dt = OffsetDateTime::from_unix_timestamp_nanos(i128::from(t.0) * 1_000_000)
                .expect("within the time crate's range");
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
        };
        let mut ms: i64 = -62_135_596_800_000; // 0001-01-01
        while ms < 253_402_300_799_999 {
            let t = Timestamp(ms);
            assert_eq!(t.to_rfc3339(), slow(t), "{ms}");
            assert_eq!(Timestamp::parse_rfc3339(&t.to_rfc3339()).unwrap(), t);
            ms += 86_399_937_123; // about 1,000 days, drifting through the times of day
        }
    }

    #[test]
    fn fast_parsing_agrees_with_the_time_crate() {
        let slow = |s: &str| {
            OffsetDateTime::parse(s, &Rfc3339)
                .ok()
                .map(|dt| dt.unix_timestamp_nanos().div_euclid(1_000_000) as i64)
        };
        let mut texts = vec![
            "2024-02-29T23:59:59Z".to_owned(),
            "2023-02-29T00:00:00Z".to_owned(),
            "2026-04-31T00:00:00Z".to_owned(),
            "2026-13-01T00:00:00Z".to_owned(),
            "2026-00-10T00:00:00Z".to_owned(),
            "2026-05-00T00:00:00Z".to_owned(),
            "2026-05-10T24:00:00Z".to_owned(),
            "2026-05-10T10:60:00Z".to_owned(),
            "2026-05-10T10:35:60Z".to_owned(),
            "2026-05-10T10:35:00.Z".to_owned(),
            "2026-05-10T10:35:00.1Z".to_owned(),
            "2026-05-10T10:35:00.12Z".to_owned(),
            "2026-05-10T10:35:00.123456789Z".to_owned(),
            "2026-05-10T10:35:00.1234567891Z".to_owned(),
            "2026-05-10T10:35:00.12a4Z".to_owned(),
            "2026-05-10T10:35:00,123Z".to_owned(),
            "2026-05-10t10:35:00.123z".to_owned(),
            "2026-05-10T10:35:00+00:00".to_owned(),
            "1900-02-29T00:00:00Z".to_owned(),
            "2000-02-29T00:00:00Z".to_owned(),
            "0000-01-01T00:00:00Z".to_owned(),
            "1969-12-31T23:59:59.9999Z".to_owned(),
            "+026-05-10T10:35:00Z".to_owned(),
        ];
        // Every day of four centuries at drifting times of day, with 0–9 fraction digits.
        let mut ms: i64 = -2_208_988_800_000; // 1900-01-01
        let mut i = 0;
        while ms < 10_413_792_000_000 {
            let base = Timestamp(ms).to_rfc3339();
            let digits = i % 10;
            texts.push(match digits {
                0 => format!("{}Z", &base[..19]),
                n => format!("{}{}Z", &base[..20], "987654321".get(..n).unwrap_or("")),
            });
            ms += 86_400_000 + 3_723_457;
            i += 1;
        }
        for text in &texts {
            let fast = parse_utc_fast(text.as_bytes());
            if let Some(ms) = fast {
                assert_eq!(Some(ms), slow(text), "{text}");
            }
            assert_eq!(
                Timestamp::parse_rfc3339(text).ok().map(Timestamp::millis),
                slow(text).filter(|_| text.as_bytes()[10] != b' '),
                "{text}"
            );
        }
        // The fast path takes the common forms.
        for text in ["2026-05-10T10:35:00Z", "2026-05-10T10:35:00.123Z"] {
            assert!(parse_utc_fast(text.as_bytes()).is_some(), "{text}");
        }
    }

    #[test]
    fn times_beyond_rfc3339_are_written_as_the_nearest_it_can_write() {
        let min = Timestamp::parse_rfc3339("0000-01-01T00:00:00Z").unwrap();
        let max = Timestamp::parse_rfc3339("9999-12-31T23:59:59.999Z").unwrap();
        assert_eq!((min, max), (Timestamp::MIN_RFC3339, Timestamp::MAX_RFC3339));
        for (t, text) in [
            (i64::MAX, "9999-12-31T23:59:59.999Z"),
            (Timestamp::MAX_RFC3339.0 + 1, "9999-12-31T23:59:59.999Z"),
            (i64::MIN, "0000-01-01T00:00:00.000Z"),
            (Timestamp::MIN_RFC3339.0 - 1, "0000-01-01T00:00:00.000Z"),
        ] {
            assert_eq!(Timestamp(t).to_rfc3339(), text);
            assert_eq!(
                serde_json::to_string(&Timestamp(t)).unwrap(),
                format!("\"{text}\"")
            );
            assert!(Timestamp::from_millis_checked(t).is_none());
        }
        assert_eq!(Timestamp::from_millis_checked(0), Some(Timestamp(0)));
        // Nor does parsing make one: an offset that moves a time out of the years in UTC is
        // refused, and one that keeps it in is taken.
        for text in ["0000-01-01T00:00:00+01:00", "9999-12-31T23:59:59.999-00:01"] {
            let e = Timestamp::parse_rfc3339(text).unwrap_err().to_string();
            assert!(e.contains("0000-9999"), "{text}: {e}");
        }
        assert_eq!(
            Timestamp::parse_rfc3339("0000-01-01T01:00:00+01:00").unwrap(),
            Timestamp::MIN_RFC3339
        );
        assert_eq!(
            Timestamp::parse_rfc3339("9999-12-31T22:59:59.999-01:00").unwrap(),
            Timestamp::MAX_RFC3339
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
