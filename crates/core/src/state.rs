//! The entries of a partition's state, as kept in memory and written to the changelog.
//!
//! Pending calls are the bulk of the state, so [`Call`] is kept small: the fields most calls never
//! set live behind one pointer ([`More`]), the scope and the tool name are indexes into the
//! correlator's per-scope tables, the call id is held once (as the record key), and the checksum is
//! its 32 digest bytes. The changelog carries what those indexes stand for (see [`EntryRef`]).

use crate::Position;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use toolcalls_model::{
    ApprovalState, CallId, Checksum, HookDecisionEntry, Json, RecordId, SessionId, SideEffects,
    Source, ThreadId, Timestamp, ToolCallRecord,
};

/// The correlation scope: native ids are unique only inside it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub(crate) struct ScopeKey {
    pub source: Source,
    pub session: SessionId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadId>,
}

/// Index of a scope in the correlator's scope table (valid while an entry of the scope exists).
pub(crate) type ScopeIx = u32;

/// A checksum held as its 32 digest bytes. Written to the changelog as the usual hex string.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Sum(pub [u8; 32]);

impl Sum {
    pub fn of(checksum: &Checksum) -> Sum {
        Sum(checksum.digest())
    }

    pub fn checksum(&self) -> Checksum {
        Checksum::from_digest(self.0)
    }
}

impl std::fmt::Debug for Sum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.checksum().as_str())
    }
}

impl Serialize for Sum {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.checksum().serialize(s)
    }
}

impl<'de> Deserialize<'de> for Sum {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Checksum::deserialize(d).map(|c| Sum::of(&c))
    }
}

/// Why a pending call's deadline is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Deadline {
    Timeout,
    TurnEnded,
    TurnAborted,
    Denied,
}

/// What the observability bus said about the execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExecEnd {
    pub at: Timestamp,
    pub is_error: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// An announced call waiting for its result.
///
/// 152 bytes (160 with the allocator's header); every call has one. What a call carries only
/// sometimes is in [`More`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Call {
    /// The scope, an index into the correlator's scope table (the changelog carries the key).
    #[serde(skip)]
    pub scope: ScopeIx,
    /// The tool, an index into the scope's tool table (the changelog carries the name).
    #[serde(skip)]
    pub tool: u32,
    /// The key the record id derives from: the call id when `has_id`, otherwise `@topic:offset`
    /// of the announce.
    pub key: Box<str>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub has_id: bool,
    pub record_id: RecordId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Json>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<Sum>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub deadline: Timestamp,
    pub why: Deadline,
    #[serde(default)]
    pub denied: bool,
    pub events: u32,
    #[serde(default)]
    pub duplicates: u32,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub more: Option<Box<More>>,
}

/// The fields of a call that most calls never set, allocated on first use.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct More {
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

impl More {
    fn is_empty(&self) -> bool {
        *self == More::default()
    }
}

impl Call {
    /// The call's own id (not the ids of collapsed retries).
    pub fn call_id(&self) -> Option<&str> {
        self.has_id.then_some(&*self.key)
    }

    pub fn aliases(&self) -> &[CallId] {
        self.more.as_ref().map_or(&[], |m| &m.aliases)
    }

    /// Whether any id names this call (its own or a collapsed retry's).
    pub fn has_any_id(&self) -> bool {
        self.has_id || !self.aliases().is_empty()
    }

    pub fn idempotency_key(&self) -> Option<&str> {
        self.more
            .as_ref()?
            .side_effects
            .as_ref()?
            .idempotency_key
            .as_deref()
    }

    pub fn started_at(&self) -> Option<Timestamp> {
        self.more.as_ref()?.started_at
    }

    pub fn exec_end(&self) -> Option<&ExecEnd> {
        self.more.as_ref()?.exec_end.as_ref()
    }

    pub fn approval(&self) -> Option<&ApprovalState> {
        self.more.as_ref()?.approval.as_ref()
    }

    pub fn hooks(&self) -> &[HookDecisionEntry] {
        self.more.as_ref().map_or(&[], |m| &m.hooks)
    }

    /// The rarely set fields, allocated on first use.
    pub fn more_mut(&mut self) -> &mut More {
        self.more.get_or_insert_with(Default::default)
    }

    /// Stores `more` unless it holds nothing.
    pub fn set_more(&mut self, more: More) {
        self.more = (!more.is_empty()).then(|| Box::new(more));
    }
}

/// The result part of a completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Done {
    pub at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Json>,
    #[serde(default)]
    pub is_error: bool,
    #[serde(default)]
    pub cancelled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// A fact about a call other than its result.
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

/// Events about a call that has not been announced (yet): a result, and/or other facts. Events
/// with the same call id gather in one entry; events without an id get one entry each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Loose {
    #[serde(skip)]
    pub scope: ScopeIx,
    /// As [`Call::key`]: the call id when `has_id`, otherwise `@topic:offset` of the first event.
    pub key: Box<str>,
    #[serde(default, skip_serializing_if = "is_false")]
    pub has_id: bool,
    pub record_id: RecordId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<Box<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Json>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<Sum>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done: Option<Done>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub facts: Vec<Fact>,
    pub first_at: Timestamp,
    pub updated_at: Timestamp,
    pub events: u32,
    #[serde(default)]
    pub duplicates: u32,
    pub deadline: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Map<String, Value>>,
}

impl Loose {
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Closed {
    #[serde(skip)]
    pub scope: ScopeIx,
    pub expires: Timestamp,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<CallId>,
    /// Only for calls with an idempotency key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idem: Option<Box<Idempotent>>,
}

/// The idempotency key of a closed call and its published record (a collapsed retry publishes a
/// new revision of it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Idempotent {
    pub key: String,
    pub record: ToolCallRecord,
}

/// Partition-wide values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Meta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_time: Option<Timestamp>,
    /// Largest event time per input topic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topic_time: Vec<Option<Timestamp>>,
    pub next_seq: u64,
}

/// A pending entry, boxed in the correlator's map (one pointer per entry). A call is held inline
/// (the enum's tag sits in a niche of [`Call`], so `Live` is no larger than `Call`); a waiting
/// result is rarer and boxed once more.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Live {
    Call(Call),
    Loose(Box<Loose>),
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
    Loose {
        scope: &'a ScopeKey,
        loose: &'a Loose,
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
    Loose {
        scope: ScopeKey,
        loose: Box<Loose>,
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
        // Remembered calls are held inline in a B-tree: 11 of them and their keys in a leaf
        // under 1 KiB, which glibc serves from its per-thread cache.
        assert_eq!(std::mem::size_of::<Closed>(), 48);
    }

    #[test]
    fn sums_round_trip_through_hex() {
        let c = toolcalls_model::checksum_of("t", None);
        let s = Sum::of(&c);
        assert_eq!(s.checksum(), c);
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, format!("\"{}\"", c.as_str()));
        assert_eq!(serde_json::from_str::<Sum>(&json).unwrap(), s);
    }
}
