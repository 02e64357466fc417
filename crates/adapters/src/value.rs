//! Native input as a `serde_json::Value`, whatever valid JSON it holds.
//!
//! JSON's grammar takes text a `Value` cannot hold, and agents write it: `JSON.stringify` of a
//! string cut in the middle of an emoji (a truncated tool output) writes a lone surrogate
//! `"\ud83d"`, and such lines are in real transcripts; numbers beyond a double and nesting past
//! serde_json's 128 levels are rarer. serde_json refuses the whole line — and the calls on it would
//! be lost. Such a line is read as [`Json::to_value`] reads it instead, lossy only where a `Value`
//! cannot be exact (a lone surrogate becomes U+FFFD; a number beyond a double, or a value nested
//! past 127 levels, `null`). The adapters rebuild arguments and results from the `Value` anyway;
//! the v1 path and the ADK adapter keep such text verbatim.

use serde_json::Value;
use toolcalls_model::Json;

/// Parses `text` as one JSON value, exactly where serde_json can and as [`Json::to_value`]
/// otherwise. The error, when the text is not JSON, is serde_json's; for JSON that nests deeper
/// than [`toolcalls_model::json::MAX_DEPTH`] levels, a data error saying so.
pub fn parse(text: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice(text).or_else(|e| {
        let Ok(t) = std::str::from_utf8(text) else {
            return Err(e);
        };
        match Json::parse(t.trim_ascii()) {
            Ok(json) => Ok(json.to_value()),
            Err(deep) if deep.is_data() => Err(deep),
            Err(_) => Err(e),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_json_allows_and_a_value_cannot_hold_is_read() {
        let v = parse(br#" {"output":"cut \ud83d","ok":"\ud83d\ude00","low":"\ude00x"} "#).unwrap();
        assert_eq!(v["output"], "cut \u{fffd}");
        assert_eq!(v["ok"], "\u{1f600}", "a pair stays one character");
        assert_eq!(v["low"], "\u{fffd}x");
        let v = parse(br#"{"n":1e400,"m":-1e400,"k":2}"#).unwrap();
        assert_eq!(v, serde_json::json!({"n": null, "m": null, "k": 2}));
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        assert!(parse(deep.as_bytes()).unwrap().is_array());
        let n = toolcalls_model::json::MAX_DEPTH + 1;
        let deeper = format!("{}1{}", "[".repeat(n), "]".repeat(n));
        let e = parse(deeper.as_bytes()).unwrap_err();
        assert!(e.is_data() && e.to_string().contains("nests deeper"), "{e}");
        assert_eq!(
            parse(br#""\\ud800""#).unwrap(),
            "\\ud800",
            "an escaped backslash"
        );
    }

    #[test]
    fn what_is_not_json_fails_as_serde_json_says() {
        for bad in [
            &b"{\"a\":"[..],
            b"{\"a\":\"\\ud800\",}",
            b"\xff",
            b"1 2",
            b"",
        ] {
            let plain = serde_json::from_slice::<Value>(bad).unwrap_err();
            assert_eq!(parse(bad).unwrap_err().to_string(), plain.to_string());
        }
    }
}
