//! The entries of a partition's state, as kept in memory and written to the changelog.
//!
//! Pending calls are the bulk of the state, so [`Call`] is kept small: the fields most calls never
//! set live behind one pointer ([`Extras`]), the scope and the tool name are indexes into the
//! correlator's per-scope tables, the call id is held once (as the record key), and the checksum is
//! its 32 digest bytes. The changelog carries what those indexes stand for (see [`EntryRef`]).

use crate::Position;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toolcalls_model::{
    ApprovalState, CallId, Checksum, HookDecisionEntry, Json, RecordId, SessionId, SideEffects,
    Source, ThreadId, Timestamp, ToolCallRecord,
};

/// The correlation scope: native ids are unique only inside it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ScopeKey {
    pub source: Source,
    pub session: SessionId,
    pub thread: Option<ThreadId>,
}

/// Index of a scope in the correlator's scope table (valid while an entry of the scope exists).
pub(crate) type ScopeIx = u32;

/// A checksum held as its 32 digest bytes (the changelog writes them as they are).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Digest(pub [u8; 32]);

impl Digest {
    pub fn of(checksum: &Checksum) -> Digest {
        Digest(checksum.digest())
    }

    pub fn checksum(&self) -> Checksum {
        Checksum::from_digest(self.0)
    }
}

impl std::fmt::Debug for Digest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.checksum().as_str())
    }
}

/// Why a pending call's deadline is set: what closes the call when it passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeadlineCause {
    Timeout,
    TurnEnded,
    TurnAborted,
    Denied,
}

/// What the observability bus said about the execution. Serialized: it is part of a call's
/// [`Extras`] and of a waiting [`Fact`], which the changelog writes as JSON text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExecEnd {
    pub at: Timestamp,
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// An announced call waiting for its result.
///
/// 152 bytes (a test below holds it there); every call has one. What a call carries only
/// sometimes is in [`Extras`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    /// The scope, an index into the correlator's scope table (the changelog carries the key).
    pub scope: ScopeIx,
    /// The tool, an index into the scope's tool table (the changelog carries the name).
    pub tool: u32,
    /// The key the record id derives from: the call id when `has_id`, otherwise `@topic:offset`
    /// of the announce.
    pub key: Box<str>,
    pub has_id: bool,
    pub record_id: RecordId,
    pub turn: Option<Box<str>>,
    pub args: Option<Json>,
    pub checksum: Option<Digest>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub deadline: Timestamp,
    pub cause: DeadlineCause,
    pub denied: bool,
    pub events: u32,
    pub duplicates: u32,
    pub attempts: u32,
    pub extras: Option<Box<Extras>>,
}

/// The fields of a call that most calls never set, allocated on first use. Serialized: the
/// changelog writes them as JSON text (their types are the model's, and they are seldom there).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Extras {
    /// Ids of retries collapsed into this call by idempotency key, and of waiting events whose id
    /// an id-less call took over.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<CallId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub side_effects: Option<SideEffects>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hook_context: Option<Map<String, Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exec_end: Option<ExecEnd>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalState>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<HookDecisionEntry>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Map<String, Value>>,
}

impl Extras {
    fn is_empty(&self) -> bool {
        *self == Extras::default()
    }
}

impl Call {
    /// The call's own id (not the ids of collapsed retries).
    pub fn call_id(&self) -> Option<&str> {
        self.has_id.then_some(&*self.key)
    }

    pub fn aliases(&self) -> &[CallId] {
        self.extras.as_ref().map_or(&[], |x| &x.aliases)
    }

    /// Whether any id names this call (its own or a collapsed retry's).
    pub fn has_any_id(&self) -> bool {
        self.has_id || !self.aliases().is_empty()
    }

    pub fn idempotency_key(&self) -> Option<&str> {
        self.extras
            .as_ref()?
            .side_effects
            .as_ref()?
            .idempotency_key
            .as_deref()
    }

    pub fn started_at(&self) -> Option<Timestamp> {
        self.extras.as_ref()?.started_at
    }

    pub fn exec_end(&self) -> Option<&ExecEnd> {
        self.extras.as_ref()?.exec_end.as_ref()
    }

    pub fn approval(&self) -> Option<&ApprovalState> {
        self.extras.as_ref()?.approval.as_ref()
    }

    pub fn hooks(&self) -> &[HookDecisionEntry] {
        self.extras.as_ref().map_or(&[], |x| &x.hooks)
    }

    /// The rarely set fields, allocated on first use.
    pub fn extras_mut(&mut self) -> &mut Extras {
        self.extras.get_or_insert_with(Default::default)
    }

    /// Stores `extras` unless they hold nothing.
    pub fn set_extras(&mut self, extras: Extras) {
        self.extras = (!extras.is_empty()).then(|| Box::new(extras));
    }
}

/// The result part of a completion.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Done {
    pub at: Timestamp,
    pub result: Option<Json>,
    pub is_error: bool,
    pub cancelled: bool,
    pub started_at: Option<Timestamp>,
    pub duration_ms: Option<u64>,
}

/// A fact about a call other than its result. Serialized: the changelog writes a waiting
/// result's facts as JSON text (the tag and field names are the format).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub(crate) enum Fact {
    ExecStart {
        at: Timestamp,
    },
    ExecEnd {
        end: ExecEnd,
        started_at: Option<Timestamp>,
    },
    Approval {
        at: Timestamp,
        decision: toolcalls_model::ApprovalDecision,
        by: Option<String>,
        reason: Option<String>,
    },
    Hook {
        entry: HookDecisionEntry,
    },
}

/// Events about a call that has not been announced (yet): a result, and/or other facts — a
/// "waiting result" (docs/ARCHITECTURE.md). Events with the same call id gather in one entry;
/// events without an id get one entry each.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct WaitingResult {
    pub scope: ScopeIx,
    /// As [`Call::key`]: the call id when `has_id`, otherwise `@topic:offset` of the first event.
    pub key: Box<str>,
    pub has_id: bool,
    pub record_id: RecordId,
    pub turn: Option<Box<str>>,
    pub tool: Option<Box<str>>,
    pub args: Option<Json>,
    pub checksum: Option<Digest>,
    /// The result, once a completion came (an entry of facts alone has none).
    pub done: Option<Done>,
    pub facts: Vec<Fact>,
    pub first_at: Timestamp,
    pub updated_at: Timestamp,
    pub events: u32,
    pub duplicates: u32,
    pub deadline: Timestamp,
    pub attributes: Option<Map<String, Value>>,
}

impl WaitingResult {
    pub fn call_id(&self) -> Option<&str> {
        self.has_id.then_some(&*self.key)
    }

    /// A result with nothing to tell its call apart: only rule 4 (oldest) may link it.
    pub fn hintless(&self) -> bool {
        !self.has_id && self.checksum.is_none() && self.tool.is_none()
    }
}

/// A call that was closed and published, remembered so repeats count as duplicates and retries
/// with the same idempotency key collapse into it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Closed {
    pub scope: ScopeIx,
    pub expires: Timestamp,
    pub ids: Vec<CallId>,
    /// Only for calls with an idempotency key.
    pub idem: Option<Box<Idempotent>>,
}

/// The idempotency key of a closed call and its published record (a collapsed retry publishes a
/// new revision of it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Idempotent {
    pub key: String,
    pub record: ToolCallRecord,
}

/// Partition-wide values.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Meta {
    pub stream_time: Option<Timestamp>,
    /// Largest event time per input topic.
    pub topic_time: Vec<Option<Timestamp>>,
    pub next_seq: u64,
}

/// A pending entry, boxed in the correlator's map (one pointer per entry). A call is held inline
/// (the enum's tag sits in a niche of [`Call`], so `Live` is no larger than `Call`); a waiting
/// result is rarer and boxed once more.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Live {
    Call(Call),
    Waiting(Box<WaitingResult>),
}

/// One changelog value, as written (borrowed). The entry's scope (and a call's tool name) are
/// written beside it, as in memory they are indexes into the correlator's tables. The entry's
/// sequence number is the changelog key. The encoding is binary: see [`crate::codec`].
pub(crate) enum EntryRef<'a> {
    Call {
        scope: &'a ScopeKey,
        tool: &'a str,
        call: &'a Call,
    },
    Waiting {
        scope: &'a ScopeKey,
        waiting: &'a WaitingResult,
    },
    Closed {
        scope: &'a ScopeKey,
        closed: &'a Closed,
    },
    Meta(&'a Meta),
}

/// One changelog value, as read back.
pub(crate) enum Entry {
    Call {
        scope: ScopeKey,
        tool: Box<str>,
        /// Always a [`Live::Call`]: decoded straight into the box the correlator keeps.
        call: Box<Live>,
    },
    Waiting {
        scope: ScopeKey,
        waiting: Box<WaitingResult>,
    },
    Closed {
        scope: ScopeKey,
        closed: Box<Closed>,
    },
    Meta(Meta),
}

/// The key of the partition-wide entry.
pub(crate) const META_KEY: &str = "meta";

/// One change to a partition's state, for the compacted changelog topic.
///
/// `value` is the entry's current value (binary, see the codec), or `None` when the entry is gone (a
/// tombstone). `pos` is the input position of the last event that changed the entry; a restore
/// ignores changes whose position is beyond the committed input offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangelogOp {
    pub key: String,
    pub value: Option<Vec<u8>>,
    pub pos: Position,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sizes the memory budget of a pending call rests on (benches/processor/README.md §3).
    #[test]
    fn a_pending_call_is_one_small_allocation() {
        assert_eq!(std::mem::size_of::<Call>(), 152);
        assert_eq!(std::mem::size_of::<Live>(), std::mem::size_of::<Call>());
        assert_eq!(std::mem::size_of::<Box<Live>>(), 8);
        // Remembered calls are held inline in a B-tree: a leaf of 11 of them and their keys
        // stays under 1 KiB.
        assert_eq!(std::mem::size_of::<Closed>(), 48);
    }

    #[test]
    fn digests_round_trip_through_checksums() {
        let c = toolcalls_model::checksum_of("t", None);
        let d = Digest::of(&c);
        assert_eq!(d.checksum(), c);
        assert_eq!(Digest::of(&d.checksum()), d);
        assert_eq!(format!("{d:?}"), c.as_str());
    }
}
