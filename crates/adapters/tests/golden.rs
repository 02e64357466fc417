//! Golden tests: every fixture in `../shared/fixtures` through its adapter and the correlation core.
//!
//! 1. With native ids the records, matched pairs, errors and interrupted calls equal the counts in
//!    SOURCES.md, and every pair was linked by its id.
//! 2. With ids dropped (`--drop-ids`) the fallbacks (checksum, tool FIFO, oldest) must pair the same
//!    (announce, completion) events as the ids did — at least 99 % of them for every file whose
//!    format keeps enough order. The figures are written to `docs/ADAPTERS.md` between markers;
//!    this test fails when the file disagrees with what it measured. To refresh the tables, run
//!    `UPDATE_DOCS=1 cargo test -p toolcalls-adapters --test golden`.
//! 3. The same for our own samples in `tests/data` (formats without real fixtures).
//!
//! Pairs are identified by the input positions of their events: each event is tagged with its index
//! in a test-only attribute, which the core carries into the record.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::Value;
use support::fixtures;
use toolcalls_adapters::{parse, Format, Options};
use toolcalls_core::{replay, Config, FinishMode, Outcome};
use toolcalls_model::{Event, EventBody, Phase, Strategy, ToolCallRecord};

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/ADAPTERS.md");
const SAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");

const A: &str = "goldenAnnounce";
const C: &str = "goldenCompletion";

/// One file: real fixtures (`../shared/fixtures`, counts from SOURCES.md) or our own samples
/// (`tests/data`, for formats without fixtures).
struct Golden {
    file: &'static str,
    format: Format,
    /// Lines the adapter must report as malformed (samples carry a few on purpose).
    bad_lines: usize,
    records: usize,
    matched: usize,
    errors: usize,
    interrupted: usize,
    /// Whether the format keeps enough order for the fallbacks to be held to 99 %; when not, why.
    order: Result<(), &'static str>,
}

/// A file's expected counts; `bad_lines` and `order` are set where they differ.
const fn golden(
    file: &'static str,
    format: Format,
    records: usize,
    matched: usize,
    errors: usize,
    interrupted: usize,
) -> Golden {
    Golden {
        file,
        format,
        bad_lines: 0,
        records,
        matched,
        errors,
        interrupted,
        order: Ok(()),
    }
}

/// Records = calls (SOURCES.md: tool_use / function_call / toolCalls counts); matched = pairs with
/// both sides; errors = records with `isError`; interrupted = records Interrupted (the Gemini CLI
/// call the user cancelled). Codex error counts follow the adapter's exit-code rule (SOURCES.md
/// gives none).
const FIXTURE_CASES: [Golden; 9] = [
    golden(
        "claude-code/spotter-tool-heavy.jsonl",
        Format::ClaudeCode,
        6,
        6,
        0,
        0,
    ),
    golden(
        "claude-code/agentcmd-full-session-four.jsonl",
        Format::ClaudeCode,
        27,
        27,
        1,
        0,
    ),
    golden(
        "claude-code/agentcmd-full-session-two.jsonl",
        Format::ClaudeCode,
        10,
        10,
        1,
        0,
    ),
    golden(
        "codex/agentcmd-rollout-01997e76.jsonl",
        Format::Codex,
        123,
        123,
        12,
        0,
    ),
    golden(
        "codex/agentcmd-rollout-01997ea4.jsonl",
        Format::Codex,
        16,
        16,
        3,
        0,
    ),
    golden(
        "codex/agentcmd-exec-json-stream-outputs.jsonl",
        Format::CodexExec,
        4,
        4,
        0,
        0,
    ),
    golden(
        "gemini-cli/agentcmd-session-981c87cb.json",
        Format::GeminiCli,
        13,
        13,
        1,
        1,
    ),
    golden(
        "gemini-cli/agentcmd-session-453aa339.json",
        Format::GeminiCli,
        3,
        3,
        0,
        0,
    ),
    Golden {
        order: Err(
            "announces only: results travel in the next request, which the recording does not hold",
        ),
        ..golden(
            "openai-responses/vercel-ai-reasoning-encrypted-content.chunks.txt",
            Format::OpenaiResponses,
            3,
            0,
            0,
            0,
        )
    },
];

/// Our own samples (see each file); the counts were worked out by reading them.
const SAMPLE_CASES: [Golden; 13] = [
    Golden {
        order: Err("results repeat neither tool nor arguments, and parallel and subagent calls finish out of order"),
        ..golden("claude-stream-json.jsonl", Format::ClaudeCodeStream, 5, 5, 1, 0)
    },
    // One call denied by a PreToolUse hook never runs: a record without a result.
    golden("claude-hooks.jsonl", Format::ClaudeCodeHooks, 7, 6, 1, 0),
    golden("claude-subagent-agent-a3f9c1e.jsonl", Format::ClaudeCode, 3, 3, 0, 0),
    golden("anthropic-messages.jsonl", Format::Anthropic, 3, 3, 1, 0),
    golden("openai-chat-stream.jsonl", Format::OpenaiChat, 2, 2, 0, 0),
    golden("openai-chat-compatible.jsonl", Format::OpenaiChat, 4, 4, 0, 0),
    Golden {
        order: Err("with previous_response_id the outputs come back in the client's order and repeat neither tool nor arguments"),
        ..golden("openai-responses-exchanges.jsonl", Format::OpenaiResponses, 3, 3, 0, 0)
    },
    // The last call is still running when the user interrupts the turn.
    golden("codex-rollout-custom-tools.jsonl", Format::Codex, 4, 3, 1, 1),
    golden("gemini-api-exchanges.jsonl", Format::Gemini, 3, 3, 1, 0),
    golden("adk-session.json", Format::Gemini, 2, 2, 1, 0),
    // One request without a tool name (reported); one call cancelled by notifications/cancelled.
    Golden { bad_lines: 1, ..golden("mcp-proxy.jsonl", Format::Mcp, 5, 5, 2, 1) },
    // One span without a tool name (reported).
    Golden { bad_lines: 1, ..golden("otel-genai-spans.jsonl", Format::Otel, 3, 3, 1, 0) },
    // @nhtio/adk bus events: one execution end without its `callId` (reported); the call it
    // belonged to never completes and the turn's end interrupts it.
    Golden { bad_lines: 1, ..golden("nhtio-adk-bus-events.jsonl", Format::Adk, 5, 4, 1, 1) },
];

/// One replay's view: pairs by input index, and counts.
struct Run {
    records: Vec<ToolCallRecord>,
    pairs: BTreeSet<(u64, u64)>,
    /// Input indexes of events that carried a call id.
    with_id: BTreeSet<u64>,
}

fn run(g: &Golden, bytes: &[u8], drop_ids: bool) -> Run {
    let opts = Options {
        drop_ids,
        ..Options::default()
    };
    let parsed = parse(g.format, g.file, bytes, &opts);
    assert_eq!(
        parsed.errors.len(),
        g.bad_lines,
        "{}: {:?}",
        g.file,
        parsed.errors
    );
    let with_id = parsed
        .events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.call_id.is_some())
        .map(|(i, _)| i as u64)
        .collect();
    let events: Vec<Event> = parsed
        .events
        .into_iter()
        .enumerate()
        .map(|(i, e)| tag(i, e))
        .collect();
    let out = replay(&Config::default(), events, FinishMode::Deadlines);
    for (i, o) in out.outcomes.iter().enumerate() {
        assert!(
            !matches!(o, Outcome::Rejected(_)),
            "{}: event {i} refused: {o:?}",
            g.file
        );
    }
    let pairs = out
        .records
        .iter()
        .filter_map(|r| {
            let attrs = r.attributes.as_ref()?;
            Some((attrs.get(A)?.as_u64()?, attrs.get(C)?.as_u64()?))
        })
        .collect();
    Run {
        records: out.records,
        pairs,
        with_id,
    }
}

/// Marks an event with its input index, under a key for its side.
fn tag(i: usize, mut e: Event) -> Event {
    let key = match e.body {
        EventBody::Announce(_) => A,
        EventBody::Completion(_) => C,
        _ => return e,
    };
    e.attributes
        .get_or_insert_with(Default::default)
        .insert(key.into(), Value::from(i as u64));
    e
}

fn strategies(records: &[ToolCallRecord]) -> String {
    let mut by: BTreeMap<String, usize> = BTreeMap::new();
    for r in records {
        let s = serde_json::to_value(r.correlation.strategy).unwrap();
        *by.entry(s.as_str().unwrap_or("?").to_owned()).or_default() += 1;
    }
    by.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks every case and returns the markdown table of its figures.
fn measure(dir: &Path, cases: &[Golden]) -> String {
    let mut table = String::new();
    table.push_str("| file | format | records | matched | errors | interrupted | with ids | without ids: same pairs | without ids: strategies | held to ≥ 99 % |\n");
    table.push_str("|---|---|---:|---:|---:|---:|---|---:|---|---|\n");
    let mut failures = Vec::new();
    for g in cases {
        let bytes = std::fs::read(dir.join(g.file)).unwrap();
        let with = run(g, &bytes, false);
        let records = with.records.len();
        let errors = with.records.iter().filter(|r| r.status.is_error).count();
        let interrupted = with
            .records
            .iter()
            .filter(|r| r.status.phase == Phase::Interrupted)
            .count();
        assert_eq!(
            (records, with.pairs.len(), errors, interrupted),
            (g.records, g.matched, g.errors, g.interrupted),
            "{}: (records, matched, errors, interrupted)",
            g.file
        );
        // Where both sides carry an id, the id links them.
        for r in &with.records {
            let Some(attrs) = &r.attributes else { continue };
            let (Some(a), Some(c)) = (
                attrs.get(A).and_then(Value::as_u64),
                attrs.get(C).and_then(Value::as_u64),
            ) else {
                continue;
            };
            if with.with_id.contains(&a) && with.with_id.contains(&c) {
                assert_eq!(
                    r.correlation.strategy,
                    Strategy::CallId,
                    "{}: pair ({a}, {c})",
                    g.file
                );
            }
        }

        let without = run(g, &bytes, true);
        assert_eq!(
            without.records.len(),
            records,
            "{}: the same number of records without ids",
            g.file
        );
        let same = with.pairs.intersection(&without.pairs).count();
        let (figure, fraction) = if with.pairs.is_empty() {
            ("n/a (no pairs)".to_owned(), None)
        } else {
            let f = same as f64 / with.pairs.len() as f64;
            (
                format!("{same}/{} = {:.1} %", with.pairs.len(), f * 100.0),
                Some(f),
            )
        };
        let held = match g.order {
            Ok(()) => {
                if fraction.is_some_and(|f| f < 0.99) {
                    failures.push(format!(
                        "{}: only {figure} of the pairs survive without ids",
                        g.file
                    ));
                }
                "yes".to_owned()
            }
            Err(why) => format!("no: {why}"),
        };
        writeln!(
            table,
            "| `{}` | {} | {records} | {} | {errors} | {interrupted} | {} | {figure} | {} | {held} |",
            g.file,
            g.format,
            with.pairs.len(),
            strategies(&with.records),
            strategies(&without.records),
        )
        .unwrap();
    }
    println!("{table}");
    assert!(failures.is_empty(), "{failures:#?}");
    table
}

#[test]
fn golden_fixtures_and_id_free_pairing() {
    let Some(dir) = fixtures() else { return };
    let table = measure(&dir, &FIXTURE_CASES);
    check_doc("fixtures", &table);
}

#[test]
fn golden_samples_and_id_free_pairing() {
    let dir = PathBuf::from(SAMPLES);
    let table = measure(&dir, &SAMPLE_CASES);
    check_doc("samples", &table);
}

/// The table `name` in docs/ADAPTERS.md must be the one measured here.
fn check_doc(name: &str, table: &str) {
    let begin =
        format!("<!-- {name}-table:begin (generated by crates/adapters/tests/golden.rs) -->");
    let end = format!("<!-- {name}-table:end -->");
    let doc = std::fs::read_to_string(DOC).unwrap_or_default();
    let (Some(b), Some(e)) = (doc.find(&begin), doc.find(&end)) else {
        panic!("{DOC} has no {name} table markers; add `{begin}` and `{end}` where the table goes");
    };
    let current = doc[b + begin.len()..e].trim();
    if current == table.trim() {
        return;
    }
    if std::env::var_os("UPDATE_DOCS").is_some() {
        let updated = format!("{}{begin}\n{}\n{}", &doc[..b], table.trim(), &doc[e..]);
        std::fs::write(DOC, updated).unwrap();
        println!("updated the {name} table in {DOC}");
        return;
    }
    panic!(
        "the {name} table in docs/ADAPTERS.md is not what this test measured; rerun with UPDATE_DOCS=1 to rewrite it.\nmeasured:\n{table}"
    );
}
