//! What every adapter shares: the parse context (events, errors, options), the deterministic clock,
//! line, SSE and document reading, id scoping; the field readers of `fields.rs`, re-exported.

use std::collections::HashMap;

use serde_json::{Map, Value};
use toolcalls_model::checksum::checksum_of_encoded;
use toolcalls_model::{
    checksum_of, Announce, CallId, Checksum, Completion, Event, EventBody, SessionId, Source,
    ThreadId, Timestamp, TurnEnd, TurnId,
};

use crate::depth::bound_depth;
pub(crate) use crate::fields::{
    excerpt, first_of, id_field, loose_time, loose_time_field, rfc3339_field, seconds_field,
    str_field, text_field, text_of,
};
use crate::stamps::Stamps;
use crate::{Format, LineError, Options, Parsed};

/// Clears the optional texts of an event's body that a native input gave as `""` (an OTLP
/// `gen_ai.agent.name` attribute set to nothing, say): events never hold an empty one, and the
/// processor refuses an event that does, so an empty value is read as no value.
fn drop_empty_texts(body: &mut EventBody) {
    fn clear(text: &mut Option<String>) {
        if text.as_deref() == Some("") {
            *text = None;
        }
    }
    match body {
        EventBody::Announce(a) => {
            clear(&mut a.agent);
            clear(&mut a.execution);
            if let Some(effects) = a.side_effects.as_mut() {
                clear(&mut effects.idempotency_key);
            }
        }
        EventBody::Completion(c) => clear(&mut c.tool),
        EventBody::ExecutionStart(x) => clear(&mut x.tool),
        EventBody::ExecutionEnd(x) => clear(&mut x.tool),
        EventBody::Approval(a) => {
            clear(&mut a.tool);
            clear(&mut a.by);
        }
        EventBody::HookDecision(h) => {
            clear(&mut h.tool);
            clear(&mut h.policy_id);
            clear(&mut h.policy_version);
        }
        EventBody::TurnEnd(_) | EventBody::TurnAborted(_) => {}
    }
}

/// The state of one [`crate::parse`] call, or of one [`crate::Stream`] for as long as it lives.
pub(crate) struct Ctx {
    file: String,
    opts: Options,
    source: Source,
    /// The session when the file names none: `--session`, else the file stem.
    default_session: String,
    events: Vec<Event>,
    errors: Vec<LineError>,
    skipped: usize,
    pub clock: Clock,
    /// What has been stamped so far: it outlives a [`Ctx::take`].
    stamps: Stamps,
}

/// The envelope of an event being built. Empty strings count as absent (the wire refuses them).
#[derive(Debug, Clone, Default)]
pub(crate) struct Envelope {
    pub session: Option<String>,
    pub thread: Option<String>,
    pub turn: Option<String>,
    pub call_id: Option<String>,
    pub time: Timestamp,
    pub attributes: Option<Map<String, Value>>,
}

impl Ctx {
    pub fn new(format: Format, name: &str, opts: &Options) -> Ctx {
        Ctx {
            file: name.to_owned(),
            opts: opts.clone(),
            source: Source::from(format.source()),
            default_session: opts.session.clone().unwrap_or_else(|| file_stem(name)),
            events: Vec::new(),
            errors: Vec::new(),
            skipped: 0,
            clock: Clock::new(opts.base_time.unwrap_or_default()),
            stamps: Stamps::default(),
        }
    }

    /// The session to use when the input names none.
    pub fn default_session(&self) -> &str {
        &self.default_session
    }

    /// The session an event naming `session` (or none) belongs to: what adapters scope ids and
    /// histories by.
    pub fn session_or_default(&self, session: &Option<String>) -> String {
        session
            .clone()
            .unwrap_or_else(|| self.default_session.clone())
    }

    /// Reports a malformed line; parsing goes on.
    pub fn error(&mut self, line: usize, message: impl Into<String>) {
        self.errors.push(LineError {
            file: self.file.clone(),
            line,
            at: None,
            message: message.into(),
        });
    }

    /// Reports a malformed part of a document (`at` is a JSON path); parsing goes on.
    pub fn error_at(&mut self, line: usize, at: impl Into<String>, message: impl Into<String>) {
        self.errors.push(LineError {
            file: self.file.clone(),
            line,
            at: Some(at.into()),
            message: message.into(),
        });
    }

    /// Counts a row that holds nothing for the ledger.
    pub fn skip(&mut self) {
        self.skipped += 1;
    }

    /// Appends an event; returns its index.
    pub fn emit(&mut self, env: Envelope, mut body: EventBody) -> usize {
        let session = env
            .session
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| self.default_session.clone());
        let mut attributes = env.attributes.filter(|a| !a.is_empty());
        if let Some(a) = attributes.as_mut() {
            bound_depth(a);
        }
        if let EventBody::Announce(Announce {
            hook_context: Some(h),
            ..
        }) = &mut body
        {
            bound_depth(h);
        }
        drop_empty_texts(&mut body);
        self.events.push(Event {
            source: self.source.clone(),
            session: SessionId::from(session),
            thread: non_empty(env.thread).map(ThreadId::from),
            turn: non_empty(env.turn).map(TurnId::from),
            call_id: non_empty(env.call_id).map(CallId),
            time: env.time,
            attributes,
            body,
        });
        self.events.len() - 1
    }

    pub fn announce(&mut self, env: Envelope, tool: &str, args: Option<Value>) -> usize {
        self.emit(env, EventBody::Announce(announce(tool, args)))
    }

    /// [`Ctx::announce`] for a format that carries its arguments as `wire` says.
    pub fn announce_as(
        &mut self,
        env: Envelope,
        tool: &str,
        args: Option<Value>,
        wire: ArgsWire,
    ) -> usize {
        self.emit(env, EventBody::Announce(announce_as(tool, args, wire)))
    }

    pub fn complete(&mut self, env: Envelope, c: Completion) -> usize {
        self.emit(env, EventBody::Completion(c))
    }

    pub fn turn_end(&mut self, env: Envelope, reason: Option<String>) -> usize {
        self.emit(env, EventBody::TurnEnd(TurnEnd { reason }))
    }

    pub fn turn_aborted(&mut self, env: Envelope, reason: Option<String>) -> usize {
        self.emit(env, EventBody::TurnAborted(TurnEnd { reason }))
    }

    /// The events so far (adapters that post-process, e.g. to attach progress rows, use it).
    pub fn events_mut(&mut self) -> &mut Vec<Event> {
        &mut self.events
    }

    /// Parses one line of a JSON-lines file. Blank lines give `None` silently; anything else that
    /// is not a JSON value is reported.
    pub fn json_line(&mut self, line: usize, bytes: &[u8]) -> Option<Value> {
        let text = match std::str::from_utf8(bytes) {
            Ok(t) => t.trim(),
            Err(e) => {
                self.error(
                    line,
                    format!("line is not valid UTF-8 ({e}); the file must be UTF-8 text"),
                );
                return None;
            }
        };
        if text.is_empty() {
            return None;
        }
        match crate::value::parse(text.as_bytes()) {
            Ok(v) => Some(v),
            Err(e) if e.is_data() => {
                self.error(
                    line,
                    format!(
                        "line is JSON too deep to read ({e}): `{}`; its calls are left out",
                        excerpt(text)
                    ),
                );
                None
            }
            Err(e) => {
                self.error(
                    line,
                    format!(
                        "line is not JSON ({e}): `{}`; each line must be one JSON value — check --format",
                        excerpt(text)
                    ),
                );
                None
            }
        }
    }

    /// [`json_line`](Self::json_line) for formats whose every line is an object: any other JSON
    /// value is reported as not `what` (a Claude Code transcript row, …).
    pub fn json_object_line(&mut self, line: usize, bytes: &[u8], what: &str) -> Option<Value> {
        let value = self.json_line(line, bytes)?;
        if !value.is_object() {
            self.error(line, format!("expected a JSON object per line ({what})"));
            return None;
        }
        Some(value)
    }

    /// Parses a whole file as one JSON document, reporting where it breaks.
    pub fn json_document(&mut self, input: &[u8]) -> Option<Value> {
        match crate::value::parse(input) {
            Ok(v) => Some(v),
            Err(e) => {
                let line = e.line().max(1);
                self.error(
                    line,
                    format!("file is not a JSON document ({e}); this format is one JSON object per file — check --format"),
                );
                None
            }
        }
    }

    /// Applies the options and hands the result over.
    pub fn finish(mut self) -> Parsed {
        self.take()
    }

    /// Hands over what was read since the last call, with the options applied. The events handed
    /// over are final: nothing read later changes them.
    pub fn take(&mut self) -> Parsed {
        let mut events = std::mem::take(&mut self.events);
        for e in &mut events {
            if let Some(source) = &self.opts.source {
                e.source = Source::new(source.as_str());
            }
            if let Some(session) = &self.opts.session {
                e.session = SessionId::new(session.as_str());
            }
            if self.opts.drop_ids {
                e.call_id = None;
            }
        }
        self.stamps.stamp(&mut events);
        // The clock rule and the stamping add milliseconds: near the end of time (a --base-time
        // in 9999) that could pass what RFC 3339 writes, and an event must carry a time it can
        // write, as its record must.
        for e in &mut events {
            e.time = e.time.within_rfc3339();
            match &mut e.body {
                EventBody::Completion(c) => {
                    c.started_at = c.started_at.map(Timestamp::within_rfc3339)
                }
                EventBody::ExecutionEnd(x) => {
                    x.started_at = x.started_at.map(Timestamp::within_rfc3339);
                }
                _ => {}
            }
        }
        Parsed {
            events,
            errors: std::mem::take(&mut self.errors),
            skipped: std::mem::take(&mut self.skipped),
        }
    }
}

/// How a format carries a call's arguments, which decides how a string among them is hashed
/// (`toolcalls_model::checksum`, "What is hashed").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ArgsWire {
    /// The arguments are the value (an object, or a string that is the argument itself: Codex and
    /// Responses `custom_tool_call` input): hashed as they are.
    Value,
    /// A string holds the arguments as JSON text (OpenAI `function.arguments`, Codex
    /// `function_call`, OTel `gen_ai.tool.call.arguments`): the value the text holds is hashed,
    /// as the ADK's OpenAI battery hashes it and as the tool receives it.
    Encoded,
}

/// The checksum of `tool` called with `args` as the format carries them.
pub(crate) fn args_checksum(tool: &str, args: &Value, wire: ArgsWire) -> Checksum {
    match (wire, args) {
        (ArgsWire::Encoded, Value::String(encoded)) => checksum_of_encoded(tool, encoded),
        _ => checksum_of(tool, Some(args)),
    }
}

/// An announce with its checksum filled in when the arguments are known.
pub(crate) fn announce(tool: &str, args: Option<Value>) -> Announce {
    announce_as(tool, args, ArgsWire::Value)
}

/// [`announce`] for a format that carries its arguments as `wire` says.
pub(crate) fn announce_as(tool: &str, args: Option<Value>, wire: ArgsWire) -> Announce {
    let checksum = args.as_ref().map(|a| args_checksum(tool, a, wire));
    Announce {
        tool: tool.to_owned(),
        args: (args).map(toolcalls_model::Json::from),
        checksum,
        ..Announce::default()
    }
}

/// A completion's correlation hints: the tool, and when the format repeats the arguments on the
/// result, the arguments and their checksum.
pub(crate) fn hints(tool: Option<&str>, args: Option<Value>) -> Completion {
    hints_as(tool, args, ArgsWire::Value)
}

/// [`hints`] for a format that carries its arguments as `wire` says.
pub(crate) fn hints_as(tool: Option<&str>, args: Option<Value>, wire: ArgsWire) -> Completion {
    let checksum = match (tool, args.as_ref()) {
        (Some(t), Some(a)) => Some(args_checksum(t, a, wire)),
        _ => None,
    };
    Completion {
        tool: tool.map(str::to_owned),
        args: (args).map(toolcalls_model::Json::from),
        checksum,
        ..Completion::default()
    }
}

/// Event time for inputs that do not carry one on every line.
///
/// The rule, documented in `docs/ADAPTERS.md`: a line that carries a time uses it; a line that does
/// not gets the last time seen before it plus the number of lines since that line, in
/// milliseconds; before any time, [`Options::base_time`] (default: the Unix epoch) plus the
/// 0-based line index. Never the wall clock.
#[derive(Debug, Clone)]
pub(crate) struct Clock {
    base: Timestamp,
    anchor: Option<(usize, Timestamp)>,
}

impl Clock {
    pub fn new(base: Timestamp) -> Clock {
        Clock { base, anchor: None }
    }

    /// The time of line `index` (0-based), given the time the line itself carries, if any.
    pub fn at(&mut self, index: usize, native: Option<Timestamp>) -> Timestamp {
        match native {
            Some(t) => {
                self.anchor = Some((index, t));
                t
            }
            None => match self.anchor {
                Some((i, t)) => t.plus_millis(index.saturating_sub(i) as u64),
                None => self.base.plus_millis(index as u64),
            },
        }
    }
}

/// Renames ids that a format reuses for different calls inside one scope.
///
/// The processor treats a second event with a call id it has already closed as a repeat, so a
/// provider that numbers calls `call_0`, `call_1`, … per response, or a JSON-RPC client that
/// restarts its ids, would lose calls. The first call with an id keeps it; the n-th call with the
/// same id in the same scope becomes `id#n`. A result names the oldest call with its id that has no
/// result yet (or, when all have one, the latest: a repeated result).
#[derive(Debug, Default)]
pub(crate) struct IdScope {
    calls: HashMap<(String, String), Vec<(String, bool)>>,
}

impl IdScope {
    /// The id to use for a new call with native id `id`.
    pub fn open(&mut self, scope: &str, id: &str) -> String {
        let list = self
            .calls
            .entry((scope.to_owned(), id.to_owned()))
            .or_default();
        let unique = if list.is_empty() {
            id.to_owned()
        } else {
            format!("{id}#{}", list.len() + 1)
        };
        list.push((unique.clone(), false));
        unique
    }

    /// The id to use for a result that names native id `id`.
    pub fn close(&mut self, scope: &str, id: &str) -> String {
        match self.calls.get_mut(&(scope.to_owned(), id.to_owned())) {
            None => id.to_owned(),
            Some(list) => {
                if let Some(entry) = list.iter_mut().find(|(_, done)| !done) {
                    entry.1 = true;
                    entry.0.clone()
                } else {
                    list.last()
                        .map_or_else(|| id.to_owned(), |(u, _)| u.clone())
                }
            }
        }
    }

    /// Whether a call with this native id is open (has no result yet) in the scope.
    pub fn pending(&self, scope: &str, id: &str) -> bool {
        self.calls
            .get(&(scope.to_owned(), id.to_owned()))
            .is_some_and(|list| list.iter().any(|(_, done)| !done))
    }
}

/// Splits input into `(1-based line number, line)` with the line ending removed.
pub(crate) fn lines(input: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    input.split(|&b| b == b'\n').enumerate().map(|(i, l)| {
        let l = l.strip_suffix(b"\r").unwrap_or(l);
        (i + 1, l)
    })
}

/// Whether the input is one pretty-printed JSON object rather than JSON lines: it opens with a `{`
/// whose first line is not a complete JSON value.
pub(crate) fn is_pretty_document(input: &[u8]) -> bool {
    let start = trim_ascii_start(input);
    start.starts_with(b"{") && !first_line_is_json(start)
}

/// The input from its first byte that is not ASCII whitespace.
pub(crate) fn trim_ascii_start(input: &[u8]) -> &[u8] {
    let start = input
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(input.len());
    &input[start..]
}

/// Whether the first line of the input is a complete JSON value.
fn first_line_is_json(input: &[u8]) -> bool {
    let first = input.split(|&b| b == b'\n').next().unwrap_or(input);
    crate::value::parse(first).is_ok()
}

/// What one line of a server-sent-events stream holds.
pub(crate) enum Sse<'a> {
    /// A JSON payload (the part after `data:`, or a bare JSON line as in recorded chunk files).
    Data(&'a [u8]),
    /// An `event:` / `id:` / `retry:` field, a comment, a blank line or `data: [DONE]`.
    Skip,
}

/// Reads one SSE line. Recorded chunk files often drop the `data: ` prefix; both forms are read.
pub(crate) fn sse(line: &[u8]) -> Sse<'_> {
    let trimmed = trim_ascii(line);
    if trimmed.is_empty() || trimmed.starts_with(b":") {
        return Sse::Skip;
    }
    for field in [&b"event:"[..], b"id:", b"retry:"] {
        if trimmed.starts_with(field) {
            return Sse::Skip;
        }
    }
    let data = match trimmed.strip_prefix(b"data:") {
        Some(rest) => trim_ascii(rest),
        None => trimmed,
    };
    if data == b"[DONE]" || data.is_empty() {
        Sse::Skip
    } else {
        Sse::Data(data)
    }
}

fn trim_ascii(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if first.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if last.is_ascii_whitespace() {
            s = rest;
        } else {
            break;
        }
    }
    s
}

/// The file name without directories and extensions; the session of files that name none.
pub(crate) fn file_stem(name: &str) -> String {
    if name == "-" || name == "<stdin>" || name.is_empty() {
        return "stdin".to_owned();
    }
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let stem = base.split('.').next().unwrap_or(base);
    if stem.is_empty() {
        base.to_owned()
    } else {
        stem.to_owned()
    }
}

pub(crate) fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.trim().is_empty())
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_near_the_end_of_time_stay_writable() {
        // Lines without times count on from --base-time: from its last millisecond, beyond what
        // RFC 3339 writes, unless held there.
        let exec = [
            r#"{"type":"thread.started","thread_id":"t"}"#,
            r#"{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"ls"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"ls","exit_code":0}}"#,
        ]
        .join("\n");
        let opts = Options {
            base_time: Some(Timestamp::MAX_RFC3339),
            ..Options::default()
        };
        let p = crate::parse(Format::CodexExec, "x.jsonl", exec.as_bytes(), &opts);
        assert_eq!(p.events.len(), 2);
        for e in &p.events {
            assert_eq!(e.time, Timestamp::MAX_RFC3339);
            assert_eq!(
                Event::decode(&e.encode()).unwrap(),
                *e,
                "reads back as it was"
            );
        }
    }

    use super::*;

    #[test]
    fn identical_idless_calls_of_one_file_get_distinct_times() {
        let opts = Options::default();
        let mut ctx = Ctx::new(Format::Gemini, "x.jsonl", &opts);
        let at = |ms| Envelope {
            time: Timestamp::from_millis(ms),
            ..Envelope::default()
        };
        let args = || Some(serde_json::json!({"path": "/a"}));
        ctx.announce(at(100), "read", args());
        ctx.announce(at(100), "read", args());
        ctx.announce(at(100), "list", args());
        ctx.announce(at(101), "read", args());
        ctx.announce(
            Envelope {
                call_id: Some("c1".into()),
                ..at(100)
            },
            "read",
            args(),
        );
        let times: Vec<i64> = ctx
            .finish()
            .events
            .iter()
            .map(|e| e.time.millis())
            .collect();
        // The second identical call moves to 101, the one at 101 to 102; another tool, and a
        // call with an id, keep their times.
        assert_eq!(times, [100, 101, 100, 102, 100]);
        // The same file again: the same times.
        let mut again = Ctx::new(Format::Gemini, "x.jsonl", &opts);
        again.announce(at(100), "read", args());
        again.announce(at(100), "read", args());
        let times: Vec<i64> = again
            .finish()
            .events
            .iter()
            .map(|e| e.time.millis())
            .collect();
        assert_eq!(times, [100, 101]);
    }

    #[test]
    fn clock_uses_native_time_then_counts_lines_from_it() {
        let mut c = Clock::new(Timestamp::from_millis(1_000));
        assert_eq!(c.at(0, None), Timestamp::from_millis(1_000));
        assert_eq!(c.at(3, None), Timestamp::from_millis(1_003));
        assert_eq!(
            c.at(5, Some(Timestamp::from_millis(50_000))),
            Timestamp::from_millis(50_000)
        );
        assert_eq!(c.at(9, None), Timestamp::from_millis(50_004));
    }

    #[test]
    fn id_scope_renames_reused_ids_and_links_results_oldest_first() {
        let mut s = IdScope::default();
        assert_eq!(s.open("a", "call_0"), "call_0");
        assert_eq!(s.open("a", "call_0"), "call_0#2");
        assert_eq!(
            s.open("b", "call_0"),
            "call_0",
            "another scope starts afresh"
        );
        assert_eq!(s.close("a", "call_0"), "call_0");
        assert_eq!(s.close("a", "call_0"), "call_0#2");
        assert_eq!(
            s.close("a", "call_0"),
            "call_0#2",
            "a repeated result names the latest call"
        );
        assert_eq!(s.close("a", "nope"), "nope");
        assert!(!s.pending("a", "call_0") && s.pending("b", "call_0"));
    }

    #[test]
    fn sse_lines_with_and_without_data_prefix() {
        assert!(matches!(sse(b"data: {\"a\":1}"), Sse::Data(b"{\"a\":1}")));
        assert!(matches!(sse(b"{\"a\":1}\r"), Sse::Data(b"{\"a\":1}")));
        assert!(matches!(sse(b"event: response.created"), Sse::Skip));
        assert!(matches!(sse(b"data: [DONE]"), Sse::Skip));
        assert!(matches!(sse(b": keep-alive"), Sse::Skip));
        assert!(matches!(sse(b"   "), Sse::Skip));
    }

    #[test]
    fn file_stems() {
        assert_eq!(file_stem("../x/rollout-1.jsonl"), "rollout-1");
        assert_eq!(file_stem("a.chunks.txt"), "a");
        assert_eq!(file_stem("-"), "stdin");
        assert_eq!(file_stem("<stdin>"), "stdin");
        assert_eq!(file_stem(".hidden"), ".hidden");
    }
}
