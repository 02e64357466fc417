//! Reading the fields of a native line: texts, ids and times, leniently where a field only
//! steers the reading, strictly (an error naming the field) where a call is known by it.

use serde_json::Value;
use toolcalls_model::Timestamp;

/// A string field, absent when missing, not a string, or blank.
pub(crate) fn str_field<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
}

/// A text field a call is known by (its id, session, turn, tool): `None` when missing, `null` or
/// blank, and an error naming the field when it holds anything but text. Read leniently, a value
/// of another type would quietly make another call of the line's (one without its id, say).
pub(crate) fn text_field<'v>(v: &'v Value, key: &str) -> Result<Option<&'v str>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str()).filter(|s| !s.trim().is_empty())),
        Some(other) => Err(wrong_type(key, "text", other)),
    }
}

/// A JSON-RPC id (text or number) as text: `None` when missing, `null` or blank, an error naming
/// the field when it is neither.
pub(crate) fn id_field(v: &Value, key: &str) -> Result<Option<String>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone()).filter(|s| !s.trim().is_empty())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(wrong_type(key, "text or a number", other)),
    }
}

/// The first of `keys` that `v` holds a value for, read by `read` (one of the `*_field`
/// readers): a logger may name the same field in several ways.
pub(crate) fn first_of<'v, T>(
    v: &'v Value,
    keys: &[&str],
    read: fn(&'v Value, &str) -> Result<Option<T>, String>,
) -> Result<Option<T>, String> {
    for key in keys {
        if let Some(found) = read(v, key)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// What [`text_field`] and its kin say of a field of the wrong type.
fn wrong_type(key: &str, expected: &str, got: &Value) -> String {
    format!(
        "`{key}` must be {expected}, got `{}`",
        excerpt(&got.to_string())
    )
}

/// The first 80 characters of a value, for error messages.
pub(crate) fn excerpt(s: &str) -> String {
    let mut out: String = s.chars().take(80).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// An RFC 3339 time field: `None` when missing or `null`, an error naming the field when it holds
/// anything else. The clock rule stands in only for a time the line does not give, never for one
/// it gives wrong.
pub(crate) fn rfc3339_field(v: &Value, key: &str) -> Result<Option<Timestamp>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => match Timestamp::parse_rfc3339(s) {
            Ok(t) => Ok(Some(t)),
            Err(_) => Err(wrong_type(
                key,
                "an RFC 3339 time",
                &Value::String(s.clone()),
            )),
        },
        Some(other) => Err(wrong_type(key, "an RFC 3339 time", other)),
    }
}

/// A time field in whatever form [`loose_time`] reads: `None` when missing or `null`, an error
/// naming the field when it holds something that is no time.
pub(crate) fn loose_time_field(v: &Value, key: &str) -> Result<Option<Timestamp>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(t) => loose_time(t).map(Some).ok_or_else(|| {
            wrong_type(
                key,
                "a time (RFC 3339, or a number of seconds or milliseconds since the epoch)",
                t,
            )
        }),
    }
}

/// A field of seconds since the epoch: `None` when missing or `null`, an error naming the field
/// when it holds anything but a number of seconds a time can be.
pub(crate) fn seconds_field(v: &Value, key: &str) -> Result<Option<Timestamp>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(t) => seconds(t)
            .map(Some)
            .ok_or_else(|| wrong_type(key, "a number of seconds since the epoch", t)),
    }
}

/// Seconds since the epoch (integer or fractional) as a timestamp.
pub(crate) fn seconds(v: &Value) -> Option<Timestamp> {
    let s = v.as_f64()?;
    if !s.is_finite() {
        return None;
    }
    // `as` saturates; a number beyond the years RFC 3339 can write is not a time.
    Timestamp::from_millis_checked((s * 1000.0).round() as i64)
}

/// A time in whatever form a logger wrote it: RFC 3339, or a number (or numeric string) of
/// seconds, milliseconds, microseconds or nanoseconds since the epoch, told apart by magnitude.
pub(crate) fn loose_time(v: &Value) -> Option<Timestamp> {
    let n = match v {
        Value::String(s) => {
            if let Ok(t) = Timestamp::parse_rfc3339(s) {
                return Some(t);
            }
            s.parse::<f64>().ok()?
        }
        Value::Number(n) => n.as_f64()?,
        _ => return None,
    };
    if !n.is_finite() || n < 0.0 {
        return None;
    }
    let ms = if n < 1e11 {
        n * 1e3
    } else if n < 1e14 {
        n
    } else if n < 1e17 {
        n / 1e3
    } else {
        n / 1e6
    };
    Timestamp::from_millis_checked(ms.round() as i64)
}

/// The text of an error-ish value, for matching well-known messages.
pub(crate) fn text_of(v: &Value) -> Option<&str> {
    match v {
        Value::String(s) => Some(s),
        Value::Array(items) => items
            .iter()
            .find_map(|i| i.get("text").and_then(Value::as_str)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loose_times_by_magnitude() {
        let t = Timestamp::parse_rfc3339("2025-01-01T00:00:00Z").unwrap();
        let ms = t.millis();
        assert_eq!(loose_time(&Value::from(ms / 1000)), Some(t));
        assert_eq!(loose_time(&Value::from(ms)), Some(t));
        assert_eq!(loose_time(&Value::from(ms * 1000)), Some(t));
        assert_eq!(
            loose_time(&Value::from((ms * 1_000_000).to_string())),
            Some(t)
        );
        assert_eq!(loose_time(&Value::from("2025-01-01T00:00:00Z")), Some(t));
        assert_eq!(loose_time(&Value::from("soon")), None);
    }
}
