//! Strict decoding: bytes → [`Event`], or the [`DecodeError`] that says why not.

use super::wire::{KindName, RawEvent};
use super::{
    Announce, Approval, ApprovalDecision, Completion, DecodeError, Event, EventBody, EventKind,
    ExecutionEnd, ExecutionStart, HookDecision, HookVerdict, TurnEnd, WIRE_VERSION,
};
use crate::ids::{CallId, SessionId, Source, ThreadId, TurnId};
use serde::Deserialize;
use std::borrow::Cow;

impl Event {
    /// Decodes and validates one message.
    pub fn decode(bytes: &[u8]) -> Result<Event, DecodeError> {
        let first = bytes.iter().position(|b| !b.is_ascii_whitespace());
        match first.map(|at| &bytes[at..]) {
            None => return Err(DecodeError::Empty),
            Some([b'{', ..]) => {}
            Some(_) if std::str::from_utf8(bytes).is_err() => return Err(DecodeError::InvalidUtf8),
            // Invisible in an editor, and serde would only say "expected value at column 1".
            Some(rest) if crate::bom::starts(rest) => {
                return Err(DecodeError::NotJson(
                    "it starts with a UTF-8 byte order mark (U+FEFF, bytes EF BB BF); write it as UTF-8 without one".into(),
                ))
            }
            Some(_) => {
                return Err(
                    match serde_json::from_slice::<serde::de::IgnoredAny>(bytes) {
                        Err(e) => classify_json_error(bytes, e),
                        Ok(_) => DecodeError::Invalid(
                            "an event is a JSON object; this message is another JSON value".into(),
                        ),
                    },
                )
            }
        }
        // Any byte that is not UTF-8 makes the message `invalid_utf8`, wherever it is; checking the
        // whole message once lets serde skip checking every string on its own.
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Err(DecodeError::InvalidUtf8);
        };
        if let Some(raw) = super::direct::read(text) {
            return Event::try_from(raw);
        }
        let raw: RawEvent = match serde_json::from_str(text) {
            Ok(raw) => raw,
            Err(e) => return Err(classify_json_error(bytes, e)),
        };
        Event::try_from(raw)
    }
}

impl Event {
    /// The source and session of the event `bytes` decodes to, found without decoding it —
    /// what splits input by session over threads before each thread decodes its own lines.
    ///
    /// Borrowed from `bytes` unless they hold escapes. `None` for anything but a JSON object that
    /// names both as strings, each once before the other is found. When [`Event::decode`] gives
    /// an event, a `Some` here is its `source` and `session`; when it refuses the message, a
    /// `Some` means nothing.
    pub fn peek_scope(bytes: &[u8]) -> Option<(Cow<'_, str>, Cow<'_, str>)> {
        super::direct::scope(bytes)
    }
}

impl EventKind {
    /// The kind named `s` on the wire.
    pub(super) fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Whether `bytes` are one JSON value (lone surrogate escapes allowed), whitespace around it.
fn is_json(bytes: &[u8]) -> bool {
    let start = bytes.len() - bytes.trim_ascii_start().len();
    crate::jsonscan::value_end(bytes, start)
        .is_some_and(|end| bytes[end..].iter().all(u8::is_ascii_whitespace))
}

fn classify_json_error(bytes: &[u8], e: serde_json::Error) -> DecodeError {
    use serde_json::error::Category;
    if std::str::from_utf8(bytes).is_err() {
        return DecodeError::InvalidUtf8;
    }
    // A message of a JSON-lines file is one line: its reader names the line, and serde's "at
    // line 1" beside that would contradict it.
    let full = e.to_string();
    let single_line = !bytes.trim_ascii_end().contains(&b'\n');
    let msg = match full.strip_suffix(&format!(" at line {} column {}", e.line(), e.column())) {
        Some(what) if single_line && e.line() == 1 => format!("{what} at column {}", e.column()),
        Some(what) if single_line => format!("{what} at the end of the line"),
        _ => full,
    };
    if msg.contains("recursion limit") {
        return DecodeError::TooDeep;
    }
    match e.classify() {
        // serde refuses an escape of half a UTF-16 pair in a string it decodes; the message may
        // still be JSON, whose grammar allows one.
        Category::Syntax if msg.contains("hex escape") && is_json(bytes) => {
            DecodeError::InvalidField(format!(
                "a text field holds a lone surrogate escape such as `\\ud800` ({msg}): valid JSON, but no Unicode text; source, session, thread, turn, callId, tool, time and the other names must be text (`args` and `result` may hold one; attributes, read as a JSON tree, may not)"
            ))
        }
        Category::Syntax | Category::Eof | Category::Io => DecodeError::NotJson(msg),
        Category::Data => {
            // A message from a newer producer fails on its new fields before we see `v`: report
            // the version, which is the real cause.
            if msg.starts_with("unknown field") {
                if let Ok(probe) = serde_json::from_slice::<VersionProbe>(bytes) {
                    if let Some(v) = probe.v {
                        if v != u64::from(WIRE_VERSION) {
                            return DecodeError::UnsupportedVersion(v.to_string());
                        }
                    }
                }
            }
            DecodeError::InvalidField(msg)
        }
    }
}

#[derive(Deserialize)]
struct VersionProbe {
    v: Option<u64>,
}

/// Which optional body fields each kind admits (the envelope fields are admitted everywhere).
/// A string field a `kind` event must have, and not as `""`.
fn required_field<T: AsRef<str>>(
    kind: &'static str,
    field: &'static str,
    value: Option<T>,
) -> Result<T, DecodeError> {
    optional(field, value)?.ok_or(DecodeError::MissingField { kind, field })
}

/// A string field the message may leave out, but not give as `""`.
fn optional<T: AsRef<str>>(
    field: &'static str,
    value: Option<T>,
) -> Result<Option<T>, DecodeError> {
    match value {
        Some(s) if s.as_ref().is_empty() => Err(DecodeError::EmptyField { field }),
        other => Ok(other),
    }
}

fn allowed(kind: EventKind, field: &str) -> bool {
    use EventKind::*;
    match field {
        "tool" => !matches!(kind, TurnEnd | TurnAborted),
        "args" => matches!(kind, Announce | Completion | Approval | HookDecision),
        "checksum" => !matches!(kind, TurnEnd | TurnAborted),
        "sideEffects" | "agent" | "execution" | "hookContext" => kind == Announce,
        "result" | "cancelled" => kind == Completion,
        "isError" | "startedAt" | "durationMs" => matches!(kind, Completion | ExecutionEnd),
        "reason" => matches!(kind, TurnEnd | TurnAborted | Approval | HookDecision),
        "decision" => matches!(kind, Approval | HookDecision),
        "by" => kind == Approval,
        "hook" | "policyId" | "policyVersion" => kind == HookDecision,
        _ => true,
    }
}

impl TryFrom<RawEvent> for Event {
    type Error = DecodeError;

    fn try_from(raw: RawEvent) -> Result<Self, DecodeError> {
        // The kind's name was matched when it was read: `Known` is a kind this build knows.
        let known = match &raw.kind {
            Some(KindName::Known(kind)) => Some(*kind),
            _ => None,
        };
        let v = raw.v.as_ref().ok_or_else(|| DecodeError::MissingField {
            kind: known.map_or("v1", EventKind::as_str),
            field: "v",
        })?;
        if v.as_u64() != Some(u64::from(WIRE_VERSION)) {
            return Err(DecodeError::UnsupportedVersion(v.to_string()));
        }
        let kind = match &raw.kind {
            None => {
                return Err(DecodeError::MissingField {
                    kind: "v1",
                    field: "kind",
                })
            }
            Some(KindName::Known(kind)) => *kind,
            Some(KindName::Unknown(name)) => {
                return Err(DecodeError::UnknownKind(name.chars().take(64).collect()))
            }
        };
        let k = kind.as_str();

        let present: [(&'static str, bool); 18] = [
            ("tool", raw.tool.is_some()),
            ("args", raw.args.is_some()),
            ("checksum", raw.checksum.is_some()),
            ("sideEffects", raw.side_effects.is_some()),
            ("agent", raw.agent.is_some()),
            ("execution", raw.execution.is_some()),
            ("hookContext", raw.hook_context.is_some()),
            ("result", raw.result.is_some()),
            ("isError", raw.is_error.is_some()),
            ("cancelled", raw.cancelled.is_some()),
            ("startedAt", raw.started_at.is_some()),
            ("durationMs", raw.duration_ms.is_some()),
            ("reason", raw.reason.is_some()),
            ("decision", raw.decision.is_some()),
            ("by", raw.by.is_some()),
            ("hook", raw.hook.is_some()),
            ("policyId", raw.policy_id.is_some()),
            ("policyVersion", raw.policy_version.is_some()),
        ];
        if let Some((field, _)) = present.iter().find(|(f, p)| *p && !allowed(kind, f)) {
            return Err(DecodeError::FieldNotAllowed { kind: k, field });
        }

        let missing = |field: &'static str| DecodeError::MissingField { kind: k, field };
        let required = |field, value: Option<String>| required_field(k, field, value);

        let source = Source(required_field(k, "source", raw.source)?);
        let session = SessionId(required_field(k, "session", raw.session)?);
        let thread = optional("thread", raw.thread)?.map(ThreadId);
        let turn = optional("turn", raw.turn)?.map(TurnId);
        let call_id = optional("callId", raw.call_id)?.map(CallId);
        let time = raw.time.ok_or(missing("time"))?;
        let tool = optional("tool", raw.tool)?;

        let body = match kind {
            EventKind::Announce
                if raw
                    .side_effects
                    .as_ref()
                    .and_then(|s| s.idempotency_key.as_deref())
                    == Some("") =>
            {
                return Err(DecodeError::EmptyField {
                    field: "sideEffects.idempotencyKey",
                })
            }
            EventKind::Announce => EventBody::Announce(Announce {
                tool: tool.ok_or(missing("tool"))?,
                args: raw.args,
                checksum: raw.checksum,
                side_effects: raw.side_effects,
                agent: optional("agent", raw.agent)?,
                execution: optional("execution", raw.execution)?,
                hook_context: raw.hook_context,
            }),
            EventKind::Completion => EventBody::Completion(Completion {
                tool,
                args: raw.args,
                checksum: raw.checksum,
                result: raw.result,
                is_error: raw.is_error.unwrap_or(false),
                cancelled: raw.cancelled.unwrap_or(false),
                started_at: raw.started_at,
                duration_ms: raw.duration_ms,
            }),
            EventKind::ExecutionStart => EventBody::ExecutionStart(ExecutionStart {
                checksum: raw.checksum.ok_or(missing("checksum"))?,
                tool,
            }),
            EventKind::ExecutionEnd => EventBody::ExecutionEnd(ExecutionEnd {
                checksum: raw.checksum.ok_or(missing("checksum"))?,
                tool,
                is_error: raw.is_error.unwrap_or(false),
                started_at: raw.started_at,
                duration_ms: raw.duration_ms,
            }),
            EventKind::TurnEnd | EventKind::TurnAborted => {
                let end = TurnEnd { reason: raw.reason };
                if kind == EventKind::TurnEnd {
                    EventBody::TurnEnd(end)
                } else {
                    EventBody::TurnAborted(end)
                }
            }
            EventKind::Approval => {
                let decision = required("decision", raw.decision)?;
                let decision = decision_named(
                    "approval",
                    &decision,
                    &APPROVAL_DECISIONS,
                    ApprovalDecision::as_str,
                )?;
                EventBody::Approval(Approval {
                    tool,
                    args: raw.args,
                    checksum: raw.checksum,
                    decision,
                    by: optional("by", raw.by)?,
                    reason: raw.reason,
                })
            }
            EventKind::HookDecision => {
                let decision = required("decision", raw.decision)?;
                let decision =
                    decision_named("hook", &decision, &HOOK_VERDICTS, HookVerdict::as_str)?;
                EventBody::HookDecision(HookDecision {
                    tool,
                    args: raw.args,
                    checksum: raw.checksum,
                    hook: required("hook", raw.hook)?,
                    decision,
                    policy_id: optional("policyId", raw.policy_id)?,
                    policy_version: optional("policyVersion", raw.policy_version)?,
                    reason: raw.reason,
                })
            }
        };

        // Approvals and hook decisions must say which call they are about.
        if let EventBody::Approval(Approval { tool, checksum, .. })
        | EventBody::HookDecision(HookDecision { tool, checksum, .. }) = &body
        {
            if call_id.is_none() && checksum.is_none() && tool.is_none() {
                return Err(DecodeError::Invalid(format!(
                    "a `{k}` event needs `callId`, `checksum` or `tool` to find its call"
                )));
            }
        }

        Ok(Event {
            source,
            session,
            thread,
            turn,
            call_id,
            time,
            attributes: raw.attributes,
            body,
        })
    }
}

const APPROVAL_DECISIONS: [ApprovalDecision; 3] = [
    ApprovalDecision::Requested,
    ApprovalDecision::Approved,
    ApprovalDecision::Denied,
];

const HOOK_VERDICTS: [HookVerdict; 3] =
    [HookVerdict::Allow, HookVerdict::Deny, HookVerdict::Modify];

/// The value among `values` whose wire name is `decision`, or the error that says which names a
/// decision of `what` (an approval, a hook) may have.
fn decision_named<T: Copy>(
    what: &str,
    decision: &str,
    values: &[T],
    name: fn(T) -> &'static str,
) -> Result<T, DecodeError> {
    values
        .iter()
        .copied()
        .find(|v| name(*v) == decision)
        .ok_or_else(|| {
            let names: Vec<&str> = values.iter().map(|v| name(*v)).collect();
            DecodeError::Invalid(format!(
                "{what} decision `{}` is not one of {}",
                decision.chars().take(32).collect::<String>(),
                names.join(", ")
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::Json;

    fn announce_with_args(args: &str) -> Vec<u8> {
        format!(r#"{{"v":1,"kind":"announce","source":"s","session":"x","time":"2026-01-01T00:00:00Z","tool":"t","args":{args}}}"#)
            .into_bytes()
    }

    #[test]
    fn arguments_are_kept_verbatim() {
        let args = r#"{"b": 12345678901234567890123, "a": 1.0}"#;
        let e = Event::decode(&announce_with_args(args)).unwrap();
        let EventBody::Announce(a) = &e.body else {
            panic!("{e:?}")
        };
        assert_eq!(a.args.as_ref().unwrap().as_str(), args);
        assert_eq!(Event::decode(&e.encode()).unwrap(), e);
        // `null` is a value (ADK hashes it), not an absent field.
        let e = Event::decode(&announce_with_args("null")).unwrap();
        let EventBody::Announce(a) = &e.body else {
            panic!()
        };
        assert_eq!(a.args.as_ref().map(Json::as_str), Some("null"));
    }

    /// A lone surrogate escape is JSON, and kept in arguments; in a text field it is refused as
    /// such, not as text that is not JSON.
    #[test]
    fn a_lone_surrogate_in_a_text_field_is_named_as_one() {
        assert!(Event::decode(&announce_with_args(r#"{"a":"\ud800"}"#)).is_ok());
        let lone = br#"{"v":1,"kind":"announce","source":"s","session":"x\ud800","time":"2026-01-01T00:00:00Z","tool":"t"}"#;
        let e = Event::decode(lone).unwrap_err();
        assert_eq!(e.reason(), "invalid_field", "{e}");
        assert!(e.to_string().contains("lone surrogate"), "{e}");
        // An escape cut short is no JSON at all.
        let short = br#"{"v":1,"kind":"announce","source":"s","session":"x\u12","time":"2026-01-01T00:00:00Z","tool":"t"}"#;
        assert_eq!(Event::decode(short).unwrap_err().reason(), "not_json");
    }

    #[test]
    fn nesting_too_deep_is_refused_inside_arguments_too() {
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        // Deeper than serde_json's 128 levels is fine in arguments (JavaScript takes it)…
        assert!(Event::decode(&announce_with_args(&deep(200))).is_ok());
        assert!(Event::decode(&announce_with_args(&deep(crate::json::MAX_DEPTH))).is_ok());
        // …up to the bound.
        assert_eq!(
            Event::decode(&announce_with_args(&deep(crate::json::MAX_DEPTH + 1))),
            Err(DecodeError::TooDeep)
        );
    }

    #[test]
    fn arguments_javascript_takes_are_kept() {
        for args in [
            r#""\ud800""#,
            r#"{"a":"\udc00\ud800"}"#,
            "1e400",
            "-1e400",
            "1e-400",
        ] {
            let e =
                Event::decode(&announce_with_args(args)).unwrap_or_else(|e| panic!("{args}: {e}"));
            let EventBody::Announce(a) = &e.body else {
                panic!("{e:?}")
            };
            assert_eq!(a.args.as_ref().map(Json::as_str), Some(args));
            assert_eq!(Event::decode(&e.encode()).unwrap(), e);
        }
    }

    #[test]
    fn reasons_are_bounded_labels() {
        assert_eq!(Event::decode(b"  ").unwrap_err().reason(), "empty");
        assert_eq!(Event::decode(b"[1]").unwrap_err().reason(), "invalid");
        assert_eq!(Event::decode(b"{").unwrap_err().reason(), "not_json");
        assert_eq!(
            Event::decode(b"{\"v\":2}").unwrap_err().reason(),
            "unsupported_version"
        );
        assert_eq!(
            Event::decode(&[b'{', 0xff, b'}']).unwrap_err().reason(),
            "invalid_utf8"
        );
        let unknown = br#"{"v":1,"kind":"announce","source":"s","session":"x","time":"2026-01-01T00:00:00Z","tool":"t","tol":1}"#;
        assert_eq!(
            Event::decode(unknown).unwrap_err().reason(),
            "invalid_field"
        );
    }

    #[test]
    fn a_message_led_by_a_byte_order_mark_is_refused_and_told_why() {
        let event = announce_with_args("{}");
        let marked = [&crate::bom::UTF8_BOM[..], &event].concat();
        let e = Event::decode(&marked).unwrap_err();
        assert_eq!(e.reason(), "not_json");
        assert!(e.to_string().contains("byte order mark"), "{e}");
        // Invalid UTF-8 anywhere is still the reason it is refused for.
        let broken = [&marked[..], &[0xff]].concat();
        assert_eq!(Event::decode(&broken).unwrap_err().reason(), "invalid_utf8");
        // The mark is only stripped from files (crate::bom): a message is decoded as it is.
        assert!(Event::decode(crate::bom::strip(&marked)).is_ok());
    }

    /// A one-line message's error says where in the line, never "at line 1" (its reader names
    /// the line of its file); a message of several lines keeps serde's line and column.
    #[test]
    fn a_syntax_error_is_placed_in_the_line() {
        let said = |text: &str| Event::decode(text.as_bytes()).unwrap_err().to_string();
        assert!(said("{\"v\":1}x").ends_with("trailing characters at column 8"));
        assert!(said("{\"v\":1,\n").ends_with("at the end of the line"));
        assert!(said("{\"v\":1,\n\"kind\":}").ends_with("at line 2 column 8"));
        assert!(!said("{\"v\":1,\"time\":\"no\"}").contains("line 1"));
    }
}
