//! The entries of a partition's state, as kept in memory and written to the changelog.
//!
//! Pending calls are the bulk of the state, so [`Call`] is kept small: the fields most calls never
//! set live behind one pointer ([`Extras`]), the scope and the tool name are indexes into the
//! correlator's per-scope tables, the call id is held once (as the record key), and the checksum is
//! its 32 digest bytes. The changelog carries what those indexes stand for (see [`EntryRef`]).

use crate::{decimal, Position};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::sync::Arc;
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

/// An input [`Position`] in 8 bytes: the input in the top 16 bits, the offset in the other 48.
/// Holds every position of an input below 65535 at an offset in `0 .. 2^48` (a partition
/// taking a million events a second reaches 2^48 in nine years); [`Call::add_position`] keeps
/// any other in the extras. [`PackedPos::NONE`] holds none.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct PackedPos(u64);

impl PackedPos {
    pub const NONE: PackedPos = PackedPos(u64::MAX);
    const OFFSET_BITS: u32 = 48;

    pub fn new(pos: Position) -> Option<PackedPos> {
        let fits = pos.topic < u16::MAX && (0..1i64 << Self::OFFSET_BITS).contains(&pos.offset);
        fits.then(|| PackedPos((u64::from(pos.topic) << Self::OFFSET_BITS) | pos.offset as u64))
    }

    pub fn get(self) -> Option<Position> {
        (self != PackedPos::NONE).then(|| {
            Position::new(
                (self.0 >> Self::OFFSET_BITS) as u16,
                (self.0 & ((1 << Self::OFFSET_BITS) - 1)) as i64,
            )
        })
    }
}

impl std::fmt::Debug for PackedPos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

/// How many copies of its events an entry lists in its provenance (docs/ARCHITECTURE.md,
/// "The record": `provenance`). At about 10 bytes an offset in the record, 10 KiB.
pub const MAX_LISTED_REPEATS: u32 = 1_024;

/// Adds `pos` to a rarely used list: the first one allocates room for one (a `Vec` would take
/// four), later ones grow it as a `Vec` does.
pub(crate) fn push_position(positions: &mut Vec<Position>, pos: Position) {
    if positions.capacity() == 0 {
        positions.reserve_exact(1);
    }
    positions.push(pos);
}

/// Positions in JSON text (a call's [`Extras`]) as `[[topic, offset], …]`.
mod position_pairs {
    use crate::Position;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &[Position], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|p| (p.topic, p.offset)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Position>, D::Error> {
        let pairs = Vec::<(u16, i64)>::deserialize(d)?;
        Ok(pairs
            .into_iter()
            .map(|(t, o)| Position::new(t, o))
            .collect())
    }
}

/// An announced call waiting for its result.
///
/// 160 bytes (a test below holds it there; mimalloc's size class for it is the same as for the
/// 152 bytes it had before it held its first position); every call has one. What a call carries
/// only sometimes is in [`Extras`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    /// The scope, an index into the correlator's scope table (the changelog carries the key).
    pub scope: ScopeIx,
    /// The tool, an index into the scope's tool table (the changelog carries the name).
    pub tool: u32,
    /// The key the record id derives from: the call id when `has_id`, otherwise `@topic:offset`
    /// of the announce — held empty when that is [`Call::pos`] (see [`Call::record_key`]).
    pub key: Box<str>,
    pub has_id: bool,
    pub record_id: RecordId,
    pub turn: Option<Arc<str>>,
    pub args: Option<Json>,
    pub checksum: Option<Digest>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub deadline: Timestamp,
    pub cause: DeadlineCause,
    pub denied: bool,
    /// Counts of what the call took in. They saturate instead of wrapping: a changelog (which
    /// may be corrupt or foreign) can hand them back at any value.
    pub events: u32,
    pub duplicates: u32,
    pub attempts: u32,
    /// The input position of its first event (its announce), packed; the positions of the other
    /// events merged into it are in [`Extras::positions`] (see [`Call::positions`]).
    pub pos: PackedPos,
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
    /// Repeat keys (`correlator/repeats.rs`) of events without an id that went into the call
    /// and that its state cannot give again — retries collapsed into it, facts a later one
    /// replaced, the events of a waiting entry it took: its copies are told by them, pending and
    /// once closed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<u64>,
    /// Input positions of the events merged into the call besides the one in [`Call::pos`]
    /// (repeats, facts, collapsed retries, the events of a waiting result it took); a result that
    /// closes the call is not kept, it goes straight into the record.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "position_pairs"
    )]
    pub positions: Vec<Position>,
}

impl Extras {
    fn is_empty(&self) -> bool {
        *self == Extras::default()
    }
}

/// The record key of an entry without an id: `@topic:offset` of its first event.
pub(crate) fn position_key(pos: Position) -> String {
    PositionKey::of(pos).as_str().to_owned()
}

/// `@topic:offset`, written on the stack by hand: a call announced without an id has its key
/// written three times (filed, elided, recorded), and `format!` costs several times the work.
pub(crate) struct PositionKey {
    text: [u8; PositionKey::MAX],
    len: usize,
}

impl PositionKey {
    /// `@`, five digits of a `u16`, `:`, and an `i64` with its sign (20 characters).
    const MAX: usize = 27;

    pub(crate) fn of(pos: Position) -> PositionKey {
        let mut key = PositionKey {
            text: [0; Self::MAX],
            len: 0,
        };
        key.push(b'@');
        key.push_digits(u64::from(pos.topic));
        key.push(b':');
        if pos.offset < 0 {
            key.push(b'-');
        }
        key.push_digits(pos.offset.unsigned_abs());
        key
    }

    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(&self.text[..self.len]).expect("the key is ASCII")
    }

    fn push(&mut self, byte: u8) {
        self.text[self.len] = byte;
        self.len += 1;
    }

    fn push_digits(&mut self, n: u64) {
        let mut buf = [0; decimal::U64_DIGITS];
        let run = decimal::digits(n, &mut buf).as_bytes();
        self.text[self.len..self.len + run.len()].copy_from_slice(run);
        self.len += run.len();
    }
}

impl Call {
    /// The key the record id derives from ([`Call::key`], or the position it was held as).
    pub fn record_key(&self) -> std::borrow::Cow<'_, str> {
        match self.pos.get() {
            Some(pos) if self.key.is_empty() && !self.has_id => position_key(pos).into(),
            _ => (*self.key).into(),
        }
    }

    /// [`Call::record_key`], taking the key out of the call.
    pub fn take_record_key(&mut self) -> String {
        match self.record_key() {
            std::borrow::Cow::Owned(key) => key,
            std::borrow::Cow::Borrowed(_) => std::mem::take(&mut self.key).into_string(),
        }
    }

    /// Holds the key empty when it says no more than the call's first position, as the key of
    /// a call announced without an id does: 16 bytes less for every such pending call.
    pub fn elide_key(&mut self) {
        if self.has_id || !self.key.starts_with('@') {
            return;
        }
        let Some(pos) = self.pos.get() else {
            return;
        };
        if *self.key == *PositionKey::of(pos).as_str() {
            self.key = Box::default();
        }
    }

    /// The call's own id (not the ids of collapsed retries).
    pub fn call_id(&self) -> Option<&str> {
        self.has_id.then_some(&*self.key)
    }

    pub fn aliases(&self) -> &[CallId] {
        self.extras.as_ref().map_or(&[], |x| &x.aliases)
    }

    /// [`Extras::repeats`].
    pub fn kept_repeats(&self) -> &[u64] {
        self.extras.as_ref().map_or(&[], |x| &x.repeats)
    }

    /// Keeps repeat key `key` of an event that went into the call ([`Extras::repeats`]).
    pub fn keep_repeat(&mut self, key: u64) {
        if !self.kept_repeats().contains(&key) {
            self.extras_mut().repeats.push(key);
        }
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

    /// The input positions of the events merged into the call so far (in no particular order:
    /// one that did not fit [`PackedPos`] is in the extras).
    pub fn positions(&self) -> impl Iterator<Item = Position> + '_ {
        let more = self.extras.as_ref().map_or(&[][..], |x| &x.positions);
        self.pos.get().into_iter().chain(more.iter().copied())
    }

    /// Notes that an event at `pos` was merged into the call: in [`Call::pos`] if that is free
    /// and `pos` fits, else in the extras.
    pub fn add_position(&mut self, pos: Position) {
        if self.pos.get().is_none() {
            if let Some(packed) = PackedPos::new(pos) {
                self.pos = packed;
                return;
            }
        }
        push_position(&mut self.extras_mut().positions, pos);
    }

    /// Notes the positions of events merged into the call elsewhere first (a waiting result it
    /// took).
    pub fn add_positions(&mut self, positions: Vec<Position>) {
        for pos in positions {
            self.add_position(pos);
        }
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
    /// The input position of the completion.
    pub pos: Position,
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
    pub turn: Option<Arc<str>>,
    pub tool: Option<Box<str>>,
    pub args: Option<Json>,
    pub checksum: Option<Digest>,
    /// The result, once a completion came (an entry of facts alone has none).
    pub done: Option<Done>,
    pub facts: Vec<Fact>,
    /// Input positions of the events merged into it, in the order they came, but for its
    /// result's (which [`Done::pos`] holds).
    pub positions: Vec<Position>,
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

/// A call that was closed and published, remembered so repeats (by id, or by repeat key for
/// events without one) count as late and retries with the same idempotency key collapse into it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Closed {
    pub scope: ScopeIx,
    pub expires: Timestamp,
    /// Its ids, the first one filed in the scope's id table; held inline for the usual one.
    pub ids: ClosedIds,
    /// Whether the call was announced with an id of its own (its scope's calls carry ids).
    pub announced_with_id: bool,
    /// The key of its tool's name (`correlator/repeats.rs`), 0 when not known (a result that
    /// never got its call and named no tool): an announce of another tool under one of its ids is
    /// another call, refused as the same id's conflict is while a call is pending, not a repeat.
    pub tool: u16,
    /// The repeat keys of the events without an id that went into the call
    /// (`correlator/repeats.rs`): its announce, its completion.
    pub repeats: Box<[u64]>,
    /// Only for calls with an idempotency key.
    pub idem: Option<Box<Idempotent>>,
}

/// A closed call's ids: most calls have one.
pub(crate) type ClosedIds = smallvec::SmallVec<[CallId; 1]>;

/// The idempotency key of a closed call and its published record (a collapsed retry publishes a
/// new revision of it).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Idempotent {
    pub key: String,
    pub record: ToolCallRecord,
    /// Which attempt's result the record holds: 1 + the index of its id in [`Closed::ids`]
    /// (the first call's id, then each retry's in order); 0 for none. A result of a later
    /// attempt that says something else revises the record. [`Idempotent::EVERY_ATTEMPT`] for
    /// an entry written before this was kept: every result is late for it, as it then was.
    pub answered: u32,
}

impl Idempotent {
    pub const EVERY_ATTEMPT: u32 = u32::MAX;
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
    /// A scope's own clock (`correlator/clock.rs`) and the time up to which it forgot its calls
    /// (`correlator/forgotten.rs`); a scope `dropped` is a note of one: that time and its key.
    Scope {
        scope: &'a ScopeKey,
        clocks: [Option<Timestamp>; 2],
        idle: bool,
        forgot_upto: Option<Timestamp>,
        dropped: bool,
    },
    /// An event held in the reorder window (`correlator/disorder.rs`).
    Held {
        event: &'a toolcalls_model::Event,
        pos: Position,
        wall: Option<Timestamp>,
    },
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
    Scope {
        scope: ScopeKey,
        clocks: [Option<Timestamp>; 2],
        idle: bool,
        forgot_upto: Option<Timestamp>,
        dropped: bool,
    },
    Held {
        event: Box<toolcalls_model::Event>,
        pos: Position,
        wall: Option<Timestamp>,
    },
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
        assert_eq!(std::mem::size_of::<Call>(), 160);
        assert_eq!(std::mem::size_of::<Live>(), std::mem::size_of::<Call>());
        assert_eq!(std::mem::size_of::<Box<Live>>(), 8);
        // Remembered calls are held inline in a hash map, with their one id inline (most have
        // one): the id's bytes are the only other allocation.
        assert_eq!(std::mem::size_of::<Closed>(), 72);
    }

    proptest::proptest! {
        /// The hand-written key is the text `format!` gives, for any topic and offset.
        #[test]
        fn a_position_key_reads_as_formatted(topic: u16, offset: i64) {
            let key = PositionKey::of(Position::new(topic, offset));
            proptest::prop_assert_eq!(key.as_str(), format!("@{topic}:{offset}"));
        }
    }

    #[test]
    fn position_keys_at_the_edges() {
        for (topic, offset) in [
            (0, 0),
            (0, -1),
            (9, 10),
            (u16::MAX, i64::MAX),
            (u16::MAX, i64::MIN),
        ] {
            let key = PositionKey::of(Position::new(topic, offset));
            assert_eq!(key.as_str(), format!("@{topic}:{offset}"));
        }
        assert_eq!(
            PositionKey::of(Position::new(u16::MAX, i64::MIN))
                .as_str()
                .len(),
            PositionKey::MAX
        );
    }

    #[test]
    fn positions_pack_into_a_word_or_go_to_the_extras() {
        for pos in [
            Position::new(0, 0),
            Position::new(1, 41),
            Position::new(u16::MAX - 1, (1 << 48) - 1),
        ] {
            assert_eq!(PackedPos::new(pos).and_then(PackedPos::get), Some(pos));
        }
        for pos in [
            Position::new(u16::MAX, 0),
            Position::new(0, -1),
            Position::new(0, 1 << 48),
            Position::new(0, i64::MAX),
        ] {
            assert_eq!(PackedPos::new(pos), None, "{pos:?}");
        }
        assert_eq!(PackedPos::NONE.get(), None);
        let mut call = Call {
            scope: 0,
            tool: 0,
            key: "k".into(),
            has_id: true,
            record_id: toolcalls_model::RecordId(uuid::Uuid::nil()),
            turn: None,
            args: None,
            checksum: None,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
            deadline: Timestamp(0),
            cause: DeadlineCause::Timeout,
            denied: false,
            events: 1,
            duplicates: 0,
            attempts: 1,
            pos: PackedPos::NONE,
            extras: None,
        };
        let all = [
            Position::new(0, -3),
            Position::new(0, 4),
            Position::new(1, 2),
        ];
        call.add_positions(all.to_vec());
        assert_eq!(call.positions().collect::<Vec<_>>().len(), 3);
        assert_eq!(
            call.pos.get(),
            Some(Position::new(0, 4)),
            "the first that fits"
        );
        let text = serde_json::to_string(call.extras.as_deref().unwrap()).unwrap();
        assert_eq!(text, r#"{"positions":[[0,-3],[1,2]]}"#);
        let back: Extras = serde_json::from_str(&text).unwrap();
        assert_eq!(back.positions, [all[0], all[2]]);
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
