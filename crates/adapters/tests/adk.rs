//! The `adk` adapter: @nhtio/adk bus events through the adapter and the correlation core.
//!
//! Two inputs:
//!
//! - `tests/data/nhtio-adk-bus-events.jsonl`, written from the documented shapes
//!   (`../shared/seeds/nhtio-adk-turn-tool-call-content.txt`: `TurnToolCallContent` with `id`,
//!   `tool`, `args`, `checksum`, `createdAt`, `updatedAt`, `results?`, `isComplete`, `isError`,
//!   `completedAt?`), each event wrapped as a listener logs it: `{"event", "session", "payload"}`.
//! - [`REAL_EMITTERS`], bare payloads written to mirror the real library's types and emitters as
//!   found in NHTIO/ADK (each line's comment names the file it mirrors).
//!
//! Every checksum in both was computed outside this project (Python's `hashlib.sha256` over the
//! canonical text `{"args":…,"tool":…}`); the tests check that the adapter carries it and that it
//! equals the project's own computation for the same tool and args.

use toolcalls_adapters::{parse, Format, Options, Parsed};
use toolcalls_core::{replay, Config, FinishMode, Outcome};
use toolcalls_model::checksum::{checksum_of, checksum_of_json};
use toolcalls_model::{EventBody, EventKind, Phase, Strategy, ToolCallRecord};

const SAMPLE: &str = include_str!("data/nhtio-adk-bus-events.jsonl");

/// Bare payloads as `runner.on('toolCall', c => log(JSON.stringify(c)))` and
/// `runner.observe(…)` write them; luxon `DateTime`s serialise as ISO 8601 with the zone's offset.
///
/// Mirrors, by line:
///
/// - 1: `turnStart` `{turnId, startedAt}` — `TurnRunner.run`, `src/lib/turn_runner.ts`.
/// - 2: `dispatchStart` `{dispatchId, startedAt}` — `DispatchRunner`,
///   `src/lib/dispatch_runner.ts` (not a tool call: skipped).
/// - 3: `toolCall` announce — `reportToolCall(id, {tool, args})` in `src/lib/dispatch_runner.ts`:
///   `{id, tool, args, checksum, createdAt, updatedAt, isComplete: false, isError: false}` (no
///   `results`, no `completedAt`); the id is the provider's (`call_…`, OpenAI Chat Completions
///   battery, `src/batteries/llm/openai_chat_completions/adapter.ts`).
/// - 4: `toolExecutionStart` `{toolName, turnId, callId, args, startedAt}` — `Tool.executor`,
///   `src/lib/classes/tool.ts`; `turnId` is the `DispatchContext`'s own id
///   (`src/lib/contracts/dispatch_context.ts`: `uuidv6()`), not the turn of line 1.
/// - 5: `toolExecutionEnd` `{toolName, turnId, callId, startedAt, endedAt, durationMs, isError}`
///   — `Tool.executor`.
/// - 6: `toolCall` completion — `reportToolCall(id, {results, isError, isComplete: true})`: the
///   same stream repeats tool, args, checksum and `createdAt`, adds `results` and `completedAt`
///   (`results` here an `ArtifactTool`'s raw string, `src/lib/types/turn_runner.ts`).
/// - 7–8: the battery's bad-arguments path
///   (`src/batteries/llm/openai_chat_completions/adapter.ts`): announce with `args: {}`, then
///   `isError: true` with the error text; no execution events.
/// - 9–12: a call whose argument holds a lone surrogate, which `JSON.stringify` writes as
///   `\ud800` and the ADK hashes as such.
/// - 13: `dispatchEnd` — skipped.
/// - 14: `turnEnd` `{turnId, startedAt, endedAt, durationMs}` — `TurnRunner.run`.
/// - 15–24: two more turns of the scripted executor (`tests/_fixtures/scripted_executor.ts`),
///   which numbers its calls `tc-i<iteration>-<n>` afresh in every dispatch: `tc-i0-1` in both.
const REAL_EMITTERS: &str = r#"{"turnId":"1f03d1e2-0a1b-6c2d-8e3f-405162738495","startedAt":"2026-05-04T10:20:00.000+02:00"}
{"dispatchId":"1f03d1e2-0a1b-6c2e-9f40-5162738495a6","startedAt":"2026-05-04T10:20:00.020+02:00"}
{"id":"call_Qm7dT2","tool":"lookup_order","args":{"orderId":"A-1042"},"checksum":"a471940e0c49053856cc384e6be14f47f5c948fc4f5c272a83fe3f8bc1a6e45b","createdAt":"2026-05-04T10:20:01.000+02:00","updatedAt":"2026-05-04T10:20:01.000+02:00","isComplete":false,"isError":false}
{"toolName":"lookup_order","turnId":"1f03d1e2-0a1c-6000-9000-a0b1c2d3e4f5","callId":"a471940e0c49053856cc384e6be14f47f5c948fc4f5c272a83fe3f8bc1a6e45b","args":{"orderId":"A-1042"},"startedAt":"2026-05-04T10:20:01.005+02:00"}
{"toolName":"lookup_order","turnId":"1f03d1e2-0a1c-6000-9000-a0b1c2d3e4f5","callId":"a471940e0c49053856cc384e6be14f47f5c948fc4f5c272a83fe3f8bc1a6e45b","startedAt":"2026-05-04T10:20:01.005+02:00","endedAt":"2026-05-04T10:20:01.345+02:00","durationMs":340,"isError":false}
{"id":"call_Qm7dT2","tool":"lookup_order","args":{"orderId":"A-1042"},"checksum":"a471940e0c49053856cc384e6be14f47f5c948fc4f5c272a83fe3f8bc1a6e45b","createdAt":"2026-05-04T10:20:01.000+02:00","updatedAt":"2026-05-04T10:20:01.350+02:00","isComplete":true,"isError":false,"results":"Order A-1042: shipped 2026-05-02, carrier DHL","completedAt":"2026-05-04T10:20:01.350+02:00"}
{"id":"call_8ZcWq1","tool":"calculator","args":{},"checksum":"bf1848f7fdc70a8edf98334cdd91e6c460507ce80d9c3d716ef40091ac6db4ff","createdAt":"2026-05-04T10:20:02.000+02:00","updatedAt":"2026-05-04T10:20:02.000+02:00","isComplete":false,"isError":false}
{"id":"call_8ZcWq1","tool":"calculator","args":{},"checksum":"bf1848f7fdc70a8edf98334cdd91e6c460507ce80d9c3d716ef40091ac6db4ff","createdAt":"2026-05-04T10:20:02.000+02:00","updatedAt":"2026-05-04T10:20:02.001+02:00","isComplete":true,"isError":true,"results":"The tool call arguments are not valid JSON","completedAt":"2026-05-04T10:20:02.001+02:00"}
{"id":"call_u1Lx0e","tool":"echo","args":{"q":"\ud800"},"checksum":"2c8f440fd40267fcfb51965338f3d673c2a904db0a449ae7b65a5a41297c66cf","createdAt":"2026-05-04T08:20:03.000Z","updatedAt":"2026-05-04T08:20:03.000Z","isComplete":false,"isError":false}
{"toolName":"echo","turnId":"1f03d1e2-0a1c-6000-9000-a0b1c2d3e4f5","callId":"2c8f440fd40267fcfb51965338f3d673c2a904db0a449ae7b65a5a41297c66cf","args":{"q":"\ud800"},"startedAt":"2026-05-04T08:20:03.002Z"}
{"toolName":"echo","turnId":"1f03d1e2-0a1c-6000-9000-a0b1c2d3e4f5","callId":"2c8f440fd40267fcfb51965338f3d673c2a904db0a449ae7b65a5a41297c66cf","startedAt":"2026-05-04T08:20:03.002Z","endedAt":"2026-05-04T08:20:03.004Z","durationMs":2,"isError":false}
{"id":"call_u1Lx0e","tool":"echo","args":{"q":"\ud800"},"checksum":"2c8f440fd40267fcfb51965338f3d673c2a904db0a449ae7b65a5a41297c66cf","createdAt":"2026-05-04T08:20:03.000Z","updatedAt":"2026-05-04T08:20:03.005Z","isComplete":true,"isError":false,"results":"\ud800","completedAt":"2026-05-04T08:20:03.005Z"}
{"dispatchId":"1f03d1e2-0a1b-6c2e-9f40-5162738495a6","startedAt":"2026-05-04T10:20:00.020+02:00","endedAt":"2026-05-04T10:20:03.100+02:00","durationMs":3080}
{"turnId":"1f03d1e2-0a1b-6c2d-8e3f-405162738495","startedAt":"2026-05-04T10:20:00.000+02:00","endedAt":"2026-05-04T10:20:03.200+02:00","durationMs":3200}
{"turnId":"1f03d1e3-1111-6000-8000-000000000002","startedAt":"2026-05-04T10:21:00.000+02:00"}
{"id":"tc-i0-1","tool":"summarize","args":{"text":"ok"},"checksum":"78a1a33c27f8e98b915e842e6d95f14fa63808babaacfdf1a5f5da216d828fff","createdAt":"2026-05-04T10:21:00.100+02:00","updatedAt":"2026-05-04T10:21:00.100+02:00","isComplete":false,"isError":false}
{"toolName":"summarize","turnId":"1f03d1e3-1111-6000-9000-0000000000d2","callId":"78a1a33c27f8e98b915e842e6d95f14fa63808babaacfdf1a5f5da216d828fff","args":{"text":"ok"},"startedAt":"2026-05-04T10:21:00.101+02:00"}
{"toolName":"summarize","turnId":"1f03d1e3-1111-6000-9000-0000000000d2","callId":"78a1a33c27f8e98b915e842e6d95f14fa63808babaacfdf1a5f5da216d828fff","startedAt":"2026-05-04T10:21:00.101+02:00","endedAt":"2026-05-04T10:21:00.111+02:00","durationMs":10,"isError":false}
{"id":"tc-i0-1","tool":"summarize","args":{"text":"ok"},"checksum":"78a1a33c27f8e98b915e842e6d95f14fa63808babaacfdf1a5f5da216d828fff","createdAt":"2026-05-04T10:21:00.100+02:00","updatedAt":"2026-05-04T10:21:00.112+02:00","isComplete":true,"isError":false,"results":"ok","completedAt":"2026-05-04T10:21:00.112+02:00"}
{"turnId":"1f03d1e3-1111-6000-8000-000000000002","startedAt":"2026-05-04T10:21:00.000+02:00","endedAt":"2026-05-04T10:21:00.200+02:00","durationMs":200}
{"turnId":"1f03d1e4-2222-6000-8000-000000000003","startedAt":"2026-05-04T10:22:00.000+02:00"}
{"id":"tc-i0-1","tool":"summarize","args":{"text":"ok"},"checksum":"78a1a33c27f8e98b915e842e6d95f14fa63808babaacfdf1a5f5da216d828fff","createdAt":"2026-05-04T10:22:00.100+02:00","updatedAt":"2026-05-04T10:22:00.100+02:00","isComplete":false,"isError":false}
{"id":"tc-i0-1","tool":"summarize","args":{"text":"ok"},"checksum":"78a1a33c27f8e98b915e842e6d95f14fa63808babaacfdf1a5f5da216d828fff","createdAt":"2026-05-04T10:22:00.100+02:00","updatedAt":"2026-05-04T10:22:00.150+02:00","isComplete":true,"isError":false,"results":"ok","completedAt":"2026-05-04T10:22:00.150+02:00"}
{"turnId":"1f03d1e4-2222-6000-8000-000000000003","startedAt":"2026-05-04T10:22:00.000+02:00","endedAt":"2026-05-04T10:22:00.200+02:00","durationMs":200}
"#;

fn parsed(name: &str, input: &str, drop_ids: bool) -> Parsed {
    let opts = Options {
        drop_ids,
        ..Options::default()
    };
    parse(Format::Adk, name, input.as_bytes(), &opts)
}

/// The events through the correlation core, as `toolcalls local` runs it; no event is refused.
fn records(p: &Parsed) -> Vec<ToolCallRecord> {
    let out = replay(
        &Config::default(),
        p.events.iter().cloned(),
        FinishMode::Deadlines,
    );
    for (i, o) in out.outcomes.iter().enumerate() {
        assert!(
            !matches!(o, Outcome::Rejected(_)),
            "event {i} refused: {o:?}"
        );
    }
    out.records
}

fn by_stream<'r>(records: &'r [ToolCallRecord], id: &str) -> &'r ToolCallRecord {
    records
        .iter()
        .find(|r| r.stream_id.as_ref().map(|c| c.as_str()) == Some(id))
        .unwrap_or_else(|| panic!("no record with stream id {id}: {records:#?}"))
}

/// What a record says, in short: tool, phase, strategy, error flag, turn, checksum, execution
/// start and duration, output.
#[derive(Debug, PartialEq)]
struct Seen<'a> {
    tool: &'a str,
    phase: Phase,
    strategy: Strategy,
    is_error: bool,
    turn: Option<&'a str>,
    checksum: Option<&'a str>,
    started_at: Option<String>,
    duration_ms: Option<u64>,
    output: Option<&'a str>,
}

fn seen(r: &ToolCallRecord) -> Seen<'_> {
    Seen {
        tool: r.spec.tool_ref.as_ref().map_or("", |t| t.name.as_str()),
        phase: r.status.phase,
        strategy: r.correlation.strategy,
        is_error: r.status.is_error,
        turn: r.metadata.turn.as_ref().map(|t| t.as_str()),
        checksum: r.checksum.as_ref().map(|c| c.as_str()),
        started_at: r.status.started_at.map(|t| t.to_rfc3339()),
        duration_ms: r.status.duration_ms,
        output: r.status.output.as_ref().map(|j| j.as_str()),
    }
}

/// Every checksum the adapter put on an event is the project's own computation over the event's
/// tool and args (and, where the args fit a `serde_json::Value`, the value-based one too).
fn checksums_are_the_projects_own(p: &Parsed) -> usize {
    let mut checked = 0;
    for e in &p.events {
        let (tool, args, checksum) = match &e.body {
            EventBody::Announce(a) => (Some(a.tool.as_str()), &a.args, &a.checksum),
            EventBody::Completion(c) => (c.tool.as_deref(), &c.args, &c.checksum),
            _ => continue,
        };
        let (Some(tool), Some(args), Some(checksum)) = (tool, args, checksum) else {
            continue;
        };
        assert_eq!(checksum, &checksum_of_json(tool, Some(args)), "{e:?}");
        if let Ok(value) = args.try_to_value() {
            assert_eq!(checksum, &checksum_of(tool, Some(&value)), "{e:?}");
        }
        checked += 1;
    }
    checked
}

const TURN: &str = "1f03c6a0-2a4e-6b10-8d3c-5a1e2b3c4d5e";

#[test]
fn documented_shapes_become_the_expected_records() {
    let p = parsed("nhtio-adk-bus-events.jsonl", SAMPLE, false);
    assert_eq!(p.errors.len(), 1, "{:?}", p.errors);
    assert_eq!(p.errors[0].line, 22);
    assert!(
        p.errors[0]
            .to_string()
            .contains("toolExecutionEnd: `callId` is empty"),
        "{}",
        p.errors[0]
    );
    // turnStart, dispatchStart, the message chunk.
    assert_eq!(p.skipped, 3);
    let kinds: Vec<EventKind> = p.events.iter().map(|e| e.kind()).collect();
    use EventKind::*;
    assert_eq!(
        kinds,
        [
            Announce,
            ExecutionStart,
            ExecutionEnd,
            Completion,
            Announce,
            ExecutionStart,
            ExecutionEnd,
            Completion,
            Announce,
            Announce,
            ExecutionStart,
            ExecutionEnd,
            Completion,
            ExecutionStart,
            ExecutionEnd,
            Completion,
            Announce,
            ExecutionStart,
            TurnEnd,
        ]
    );
    for e in &p.events {
        assert_eq!(e.session.as_str(), "support-desk-42");
        assert_eq!(e.source.as_str(), "adk");
        assert_eq!(e.turn.as_ref().map(|t| t.as_str()), Some(TURN), "{e:?}");
        if let EventBody::ExecutionStart(_) | EventBody::ExecutionEnd(_) = &e.body {
            assert_eq!(e.call_id, None, "execution events join by checksum only");
            let attrs = e.attributes.as_ref().unwrap();
            assert_eq!(
                attrs["adkTurnId"], "1f03c6a0-2b11-6c20-9e4f-6b2f3c4d5e6f",
                "the payload's turnId (the dispatch context's id) is kept, not used as the turn"
            );
        }
    }
    let EventBody::ExecutionEnd(end) = &p.events[2].body else {
        panic!()
    };
    assert_eq!(
        (
            end.checksum.as_str(),
            end.tool.as_deref(),
            end.duration_ms,
            end.started_at.map(|t| t.to_rfc3339()),
            p.events[2].time.to_rfc3339()
        ),
        (
            "301e482e5175c7e2f30c175d7df59d32098cbd3b5dcfe6dd274c7a0287ad1d74",
            Some("search_docs"),
            Some(270),
            Some("2026-05-04T08:15:01.210Z".to_owned()),
            "2026-05-04T08:15:01.480Z".to_owned()
        )
    );
    assert_eq!(checksums_are_the_projects_own(&p), 9);

    let records = records(&p);
    assert_eq!(records.len(), 5);
    let ok = |tool, checksum, started: &str, duration, output| Seen {
        tool,
        phase: Phase::Succeeded,
        strategy: Strategy::CallId,
        is_error: false,
        turn: Some(TURN),
        checksum: Some(checksum),
        started_at: Some(started.to_owned()),
        duration_ms: Some(duration),
        output: Some(output),
    };
    assert_eq!(
        seen(by_stream(&records, "call_kY3f")),
        ok(
            "search_docs",
            "301e482e5175c7e2f30c175d7df59d32098cbd3b5dcfe6dd274c7a0287ad1d74",
            "2026-05-04T08:15:01.210Z",
            270,
            r#""3 passages from refunds.md and billing-faq.md""#
        )
    );
    assert_eq!(
        seen(by_stream(&records, "call_p0Qa")),
        Seen {
            phase: Phase::Failed,
            is_error: true,
            output: Some(
                r#""E_TOOL_DOWNSTREAM_ERROR: ENOENT: no such file or directory, open '/srv/kb/refunds.md'""#
            ),
            ..ok(
                "read_file",
                "7ce6e78c9e72b27d77add7b2d2315d2c0d8eea66efbd821e60c0cf7247503be3",
                "2026-05-04T08:15:02.010Z",
                20,
                ""
            )
        }
    );
    // Two calls with the same tool and args share a checksum; each took its own execution.
    let weather = "bdfd58b6c88ba7bb48742089605d349be229e3502331bb1b685c5de2a8c9e0a1";
    let output = r#"{"city":"Oslo","tempC":7}"#;
    assert_eq!(
        seen(by_stream(&records, "call_A1")),
        ok(
            "get_weather",
            weather,
            "2026-05-04T08:15:03.010Z",
            90,
            output
        )
    );
    assert_eq!(
        seen(by_stream(&records, "call_A2")),
        ok(
            "get_weather",
            weather,
            "2026-05-04T08:15:03.120Z",
            80,
            output
        )
    );
    // Started, its end not usable, no result: the turn's end interrupts it.
    let z9 = by_stream(&records, "call_Z9");
    assert_eq!(
        seen(z9),
        Seen {
            phase: Phase::Interrupted,
            strategy: Strategy::Unmatched,
            duration_ms: None,
            output: None,
            ..ok(
                "send_email",
                "65d3eea3aa743a5cb0f97b57427fc50cd62646e455af1f2cb388cc6aa7011510",
                "2026-05-04T08:15:04.010Z",
                0,
                ""
            )
        }
    );
    assert_eq!(
        z9.spec.input.as_ref().map(|j| j.as_str()),
        Some(r#"{"to":"ops@example.com","subject":"refund"}"#),
        "arguments verbatim"
    );
}

#[test]
fn without_stream_ids_the_checksum_pairs_the_same_calls() {
    let with = records(&parsed("nhtio-adk-bus-events.jsonl", SAMPLE, false));
    let without = records(&parsed("nhtio-adk-bus-events.jsonl", SAMPLE, true));
    let summary = |rs: &[ToolCallRecord]| {
        let mut v: Vec<(String, Phase, Option<u64>)> = rs
            .iter()
            .map(|r| {
                (
                    r.status
                        .output
                        .as_ref()
                        .map_or("-".into(), |j| j.to_string()),
                    r.status.phase,
                    r.status.duration_ms,
                )
            })
            .collect();
        v.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        v
    };
    assert_eq!(summary(&with), summary(&without));
    for r in &without {
        assert!(
            matches!(
                r.correlation.strategy,
                Strategy::Checksum | Strategy::Unmatched
            ),
            "{r:?}"
        );
    }
}

#[test]
fn real_emitter_shapes_become_the_expected_records() {
    let p = parsed("adk-turn.jsonl", REAL_EMITTERS, false);
    assert!(p.errors.is_empty(), "{:?}", p.errors);
    // turnStart ×3, dispatchStart, dispatchEnd.
    assert_eq!(p.skipped, 5);
    assert!(p.events.iter().all(|e| e.session.as_str() == "adk-turn"));
    assert_eq!(checksums_are_the_projects_own(&p), 10);

    let records = records(&p);
    assert_eq!(records.len(), 5, "{records:#?}");
    let t1 = Some("1f03d1e2-0a1b-6c2d-8e3f-405162738495");
    assert_eq!(
        seen(by_stream(&records, "call_Qm7dT2")),
        Seen {
            tool: "lookup_order",
            phase: Phase::Succeeded,
            strategy: Strategy::CallId,
            is_error: false,
            turn: t1,
            checksum: Some("a471940e0c49053856cc384e6be14f47f5c948fc4f5c272a83fe3f8bc1a6e45b"),
            started_at: Some("2026-05-04T08:20:01.005Z".into()),
            duration_ms: Some(340),
            output: Some(r#""Order A-1042: shipped 2026-05-02, carrier DHL""#),
        }
    );
    // Refused by the battery before any tool ran: no execution events, a failed call (its times
    // are those of its two emissions).
    assert_eq!(
        seen(by_stream(&records, "call_8ZcWq1")),
        Seen {
            tool: "calculator",
            phase: Phase::Failed,
            strategy: Strategy::CallId,
            is_error: true,
            turn: t1,
            checksum: Some("bf1848f7fdc70a8edf98334cdd91e6c460507ce80d9c3d716ef40091ac6db4ff"),
            started_at: Some("2026-05-04T08:20:02.000Z".into()),
            duration_ms: Some(1),
            output: Some(r#""The tool call arguments are not valid JSON""#),
        }
    );
    // A lone surrogate: kept verbatim, hashed as the ADK hashes it, joined to its execution.
    let echo = by_stream(&records, "call_u1Lx0e");
    assert_eq!(
        (
            echo.spec.input.as_ref().map(|j| j.as_str()),
            echo.checksum.as_ref().map(|c| c.as_str()),
            echo.status.duration_ms,
            echo.status.phase,
        ),
        (
            Some(r#"{"q":"\ud800"}"#),
            Some("2c8f440fd40267fcfb51965338f3d673c2a904db0a449ae7b65a5a41297c66cf"),
            Some(2),
            Phase::Succeeded
        )
    );
    // The scripted executor's `tc-i0-1` in two turns: two calls (the second logged without its
    // execution events: its duration is that of its emissions).
    let first = by_stream(&records, "tc-i0-1");
    let second = by_stream(&records, "tc-i0-1#2");
    assert_eq!(
        (
            first.metadata.turn.as_ref().map(|t| t.as_str()),
            first.status.duration_ms,
            first.status.phase
        ),
        (
            Some("1f03d1e3-1111-6000-8000-000000000002"),
            Some(10),
            Phase::Succeeded
        )
    );
    assert_eq!(
        (
            second.metadata.turn.as_ref().map(|t| t.as_str()),
            second.status.duration_ms,
            second.status.phase
        ),
        (
            Some("1f03d1e4-2222-6000-8000-000000000003"),
            Some(50),
            Phase::Succeeded
        )
    );
    assert_ne!(first.metadata.name, second.metadata.name);
}

#[test]
fn detection_recognises_both_inputs() {
    assert_eq!(
        Format::detect("nhtio-adk-bus-events.jsonl", SAMPLE.as_bytes()),
        Some(Format::Adk)
    );
    assert_eq!(
        Format::detect("adk-turn.jsonl", REAL_EMITTERS.as_bytes()),
        Some(Format::Adk)
    );
}

#[test]
fn malformed_lines_give_clear_errors_and_parsing_goes_on() {
    let good = r#"{"event":"toolCall","payload":{"id":"ok","tool":"add","args":{"a":2,"b":3},"checksum":"4610788d79e4954a3ea4f2a6015dc2ec8c219c073ecebd14aeed9240515d8407","createdAt":"2026-05-04T10:00:00.000Z","updatedAt":"2026-05-04T10:00:00.000Z","isComplete":false,"isError":false}}"#;
    let deep = format!(
        r#"{{"event":"toolCall","payload":{{"id":"d","tool":"t","isComplete":false,"args":{}{}}}}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let cases: Vec<(String, &str)> = vec![
        ("not json".into(), "line is not JSON"),
        ("[1,2]".into(), "expected a JSON object per line"),
        (r#"{"event":"toolCall","payload":[1]}"#.into(), "`payload` must be the event's payload object"),
        (r#"{"event":"toolExecutionEnd"}"#.into(), "has no `payload`"),
        (r#"{"hello":"world"}"#.into(), "not an @nhtio/adk bus event"),
        (r#"{"type":"session_meta","payload":{"id":"x"}}"#.into(), "`session_meta` is not an event of the @nhtio/adk buses"),
        (r#"{"event":"toolCall","payload":{"id":"c","tool":"t"}}"#.into(), "toolCall: has no `isComplete`"),
        (r#"{"event":"toolCall","payload":{"tool":"t","isComplete":true}}"#.into(), "toolCall: has no `id`"),
        (r#"{"event":"toolCall","payload":{"id":"c","tool":"t","isComplete":"yes"}}"#.into(), "`isComplete` must be true or false"),
        (r#"{"event":"toolCall","payload":{"id":"c","tool":"t","isComplete":false,"checksum":"abc"}}"#.into(), "`checksum` is not an ADK tool-call checksum"),
        (format!(r#"{{"event":"toolCall","payload":{{"id":"c","tool":"t","isComplete":false,"checksum":"{}"}}}}"#, "A".repeat(64)), "uppercase"),
        (r#"{"event":"toolCall","payload":{"id":"c","tool":"t","isComplete":false,"createdAt":"yesterday"}}"#.into(), "`createdAt` is not a time"),
        (r#"{"event":"toolCall","payload":{"id":7,"tool":"t","isComplete":false}}"#.into(), "`id` must be a string"),
        (r#"{"toolName":"t","turnId":"d","callId":"","args":{},"startedAt":"2026-05-04T10:00:00.000Z"}"#.into(), "toolExecutionStart: `callId` is empty"),
        (r#"{"toolName":42,"turnId":"d","callId":"4610788d79e4954a3ea4f2a6015dc2ec8c219c073ecebd14aeed9240515d8407","startedAt":"2026-05-04T10:00:00.000Z"}"#.into(), "`toolName` must be a string"),
        (r#"{"toolName":"t","callId":"4610788d79e4954a3ea4f2a6015dc2ec8c219c073ecebd14aeed9240515d8407","startedAt":"2026-05-04T10:00:00.000Z","endedAt":"2026-05-04T10:00:00.000Z","durationMs":-5}"#.into(), "`durationMs` must be a number"),
        (r#"{"event":"turnEnd","payload":{"turnId":"t","endedAt":false}}"#.into(), "turnEnd: `endedAt` is not a time"),
        (deep, "`args` cannot be kept"),
    ];
    let mut input = String::new();
    for (line, _) in &cases {
        input.push_str(good);
        input.push('\n');
        input.push_str(line);
        input.push('\n');
    }
    let mut bytes = input.into_bytes();
    bytes.extend_from_slice(b"{\"event\":\"toolCall\",\"payload\":{\"id\":\"\xff\"}}\n");
    let p = parse(Format::Adk, "bad.jsonl", &bytes, &Options::default());
    let want: Vec<(usize, &str)> = cases
        .iter()
        .enumerate()
        .map(|(i, (_, what))| (2 * i + 2, *what))
        .chain([(2 * cases.len() + 1, "not valid UTF-8")])
        .collect();
    assert_eq!(p.errors.len(), want.len(), "{:#?}", p.errors);
    for (e, (line, what)) in p.errors.iter().zip(want) {
        assert_eq!(e.line, line, "{e}");
        assert!(
            e.to_string().contains(what),
            "line {line}: `{e}` should say {what}"
        );
        assert!(e.file == "bad.jsonl");
    }
    // The good lines between them are one call: the same stream, never completed, emitted again.
    let announces = p
        .events
        .iter()
        .filter(|e| e.kind() == EventKind::Announce)
        .count();
    assert_eq!(announces, 1, "the same open stream repeated is one call");
    assert_eq!(p.skipped, cases.len() - 1, "its repeats are skipped");
}
