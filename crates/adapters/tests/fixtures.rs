//! Every file in `../shared/fixtures` parses without errors into the event counts SOURCES.md gives.
//!
//! The fixtures are real recordings kept outside the project (see `../shared/fixtures/SOURCES.md`);
//! when the folder is missing the test says so and passes, unless `CI` is set.

mod support;

use std::collections::BTreeSet;
use std::path::Path;

use support::fixtures;
use toolcalls_adapters::{parse, Format, Options};
use toolcalls_model::EventBody;

/// What one fixture must turn into.
struct Expect {
    file: &'static str,
    format: Format,
    announces: usize,
    completions: usize,
    /// Completions with `isError`.
    errors: usize,
    /// Completions with `cancelled`.
    cancelled: usize,
    turn_aborted: usize,
}

/// Counts from SOURCES.md. Where SOURCES.md gives no number (errors of Codex rollouts, Claude Code
/// interruptions), the number follows the adapter's documented rule and was checked by hand
/// against the file: Codex `exit_code` ≠ 0 or plain-text shell output (12 and 3), and Claude Code
/// `[Request interrupted by user]` rows (2, 0, 2).
const EXPECT: [Expect; 9] = [
    Expect {
        file: "claude-code/spotter-tool-heavy.jsonl",
        format: Format::ClaudeCode,
        announces: 6,
        completions: 6,
        errors: 0,
        cancelled: 0,
        turn_aborted: 2,
    },
    Expect {
        file: "claude-code/agentcmd-full-session-four.jsonl",
        format: Format::ClaudeCode,
        announces: 27,
        completions: 27,
        errors: 1,
        cancelled: 0,
        turn_aborted: 0,
    },
    Expect {
        file: "claude-code/agentcmd-full-session-two.jsonl",
        format: Format::ClaudeCode,
        announces: 10,
        completions: 10,
        errors: 1,
        cancelled: 0,
        turn_aborted: 2,
    },
    Expect {
        file: "codex/agentcmd-rollout-01997e76.jsonl",
        format: Format::Codex,
        announces: 123,
        completions: 123,
        errors: 12,
        cancelled: 0,
        turn_aborted: 4,
    },
    Expect {
        file: "codex/agentcmd-rollout-01997ea4.jsonl",
        format: Format::Codex,
        announces: 16,
        completions: 16,
        errors: 3,
        cancelled: 0,
        turn_aborted: 0,
    },
    Expect {
        file: "codex/agentcmd-exec-json-stream-outputs.jsonl",
        format: Format::CodexExec,
        announces: 4,
        completions: 4,
        errors: 0,
        cancelled: 0,
        turn_aborted: 0,
    },
    Expect {
        file: "gemini-cli/agentcmd-session-981c87cb.json",
        format: Format::GeminiCli,
        announces: 13,
        completions: 13,
        errors: 1,
        cancelled: 1,
        turn_aborted: 0,
    },
    Expect {
        file: "gemini-cli/agentcmd-session-453aa339.json",
        format: Format::GeminiCli,
        announces: 3,
        completions: 3,
        errors: 0,
        cancelled: 0,
        turn_aborted: 0,
    },
    Expect {
        file: "openai-responses/vercel-ai-reasoning-encrypted-content.chunks.txt",
        format: Format::OpenaiResponses,
        announces: 3,
        completions: 0,
        errors: 0,
        cancelled: 0,
        turn_aborted: 0,
    },
];

/// Each fixture with its bytes; none when the folder is missing (see [`fixtures`]).
fn read_fixtures() -> Vec<(&'static Expect, Vec<u8>)> {
    let Some(dir) = fixtures() else {
        return Vec::new();
    };
    EXPECT
        .iter()
        .map(|e| (e, std::fs::read(dir.join(e.file)).unwrap()))
        .collect()
}

fn files(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for sub in std::fs::read_dir(dir).unwrap() {
        let sub = sub.unwrap().path();
        if !sub.is_dir() {
            continue;
        }
        for f in std::fs::read_dir(&sub).unwrap() {
            let f = f.unwrap().path();
            let rel = f
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            out.insert(rel);
        }
    }
    out
}

#[test]
fn every_fixture_is_counted() {
    let Some(dir) = fixtures() else { return };
    let listed: BTreeSet<String> = EXPECT.iter().map(|e| e.file.to_owned()).collect();
    assert_eq!(
        files(&dir),
        listed,
        "a fixture was added or removed: give it its counts from SOURCES.md"
    );
}

#[test]
fn fixtures_parse_into_the_counts_of_sources_md() {
    for (e, bytes) in read_fixtures() {
        let p = parse(e.format, e.file, &bytes, &Options::default());
        assert!(p.errors.is_empty(), "{}: {:?}", e.file, p.errors);
        let (mut a, mut c, mut err, mut cancel, mut aborted) = (0, 0, 0, 0, 0);
        for ev in &p.events {
            match &ev.body {
                EventBody::Announce(_) => a += 1,
                EventBody::Completion(x) => {
                    c += 1;
                    err += usize::from(x.is_error);
                    cancel += usize::from(x.cancelled);
                }
                EventBody::TurnAborted(_) => aborted += 1,
                _ => {}
            }
            // Every event survives the wire.
            let back = toolcalls_model::Event::decode(&ev.encode())
                .unwrap_or_else(|d| panic!("{}: {d}", e.file));
            assert_eq!(&back, ev, "{}", e.file);
        }
        let got = (a, c, err, cancel, aborted);
        let want = (
            e.announces,
            e.completions,
            e.errors,
            e.cancelled,
            e.turn_aborted,
        );
        assert_eq!(
            got, want,
            "{}: (announces, completions, errors, cancelled, turn_aborted)",
            e.file
        );
    }
}

#[test]
fn fixture_formats_are_detected() {
    for (e, bytes) in read_fixtures() {
        let head = &bytes[..bytes.len().min(64 * 1024)];
        assert_eq!(Format::detect(e.file, head), Some(e.format), "{}", e.file);
    }
}

#[test]
fn ids_are_dropped_but_hints_stay() {
    for (e, bytes) in read_fixtures() {
        let with = parse(e.format, e.file, &bytes, &Options::default());
        let without = parse(
            e.format,
            e.file,
            &bytes,
            &Options {
                drop_ids: true,
                ..Options::default()
            },
        );
        assert_eq!(with.events.len(), without.events.len(), "{}", e.file);
        for (a, b) in with.events.iter().zip(&without.events) {
            assert!(b.call_id.is_none(), "{}", e.file);
            let mut a = a.clone();
            a.call_id = None;
            assert_eq!(&a, b, "{}: only the call id differs", e.file);
        }
    }
}

/// Cut points for reading a file in pieces: a small deterministic generator (xorshift), so that a
/// failure names the seed that found it.
fn cuts(len: usize, seed: u64) -> Vec<usize> {
    let mut x = seed.max(1);
    let mut at = 0;
    let mut out = Vec::new();
    while at < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Mostly small pieces (inside lines), now and then a large one.
        let step = if x % 8 == 0 { x % 20_000 } else { x % 300 } as usize + 1;
        at = (at + step).min(len);
        out.push(at);
    }
    out
}

#[test]
fn a_line_format_read_in_pieces_gives_what_it_gives_read_whole() {
    let mut streamed_any = false;
    for (e, bytes) in read_fixtures() {
        let Some(_) = toolcalls_adapters::Stream::new(e.format, e.file, &Options::default()) else {
            continue;
        };
        streamed_any = true;
        let whole = parse(e.format, e.file, &bytes, &Options::default());
        for seed in 1..=5u64 {
            let mut stream =
                toolcalls_adapters::Stream::new(e.format, e.file, &Options::default()).unwrap();
            let (mut events, mut errors, mut skipped) = (Vec::new(), Vec::new(), 0);
            let mut from = 0;
            for to in cuts(bytes.len(), seed) {
                let p = stream.push(&bytes[from..to]);
                events.extend(p.events);
                errors.extend(p.errors);
                skipped += p.skipped;
                from = to;
            }
            assert_eq!(events, whole.events, "{} (seed {seed})", e.file);
            assert_eq!(errors, whole.errors, "{} (seed {seed})", e.file);
            assert_eq!(skipped, whole.skipped, "{} (seed {seed})", e.file);
        }
    }
    if fixtures().is_some() {
        assert!(streamed_any, "no fixture of a line format");
    }
}

#[test]
fn a_fixture_saved_with_a_byte_order_mark_reads_as_without() {
    for (e, bytes) in read_fixtures() {
        let marked = [&toolcalls_model::bom::UTF8_BOM[..], &bytes].concat();
        let head = &marked[..marked.len().min(64 * 1024)];
        assert_eq!(Format::detect(e.file, head), Some(e.format), "{}", e.file);
        let whole = parse(e.format, e.file, &bytes, &Options::default());
        assert_eq!(
            parse(e.format, e.file, &marked, &Options::default()),
            whole,
            "{}",
            e.file
        );
        let Some(mut stream) =
            toolcalls_adapters::Stream::new(e.format, e.file, &Options::default())
        else {
            continue;
        };
        // The mark cut in two by the first piece, as a file being written can be.
        let (mut events, mut from) = (Vec::new(), 0);
        for to in [1, 2]
            .into_iter()
            .chain(cuts(marked.len(), 3).into_iter().filter(|&to| to > 2))
        {
            let p = stream.push(&marked[from..to]);
            assert!(p.errors.is_empty(), "{}: {:?}", e.file, p.errors);
            events.extend(p.events);
            from = to;
        }
        assert_eq!(events, whole.events, "{}", e.file);
    }
}
