//! The flat wire shape of an event: every field of every kind, all optional, in one struct.
//!
//! Decoding goes through it so that errors can name the field and the kind ([`super::decode`]);
//! encoding too, so both directions share one field list.

use super::{Event, EventBody, EventKind, SideEffects, WIRE_VERSION};
use crate::checksum::Checksum;
use crate::json::Json;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// The `kind` field as sent: a known kind is read without allocating; an unknown name is kept for
/// the error that names it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum KindName {
    Known(EventKind),
    Unknown(String),
}

impl KindName {
    pub(super) fn as_str(&self) -> &str {
        match self {
            KindName::Known(k) => k.as_str(),
            KindName::Unknown(name) => name,
        }
    }
}

impl Serialize for KindName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for KindName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = KindName;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<KindName, E> {
                Ok(EventKind::parse(name)
                    .map_or_else(|| KindName::Unknown(name.to_owned()), KindName::Known))
            }
        }
        d.deserialize_str(V)
    }
}

/// Declares [`RawEvent`] with the same rule for every field: `Some` when the message has it (even
/// as `null`, see [`present`]), written only when set.
macro_rules! raw_event {
    ($($field:ident: $ty:ty,)*) => {
        /// The flat wire shape: every field of every kind, all optional. Decoding goes through it
        /// so that errors can name the field and the kind; encoding too, so both directions share
        /// one field list.
        #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub(crate) struct RawEvent {
            $(
                #[serde(
                    default,
                    deserialize_with = "present",
                    skip_serializing_if = "Option::is_none"
                )]
                pub $field: Option<$ty>,
            )*
        }
    };
}

raw_event! {
    // The envelope.
    v: serde_json::Number,
    kind: KindName,
    source: String,
    session: String,
    thread: String,
    turn: String,
    call_id: String,
    time: Timestamp,
    attributes: Map<String, Value>,

    // The fields of the kinds (which kind admits which: `decode::allowed`).
    tool: String,
    args: Json,
    checksum: Checksum,
    side_effects: SideEffects,
    agent: String,
    execution: String,
    hook_context: Map<String, Value>,
    result: Json,
    is_error: bool,
    cancelled: bool,
    started_at: Timestamp,
    duration_ms: u64,
    reason: String,
    decision: String,
    by: String,
    hook: String,
    policy_id: String,
    policy_version: String,
}

/// A field that is present is `Some`, even when it is `null`: `null` is refused by typed fields
/// and kept as `Value::Null` by `args` / `result` (ADK hashes `"args":null`, not a missing `args`).
pub(super) fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

impl From<Event> for RawEvent {
    fn from(e: Event) -> RawEvent {
        let mut raw = RawEvent {
            v: Some(WIRE_VERSION.into()),
            kind: Some(KindName::Known(e.kind())),
            source: Some(e.source.0),
            session: Some(e.session.0),
            thread: e.thread.map(|t| t.0),
            turn: e.turn.map(|t| t.0),
            call_id: e.call_id.map(|c| c.0),
            time: Some(e.time),
            attributes: e.attributes,
            ..RawEvent::default()
        };
        match e.body {
            EventBody::Announce(a) => {
                raw.set_call(Some(a.tool), a.args, a.checksum);
                raw.side_effects = a.side_effects;
                raw.agent = a.agent;
                raw.execution = a.execution;
                raw.hook_context = a.hook_context;
            }
            EventBody::Completion(c) => {
                raw.set_call(c.tool, c.args, c.checksum);
                raw.result = c.result;
                raw.is_error = c.is_error.then_some(true);
                raw.cancelled = c.cancelled.then_some(true);
                raw.started_at = c.started_at;
                raw.duration_ms = c.duration_ms;
            }
            EventBody::ExecutionStart(s) => {
                raw.checksum = Some(s.checksum);
                raw.tool = s.tool;
            }
            EventBody::ExecutionEnd(s) => {
                raw.checksum = Some(s.checksum);
                raw.tool = s.tool;
                raw.is_error = s.is_error.then_some(true);
                raw.started_at = s.started_at;
                raw.duration_ms = s.duration_ms;
            }
            EventBody::TurnEnd(t) | EventBody::TurnAborted(t) => raw.reason = t.reason,
            EventBody::Approval(a) => {
                raw.set_call(a.tool, a.args, a.checksum);
                raw.decision = Some(a.decision.as_str().to_owned());
                raw.by = a.by;
                raw.reason = a.reason;
            }
            EventBody::HookDecision(h) => {
                raw.set_call(h.tool, h.args, h.checksum);
                raw.hook = Some(h.hook);
                raw.decision = Some(h.decision.as_str().to_owned());
                raw.policy_id = h.policy_id;
                raw.policy_version = h.policy_version;
                raw.reason = h.reason;
            }
        }
        raw
    }
}

impl RawEvent {
    /// Sets the fields that name a call by what it does: its tool, arguments and checksum.
    fn set_call(&mut self, tool: Option<String>, args: Option<Json>, checksum: Option<Checksum>) {
        self.tool = tool;
        self.args = args;
        self.checksum = checksum;
    }
}
