//! The fuzz harness shared by the fuzz tests of the workspace (`crates/model/tests/fuzz.rs`,
//! `crates/adapters/tests/fuzz.rs`, `crates/core/tests/fuzz_local.rs`, `tests/fuzz_local.rs`; the
//! others include this file with `#[path]`): mutations of real inputs, a deterministic generator,
//! and a loop that runs a check on each mutated input under `catch_unwind`, bounded by a case
//! count or a time.
//!
//! It runs on the stable toolchain and needs no crate beyond std and serde_json: inputs come from a
//! SplitMix64 generator seeded per case, so a failing case is reproduced from its seed alone.
//!
//! - `TOOLCALLS_FUZZ_CASES`: cases per fuzz test (default: the test's own small number, so
//!   that the bounded run in the normal test command costs seconds);
//! - `TOOLCALLS_FUZZ_SECS`: run each fuzz test for this many seconds instead (the long run:
//!   `scripts/fuzz.sh`);
//! - `TOOLCALLS_FUZZ_SEED`: the base seed (default fixed, so the normal run is reproducible); a
//!   failure prints the seed of its case and saves the input under the target directory.
#![allow(dead_code)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// SplitMix64: small, fast, and good enough to pick mutations.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// How long a fuzz test runs.
#[derive(Debug, Clone)]
pub struct Budget {
    pub cases: u64,
    pub time: Option<Duration>,
    pub seed: u64,
}

impl Budget {
    /// The budget the environment asks for, `default_cases` when it asks nothing.
    pub fn from_env(default_cases: u64) -> Budget {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let time = var("TOOLCALLS_FUZZ_SECS").map(|s| {
            Duration::from_secs_f64(
                s.trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("TOOLCALLS_FUZZ_SECS={s} is not a number")),
            )
        });
        let cases = var("TOOLCALLS_FUZZ_CASES").map_or(default_cases, |s| {
            s.trim()
                .parse()
                .unwrap_or_else(|_| panic!("TOOLCALLS_FUZZ_CASES={s} is not a number"))
        });
        let seed = var("TOOLCALLS_FUZZ_SEED").map_or(0x7C0_0CA1_15F0_22ED, |s| {
            s.trim()
                .parse()
                .unwrap_or_else(|_| panic!("TOOLCALLS_FUZZ_SEED={s} is not a number"))
        });
        Budget { cases, time, seed }
    }
}

/// Runs `check` on `generate`d inputs until the budget is spent; a panic in `check` fails the test
/// with the case's seed, an excerpt of the input and the path of a file holding all of it.
/// Returns the number of cases run.
// The wall clock bounds the test run; the core's ban on reading it (crates/core/clippy.toml)
// is about the code under test.
#[allow(clippy::disallowed_methods)]
pub fn run(
    name: &str,
    budget: &Budget,
    mut generate: impl FnMut(&mut Rng, u64) -> Vec<u8>,
    check: impl Fn(&[u8]),
) -> u64 {
    let start = Instant::now();
    let mut case = 0u64;
    loop {
        let done = match budget.time {
            Some(time) => start.elapsed() >= time,
            None => case >= budget.cases,
        };
        if done {
            break;
        }
        let seed = budget
            .seed
            .wrapping_add(case.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let mut rng = Rng::new(seed);
        let input = generate(&mut rng, case);
        if let Err(panic) = catch_unwind(AssertUnwindSafe(|| check(&input))) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            let saved = save_failure(name, seed, &input);
            panic!(
                "fuzz {name}: case {case} (TOOLCALLS_FUZZ_SEED={} reproduces the run; case seed {seed}) \
                 panicked: {message}\ninput ({} bytes, saved at {}): {}",
                budget.seed,
                input.len(),
                saved.display(),
                excerpt(&input)
            );
        }
        case += 1;
    }
    println!(
        "fuzz {name}: {case} cases in {:.1} s, 0 panics (TOOLCALLS_FUZZ_SEED={})",
        start.elapsed().as_secs_f64(),
        budget.seed
    );
    case
}

fn save_failure(name: &str, seed: u64, input: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join("toolcalls-fuzz-failures");
    let path = dir.join(format!("{name}-{seed}.bin"));
    if std::fs::create_dir_all(&dir).is_ok() && std::fs::write(&path, input).is_ok() {
        path
    } else {
        PathBuf::from("(not saved)")
    }
}

/// The first bytes of an input, escaped for a terminal.
pub fn excerpt(input: &[u8]) -> String {
    let shown = &input[..input.len().min(600)];
    let mut s = String::from_utf8_lossy(shown).escape_debug().to_string();
    if input.len() > shown.len() {
        s.push('…');
    }
    s
}

/// Raw JSON texts that break assumptions: what JavaScript takes and serde_json does not, wrong
/// types for any field, edge values of times, ids, numbers and checksums.
pub fn odd_values() -> Vec<String> {
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let deep_object = |n: usize| format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n));
    vec![
        r#""\ud800""#.into(),
        r#""\udc00""#.into(),
        r#""\ude00\ud83d""#.into(),
        r#""\ud83d\ude00""#.into(),
        r#"{"\ud800":1,"\uffff":2,"a":"\udfff"}"#.into(),
        r#""\u0000""#.into(),
        "\"\u{0}\"".into(),
        r#""a\nb\u001f""#.into(),
        "1e400".into(),
        "-1e400".into(),
        "1e-400".into(),
        "-0".into(),
        "18446744073709551616".into(),
        "-9223372036854775809".into(),
        "123456789012345678901234567890".into(),
        "1.7976931348623159e308".into(),
        "0".into(),
        "1".into(),
        "-1".into(),
        "1.5".into(),
        "null".into(),
        "true".into(),
        "false".into(),
        "\"\"".into(),
        "\" \"".into(),
        "\"x\"".into(),
        "[]".into(),
        "{}".into(),
        "[null]".into(),
        r#"{"__proto__":{"a":1}}"#.into(),
        deep(127),
        deep(128),
        deep(129),
        deep(1000),
        deep(4096),
        deep(4097),
        deep_object(200),
        format!("\"{}\"", "x".repeat(100_000)),
        format!("\"{}\"", "é😀".repeat(5_000)),
        format!("[{}]", vec!["1"; 10_000].join(",")),
        "\"2026-01-01T00:00:00Z\"".into(),
        "\"2026-01-01T00:00:00.123456789+14:00\"".into(),
        "\"9999-12-31T23:59:59.999Z\"".into(),
        "\"0000-01-01T00:00:00Z\"".into(),
        "\"2026-02-30T00:00:00Z\"".into(),
        "\"2026-01-01T00:00:00+25:00\"".into(),
        "\"1970-01-01T00:00:00Z\"".into(),
        format!("\"{}\"", "a".repeat(64)),
        format!("\"{}\"", "A".repeat(64)),
        "\"announce\"".into(),
        "\"completion\"".into(),
        "\"execution_end\"".into(),
        "\"approved\"".into(),
        "\"deny\"".into(),
        r#"{"level":"external_write","idempotent":false,"idempotencyKey":""}"#.into(),
        r#"{"type":"tool_use","id":"x","name":"y","input":{}}"#.into(),
        r#"[{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":"{\"a\":\ud800}"}}]}]"#.into(),
    ]
}

/// One mutated input made from `base` (and, for splicing, the other inputs of `corpus`): 1 to 4
/// mutations, byte-level, line-level or JSON-aware.
pub fn mutate(rng: &mut Rng, base: &[u8], corpus: &[Vec<u8>], odd: &[String]) -> Vec<u8> {
    let mut data = base.to_vec();
    for _ in 0..1 + rng.below(4) {
        data = match rng.below(12) {
            0 => flip_bits(rng, data),
            1 => set_bytes(rng, data),
            2 => truncate(rng, data),
            3 => delete_range(rng, data),
            4 => duplicate_range(rng, data),
            5 => splice(rng, data, corpus),
            6 => insert_odd(rng, data, odd),
            7..=9 => json_field(rng, data, odd),
            10 => lines(rng, data, corpus),
            _ => interleave(rng, data, corpus),
        };
    }
    data
}

fn flip_bits(rng: &mut Rng, mut data: Vec<u8>) -> Vec<u8> {
    for _ in 0..1 + rng.below(8) {
        if data.is_empty() {
            break;
        }
        let i = rng.below(data.len());
        data[i] ^= 1 << rng.below(8);
    }
    data
}

fn set_bytes(rng: &mut Rng, mut data: Vec<u8>) -> Vec<u8> {
    const BYTES: &[u8] = b"\0\x01\x7f\x80\xbf\xc0\xf0\xff\"\\{}[],:-+.eE0n \n\r\t";
    for _ in 0..1 + rng.below(4) {
        if data.is_empty() {
            break;
        }
        let i = rng.below(data.len());
        data[i] = *rng.pick(BYTES);
    }
    data
}

fn truncate(rng: &mut Rng, mut data: Vec<u8>) -> Vec<u8> {
    let at = rng.below(data.len() + 1);
    data.truncate(at);
    data
}

fn delete_range(rng: &mut Rng, mut data: Vec<u8>) -> Vec<u8> {
    let start = rng.below(data.len() + 1);
    let end = (start + 1 + rng.below(64)).min(data.len());
    data.drain(start..end.max(start));
    data
}

fn duplicate_range(rng: &mut Rng, mut data: Vec<u8>) -> Vec<u8> {
    let start = rng.below(data.len() + 1);
    let end = (start + 1 + rng.below(256)).min(data.len());
    let piece: Vec<u8> = data[start..end.max(start)].to_vec();
    let at = rng.below(data.len() + 1);
    data.splice(at..at, piece);
    data
}

fn splice(rng: &mut Rng, mut data: Vec<u8>, corpus: &[Vec<u8>]) -> Vec<u8> {
    if corpus.is_empty() {
        return data;
    }
    let other = rng.pick(corpus);
    let start = rng.below(other.len() + 1);
    let end = (start + rng.below(512)).min(other.len());
    let at = rng.below(data.len() + 1);
    data.splice(at..at, other[start..end].iter().copied());
    data
}

fn insert_odd(rng: &mut Rng, mut data: Vec<u8>, odd: &[String]) -> Vec<u8> {
    let at = rng.below(data.len() + 1);
    data.splice(at..at, rng.pick(odd).bytes());
    data
}

/// Splits into lines (keeping the `\n`s out), for the line-level mutations.
fn split_lines(data: &[u8]) -> Vec<Vec<u8>> {
    data.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
}

fn join_lines(lines: &[Vec<u8>]) -> Vec<u8> {
    lines.join(&b'\n')
}

/// Line-level: drop, repeat, swap or borrow whole lines.
fn lines(rng: &mut Rng, data: Vec<u8>, corpus: &[Vec<u8>]) -> Vec<u8> {
    let mut lines = split_lines(&data);
    if lines.is_empty() {
        return data;
    }
    match rng.below(4) {
        0 => {
            let i = rng.below(lines.len());
            lines.remove(i);
        }
        1 => {
            let i = rng.below(lines.len());
            let line = lines[i].clone();
            let at = rng.below(lines.len() + 1);
            lines.insert(at, line);
        }
        2 => {
            let (i, j) = (rng.below(lines.len()), rng.below(lines.len()));
            lines.swap(i, j);
        }
        _ => {
            if !corpus.is_empty() {
                let other = split_lines(rng.pick(corpus).as_slice());
                let line = rng.pick(&other).clone();
                let at = rng.below(lines.len() + 1);
                lines.insert(at, line);
            }
        }
    }
    join_lines(&lines)
}

/// Lines of two inputs interleaved (files merged from several producers).
fn interleave(rng: &mut Rng, data: Vec<u8>, corpus: &[Vec<u8>]) -> Vec<u8> {
    if corpus.is_empty() {
        return data;
    }
    let a = split_lines(&data);
    let b = split_lines(rng.pick(corpus).as_slice());
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::with_capacity(a.len() + b.len());
    while i < a.len() || j < b.len() {
        if j >= b.len() || (i < a.len() && rng.chance(50)) {
            out.push(a[i].clone());
            i += 1;
        } else {
            out.push(b[j].clone());
            j += 1;
        }
    }
    join_lines(&out)
}

/// JSON-aware: in one line (or the whole input) that is JSON, set a random field anywhere in the
/// tree to an odd value (a wrong type, an edge value), remove it, or add an unknown one.
fn json_field(rng: &mut Rng, data: Vec<u8>, odd: &[String]) -> Vec<u8> {
    let whole = serde_json::from_slice::<serde_json::Value>(&data).is_ok();
    let mut lines = if whole {
        vec![data.clone()]
    } else {
        split_lines(&data)
    };
    let candidates: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].first().is_some_and(|b| *b == b'{' || *b == b'['))
        .collect();
    if candidates.is_empty() {
        return data;
    }
    let i = *rng.pick(&candidates);
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&lines[i]) else {
        return data;
    };
    // The odd value goes in as a placeholder string, replaced in the text afterwards: a `Value`
    // cannot hold a lone surrogate or `1e400`.
    const PLACEHOLDER: &str = "\u{1}FUZZ-PLACEHOLDER\u{1}";
    let action = rng.below(10);
    let replaced = edit_random_node(rng, &mut value, action, PLACEHOLDER);
    let text = value.to_string();
    let placeholder = serde_json::to_string(PLACEHOLDER).expect("a string serializes");
    // Often an odd value of the type the field had (an empty or lone-surrogate string where a
    // string was): the input then gets past the type checks, into what is done with the value.
    let same_kind: Vec<&String> = match replaced {
        Some(kind) if rng.chance(50) => odd.iter().filter(|o| kind_of(o) == kind).collect(),
        _ => Vec::new(),
    };
    let value = if same_kind.is_empty() {
        rng.pick(odd).as_str()
    } else {
        rng.pick(&same_kind).as_str()
    };
    lines[i] = text.replacen(&placeholder, value, 1).into_bytes();
    if whole {
        lines.swap_remove(0)
    } else {
        join_lines(&lines)
    }
}

/// The kind of a JSON text, by its first byte: `"` a string, `{` an object, `[` an array, `0` a
/// number, `t` a literal.
fn kind_of(text: &str) -> u8 {
    match text.as_bytes().first() {
        Some(b'-' | b'0'..=b'9') => b'0',
        Some(b'f' | b'n') => b't',
        Some(&b) => b,
        None => 0,
    }
}

/// Edits a node of `value` chosen at random, leaving `placeholder` where the odd value goes;
/// returns the kind ([`kind_of`]) of the value the placeholder replaced, when it replaced one.
fn edit_random_node(
    rng: &mut Rng,
    value: &mut serde_json::Value,
    action: usize,
    placeholder: &str,
) -> Option<u8> {
    use serde_json::Value;
    // Choose a random path of containers, at most a few levels, then walk it.
    enum Step {
        Key(String),
        Index(usize),
    }
    let mut path = Vec::new();
    let mut look: &Value = value;
    for _ in 0..rng.below(6) {
        let step = match look {
            Value::Object(map) if !map.is_empty() => {
                let key = map
                    .keys()
                    .nth(rng.below(map.len()))
                    .cloned()
                    .unwrap_or_default();
                (map.get(&key), Step::Key(key))
            }
            Value::Array(items) if !items.is_empty() => {
                let i = rng.below(items.len());
                (items.get(i), Step::Index(i))
            }
            _ => break,
        };
        match step {
            (Some(child @ (Value::Object(_) | Value::Array(_))), step) => {
                path.push(step);
                look = child;
            }
            _ => break,
        }
    }
    let mut node = value;
    for step in path {
        node = match (node, step) {
            (Value::Object(map), Step::Key(key)) => map.entry(key).or_insert(Value::Null),
            (Value::Array(items), Step::Index(i)) => &mut items[i],
            (node, _) => node,
        };
    }
    let kind = |v: &Value| kind_of(&v.to_string());
    match node {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            match (action, keys.is_empty()) {
                (0, false) => {
                    map.remove(&keys[rng.below(keys.len())]);
                    None
                }
                (1, _) => {
                    map.insert("fuzzUnknownField".into(), Value::String(placeholder.into()));
                    None
                }
                (_, false) => {
                    let key = &keys[rng.below(keys.len())];
                    map.insert(key.clone(), Value::String(placeholder.into()))
                        .map(|old| kind(&old))
                }
                (_, true) => {
                    map.insert("v".into(), Value::String(placeholder.into()));
                    None
                }
            }
        }
        Value::Array(items) => {
            let at = rng.below(items.len() + 1);
            items.insert(at, Value::String(placeholder.into()));
            None
        }
        other => {
            let was = kind(other);
            *other = Value::String(placeholder.into());
            Some(was)
        }
    }
}

/// The files of a folder and its subfolders, sorted by path.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The real recordings in `../shared/fixtures` beside the checkout (read in place, never copied),
/// or `None`, said plainly, when the folder is missing.
pub fn shared_fixtures(workspace_root: &Path, test: &str) -> Option<Vec<(PathBuf, Vec<u8>)>> {
    let dir = workspace_root.join("../shared/fixtures");
    if !dir.is_dir() {
        println!(
            "{test}: skipped the real recordings: {} is missing (it is a folder beside the \
             checkout in CI); fuzzing the project's own samples only",
            dir.display()
        );
        return None;
    }
    let files: Vec<(PathBuf, Vec<u8>)> = files_under(&dir)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e != "md"))
        .filter_map(|p| std::fs::read(&p).ok().map(|bytes| (p, bytes)))
        .collect();
    Some(files)
}

/// v1 events of every kind, valid, for the mutations to start from.
pub fn v1_events() -> Vec<Vec<u8>> {
    let t = "2026-01-01T00:00:00Z";
    let sum = "8685b816cc16dea76ec5c8e81755900b9f7597dce0bd024bc773352a9b2dad2d";
    [
        format!(r#"{{"v":1,"kind":"announce","source":"adk","session":"s","thread":"th","turn":"r1","callId":"c1","time":"{t}","tool":"noop","args":{{}},"checksum":"{sum}","sideEffects":{{"level":"external_write","idempotent":false,"idempotencyKey":"k1"}},"agent":"a","execution":"e","hookContext":{{"x":1}},"attributes":{{"y":[1,2]}}}}"#),
        format!(r#"{{"v":1,"kind":"announce","source":"openai","session":"s","callId":"c2","time":"{t}","tool":"get","args":"{{\"a\":1}}"}}"#),
        format!(r#"{{"v":1,"kind":"announce","source":"gemini-cli","session":"s","turn":"r1","time":"{t}","tool":"ls"}}"#),
        format!(r#"{{"v":1,"kind":"completion","source":"adk","session":"s","thread":"th","callId":"c1","time":"2026-01-01T00:00:01Z","tool":"noop","args":{{}},"result":{{"ok":true}},"isError":false,"cancelled":false,"startedAt":"{t}","durationMs":1000}}"#),
        r#"{"v":1,"kind":"completion","source":"openai","session":"s","callId":"c2","time":"2026-01-01T00:00:02Z","result":"done"}"#.to_owned(),
        r#"{"v":1,"kind":"completion","source":"gemini-cli","session":"s","turn":"r1","time":"2026-01-01T00:00:03Z","tool":"ls","isError":true,"cancelled":true}"#.to_owned(),
        format!(r#"{{"v":1,"kind":"execution_start","source":"adk","session":"s","time":"{t}","checksum":"{sum}","tool":"noop"}}"#),
        format!(r#"{{"v":1,"kind":"execution_end","source":"adk","session":"s","time":"2026-01-01T00:00:01Z","checksum":"{sum}","isError":true,"startedAt":"{t}","durationMs":5}}"#),
        r#"{"v":1,"kind":"turn_end","source":"gemini-cli","session":"s","turn":"r1","time":"2026-01-01T00:00:04Z","reason":"done"}"#.to_owned(),
        r#"{"v":1,"kind":"turn_aborted","source":"adk","session":"s","time":"2026-01-01T00:00:05Z"}"#.to_owned(),
        format!(r#"{{"v":1,"kind":"approval","source":"adk","session":"s","callId":"c1","time":"{t}","decision":"approved","by":"alice","reason":"ok","tool":"noop","args":{{}},"checksum":"{sum}"}}"#),
        format!(r#"{{"v":1,"kind":"hook_decision","source":"adk","session":"s","time":"{t}","hook":"pre","decision":"deny","policyId":"p","policyVersion":"1","reason":"no","tool":"noop"}}"#),
    ]
    .into_iter()
    .map(String::into_bytes)
    .collect()
}
