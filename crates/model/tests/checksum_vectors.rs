//! Pins the ADK checksum to vectors produced by real JavaScript.
//!
//! `tests/data/checksum-vectors.json` is the output of `scripts/checksum-vectors.mjs`, which runs
//! @nhtio/adk's `canonicalStringify` semantics on values made by `JSON.parse` (rule `value`: the
//! args of a v1 event, a string hashed as a string; rule `encoded`: a string of JSON text as the
//! openai, codex and otel adapters hash it, see `toolcalls_model::checksum`). This test checks that
//! the Rust side reproduces every canonical text and checksum, that the committed file is what the
//! script prints today (when node is available), and, with proptest, that the canonical form is
//! valid JSON for the same value and a fixed point.

use std::path::{Path, PathBuf};
use std::process::Command;

use proptest::prelude::*;
use serde::Deserialize;
use serde_json::Value;
use toolcalls_model::canonical::{canonical_string, cmp_utf16};
use toolcalls_model::checksum::{
    checksum_input, checksum_of, checksum_of_encoded, checksum_of_json, encoded_checksum_input,
    json_checksum_input,
};
use toolcalls_model::json::Json;
use toolcalls_model::Checksum;

/// One entry of the committed vector file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Vector {
    name: String,
    /// `value` ([`checksum_of`], [`checksum_of_json`]) or `encoded` ([`checksum_of_encoded`] of the
    /// string `args_json` holds).
    rule: String,
    tool: String,
    /// The exact JSON text of `args` as a producer sends it; `None` when the event has no args.
    args_json: Option<String>,
    canonical: String,
    checksum: String,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn committed_vectors_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/checksum-vectors.json")
}

fn committed_vectors() -> Vec<Vector> {
    let path = committed_vectors_path();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()))
}

#[test]
fn rust_matches_every_javascript_vector() {
    let vectors = committed_vectors();
    assert!(vectors.len() >= 40, "vector file looks truncated");
    for vector in &vectors {
        if vector.rule == "encoded" {
            let Some(Value::String(encoded)) = vector
                .args_json
                .as_deref()
                .map(|text| serde_json::from_str::<Value>(text).unwrap())
            else {
                panic!("{}: an encoded vector holds a string", vector.name)
            };
            assert_eq!(
                encoded_checksum_input(&vector.tool, &encoded),
                vector.canonical,
                "canonical text differs for vector {}",
                vector.name
            );
            assert_eq!(
                checksum_of_encoded(&vector.tool, &encoded).as_str(),
                vector.checksum,
                "checksum differs for vector {}",
                vector.name
            );
            continue;
        }
        assert_eq!(vector.rule, "value", "{}", vector.name);
        let args: Option<Value> = vector.args_json.as_deref().map(|text| {
            serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("{}: args_json does not parse: {e}", vector.name))
        });
        assert_eq!(
            checksum_input(&vector.tool, args.as_ref()),
            vector.canonical,
            "canonical text differs for vector {}",
            vector.name
        );
        let expected = Checksum::parse(&vector.checksum)
            .unwrap_or_else(|e| panic!("{}: bad checksum in file: {e}", vector.name));
        assert_eq!(
            checksum_of(&vector.tool, args.as_ref()),
            expected,
            "checksum differs for vector {}",
            vector.name
        );
        // The hot path reads the text without building a `Value`.
        let json = vector.args_json.as_deref().map(|t| Json::parse(t).unwrap());
        assert_eq!(
            checksum_of_json(&vector.tool, json.as_ref()),
            expected,
            "checksum of the verbatim text differs for vector {}",
            vector.name
        );
    }
}

/// JSON text of `value` as a producer might send it: object keys in reverse order, spaces and
/// newlines between tokens, `/` and non-ASCII written as `\u` escapes.
fn unusual_text(value: &Value) -> String {
    match value {
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(unusual_text).collect();
            format!("[ {} ]", items.join(" ,\n"))
        }
        Value::Object(map) => {
            let entries: Vec<String> = map
                .iter()
                .rev()
                .map(|(k, v)| format!("{} :\t{}", escaped(k), unusual_text(v)))
                .collect();
            format!("{{ {} }}", entries.join(", "))
        }
        Value::String(s) => escaped(s),
        other => other.to_string(),
    }
}

fn escaped(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '/' => out.push_str("\\/"),
            c if !c.is_ascii() => {
                for unit in c.encode_utf16(&mut [0; 2]) {
                    out.push_str(&format!("\\u{unit:04X}"));
                }
            }
            c => {
                // serde_json's escape of one ASCII character, without the quotes.
                let quoted = serde_json::to_string(&c.to_string()).unwrap();
                out.push_str(&quoted[1..quoted.len() - 1]);
            }
        }
    }
    out.push('"');
    out
}

#[test]
fn verbatim_text_with_duplicate_keys_hashes_as_javascript_reads_it() {
    // `JSON.parse` keeps the last of duplicate keys, as a `Value` does.
    let text = r#"{"b": 1, "a": {"y": 2, "x": 3, "y": [4]}, "b": "last"}"#;
    let value: Value = serde_json::from_str(text).unwrap();
    let json = Json::parse(text).unwrap();
    assert_eq!(
        checksum_of_json("t", Some(&json)),
        checksum_of("t", Some(&value))
    );
    assert_eq!(
        checksum_input("t", Some(&value)),
        r#"{"args":{"a":{"x":3,"y":[4]},"b":"last"},"tool":"t"}"#
    );
    // OpenAI-style string arguments: a v1 event's string is a string; as encoded arguments the
    // string's JSON is what is hashed, escapes and all.
    let text = r#""{\"q\": \"caf\\u00e9\", \"n\": 1.50}""#;
    let json = Json::parse(text).unwrap();
    let value: Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        checksum_of_json("s", Some(&json)),
        checksum_of("s", Some(&value))
    );
    assert_eq!(
        checksum_input("s", Some(&value)),
        r#"{"args":"{\"q\": \"caf\\u00e9\", \"n\": 1.50}","tool":"s"}"#
    );
    assert_eq!(
        encoded_checksum_input("s", value.as_str().unwrap()),
        r#"{"args":{"n":1.5,"q":"café"},"tool":"s"}"#
    );
}

#[test]
fn committed_vectors_are_what_the_script_prints() {
    let script = Path::new("scripts").join("checksum-vectors.mjs");
    let output = match Command::new("node")
        .arg(&script)
        .current_dir(workspace_root())
        .output()
    {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if std::env::var_os("CI").is_some() {
                panic!("node is not on PATH, and CI is set: the vector file cannot be re-checked");
            }
            println!(
                "skipped re-running scripts/checksum-vectors.mjs: node is not on PATH \
                 (rust_matches_every_javascript_vector still checks the committed file)"
            );
            return;
        }
        Err(e) => panic!("cannot run node {}: {e}", script.display()),
    };
    assert!(
        output.status.success(),
        "node {} failed ({}): {}",
        script.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let committed = std::fs::read(committed_vectors_path()).expect("read committed vectors");
    assert!(
        output.stdout == committed,
        "crates/model/tests/data/checksum-vectors.json is stale; regenerate it with\n  \
         node scripts/checksum-vectors.mjs > crates/model/tests/data/checksum-vectors.json\n\
         script output:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

/// Equality as JavaScript would see it after a round trip: numbers compare as doubles.
fn js_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| js_equal(x, y))
        }
        (Value::Object(xs), Value::Object(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .all(|(k, x)| ys.get(k).is_some_and(|y| js_equal(x, y)))
        }
        _ => a == b,
    }
}

fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-c]{0,3}",
        // Characters where JSON escaping and UTF-8 vs UTF-16 order differ.
        "[\\x00-\\x1f\"\\\\/\\x7f\u{2028}\u{2029}\u{D7FF}\u{E000}\u{FB01}\u{FFFF}\u{10000}\u{1F600}a]{0,5}",
        any::<String>(),
    ]
}

fn arb_number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-(1i64 << 54)..(1i64 << 54)).prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        (-1e-5f64..1e-5).prop_map(Value::from),
        (-1e22f64..1e22).prop_map(Value::from),
    ]
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        arb_number(),
        arb_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(arb_string(), inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn canonical_text_reparses_to_the_same_value(value in arb_json()) {
        let text = canonical_string(&value);
        let reparsed: Value = serde_json::from_str(&text).expect("canonical text is JSON");
        prop_assert!(js_equal(&value, &reparsed), "{value:?} -> {text} -> {reparsed:?}");
    }

    #[test]
    fn canonical_text_is_a_fixed_point(value in arb_json()) {
        let text = canonical_string(&value);
        let reparsed: Value = serde_json::from_str(&text).expect("canonical text is JSON");
        prop_assert_eq!(canonical_string(&reparsed), text);
    }

    #[test]
    fn encoded_args_hash_as_the_value_they_encode(value in arb_json()) {
        for text in [value.to_string(), unusual_text(&value)] {
            prop_assert_eq!(checksum_of_encoded("t", &text), checksum_of("t", Some(&value)));
        }
    }

    #[test]
    fn string_args_hash_as_strings(s in arb_string()) {
        let value = Value::String(s.clone());
        let json = Json::from(value.clone());
        prop_assert_eq!(checksum_of_json("t", Some(&json)), checksum_of("t", Some(&value)));
        let mut expected = String::from("{\"args\":");
        expected.push_str(&serde_json::to_string(&s).unwrap());
        expected.push_str(",\"tool\":\"t\"}");
        prop_assert_eq!(checksum_input("t", Some(&value)), expected);
    }

    #[test]
    fn checksum_of_verbatim_text_equals_checksum_of_the_value(value in arb_json()) {
        for text in [value.to_string(), unusual_text(&value)] {
            let json = Json::parse(&text).expect("valid JSON");
            prop_assert_eq!(
                checksum_of_json("t", Some(&json)),
                checksum_of("t", Some(&value)),
                "text {}", text
            );
        }
        // As a string argument: a string.
        let as_text = Value::String(unusual_text(&value));
        let json = Json::parse(&as_text.to_string()).expect("valid JSON");
        prop_assert_eq!(checksum_of_json("t", Some(&json)), checksum_of("t", Some(&as_text)));
    }

    #[test]
    fn the_javascript_reader_agrees_with_serde_json(value in arb_json()) {
        // Text serde_json refuses (a number beyond a double, 200 levels) takes the second path;
        // around an ordinary value it must write what the first path writes.
        let canonical = canonical_string(&value);
        for text in [value.to_string(), unusual_text(&value)] {
            let overflow = Json::parse(&format!("[{text}, 1e400]")).expect("valid JSON");
            prop_assert_eq!(
                json_checksum_input("t", Some(&overflow)),
                format!(r#"{{"args":[{canonical},null],"tool":"t"}}"#)
            );
            let deep = Json::parse(&format!("{}{text}{}", "[".repeat(200), "]".repeat(200)))
                .expect("valid JSON");
            prop_assert_eq!(
                json_checksum_input("t", Some(&deep)),
                format!(r#"{{"args":{}{canonical}{},"tool":"t"}}"#, "[".repeat(200), "]".repeat(200))
            );
        }
    }

    #[test]
    fn utf16_order_is_code_unit_order(a in arb_string(), b in arb_string()) {
        prop_assert_eq!(cmp_utf16(&a, &b), a.encode_utf16().cmp(b.encode_utf16()));
    }
}
