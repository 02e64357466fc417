//! A lone surrogate escape — what `JSON.stringify` writes for a string cut in the middle of an
//! emoji, as a truncated tool output is — is valid JSON, and loses no call in any adapter.
//!
//! Every sample file of every format (`tests/data`) and every real recording in
//! `../shared/fixtures`, with `\ud83d` appended to the longest text of each line (or of the
//! document), must give the same events, kinds and errors as the file itself.

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use toolcalls_adapters::{parse, Format, Options};
use toolcalls_model::Event;

/// Stands for the escape while the value is written back (a `Value` cannot hold the surrogate).
const MARK: &str = "\u{2063}SURROGATE\u{2063}";

/// The longest string of `v` that is prose rather than structure: not a time, not encoded JSON,
/// not an id-sized token.
fn longest_text(v: &mut Value) -> Option<&mut String> {
    let mut best: Option<&mut String> = None;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) if is_text(s) && best.as_ref().is_none_or(|b| b.len() < s.len()) => {
                best = Some(s);
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(map) => stack.extend(map.values_mut()),
            _ => {}
        }
    }
    best
}

fn is_text(s: &str) -> bool {
    let t = s.trim_start();
    s.len() >= 24
        && s.contains(' ')
        && !t.starts_with('{')
        && !t.starts_with('[')
        && !s.as_bytes().first().is_some_and(u8::is_ascii_digit)
}

/// `json` with `\ud83d` appended to its longest text; `None` when it has none or is not JSON.
fn with_lone_surrogate(json: &[u8]) -> Option<Vec<u8>> {
    let mut v: Value = serde_json::from_slice(json).ok()?;
    longest_text(&mut v)?.push_str(MARK);
    let text = serde_json::to_string(&v).ok()?;
    Some(text.replace(MARK, r"\ud83d").into_bytes())
}

/// The file with a lone surrogate in each line (or in the document, for a whole-file format),
/// and how many were put in.
fn mutate(bytes: &[u8]) -> (Vec<u8>, usize) {
    if let Some(doc) = with_lone_surrogate(bytes) {
        return (doc, 1);
    }
    let mut out = Vec::with_capacity(bytes.len() + 1024);
    let mut n = 0;
    for line in bytes.split(|&b| b == b'\n') {
        match with_lone_surrogate(line) {
            Some(changed) => {
                out.extend_from_slice(&changed);
                n += 1;
            }
            None => out.extend_from_slice(line),
        }
        out.push(b'\n');
    }
    out.pop();
    (out, n)
}

fn shape(events: &[Event]) -> Vec<(String, String, Option<String>)> {
    events
        .iter()
        .map(|e| {
            (
                e.kind().as_str().to_owned(),
                e.session.as_str().to_owned(),
                e.call_id.as_ref().map(|c| c.as_str().to_owned()),
            )
        })
        .collect()
}

fn files() -> Vec<PathBuf> {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut files: Vec<PathBuf> = std::fs::read_dir(data)
        .expect("tests/data")
        .map(|e| e.expect("an entry").path())
        .collect();
    if let Some(dir) = support::fixtures() {
        for sub in std::fs::read_dir(dir)
            .expect("the fixtures folder")
            .flatten()
        {
            if let Ok(entries) = std::fs::read_dir(sub.path()) {
                files.extend(entries.flatten().map(|e| e.path()).filter(|p| {
                    matches!(
                        p.extension().and_then(|x| x.to_str()),
                        Some("jsonl" | "json")
                    )
                }));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn a_lone_surrogate_loses_no_call_in_any_format() {
    let (mut checked, mut replaced) = (0, 0);
    for path in files() {
        let name = path.to_string_lossy().into_owned();
        let bytes = std::fs::read(&path).expect("readable");
        let Some(format) = Format::detect(&name, &bytes[..bytes.len().min(1 << 16)]) else {
            continue;
        };
        let (mutated, n) = mutate(&bytes);
        if n == 0 {
            continue;
        }
        let opts = Options::default();
        let before = parse(format, &name, &bytes, &opts);
        let after = parse(format, &name, &mutated, &opts);
        let errors = |p: &toolcalls_adapters::Parsed| {
            p.errors.iter().map(|e| e.to_string()).collect::<Vec<_>>()
        };
        assert_eq!(
            errors(&after),
            errors(&before),
            "{name} ({format:?}): a lone surrogate in {n} places changed the errors"
        );
        assert_eq!(
            shape(&after.events),
            shape(&before.events),
            "{name} ({format:?}): a lone surrogate in {n} places changed the events"
        );
        let encoded: Vec<String> = after
            .events
            .iter()
            .map(|e| String::from_utf8_lossy(&e.encode()).into_owned())
            .collect();
        if encoded
            .iter()
            .any(|e| e.contains('\u{fffd}') || e.contains(r"\ud83d"))
        {
            replaced += 1;
        }
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} files had text to change");
    assert!(
        replaced * 2 >= checked,
        "the surrogate reached the events of only {replaced} of {checked} files"
    );
    println!("{checked} files, the surrogate kept or replaced in the events of {replaced}");
}
