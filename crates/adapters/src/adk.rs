//! @nhtio/adk's own bus events, one JSON object per line as a listener writes them.
//!
//! The ADK has two buses on its `TurnRunner` (NHTIO/ADK `src/lib/turn_runner.ts`, the shapes in
//! `src/lib/types/turn_runner.ts`); a listener writes each payload with `JSON.stringify` — bare, or
//! wrapped as `{"event": <bus name>, "payload": <payload>}` (`type` / `data` are read too, and a
//! wrapper may add `session` and `turn`):
//!
//! - `toolCall` (functional bus, `runner.on`): a `TurnToolCallContent` `{id, tool, args, checksum,
//!   createdAt, updatedAt, results?, isComplete, isError, completedAt?}`. The dispatch runner's
//!   `reportToolCall` helper (`src/lib/dispatch_runner.ts`) emits it when the model asks for the
//!   call (`isComplete: false`) and again under the same `id` with `results` and
//!   `isComplete: true`; every emission repeats tool, args and checksum. → an announce at
//!   `createdAt` and a completion at `completedAt`, the stream `id` as the call id, the
//!   emission's `checksum` as the checksum (computed from `args` when it is still `""`).
//! - `toolExecutionStart` `{toolName, turnId, callId, args, startedAt}` and `toolExecutionEnd`
//!   `{toolName, turnId, callId, startedAt, endedAt, durationMs, isError}` (observability bus,
//!   `runner.observe`; emitted by `Tool.executor`, `src/lib/classes/tool.ts`). `callId` is the
//!   checksum `sha256(canonicalStringify({tool, args}))`, not the stream id: → `execution_start` /
//!   `execution_end` with that checksum and no call id, which the processor joins by checksum.
//!   Their `turnId` is the id of the executor's `DispatchContext` (a fresh uuid per dispatch, not
//!   the turn of `turnStart`), so it is kept as the attribute `adkTurnId`, not used as the turn.
//! - `turnStart` `{turnId, startedAt}` / `turnEnd` `{turnId, startedAt, endedAt, durationMs}`: the
//!   calls between them (while only one turn of the session is open) get that turn; `turnEnd` →
//!   `turn_end`, so calls left without a result become Interrupted.
//!
//! Other events of the buses (`message`, `thought`, `dispatchStart`, `log`, …) are skipped.
//!
//! Stream ids are kept per session; an id used again after its call completed (the ADK's scripted
//! executor numbers `tc-i0-1`, `tc-i0-2`, … afresh in every dispatch) is a new call, `id#2`. A
//! `toolCall` that is still missing its tool or args is held until an emission brings them (the
//! announce keeps the time of the first), or until the input ends.

mod fields;

use std::collections::HashMap;

use serde_json::{Map, Value};
use toolcalls_model::checksum::checksum_of_json;
use toolcalls_model::{
    Announce, Checksum, Completion, EventBody, ExecutionEnd, ExecutionStart, Json, Timestamp,
};

use crate::common::{excerpt, lines, Ctx, Envelope};
use fields::{Kind, Obj, NAME_KEYS, PAYLOAD_KEYS};

pub(crate) use fields::looks_like;

/// Reads a file of ADK bus events (see the [module docs](self)).
pub(crate) fn parse(ctx: &mut Ctx, input: &[u8]) {
    let mut state = State::default();
    for (line, bytes) in lines(input) {
        let Some(obj) = read_object(ctx, line, bytes) else {
            continue;
        };
        if let Err(message) = state.line(ctx, line - 1, &obj) {
            ctx.error(line, message);
        }
    }
    state.finish(ctx);
}

/// One line as an object, or the error that says why it is not one.
fn read_object(ctx: &mut Ctx, line: usize, bytes: &[u8]) -> Option<Obj> {
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t.trim(),
        Err(e) => {
            ctx.error(
                line,
                format!("line is not valid UTF-8 ({e}); the file must be UTF-8 text"),
            );
            return None;
        }
    };
    if text.is_empty() {
        return None;
    }
    match fields::object(text) {
        Ok(obj) => Some(obj),
        Err(e) => {
            let message = if serde_json::from_str::<&serde_json::value::RawValue>(text).is_ok() {
                format!(
                    "expected a JSON object per line (an @nhtio/adk bus event), got `{}`",
                    excerpt(text)
                )
            } else {
                format!(
                    "line is not JSON ({e}): `{}`; each line must be one JSON object — check --format",
                    excerpt(text)
                )
            };
            ctx.error(line, message);
            None
        }
    }
}

/// What the file has said so far.
#[derive(Default)]
struct State {
    /// Tool-call streams by (session, stream id).
    streams: HashMap<(String, String), Stream>,
    /// The turns of each session between their `turnStart` and `turnEnd`.
    open_turns: HashMap<String, Vec<String>>,
}

/// The call a stream id stands for now.
#[derive(Default)]
struct Stream {
    /// How many calls used this stream id so far.
    calls: usize,
    /// The call id of the current call: the stream id, `id#2` for the second call under it, …
    uid: String,
    /// The current call has emitted, and not completed.
    open: bool,
    announced: bool,
    tool: Option<String>,
    args: Option<Json>,
    checksum: Option<Checksum>,
    /// `createdAt` of its first emission (else that emission's line time).
    created: Timestamp,
    session: Option<String>,
    turn: Option<String>,
    /// Input line index of its first emission (the order of announces held to the end).
    first_index: usize,
}

impl Stream {
    /// The checksum the call is known by: the ADK's own, else computed from the args as the ADK
    /// computes it.
    fn checksum(&self) -> Option<Checksum> {
        self.checksum.clone().or_else(|| {
            let (tool, args) = (self.tool.as_deref()?, self.args.as_ref()?);
            Some(checksum_of_json(tool, Some(args)))
        })
    }

    fn envelope(&self, time: Timestamp) -> Envelope {
        Envelope {
            session: self.session.clone(),
            turn: self.turn.clone(),
            call_id: Some(self.uid.clone()),
            time,
            ..Envelope::default()
        }
    }

    fn announce(&mut self, ctx: &mut Ctx) {
        let Some(tool) = self.tool.clone() else {
            return;
        };
        let body = Announce {
            checksum: self.checksum(),
            tool,
            args: self.args.clone(),
            ..Announce::default()
        };
        ctx.emit(self.envelope(self.created), EventBody::Announce(body));
        self.announced = true;
    }

    fn complete(&self, ctx: &mut Ctx, time: Timestamp, result: Option<Json>, is_error: bool) {
        let body = Completion {
            tool: self.tool.clone(),
            args: self.args.clone(),
            checksum: self.checksum(),
            result,
            is_error,
            ..Completion::default()
        };
        ctx.emit(self.envelope(time), EventBody::Completion(body));
    }
}

/// The fields of one `toolCall` emission.
struct Emission {
    id: String,
    complete: bool,
    is_error: bool,
    tool: Option<String>,
    args: Option<Json>,
    checksum: Option<Checksum>,
    results: Option<Json>,
    created: Option<Timestamp>,
    updated: Option<Timestamp>,
    completed: Option<Timestamp>,
}

impl Emission {
    fn read(p: &Obj) -> Result<Emission, String> {
        let id = fields::name(p, "id")?.ok_or(
            "has no `id` (the stream id that ties the announce and the completion emission)",
        )?;
        let complete = fields::boolean(p, "isComplete")?
            .ok_or("has no `isComplete` (false when the model asks, true with the results)")?;
        Ok(Emission {
            id,
            complete,
            is_error: fields::boolean(p, "isError")?.unwrap_or(false),
            tool: fields::name(p, "tool")?,
            args: fields::json(p, "args")?,
            checksum: fields::checksum(p, "checksum")?,
            results: fields::json(p, "results")?,
            created: fields::time(p, "createdAt")?,
            updated: fields::time(p, "updatedAt")?,
            completed: fields::time(p, "completedAt")?,
        })
    }
}

impl State {
    /// Reads one object: a wrapped event or a bare payload.
    fn line(&mut self, ctx: &mut Ctx, index: usize, obj: &Obj) -> Result<(), String> {
        let mut name = None;
        for key in NAME_KEYS {
            if let Some(n) = fields::string(obj, key).ok().flatten() {
                name = Some(n);
                break;
            }
        }
        let payload_key = PAYLOAD_KEYS.into_iter().find(|k| obj.contains_key(*k));
        let (kind, owned, session, turn) = match (name, payload_key) {
            (Some(name), Some(key)) => {
                let kind = Kind::named(&name).ok_or_else(|| {
                    format!(
                        "`{}` is not an event of the @nhtio/adk buses (`toolCall`, \
                         `toolExecutionStart`, `toolExecutionEnd`, `turnStart`, `turnEnd`, …)",
                        excerpt(&name)
                    )
                })?;
                if kind == Kind::Other {
                    ctx.skip();
                    return Ok(());
                }
                let raw = obj[key].get();
                let payload = fields::object(raw).map_err(|_| {
                    format!(
                        "`{name}` event: `{key}` must be the event's payload object, got `{}`",
                        excerpt(raw)
                    )
                })?;
                let session = match fields::name(obj, "session")? {
                    Some(s) => Some(s),
                    None => fields::name(obj, "sessionId")?,
                };
                let turn = match fields::name(obj, "turn")? {
                    Some(t) => Some(t),
                    None => fields::name(obj, "turnId")?,
                };
                (kind, Some(payload), session, turn)
            }
            (Some(name), None) if Kind::of_ledger(&name) => {
                return Err(format!(
                    "`{name}` event has no `payload` (or `data`) object holding the event"
                ));
            }
            _ => match fields::payload_kind(|k| obj.contains_key(k)) {
                Some(Kind::Other) => {
                    ctx.skip();
                    return Ok(());
                }
                Some(kind) => (kind, None, None, None),
                None => return Err(
                    "not an @nhtio/adk bus event: expected a `toolCall` payload (`id`, `tool`, \
                         `args`, `checksum`, `isComplete`), `toolExecutionStart` / `End` \
                         (`toolName`, `callId`), `turnStart` / `turnEnd` (`turnId`), or \
                         `{\"event\": <name>, \"payload\": <payload>}`"
                        .to_owned(),
                ),
            },
        };
        let payload = owned.as_ref().unwrap_or(obj);
        let session_key = ctx.session_or_default(&session);
        let turn = turn.or_else(|| self.current_turn(&session_key));
        let at = |ctx: &mut Ctx, native: Option<Timestamp>| ctx.clock.at(index, native);
        let result = match kind {
            Kind::ToolCall => Emission::read(payload).map(|e| {
                let time = at(ctx, e.updated.or(e.completed).or(e.created));
                self.tool_call(ctx, index, e, time, session, session_key, turn);
            }),
            Kind::ExecStart => exec_start(payload).map(|(start, adk_turn, started)| {
                let time = at(ctx, started);
                ctx.emit(
                    exec_envelope(session, turn, time, adk_turn),
                    EventBody::ExecutionStart(start),
                );
            }),
            Kind::ExecEnd => exec_end(payload).map(|(end, adk_turn, ended)| {
                let time = at(ctx, ended);
                ctx.emit(
                    exec_envelope(session, turn, time, adk_turn),
                    EventBody::ExecutionEnd(end),
                );
            }),
            Kind::TurnStart => turn_times(payload, "startedAt").map(|(id, started)| {
                at(ctx, started);
                if let Some(id) = id {
                    let open = self.open_turns.entry(session_key).or_default();
                    if !open.contains(&id) {
                        open.push(id);
                    }
                }
                ctx.skip();
            }),
            Kind::TurnEnd => turn_times(payload, "endedAt").map(|(id, ended)| {
                let time = at(ctx, ended);
                if let Some(id) = &id {
                    if let Some(open) = self.open_turns.get_mut(&session_key) {
                        open.retain(|t| t != id);
                    }
                }
                let env = Envelope {
                    session,
                    turn: id.or(turn),
                    time,
                    ..Envelope::default()
                };
                ctx.turn_end(env, None);
            }),
            Kind::Other => Ok(()),
        };
        result.map_err(|e| format!("{}: {e}", kind.name()))
    }

    /// The turn of the session's calls now: its one open turn (none when several are open).
    fn current_turn(&self, session: &str) -> Option<String> {
        match self.open_turns.get(session).map(Vec::as_slice) {
            Some([one]) => Some(one.clone()),
            _ => None,
        }
    }

    /// One `toolCall` emission: a new call, an update of the open one, or its completion.
    #[allow(clippy::too_many_arguments)]
    fn tool_call(
        &mut self,
        ctx: &mut Ctx,
        index: usize,
        e: Emission,
        time: Timestamp,
        session: Option<String>,
        session_key: String,
        turn: Option<String>,
    ) {
        let stream = self.streams.entry((session_key, e.id.clone())).or_default();
        // A completion of a call already completed is the same emission again (the ADK refuses
        // updates of a completed stream): it names that call again, for the processor to dedupe.
        let repeat = e.complete && !stream.open && stream.calls > 0;
        if !stream.open && !repeat {
            stream.calls += 1;
            stream.uid = if stream.calls == 1 {
                e.id.clone()
            } else {
                format!("{}#{}", e.id, stream.calls)
            };
            stream.open = true;
            stream.announced = false;
            stream.tool = None;
            stream.args = None;
            stream.checksum = None;
            stream.created = e.created.unwrap_or(time);
            stream.session = session;
            stream.turn = turn;
            stream.first_index = index;
        }
        if e.tool.is_some() {
            stream.tool = e.tool;
        }
        if e.args.is_some() {
            stream.args = e.args;
        }
        if e.checksum.is_some() {
            stream.checksum = e.checksum;
        }
        let ready = stream.tool.is_some() && (stream.args.is_some() || stream.checksum.is_some());
        if !stream.announced && (ready || (e.complete && stream.tool.is_some())) {
            stream.announce(ctx);
        } else if !e.complete {
            // A partial emission before tool and args are known, or an update of an announced
            // call that says nothing new for the ledger.
            ctx.skip();
        }
        if e.complete {
            stream.complete(ctx, e.completed.unwrap_or(time), e.results, e.is_error);
            stream.open = false;
        }
    }

    /// The input ended: calls whose tool is known but whose args never came are announced as
    /// they are, in the order they started.
    fn finish(self, ctx: &mut Ctx) {
        let mut held: Vec<Stream> = self
            .streams
            .into_values()
            .filter(|s| s.open && !s.announced && s.tool.is_some())
            .collect();
        held.sort_by_key(|s| s.first_index);
        for mut stream in held {
            stream.announce(ctx);
        }
    }
}

/// The envelope of an execution event: no call id (the ADK's `callId` is the checksum), the
/// payload's `turnId` as an attribute.
fn exec_envelope(
    session: Option<String>,
    turn: Option<String>,
    time: Timestamp,
    adk_turn: Option<String>,
) -> Envelope {
    let attributes = adk_turn.map(|t| {
        let mut m = Map::new();
        m.insert("adkTurnId".into(), Value::String(t));
        m
    });
    Envelope {
        session,
        turn,
        time,
        attributes,
        ..Envelope::default()
    }
}

/// The `callId` of an execution event: the checksum that joins it to its call.
fn call_id(p: &Obj) -> Result<Checksum, String> {
    fields::checksum(p, "callId")?.ok_or_else(|| {
        "`callId` is empty (the ADK leaves it empty when the executor was given none); it is the \
         checksum that joins the event to its call, so the event cannot be used"
            .to_owned()
    })
}

/// A `ToolExecutionStartEvent`: the event, the payload's `turnId`, and `startedAt`.
fn exec_start(p: &Obj) -> Result<(ExecutionStart, Option<String>, Option<Timestamp>), String> {
    let start = ExecutionStart {
        checksum: call_id(p)?,
        tool: fields::name(p, "toolName")?,
    };
    Ok((
        start,
        fields::name(p, "turnId")?,
        fields::time(p, "startedAt")?,
    ))
}

/// A `ToolExecutionEndEvent`: the event, the payload's `turnId`, and when it ended (`endedAt`,
/// else `startedAt` plus `durationMs`).
fn exec_end(p: &Obj) -> Result<(ExecutionEnd, Option<String>, Option<Timestamp>), String> {
    let checksum = call_id(p)?;
    let started = fields::time(p, "startedAt")?;
    let ended = fields::time(p, "endedAt")?;
    let duration = fields::millis(p, "durationMs")?;
    let end = ExecutionEnd {
        checksum,
        tool: fields::name(p, "toolName")?,
        is_error: fields::boolean(p, "isError")?.unwrap_or(false),
        started_at: started,
        duration_ms: duration.or_else(|| Some(ended?.millis_since(started?))),
    };
    let ended = ended.or_else(|| Some(started?.plus_millis(duration?)));
    Ok((end, fields::name(p, "turnId")?, ended.or(started)))
}

/// A `TurnStartEvent` / `TurnEndEvent`: its `turnId` and the time named `key`.
fn turn_times(p: &Obj, key: &str) -> Result<(Option<String>, Option<Timestamp>), String> {
    Ok((fields::name(p, "turnId")?, fields::time(p, key)?))
}

#[cfg(test)]
mod tests {
    use crate::test_support::{kinds_and_ids, parse_str};
    use crate::Format;
    use toolcalls_model::EventKind::*;

    #[test]
    fn a_stream_held_until_its_args_come_and_an_id_used_again() {
        let p = parse_str(
            Format::Adk,
            "s.jsonl",
            concat!(
                r#"{"id":"c","tool":"","checksum":"","createdAt":"2026-05-04T10:00:00.000Z","updatedAt":"2026-05-04T10:00:00.000Z","isComplete":false,"isError":false}"#,
                "\n",
                r#"{"id":"c","tool":"add","checksum":"","createdAt":"2026-05-04T10:00:00.000Z","updatedAt":"2026-05-04T10:00:00.100Z","isComplete":false,"isError":false}"#,
                "\n",
                r#"{"id":"c","tool":"add","args":{"a":2,"b":3},"checksum":"4610788d79e4954a3ea4f2a6015dc2ec8c219c073ecebd14aeed9240515d8407","createdAt":"2026-05-04T10:00:00.000Z","updatedAt":"2026-05-04T10:00:00.200Z","isComplete":false,"isError":false}"#,
                "\n",
                r#"{"id":"c","tool":"add","args":{"a":2,"b":3},"checksum":"4610788d79e4954a3ea4f2a6015dc2ec8c219c073ecebd14aeed9240515d8407","createdAt":"2026-05-04T10:00:00.000Z","updatedAt":"2026-05-04T10:00:01.000Z","results":"5","isComplete":true,"isError":false,"completedAt":"2026-05-04T10:00:01.000Z"}"#,
                "\n",
                r#"{"id":"c","tool":"add","args":{"a":40,"b":2},"checksum":"","createdAt":"2026-05-04T10:00:02.000Z","updatedAt":"2026-05-04T10:00:02.000Z","isComplete":false,"isError":false}"#,
                "\n",
                r#"{"id":"d","tool":"slow","createdAt":"2026-05-04T10:00:03.000Z","updatedAt":"2026-05-04T10:00:03.000Z","checksum":"","isComplete":false,"isError":false}"#,
            ),
        );
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(
            kinds_and_ids(&p),
            [
                (Announce, Some("c")),
                (Completion, Some("c")),
                (Announce, Some("c#2")),
                (Announce, Some("d")),
            ]
        );
        assert_eq!(
            p.skipped, 3,
            "the emissions before tool and args were both known"
        );
        assert_eq!(
            p.events[0].time.to_rfc3339(),
            "2026-05-04T10:00:00.000Z",
            "the announce keeps the time of the first emission"
        );
        let toolcalls_model::EventBody::Announce(a) = &p.events[2].body else {
            panic!()
        };
        assert_eq!(
            a.checksum.as_ref().map(|c| c.as_str()),
            Some("8e94d1b5a6bdd3aa73097fe93251bbe3eb8c71a1438d06e6e986e6a9e59670d3"),
            "no checksum yet: computed from the args as the ADK computes it"
        );
    }
}
