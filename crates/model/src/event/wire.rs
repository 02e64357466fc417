//! The flat wire shape of an event: every field of every kind, all optional, in one struct —
//! [`RawEvent`] on the way in, [`Fields`] (borrowed from the event) on the way out, in the same
//! order.
//!
//! Decoding goes through `RawEvent` so that errors can name the field and the kind
//! ([`super::decode`]); encoding goes through `Fields`, both `Event::encode` and serde.

use super::{Event, EventBody, EventKind, SideEffects, WIRE_VERSION};
use crate::checksum::Checksum;
use crate::json::Json;
use crate::time::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;
use std::sync::Arc;

/// The `kind` field as sent: a known kind is read without allocating; an unknown name is kept for
/// the error that names it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum KindName {
    Known(EventKind),
    Unknown(String),
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
/// as `null`, see [`present`]).
macro_rules! raw_event {
    ($($field:ident: $ty:ty,)*) => {
        /// The flat wire shape as read: every field of every kind, all optional, so that errors
        /// can name the field and the kind.
        #[derive(Debug, Default, PartialEq, Deserialize)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub(crate) struct RawEvent {
            $(
                #[serde(default, deserialize_with = "present")]
                pub $field: Option<$ty>,
            )*
        }
    };
}

raw_event! {
    // The envelope.
    v: serde_json::Number,
    kind: KindName,
    source: Arc<str>,
    session: Arc<str>,
    thread: Arc<str>,
    turn: Arc<str>,
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

/// The flat wire shape as written, borrowed from an event: the fields of [`RawEvent`] in its order,
/// each written only when set.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Fields<'a> {
    pub v: u32,
    pub kind: EventKind,
    pub source: &'a str,
    pub session: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub turn: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call_id: Option<&'a str>,
    pub time: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attributes: Option<&'a Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<&'a Json>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checksum: Option<&'a Checksum>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<&'a SideEffects>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub execution: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook_context: Option<&'a Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<&'a Json>,
    /// `Some(true)` or nothing (`false` is the default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// `Some(true)` or nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cancelled: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hook: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_version: Option<&'a str>,
}

impl Event {
    /// The event's fields as written.
    pub(super) fn fields(&self) -> Fields<'_> {
        let mut f = Fields {
            v: WIRE_VERSION,
            kind: self.kind(),
            source: self.source.as_str(),
            session: self.session.as_str(),
            thread: self.thread.as_ref().map(|t| t.as_str()),
            turn: self.turn.as_ref().map(|t| t.as_str()),
            call_id: self.call_id.as_ref().map(|c| c.as_str()),
            time: self.time,
            attributes: self.attributes.as_ref(),
            tool: None,
            args: None,
            checksum: None,
            side_effects: None,
            agent: None,
            execution: None,
            hook_context: None,
            result: None,
            is_error: None,
            cancelled: None,
            started_at: None,
            duration_ms: None,
            reason: None,
            decision: None,
            by: None,
            hook: None,
            policy_id: None,
            policy_version: None,
        };
        match &self.body {
            EventBody::Announce(a) => {
                f.set_call(Some(&a.tool), a.args.as_ref(), a.checksum.as_ref());
                f.side_effects = a.side_effects.as_ref();
                f.agent = text(&a.agent);
                f.execution = text(&a.execution);
                f.hook_context = a.hook_context.as_ref();
            }
            EventBody::Completion(c) => {
                f.set_call(text(&c.tool), c.args.as_ref(), c.checksum.as_ref());
                f.result = c.result.as_ref();
                f.is_error = c.is_error.then_some(true);
                f.cancelled = c.cancelled.then_some(true);
                f.started_at = c.started_at;
                f.duration_ms = c.duration_ms;
            }
            EventBody::ExecutionStart(s) => {
                f.checksum = Some(&s.checksum);
                f.tool = text(&s.tool);
            }
            EventBody::ExecutionEnd(s) => {
                f.checksum = Some(&s.checksum);
                f.tool = text(&s.tool);
                f.is_error = s.is_error.then_some(true);
                f.started_at = s.started_at;
                f.duration_ms = s.duration_ms;
            }
            EventBody::TurnEnd(t) | EventBody::TurnAborted(t) => f.reason = text(&t.reason),
            EventBody::Approval(a) => {
                f.set_call(text(&a.tool), a.args.as_ref(), a.checksum.as_ref());
                f.decision = Some(a.decision.as_str());
                f.by = text(&a.by);
                f.reason = text(&a.reason);
            }
            EventBody::HookDecision(h) => {
                f.set_call(text(&h.tool), h.args.as_ref(), h.checksum.as_ref());
                f.hook = Some(&h.hook);
                f.decision = Some(h.decision.as_str());
                f.policy_id = text(&h.policy_id);
                f.policy_version = text(&h.policy_version);
                f.reason = text(&h.reason);
            }
        }
        f
    }
}

/// An optional text field, borrowed.
fn text(s: &Option<String>) -> Option<&str> {
    s.as_deref()
}

impl<'a> Fields<'a> {
    /// Sets the fields that name a call by what it does: its tool, arguments and checksum.
    fn set_call(
        &mut self,
        tool: Option<&'a str>,
        args: Option<&'a Json>,
        checksum: Option<&'a Checksum>,
    ) {
        self.tool = tool;
        self.args = args;
        self.checksum = checksum;
    }
}
