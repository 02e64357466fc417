//! Pins the checksum to vectors computed by @nhtio/adk's own code, on the inputs where JavaScript
//! and serde_json part ways: lone surrogates, numbers beyond a double, deep nesting.
//!
//! `tests/data/adk-vectors.json` holds, for each input, the tool, the args as JSON text (`null`:
//! no args), the canonical text and its SHA-256. It was produced outside this repository:
//!
//! 1. `src/lib/utils/canonical_json.ts` of NHTIO/ADK (blob of commit
//!    `af5f82c5ca2515f6c72ef903cc33be74943d2a62`, unchanged) compiled to JavaScript with
//!    `tsc` 7.0.2 (`--module esnext --target es2022`), in a scratch directory under /tmp;
//! 2. for each input, with node v20.20.2: `args = JSON.parse(text)` (absent: `undefined`), then
//!    `canonical = canonicalStringify({ tool, args })` — what `Tool.executor` hashes
//!    (`src/lib/classes/tool.ts`) — and `sha256(canonical)` with `js-sha256` 0.11.1, the hash the
//!    ADK imports (its package.json asks for `^0.11.1`), cross-checked against node's
//!    `crypto.createHash('sha256')` over the UTF-8 text; every canonical text was checked to be
//!    well-formed UTF-16 (`String.prototype.isWellFormed`), so the two agree by construction.
//!
//! The ADK's code is not in this repository; only its output is.
//!
//! What the vectors show: a lone surrogate (high or low, in a value or a key, reversed pairs, a
//! half beside a whole pair) is written as a lowercase `\udxxx` escape, whatever the case of the
//! input escape; an escaped pair is the character itself; keys sort by UTF-16 code units with
//! lone halves among them (`\ud7ff` < `\ud800` < `😀` (d83d) < `\udbff` < `\udc00` < `\ue000`),
//! and `"\ud800"` / `"\uD800"` are one key (the last wins); `1e400`, `-1e400` and an integer of
//! 400 digits are `Infinity`, written `null`; `1e-400` is `0`; nesting of 127, 128, 129 and 1000
//! levels hashes like any other value.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;
use toolcalls_model::checksum::{
    checksum_of, checksum_of_encoded, checksum_of_json, encoded_checksum_input, json_checksum_input,
};
use toolcalls_model::{Checksum, Event, EventBody, Json};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Vector {
    name: String,
    tool: String,
    /// The args as JSON text, as an event carries them; `None`: no args.
    args: Option<String>,
    canonical: String,
    sha256: String,
}

fn vectors() -> Vec<Vector> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/adk-vectors.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()))
}

#[test]
fn the_verbatim_text_hashes_as_the_adk_hashes_it() {
    let vectors = vectors();
    assert!(vectors.len() >= 40, "vector file looks truncated");
    for v in &vectors {
        let expected = Checksum::parse(&v.sha256).unwrap();
        let json = v.args.as_deref().map(|text| {
            Json::parse(text).unwrap_or_else(|e| panic!("{}: args refused: {e}", v.name))
        });
        assert_eq!(
            json_checksum_input(&v.tool, json.as_ref()),
            v.canonical,
            "canonical text of {}",
            v.name
        );
        assert_eq!(
            checksum_of_json(&v.tool, json.as_ref()),
            expected,
            "checksum of {}",
            v.name
        );
        // Where a `Value` can hold the args, the tree path agrees.
        let value = json.as_ref().map(Json::try_to_value);
        match value {
            None => assert_eq!(checksum_of(&v.tool, None), expected, "{}", v.name),
            Some(Ok(value)) => {
                assert_eq!(checksum_of(&v.tool, Some(&value)), expected, "{}", v.name)
            }
            Some(Err(_)) => {}
        }
    }
}

#[test]
fn encoded_arguments_hash_the_value_the_text_holds() {
    // The OpenAI battery `JSON.parse`s the arguments string and hashes the value: the same
    // canonical text as the args themselves.
    for v in vectors() {
        let Some(text) = v.args.as_deref() else {
            continue;
        };
        assert_eq!(
            encoded_checksum_input(&v.tool, text),
            v.canonical,
            "{}",
            v.name
        );
        assert_eq!(
            checksum_of_encoded(&v.tool, text).as_str(),
            v.sha256,
            "{}",
            v.name
        );
    }
}

#[test]
fn every_vector_decodes_as_an_event() {
    for v in vectors() {
        let mut event = serde_json::json!({
            "v": 1, "kind": "announce", "source": "adk", "session": "s",
            "time": "2026-01-01T00:00:00Z", "tool": v.tool,
        })
        .to_string();
        if let Some(args) = &v.args {
            event.truncate(event.len() - 1);
            event.push_str(&format!(r#","args":{args}}}"#));
        }
        let decoded = Event::decode(event.as_bytes())
            .unwrap_or_else(|e| panic!("{}: the event is refused: {e}", v.name));
        let EventBody::Announce(a) = &decoded.body else {
            panic!("{}: {decoded:?}", v.name)
        };
        assert_eq!(
            a.args.as_ref().map(Json::as_str),
            v.args.as_deref(),
            "{}",
            v.name
        );
        assert_eq!(
            checksum_of_json(&a.tool, a.args.as_ref()).as_str(),
            v.sha256,
            "{}",
            v.name
        );
        // Encoding and decoding again keeps the text.
        assert_eq!(
            Event::decode(&decoded.encode()).unwrap(),
            decoded,
            "{}",
            v.name
        );
    }
}

#[test]
fn lossy_values_of_the_vectors_never_panic() {
    for v in vectors() {
        if let Some(text) = &v.args {
            let json = Json::parse(text).unwrap();
            let value: Value = json.to_value();
            let _ = serde_json::to_string(&value).unwrap();
        }
    }
}
