//! The @nhtio/adk tool-call checksum: `sha256(canonicalStringify({ tool, args }))`.
//!
//! The ADK computes it in `Tool.executor` (as the `callId` of `toolExecutionStart` / `End`), in
//! the dispatch runner's `reportToolCall` helper (as `TurnToolCallContent.checksum`) and in every
//! LLM battery (as `ToolCall.checksum`); all hash `canonicalStringify({ tool, args })` with
//! `js-sha256` and print lowercase hex (see `NHTIO/ADK`, `src/lib/utils/canonical_json.ts`,
//! `src/lib/classes/tool.ts`, `src/lib/dispatch_runner.ts`). The checksum collides by design for
//! identical `{tool, args}`, which is what the correlator's checksum strategy relies on.
//!
//! [`checksum_of`] reproduces it bit for bit (the canonical text: [`crate::canonical`]), also on
//! the texts JavaScript's `JSON.parse` takes and serde_json refuses — lone surrogate escapes,
//! numbers beyond a double, deep nesting — which [`checksum_of_json`] reads from the verbatim
//! text. `crates/model/tests/adk_vectors.rs` pins vectors computed by the ADK's own code.
//!
//! # What is hashed: `args` as a value, or as encoded text
//!
//! Every ADK path hashes the JavaScript value it has in hand; they differ in where that value
//! comes from, and that is what decides how a **string** argument is hashed:
//!
//! - `Tool.executor` hashes the raw argument value it is called with (a string stays a string);
//!   `reportToolCall` hashes whatever `args` a battery reports, also as is.
//! - The batteries turn a provider's wire form into that value first. The OpenAI Chat Completions
//!   battery `JSON.parse`s `function.arguments` (a string of JSON text) and uses the object — or
//!   `{}` when the text is empty, not JSON, or not an object — for its `ToolCall.checksum`, for
//!   `reportToolCall` *and* as the argument of `Tool.executor`. So the battery's announce and the
//!   observability bus's `toolExecutionStart` / `End` carry the same checksum: both hash the
//!   parsed object.
//!
//! toolcalls follows the same split, by who holds the value:
//!
//! - **v1 events** ([`checksum_of`], [`checksum_of_json`]; what the correlator computes when an
//!   event has `args` but no `checksum`): `args` is the value, hashed as sent — a JSON string is
//!   a string. A v1 event from the ADK carries the JavaScript value its buses reported (the
//!   battery's parsed object, or a tool's own string argument), so this is exactly what
//!   `Tool.executor` hashed into the `callId` of the execution events the announce must meet
//!   (`"42"` hashes as the string `"42"`, not as the number `42`; `"{\"a\":1}"` as that string).
//! - **Formats whose wire encodes the arguments as JSON text** ([`checksum_of_encoded`]: OpenAI
//!   Chat Completions `function.arguments`, Responses `arguments`, Codex `function_call`
//!   `arguments`, OTel `gen_ai.tool.call.arguments`): the adapters keep `args` verbatim (the
//!   string) and set the checksum of the value the text holds, as the battery does and as
//!   `Tool.executor` then sees it. Where the text is not JSON the string itself is hashed, and
//!   JSON that is not an object is hashed as what it is: the OpenAI battery hashes `{}` in both
//!   cases, but it never runs such a call (no execution events to meet), and `{}` would give
//!   every malformed call of a tool one checksum.
//! - **Free-form string inputs** (Codex and Responses `custom_tool_call` `input`): the string is
//!   the argument; hashed as a string.
//!
//! **Absent args** are *not* omitted. `canonicalStringify` builds `'"args":' +
//! canonicalStringify(undefined)`, and `JSON.stringify(undefined)` is `undefined`, so JavaScript
//! concatenates the word: the hashed text is `{"args":undefined,"tool":"…"}` — not JSON, but what
//! `Tool.executor` hashes for a call without arguments. (The `reportToolCall` helper instead
//! leaves the checksum empty until args are known.) `null` args hash as `"args":null`.

use std::cell::RefCell;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::canonical::{write_canonical, write_js_string};

/// A tool-call checksum: SHA-256 as 64 lowercase hex digits.
///
/// Built by [`checksum_of`], or parsed from the wire with [`Checksum::parse`], which rejects
/// anything but exactly 64 lowercase hex digits so that equal checksums compare equal as strings.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Checksum(String);

/// Why a string is not a [`Checksum`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChecksumError {
    /// The string is not 64 bytes long.
    #[error("checksum must be 64 lowercase hex digits, got {len} bytes")]
    WrongLength {
        /// Length of the rejected string in bytes.
        len: usize,
    },
    /// The string holds an uppercase hex digit.
    #[error("checksum must be lowercase hex, found uppercase {found:?} at byte {index}")]
    Uppercase {
        /// The offending character.
        found: char,
        /// Its byte offset.
        index: usize,
    },
    /// The string holds a character that is not a hex digit.
    #[error("checksum must be hex, found {found:?} at byte {index}")]
    NotHex {
        /// The offending character.
        found: char,
        /// Its byte offset.
        index: usize,
    },
}

impl Checksum {
    /// Length of a checksum in hex digits.
    pub const LEN: usize = 64;

    /// Parses a checksum given as 64 lowercase hex digits.
    ///
    /// # Errors
    ///
    /// [`ChecksumError`] naming the first problem: wrong length, an uppercase digit, or a
    /// character that is not a hex digit.
    pub fn parse(text: &str) -> Result<Checksum, ChecksumError> {
        validate(text)?;
        Ok(Checksum(text.to_owned()))
    }

    /// Wraps a SHA-256 digest.
    #[must_use]
    pub fn from_digest(digest: [u8; 32]) -> Checksum {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut text = [0u8; Self::LEN];
        for (pair, byte) in text.chunks_exact_mut(2).zip(digest) {
            pair[0] = HEX[usize::from(byte >> 4)];
            pair[1] = HEX[usize::from(byte & 0x0f)];
        }
        Checksum(
            std::str::from_utf8(&text)
                .expect("hex digits are ASCII")
                .to_owned(),
        )
    }

    /// The 64 lowercase hex digits.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 32 bytes of the digest (the inverse of [`Checksum::from_digest`]), for holding a
    /// checksum in 32 bytes instead of a 64-character string.
    #[must_use]
    pub fn digest(&self) -> [u8; 32] {
        fn nibble(c: u8) -> u8 {
            match c {
                b'0'..=b'9' => c - b'0',
                _ => c - b'a' + 10,
            }
        }
        // A `Checksum` is always 64 lowercase hex digits (checked when it is made).
        let mut out = [0u8; 32];
        for (byte, pair) in out.iter_mut().zip(self.0.as_bytes().chunks_exact(2)) {
            *byte = (nibble(pair[0]) << 4) | nibble(pair[1]);
        }
        out
    }
}

fn validate(text: &str) -> Result<(), ChecksumError> {
    if text.len() != Checksum::LEN {
        return Err(ChecksumError::WrongLength { len: text.len() });
    }
    for (index, found) in text.char_indices() {
        match found {
            '0'..='9' | 'a'..='f' => {}
            'A'..='F' => return Err(ChecksumError::Uppercase { found, index }),
            _ => return Err(ChecksumError::NotHex { found, index }),
        }
    }
    Ok(())
}

impl fmt::Display for Checksum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Checksum {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl FromStr for Checksum {
    type Err = ChecksumError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Checksum::parse(text)
    }
}

impl TryFrom<String> for Checksum {
    type Error = ChecksumError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        validate(&text)?;
        Ok(Checksum(text))
    }
}

impl From<Checksum> for String {
    fn from(checksum: Checksum) -> String {
        checksum.0
    }
}

/// Capacity above which the per-thread buffer is dropped after use instead of kept, so one huge
/// argument object does not pin its memory for the life of the thread.
const MAX_RETAINED_BUFFER: usize = 64 * 1024;

thread_local! {
    /// Scratch buffer for the canonical text, reused across calls on the same thread.
    static BUFFER: RefCell<String> = const { RefCell::new(String::new()) };
}

/// [`checksum_of`] for arguments kept verbatim: the text is read as JavaScript's `JSON.parse`
/// reads it (numbers through `f64`, lone surrogates as UTF-16) and hashed, without building a
/// `Value`. A JSON string is hashed as a string (see the [module docs](self)).
pub fn checksum_of_json(tool: &str, args: Option<&crate::json::Json>) -> Checksum {
    Checksum::from_digest(digest_of_json(tool, args))
}

/// [`checksum_of_json`] as the raw 32-byte digest, without the hex string.
pub fn digest_of_json(tool: &str, args: Option<&crate::json::Json>) -> [u8; 32] {
    let Some(json) = args else {
        return digest_of(tool, None);
    };
    with_buffer(|buffer| write_json_checksum_input(tool, json.as_str(), buffer))
}

/// Returns the exact text [`checksum_of_json`] hashes, for diagnostics and tests.
#[must_use]
pub fn json_checksum_input(tool: &str, args: Option<&crate::json::Json>) -> String {
    let mut out = String::new();
    match args {
        None => write_checksum_input(tool, None, &mut out),
        Some(json) => write_json_checksum_input(tool, json.as_str(), &mut out),
    }
    out
}

/// Appends `{"args":<canonical text of the JSON text>,"tool":<tool>}`.
fn write_json_checksum_input(tool: &str, text: &str, out: &mut String) {
    out.push_str("{\"args\":");
    if crate::canonical::write_canonical_text(text, out).is_err() {
        // Unreachable for a `Json`, which holds one JSON value within `MAX_DEPTH`; should the
        // text be anything else, it is hashed as the string it is, never a panic.
        write_js_string(text, out);
    }
    out.push_str(",\"tool\":");
    write_js_string(tool, out);
    out.push('}');
}

/// The checksum of a call whose format carries the arguments as JSON text in a string (OpenAI
/// function calling, Codex `function_call`, OTel `gen_ai.tool.call.arguments`): the value the
/// text holds when it is JSON (as the ADK's OpenAI battery parses it before hashing and before
/// calling the tool), else the string itself (see the [module docs](self)).
#[must_use]
pub fn checksum_of_encoded(tool: &str, encoded: &str) -> Checksum {
    Checksum::from_digest(with_buffer(|buffer| {
        write_encoded_checksum_input(tool, encoded, buffer);
    }))
}

/// Returns the exact text [`checksum_of_encoded`] hashes, for diagnostics and tests.
#[must_use]
pub fn encoded_checksum_input(tool: &str, encoded: &str) -> String {
    let mut out = String::new();
    write_encoded_checksum_input(tool, encoded, &mut out);
    out
}

fn write_encoded_checksum_input(tool: &str, encoded: &str, out: &mut String) {
    out.push_str("{\"args\":");
    let start = out.len();
    if crate::canonical::write_canonical_text(encoded, out).is_err() {
        out.truncate(start);
        write_js_string(encoded, out);
    }
    out.push_str(",\"tool\":");
    write_js_string(tool, out);
    out.push('}');
}

/// SHA-256 of what `write` puts into the per-thread scratch buffer.
fn with_buffer(write: impl FnOnce(&mut String)) -> [u8; 32] {
    BUFFER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut buffer) => {
            buffer.clear();
            write(&mut buffer);
            let digest = Sha256::digest(buffer.as_bytes()).into();
            if buffer.capacity() > MAX_RETAINED_BUFFER {
                *buffer = String::new();
            }
            digest
        }
        // Unreachable in practice (nothing here re-enters), but never worth a panic.
        Err(_) => {
            let mut buffer = String::new();
            write(&mut buffer);
            Sha256::digest(buffer.as_bytes()).into()
        }
    })
}

/// [`checksum_of`] as the raw 32-byte digest, without the hex string.
#[must_use]
pub fn digest_of(tool: &str, args: Option<&Value>) -> [u8; 32] {
    with_buffer(|buffer| write_checksum_input(tool, args, buffer))
}

/// Computes the ADK checksum of a tool call: `sha256(canonicalStringify({ tool, args }))`.
///
/// `args` is the value as received, hashed as is (a string as a string), and `None` hashes as
/// JavaScript's `undefined` (see the [module docs](self)). The canonical text is written into a
/// per-thread buffer that is reused across calls, and hashed in one pass.
#[must_use]
pub fn checksum_of(tool: &str, args: Option<&Value>) -> Checksum {
    Checksum::from_digest(digest_of(tool, args))
}

/// Returns the exact text [`checksum_of`] hashes, for diagnostics and tests.
#[must_use]
pub fn checksum_input(tool: &str, args: Option<&Value>) -> String {
    let mut out = String::new();
    write_checksum_input(tool, args, &mut out);
    out
}

/// Appends the text [`checksum_of`] hashes: `{"args":<canonical args>,"tool":<tool>}`.
///
/// The two keys are already in sorted order, so no object is built.
pub fn write_checksum_input(tool: &str, args: Option<&Value>, out: &mut String) {
    out.push_str("{\"args\":");
    match args {
        None => out.push_str("undefined"),
        Some(value) => write_canonical(value, out),
    }
    out.push_str(",\"tool\":");
    write_js_string(tool, out);
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checksum_is_sha256_of_the_canonical_text() {
        let args = json!({"b": 1, "a": [true, null]});
        let text = checksum_input("search", Some(&args));
        assert_eq!(text, r#"{"args":{"a":[true,null],"b":1},"tool":"search"}"#);
        let expected = Checksum::from_digest(Sha256::digest(text.as_bytes()).into());
        assert_eq!(checksum_of("search", Some(&args)), expected);
    }

    #[test]
    fn known_digest() {
        // sha256 of `{"args":{},"tool":"noop"}`, computed with node's crypto module.
        let checksum = checksum_of("noop", Some(&json!({})));
        assert_eq!(
            checksum_input("noop", Some(&json!({}))),
            r#"{"args":{},"tool":"noop"}"#
        );
        assert_eq!(
            checksum.as_str(),
            "8685b816cc16dea76ec5c8e81755900b9f7597dce0bd024bc773352a9b2dad2d"
        );
    }

    #[test]
    fn digest_round_trips_through_the_hex_string() {
        let checksum = checksum_of("noop", Some(&json!({})));
        assert_eq!(Checksum::from_digest(checksum.digest()), checksum);
        assert_eq!(digest_of("noop", Some(&json!({}))), checksum.digest());
        let all = Checksum::parse(&"0123456789abcdef".repeat(4)).unwrap();
        assert_eq!(Checksum::from_digest(all.digest()), all);
    }

    #[test]
    fn key_order_does_not_matter() {
        let a: Value = serde_json::from_str(r#"{"x":1,"y":{"q":2,"p":3}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"y":{"p":3,"q":2},"x":1}"#).unwrap();
        assert_eq!(checksum_of("t", Some(&a)), checksum_of("t", Some(&b)));
    }

    #[test]
    fn string_args_are_hashed_as_strings() {
        // As `Tool.executor` hashes a string argument: JSON inside it or not.
        for text in ["not json", r#"{ "a": 2, "b": 1.0 }"#, "42", "null"] {
            let args = Value::String(text.to_owned());
            let mut expected = String::from("{\"args\":");
            write_js_string(text, &mut expected);
            expected.push_str(",\"tool\":\"t\"}");
            assert_eq!(checksum_input("t", Some(&args)), expected);
            let json = crate::json::Json::from(args.clone());
            assert_eq!(
                checksum_of_json("t", Some(&json)),
                checksum_of("t", Some(&args))
            );
        }
    }

    #[test]
    fn encoded_args_hash_the_value_they_hold() {
        let object = json!({"b": 1, "a": 2});
        assert_eq!(
            checksum_of_encoded("t", r#"{ "a": 2, "b": 1.0 }"#),
            checksum_of("t", Some(&object))
        );
        assert_eq!(
            encoded_checksum_input("t", "[3, 1e400]"),
            r#"{"args":[3,null],"tool":"t"}"#
        );
        // Not JSON: the string itself.
        assert_eq!(
            checksum_of_encoded("t", "{\"a\":1"),
            checksum_of("t", Some(&Value::String("{\"a\":1".into())))
        );
        assert_eq!(encoded_checksum_input("t", ""), r#"{"args":"","tool":"t"}"#);
    }

    #[test]
    fn verbatim_text_serde_json_refuses_is_hashed_as_javascript_reads_it() {
        let cases = [
            (r#""\ud800""#, r#"{"args":"\ud800","tool":"t"}"#),
            (
                r#"{"b":1e400,"a":"\ude00\ud83d"}"#,
                r#"{"args":{"a":"\ude00\ud83d","b":null},"tool":"t"}"#,
            ),
        ];
        for (text, canonical) in cases {
            let json = crate::json::Json::parse(text).unwrap();
            assert_eq!(json_checksum_input("t", Some(&json)), canonical);
            assert_eq!(
                checksum_of_json("t", Some(&json)),
                Checksum::from_digest(Sha256::digest(canonical.as_bytes()).into())
            );
        }
    }

    #[test]
    fn absent_args_hash_as_javascript_undefined() {
        assert_eq!(
            checksum_input("t", None),
            r#"{"args":undefined,"tool":"t"}"#
        );
        assert_eq!(
            checksum_input("t", Some(&Value::Null)),
            r#"{"args":null,"tool":"t"}"#
        );
        assert_ne!(checksum_of("t", None), checksum_of("t", Some(&Value::Null)));
    }

    #[test]
    fn parse_accepts_lowercase_hex_only() {
        let good = "a".repeat(64);
        assert_eq!(Checksum::parse(&good).unwrap().as_str(), good);
        assert_eq!(
            Checksum::parse("abc"),
            Err(ChecksumError::WrongLength { len: 3 })
        );
        let upper = format!("{}A", "0".repeat(63));
        assert_eq!(
            Checksum::parse(&upper),
            Err(ChecksumError::Uppercase {
                found: 'A',
                index: 63
            })
        );
        let not_hex = format!("g{}", "0".repeat(63));
        assert_eq!(
            Checksum::parse(&not_hex),
            Err(ChecksumError::NotHex {
                found: 'g',
                index: 0
            })
        );
        assert_eq!(
            ChecksumError::WrongLength { len: 3 }.to_string(),
            "checksum must be 64 lowercase hex digits, got 3 bytes"
        );
    }

    #[test]
    fn serde_round_trip_validates() {
        let checksum = checksum_of("t", Some(&json!([1, 2])));
        let text = serde_json::to_string(&checksum).unwrap();
        assert_eq!(text, format!("\"{checksum}\""));
        let back: Checksum = serde_json::from_str(&text).unwrap();
        assert_eq!(back, checksum);
        assert!(serde_json::from_str::<Checksum>("\"xyz\"").is_err());
    }

    #[test]
    fn large_args_do_not_pin_the_buffer() {
        let big = Value::String("x".repeat(2 * MAX_RETAINED_BUFFER));
        let checksum = checksum_of("t", Some(&big));
        assert_eq!(checksum.as_str().len(), Checksum::LEN);
        BUFFER.with(|cell| assert!(cell.borrow().capacity() <= MAX_RETAINED_BUFFER));
    }
}
