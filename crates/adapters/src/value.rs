//! Native input as a `serde_json::Value`, lone surrogates included.
//!
//! JSON's grammar lets a string hold any `\uXXXX` escape, and JavaScript writes one for a lone
//! surrogate: `JSON.stringify` of a string cut in the middle of an emoji (a truncated tool output)
//! writes `"\ud83d"`, and such lines are in real transcripts. A `Value` cannot hold it (a Rust
//! string is UTF-8), so serde_json refuses the whole line — and the calls on it would be lost.
//! Here a line that fails only for that is read again with each lone surrogate escape replaced by
//! `\ufffd`, U+FFFD REPLACEMENT CHARACTER, as a lossy UTF-16 decoder replaces it. The adapters
//! rebuild arguments and results from the `Value` anyway; the v1 path and the ADK adapter keep
//! such text verbatim instead (`toolcalls_model::Json`).

use serde_json::Value;

/// Parses `text` as one JSON value; where serde_json refuses it and it holds lone surrogate
/// escapes, parses it again with those escapes replaced by `\ufffd`. The error, if any, is the
/// first parse's.
pub fn parse(text: &[u8]) -> Result<Value, serde_json::Error> {
    serde_json::from_slice(text).or_else(|e| match replace_lone_surrogates(text) {
        Some(repaired) => serde_json::from_slice(&repaired).map_err(|_| e),
        None => Err(e),
    })
}

/// `text` with every lone surrogate escape (a high one not followed by a low one, or a low one
/// alone) replaced by `\ufffd`; `None` when it has none. Escapes are only read where JSON has
/// them, after a backslash: `\\ud800` is an escaped backslash and the letters `ud800`.
pub(crate) fn replace_lone_surrogates(text: &[u8]) -> Option<Vec<u8>> {
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut i = 0;
    while let Some(at) = text
        .get(i..)
        .and_then(|rest| memchr::memchr(b'\\', rest))
        .map(|at| i + at)
    {
        if text.get(at + 1) != Some(&b'u') {
            i = at + 2; // `\"`, `\\`, `\n`, …: the next byte is not an escape
            continue;
        }
        let Some(unit) = hex4(text, at + 2) else {
            i = at + 2;
            continue;
        };
        let keep = match unit {
            0xD800..=0xDBFF => {
                let next = (text.get(at + 6..at + 8) == Some(b"\\u"))
                    .then(|| hex4(text, at + 8))
                    .flatten();
                if next.is_some_and(|low| (0xDC00..=0xDFFF).contains(&low)) {
                    i = at + 12; // a pair: both escapes stay
                    continue;
                }
                false
            }
            0xDC00..=0xDFFF => false,
            _ => true,
        };
        if !keep {
            let buf = out.get_or_insert_with(|| Vec::with_capacity(text.len()));
            buf.extend_from_slice(&text[copied..at]);
            buf.extend_from_slice(br"\ufffd");
            copied = at + 6;
        }
        i = at + 6;
    }
    let mut buf = out?;
    buf.extend_from_slice(&text[copied..]);
    Some(buf)
}

/// The four hex digits at `text[at..at + 4]` as a number.
fn hex4(text: &[u8], at: usize) -> Option<u16> {
    let digits = std::str::from_utf8(text.get(at..at + 4)?).ok()?;
    if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u16::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replaced(text: &str) -> Option<String> {
        replace_lone_surrogates(text.as_bytes()).map(|b| String::from_utf8(b).unwrap())
    }

    #[test]
    fn lone_surrogates_are_replaced_and_pairs_kept() {
        assert_eq!(replaced(r#""a\ud83d""#).as_deref(), Some(r#""a\ufffd""#));
        assert_eq!(replaced(r#""\ude00x""#).as_deref(), Some(r#""\ufffdx""#));
        assert_eq!(
            replaced(r#""\ud83d\ud83d\ude00""#).as_deref(),
            Some(r#""\ufffd\ud83d\ude00""#),
            "a high one before a pair"
        );
        assert_eq!(
            replaced(r#""\ud83d\u0041""#).as_deref(),
            Some(r#""\ufffd\u0041""#)
        );
        assert_eq!(replaced(r#""\ud83d\ude00 \u00e9 \n""#), None);
        assert_eq!(replaced(r#""\\ud800""#), None, "an escaped backslash");
        assert_eq!(replaced(r#""\\\ud800""#).as_deref(), Some(r#""\\\ufffd""#));
        assert_eq!(replaced(r#""\ud8""#), None, "too short to be an escape");
        assert_eq!(replaced("\"\\"), None, "a backslash at the end");
    }

    #[test]
    fn a_line_with_lone_surrogates_parses_and_others_fail_as_before() {
        let v = parse(br#"{"output":"cut \ud83d","ok":"\ud83d\ude00"}"#).unwrap();
        assert_eq!(v["output"], "cut \u{fffd}");
        assert_eq!(v["ok"], "\u{1f600}");
        let plain = serde_json::from_slice::<Value>(b"{\"a\":").unwrap_err();
        let ours = parse(b"{\"a\":").unwrap_err();
        assert_eq!(ours.to_string(), plain.to_string());
        let both = parse(br#"{"a":"\ud800",}"#).unwrap_err();
        assert!(both.to_string().contains("surrogate") || both.to_string().contains("escape"));
    }
}
