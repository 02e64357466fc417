//! The per-partition correlation state machine.
//!
//! # Memory
//!
//! Pending calls are the state, so what each one costs is kept down (the budget is 400 bytes per
//! call beyond its payload; `benches/processor/README.md` §3 measures it):
//!
//! - an entry is one allocation ([`Live`] in a `Box`, a [`Call`] of 152 bytes), the rarely set
//!   fields behind one more pointer;
//! - scopes live in a table and entries hold their index, so no entry holds the scope's strings and
//!   no lookup hashes them (only an event's own scope is hashed, once);
//! - tool names are held once per scope, in a tool table whose slots also list the tool's pending
//!   calls (rule 3, and rule 4 across all slots);
//! - the id, checksum and record-id indexes are hash tables of sequence numbers only: the key is read
//!   from the entry itself, to compare on lookup and to rehash on growth. An id is held once, in
//!   its entry; ids beyond an entry's first (collapsed retries) go to a small map of their own.

use crate::state::{
    Call, Closed, Deadline, Done, Entry, EntryRef, ExecEnd, Fact, Idempotent, Live, Loose, Meta,
    More, ScopeIx, ScopeKey, Sum, META_KEY,
};
use crate::{ChangelogOp, Config, Effects, Outcome, Position};
use hashbrown::HashTable;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::BuildHasher;
use toolcalls_model::checksum::digest_of_json;
use toolcalls_model::{
    Announce, ApprovalDecision, ApprovalState, CallId, Completion, Correlation, Event, EventBody,
    HookDecisionEntry, HookVerdict, Json, Metadata, Phase, RecordId, Ref, ReplayPolicy, SessionId,
    Spec, Status, Strategy, Timestamp, ToolCallRecord, TurnId,
};

/// Hash maps of the core use foldhash (seeded per process): ids and names come from producers, so
/// the hash must not be predictable, and SipHash showed up at 5 % of the core path's profile.
type Hasher = foldhash::fast::RandomState;
type HashMap<K, V> = std::collections::HashMap<K, V, Hasher>;

/// Key of the partition-wide entry in the dirty set.
const META_SEQ: u64 = u64::MAX;

/// Every entry by sequence number: the pending ones (calls and waiting results) and the
/// remembered closed calls. The indexes hold sequence numbers and read keys from here.
#[derive(Debug, Default)]
struct Entries {
    /// A hash map: the indexes read an entry's key through it on every probe and every rehash.
    live: HashMap<u64, Box<Live>>,
    /// Pending entries oldest first, for the state cap: taken from `live` when the cap first
    /// evicts, and used up before it is taken again. Entries filed meanwhile are newer than all of
    /// it (sequence numbers only grow), so its first entry still pending is the oldest one.
    evict_order: VecDeque<u64>,
    closed: BTreeMap<u64, Closed>,
}

impl Entries {
    /// The oldest pending entry (the smallest sequence number).
    fn oldest_live(&mut self) -> Option<u64> {
        loop {
            while let Some(&seq) = self.evict_order.front() {
                if self.live.contains_key(&seq) {
                    return Some(seq);
                }
                self.evict_order.pop_front();
            }
            if self.live.is_empty() {
                return None;
            }
            self.evict_order = self.live_seqs().into();
        }
    }

    /// The sequence numbers of the pending entries, oldest first.
    fn live_seqs(&self) -> Vec<u64> {
        let mut seqs: Vec<u64> = self.live.keys().copied().collect();
        seqs.sort_unstable();
        seqs
    }

    fn live(&self, seq: u64) -> Option<&Live> {
        self.live.get(&seq).map(|b| &**b)
    }

    fn live_mut(&mut self, seq: u64) -> Option<&mut Live> {
        self.live.get_mut(&seq).map(|b| &mut **b)
    }

    fn call(&self, seq: u64) -> Option<&Call> {
        match self.live(seq)? {
            Live::Call(c) => Some(c),
            Live::Loose(_) => None,
        }
    }

    fn call_mut(&mut self, seq: u64) -> Option<&mut Call> {
        match self.live_mut(seq)? {
            Live::Call(c) => Some(c),
            Live::Loose(_) => None,
        }
    }

    /// The id an entry is filed under in its scope's `ids` table: a call's or waiting result's own
    /// id, a closed call's first id.
    fn primary_id(&self, seq: u64) -> Option<&str> {
        match self.live(seq) {
            Some(Live::Call(c)) => c.call_id(),
            Some(Live::Loose(l)) => l.call_id(),
            None => self.closed.get(&seq)?.ids.first().map(CallId::as_str),
        }
    }

    fn record_id(&self, seq: u64) -> Option<RecordId> {
        match self.live(seq)? {
            Live::Call(c) => Some(c.record_id),
            Live::Loose(l) => Some(l.record_id),
        }
    }
}

/// A tool name of a scope and its pending calls (unordered; the rules pick by created time).
#[derive(Debug, Default)]
struct Tool {
    name: Box<str>,
    calls: Vec<Pending>,
}

/// A pending call as its tool slot holds it: with what rules 3 and 4 filter and order on, so
/// scanning a slot reads no entry that cannot fit. While a call is pending its created time and
/// turn never change, and an id, once it names the call, stays: a candidate the slot rules out
/// is out; one it lets through is checked against the call where the slot cannot tell for sure.
#[derive(Debug, Clone, Copy)]
struct Pending {
    seq: u64,
    created_at: Timestamp,
    /// The low bits of the turn's hash (`hs.hash_one(turn)`), if the call has a turn.
    turn: u32,
    flags: u8,
}

impl Pending {
    const HAS_TURN: u8 = 1;
    /// Set when the call had an id when it was filed; an id-less call may gain one later.
    const HAS_ID: u8 = 2;

    fn of(seq: u64, call: &Call, hs: &Hasher) -> Self {
        let mut flags = 0;
        if call.has_any_id() {
            flags |= Self::HAS_ID;
        }
        let turn = match call.turn.as_deref() {
            Some(t) => {
                flags |= Self::HAS_TURN;
                turn_hash(hs, t)
            }
            None => 0,
        };
        Pending {
            seq,
            created_at: call.created_at,
            turn,
            flags,
        }
    }

    fn turn(&self) -> Option<u32> {
        (self.flags & Self::HAS_TURN != 0).then_some(self.turn)
    }

    fn has_id(&self) -> bool {
        self.flags & Self::HAS_ID != 0
    }
}

fn turn_hash(hs: &Hasher, turn: &str) -> u32 {
    hs.hash_one(turn) as u32
}

/// The indexes of one scope. Everything here points into [`Entries`] by sequence number.
#[derive(Debug)]
struct Scope {
    key: ScopeKey,
    /// Entries (pending and closed) of this scope; at 0 the scope is dropped.
    refs: u32,
    /// Entries by their first id ([`Entries::primary_id`]): live calls, loose groups, closed calls.
    ids: HashTable<u64>,
    /// Ids beyond an entry's first (collapsed retries, ids taken over from loose groups).
    more_ids: HashMap<Box<str>, u64>,
    /// Pending calls by checksum; several calls may share one.
    by_checksum: HashTable<u64>,
    /// Tool slots; `Call::tool` indexes them. A slot is freed when its last call goes.
    tools: Vec<Tool>,
    free_tools: Vec<u32>,
    tool_ix: HashMap<Box<str>, u32>,
    /// Loose groups in arrival order.
    loose: BTreeSet<u64>,
    /// Idempotency key → the live or closed call that holds it.
    idem: HashMap<String, u64>,
}

impl Scope {
    fn new(key: ScopeKey) -> Self {
        Scope {
            key,
            refs: 0,
            ids: HashTable::new(),
            more_ids: HashMap::default(),
            by_checksum: HashTable::new(),
            tools: Vec::new(),
            free_tools: Vec::new(),
            tool_ix: HashMap::default(),
            loose: BTreeSet::new(),
            idem: HashMap::default(),
        }
    }

    fn tool_name(&self, tool: u32) -> &str {
        &self.tools[tool as usize].name
    }

    /// The slot of tool `name`, made if the scope has no pending call of it.
    fn tool_slot(&mut self, name: &str) -> u32 {
        if let Some(&t) = self.tool_ix.get(name) {
            return t;
        }
        let t = match self.free_tools.pop() {
            Some(t) => {
                self.tools[t as usize].name = name.into();
                t
            }
            None => {
                self.tools.push(Tool {
                    name: name.into(),
                    calls: Vec::new(),
                });
                (self.tools.len() - 1) as u32
            }
        };
        self.tool_ix.insert(name.into(), t);
        t
    }

    fn remove_tool_call(&mut self, t: u32, seq: u64) {
        let tool = &mut self.tools[t as usize];
        if let Some(i) = tool.calls.iter().position(|p| p.seq == seq) {
            tool.calls.swap_remove(i);
        }
        if tool.calls.is_empty() {
            self.tool_ix.remove(&*tool.name);
            *tool = Tool::default();
            self.free_tools.push(t);
        } else if tool.calls.capacity() > 64 && tool.calls.len() * 4 < tool.calls.capacity() {
            tool.calls.shrink_to(tool.calls.len() * 2);
        }
    }

    /// Every pending call of the scope.
    fn calls(&self) -> impl Iterator<Item = Pending> + '_ {
        self.tools.iter().flat_map(|t| t.calls.iter().copied())
    }
}

/// The scope table: slots indexed by [`ScopeIx`], found by key through a hash table of indexes.
#[derive(Debug, Default)]
struct Scopes {
    slots: Vec<Option<Scope>>,
    free: Vec<ScopeIx>,
    index: HashTable<ScopeIx>,
    /// Scopes that may have no entry left; dropped at the end of the step if they still have none.
    empty: Vec<ScopeIx>,
}

impl Scopes {
    fn get(&self, ix: ScopeIx) -> &Scope {
        self.slots[ix as usize]
            .as_ref()
            .expect("an entry's scope exists while the entry does")
    }

    fn get_mut(&mut self, ix: ScopeIx) -> &mut Scope {
        self.slots[ix as usize]
            .as_mut()
            .expect("an entry's scope exists while the entry does")
    }

    /// The index of the scope `key`, made if it does not exist.
    fn intern(&mut self, key: ScopeKey, hs: &Hasher) -> ScopeIx {
        let h = hs.hash_one(&key);
        let slots = &self.slots;
        if let Some(&ix) = self.index.find(h, |&i| {
            slots[i as usize].as_ref().is_some_and(|s| s.key == key)
        }) {
            return ix;
        }
        let scope = Scope::new(key);
        let ix = match self.free.pop() {
            Some(ix) => {
                self.slots[ix as usize] = Some(scope);
                ix
            }
            None => {
                self.slots.push(Some(scope));
                (self.slots.len() - 1) as ScopeIx
            }
        };
        let slots = &self.slots;
        self.index.insert_unique(h, ix, |&i| {
            slots[i as usize]
                .as_ref()
                .map_or(0, |s| hs.hash_one(&s.key))
        });
        // Nothing refers to it yet: dropped at the end of the step unless an entry does by then.
        self.empty.push(ix);
        ix
    }

    fn unref(&mut self, ix: ScopeIx) {
        let scope = self.get_mut(ix);
        scope.refs -= 1;
        if scope.refs == 0 {
            self.empty.push(ix);
        }
    }

    /// Drops the scopes left without entries.
    fn sweep(&mut self, hs: &Hasher) {
        while let Some(ix) = self.empty.pop() {
            let Some(scope) = &self.slots[ix as usize] else {
                continue;
            };
            if scope.refs > 0 {
                continue;
            }
            if let Ok(slot) = self.index.find_entry(hs.hash_one(&scope.key), |&i| i == ix) {
                slot.remove();
            }
            self.slots[ix as usize] = None;
            self.free.push(ix);
        }
    }
}

/// What a result-side event offers to find its call.
struct Hints<'a> {
    call_id: Option<&'a str>,
    turn: Option<&'a str>,
    checksum: Option<&'a Sum>,
    tool: Option<&'a str>,
    /// Rule 4 (oldest pending) applies: only for results with no hint at all.
    oldest: bool,
    /// Prefer calls that lack this fact (so identical calls each get their own start/end).
    fact: Option<&'a Fact>,
}

/// The envelope of an event, as the handlers use it.
struct Envelope {
    scope: ScopeIx,
    turn: Option<TurnId>,
    call_id: Option<CallId>,
    time: Timestamp,
    attributes: Option<Map<String, Value>>,
}

/// What a result-side event says about the call it belongs to.
struct Subject {
    tool: Option<String>,
    args: Option<Json>,
    checksum: Option<Sum>,
}

/// A link found by the rules: which entry, by which strategy, among how many candidates.
#[derive(Debug, Clone, Copy)]
struct Link {
    seq: u64,
    strategy: Strategy,
    candidates: u32,
}

impl Link {
    fn confidence(&self) -> f64 {
        let single = self.candidates <= 1;
        match (self.strategy, single) {
            (Strategy::CallId, _) => 1.0,
            (Strategy::Checksum, true) => 0.95,
            (Strategy::Checksum, false) => 0.85,
            (Strategy::ToolFifo, true) => 0.75,
            (Strategy::ToolFifo, false) => 0.6,
            (Strategy::Oldest, true) => 0.5,
            (Strategy::Oldest, false) => 0.3,
            (Strategy::Unmatched, _) => 0.0,
        }
    }
}

/// The correlation state of one input partition. See the crate docs for the rules.
#[derive(Debug)]
pub struct Correlator {
    config: Config,
    stream_time: Option<Timestamp>,
    /// The largest event time seen per input topic (by `Position::topic`); stream time follows
    /// the smallest of them (a watermark), so a topic read ahead of the other cannot time out
    /// calls whose results are still unread there.
    topic_time: Vec<Option<Timestamp>>,
    next_seq: u64,
    entries: Entries,
    scopes: Scopes,
    /// Every entry's next deadline, (when, seq).
    timers: BTreeSet<(Timestamp, u64)>,
    /// Live entries by record id, for the query API.
    by_record: HashTable<u64>,
    hs: Hasher,
    /// Entries changed since the last `take_changelog`, with the position that changed them, in
    /// the order of the changes (an entry may appear more than once; the last one counts);
    /// `None` when the changelog is off (the embedded mode). A log rather than a map: a change
    /// costs a push, and `take_changelog` sorts once.
    dirty: Option<Vec<(u64, Position)>>,
    /// The partition-wide entry changed since the last `take_changelog` (every event changes
    /// it), at this position; kept apart from `dirty` so it costs nothing per event.
    meta_dirty: Option<Position>,
    /// Entries numbered from here on were never offered to the changelog (they were made after
    /// the last `take_changelog`): one that is gone again needs no tombstone, its key holds
    /// nothing. Most calls open and close between two checkpoints.
    unwritten_from: u64,
    /// Position of the event being applied (or the last one, during a punctuation).
    pos: Position,
    /// The estimate of [`live_bytes`] summed over the pending entries.
    pending_bytes: usize,
    pending_calls: usize,
}

/// A decoded changelog entry whose scope is interned, waiting to be inserted.
enum Item {
    Meta(Meta),
    /// A [`Live::Call`] and its tool name.
    Call(Box<Live>, Box<str>),
    Loose(Box<Loose>),
    Closed(Box<Closed>),
}

/// A changelog that cannot be restored.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("changelog entry `{key}` is not a state entry of this version ({source}); the changelog topic was written by another program or version — point the processor at its own changelog topic")]
    Decode {
        key: String,
        source: crate::CodecError,
    },
    #[error("changelog key `{0}` is not a state key; the changelog topic was written by another program")]
    Key(String),
}

impl Correlator {
    /// An empty correlator that records changes for the changelog.
    pub fn new(config: Config) -> Self {
        Correlator {
            config,
            stream_time: None,
            topic_time: Vec::new(),
            next_seq: 0,
            entries: Entries::default(),
            scopes: Scopes::default(),
            timers: BTreeSet::new(),
            by_record: HashTable::new(),
            hs: Hasher::default(),
            dirty: Some(Vec::new()),
            meta_dirty: None,
            unwritten_from: 0,
            pos: Position::default(),
            pending_bytes: 0,
            pending_calls: 0,
        }
    }

    /// An empty correlator that keeps no changelog (for the embedded mode and benchmarks).
    pub fn without_changelog(config: Config) -> Self {
        Correlator {
            dirty: None,
            meta_dirty: None,
            ..Correlator::new(config)
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The largest event (or punctuation) time seen.
    pub fn stream_time(&self) -> Option<Timestamp> {
        self.stream_time
    }

    /// Pending calls and waiting results.
    pub fn pending_len(&self) -> usize {
        self.entries.live.len()
    }

    /// Pending announced calls only.
    pub fn pending_calls(&self) -> usize {
        self.pending_calls
    }

    /// Closed call ids remembered for de-duplication.
    pub fn remembered(&self) -> usize {
        self.entries.closed.len()
    }

    /// An estimate of the memory held by pending entries, payloads included: each entry's
    /// allocations as glibc rounds them, and its share of the maps and tables that index it
    /// (`live_bytes` in `correlator.rs`; `benches/processor` compares it with the resident set).
    pub fn pending_bytes(&self) -> usize {
        debug_assert_eq!(
            self.pending_bytes,
            self.entries
                .live
                .values()
                .map(|l| live_bytes(l))
                .sum::<usize>(),
            "pending_bytes drifted from its entries"
        );
        self.pending_bytes
    }

    /// Created time of the oldest pending entry.
    pub fn oldest_pending(&self) -> Option<Timestamp> {
        self.entries
            .live
            .values()
            .map(|l| match &**l {
                Live::Call(c) => c.created_at,
                Live::Loose(l) => l.first_at,
            })
            .min()
    }

    /// Applies one event: links it, merges it or parks it, then fires every deadline that the new
    /// stream time has passed and enforces the state cap. Records go to `out`.
    pub fn apply(&mut self, event: Event, pos: Position, out: &mut Effects) -> Outcome {
        self.pos = pos;
        self.note_time(pos.topic, event.time);
        let outcome = self.dispatch(event, out);
        self.touch(META_SEQ);
        self.fire_timers(out);
        self.enforce_caps(out);
        self.scopes.sweep(&self.hs);
        outcome
    }

    /// Records an event time of input topic `topic` and moves stream time to the watermark: the
    /// smallest of the input topics' largest event times, once `config.input_topics` topics have
    /// been seen (never backwards).
    fn note_time(&mut self, topic: u16, time: Timestamp) {
        let t = usize::from(topic);
        if self.topic_time.len() <= t {
            self.topic_time.resize(t + 1, None);
        }
        if self.topic_time[t].is_none_or(|x| time > x) {
            self.topic_time[t] = Some(time);
        }
        let seen = self.topic_time.iter().flatten().count();
        if seen < usize::from(self.config.input_topics.max(1)) {
            return;
        }
        let watermark = self.topic_time.iter().flatten().min().copied();
        if let Some(w) = watermark {
            if self.stream_time.is_none_or(|s| w > s) {
                self.stream_time = Some(w);
            }
        }
    }

    /// The largest event time seen on any input topic (at or ahead of stream time).
    pub fn max_event_time(&self) -> Option<Timestamp> {
        self.topic_time
            .iter()
            .flatten()
            .max()
            .copied()
            .max(self.stream_time)
    }

    /// Moves stream time on to `now` (if later) and fires what is due: the wall-clock punctuation
    /// of an idle partition, or the runtime moving past an input topic that has gone quiet.
    pub fn advance(&mut self, now: Timestamp, out: &mut Effects) {
        if self.stream_time.is_none_or(|t| now > t) {
            self.stream_time = Some(now);
            self.touch(META_SEQ);
        }
        self.fire_timers(out);
        self.scopes.sweep(&self.hs);
    }

    /// Closes every pending entry now: calls as `phase` (with `reason`), waiting results as
    /// `Orphaned`. Used at the end of a finite input.
    pub fn close_all(&mut self, phase: Phase, reason: &str, out: &mut Effects) {
        for seq in self.entries.live_seqs() {
            match self.entries.live(seq) {
                Some(Live::Call(_)) => self.close_call(
                    seq,
                    None,
                    phase,
                    Some(reason),
                    Link {
                        seq,
                        strategy: Strategy::Unmatched,
                        candidates: 0,
                    },
                    out,
                ),
                Some(Live::Loose(_)) => self.close_loose(seq, Phase::Orphaned, reason, out),
                None => {}
            }
        }
        self.scopes.sweep(&self.hs);
    }

    // ---------------------------------------------------------------------------------------------
    // Changelog

    /// The entries changed since the last call, in key order, with their current value; an entry
    /// that is gone has a tombstone (`value: None`) — unless it was made after the last call, so
    /// that its key was never written.
    ///
    /// Returns nothing when the correlator was made [`without_changelog`](Self::without_changelog).
    pub fn take_changelog(&mut self) -> Vec<ChangelogOp> {
        let Some(dirty) = self.dirty.as_mut() else {
            return Vec::new();
        };
        // Stable: of an entry's changes, the last stays last.
        dirty.sort_by_key(|&(seq, _)| seq);
        let mut dirty = std::mem::take(dirty);
        // The partition-wide entry sorts last.
        dirty.extend(self.meta_dirty.take().map(|pos| (META_SEQ, pos)));
        let mut ops = Vec::with_capacity(dirty.len());
        for (i, &(seq, pos)) in dirty.iter().enumerate() {
            if dirty.get(i + 1).is_some_and(|&(next, _)| next == seq) {
                continue;
            }
            let (key, value) = if seq == META_SEQ {
                let meta = Meta {
                    stream_time: self.stream_time,
                    topic_time: self.topic_time.clone(),
                    next_seq: self.next_seq,
                };
                (META_KEY.to_owned(), Some(encode(&EntryRef::Meta(&meta))))
            } else {
                let value = match (self.entries.live(seq), self.entries.closed.get(&seq)) {
                    (Some(Live::Call(call)), _) => {
                        let scope = self.scopes.get(call.scope);
                        Some(encode(&EntryRef::Call {
                            scope: &scope.key,
                            tool: scope.tool_name(call.tool),
                            call,
                        }))
                    }
                    (Some(Live::Loose(loose)), _) => Some(encode(&EntryRef::Loose {
                        scope: &self.scopes.get(loose.scope).key,
                        loose,
                    })),
                    (None, Some(closed)) => Some(encode(&EntryRef::Closed {
                        scope: &self.scopes.get(closed.scope).key,
                        closed,
                    })),
                    (None, None) if seq >= self.unwritten_from => continue,
                    (None, None) => None,
                };
                (seq.to_string(), value)
            };
            ops.push(ChangelogOp { key, value, pos });
        }
        self.unwritten_from = self.next_seq;
        ops
    }

    /// The entry number a changelog key stands for; `None` for the partition-wide entry and for
    /// keys this program does not write.
    pub fn changelog_key_seq(key: &str) -> Option<u64> {
        key.parse().ok().filter(|&seq| seq != META_SEQ)
    }

    /// Numbers new entries from `next` on (at least), and never writes a tombstone for a number
    /// below it. For the restore: a changelog read on a broker that shows aborted transactions to
    /// `read_committed` readers holds keys the restored state leaves out (written by batches
    /// whose offsets never committed); new entries must not take those keys, or a tombstone left
    /// out (see [`take_changelog`](Self::take_changelog)) would leave such a value standing.
    pub fn reserve_seqs(&mut self, next: u64) {
        self.next_seq = self.next_seq.max(next);
        self.unwritten_from = self.next_seq;
    }

    /// Writes changelog key `key` again at the next [`take_changelog`](Self::take_changelog), as
    /// the state holds it now (a tombstone when it holds no such entry), at
    /// [`Position::RESTATED`]. For the restore: on a broker that shows aborted transactions to
    /// `read_committed` readers, a key's latest value may come from a batch whose offsets never
    /// committed; the restore skips it, but once later offsets commit, the next restore would not.
    /// Writing the key again buries it. Keys this program does not write are ignored.
    pub fn restate(&mut self, key: &str) {
        let Some(dirty) = self.dirty.as_mut() else {
            return;
        };
        if let Some(seq) = Self::changelog_key_seq(key) {
            dirty.push((seq, Position::RESTATED));
        } else if key == META_KEY {
            self.meta_dirty.get_or_insert(Position::RESTATED);
        }
    }

    /// Rebuilds a correlator from the latest value of every changelog key (tombstoned keys left
    /// out). The result decides exactly as the correlator that wrote the changelog would have.
    pub fn restore<K: AsRef<str>, V: AsRef<[u8]>>(
        config: Config,
        entries: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, RestoreError> {
        let mut c = Correlator::new(config);
        // Entries are inserted oldest first, whatever order the changelog gave them in: where two
        // entries claim one id or idempotency key (a remembered closed call and a newer call with
        // the same key), the newer one holds it, as it did before the restore. Sorting before
        // decoding also makes the entries' memory follow their order.
        let entries = entries.into_iter();
        let mut raw = Vec::with_capacity(entries.size_hint().0);
        for (key, value) in entries {
            let key = key.as_ref();
            let seq = match key {
                META_KEY => None,
                _ => Some(
                    key.parse::<u64>()
                        .map_err(|_| RestoreError::Key(key.chars().take(64).collect()))?,
                ),
            };
            raw.push((seq, value));
        }
        raw.sort_by_key(|(seq, _)| *seq);

        // Decode, and make every scope with how many entries its tables will hold, so that the
        // tables are made at their size once instead of growing (growing reads every key back
        // from its entry).
        let mut sizes: Vec<[usize; 2]> = Vec::new();
        let mut live = 0;
        let mut items = Vec::with_capacity(raw.len());
        for (seq, value) in raw {
            let key = || seq.map_or_else(|| META_KEY.to_owned(), |s| s.to_string());
            let entry: Entry = crate::codec::decode(value.as_ref())
                .map_err(|source| RestoreError::Decode { key: key(), source })?;
            drop(value);
            if seq.is_none() != matches!(entry, Entry::Meta(_)) {
                return Err(RestoreError::Key(key()));
            }
            let (ix, ids, sums, item) = match entry {
                Entry::Meta(m) => {
                    items.push((seq, Item::Meta(m)));
                    continue;
                }
                Entry::Call {
                    scope,
                    tool,
                    mut call,
                } => {
                    let ix = c.scopes.intern(scope, &c.hs);
                    let Live::Call(body) = &mut *call else {
                        unreachable!("decoded as a call")
                    };
                    body.scope = ix;
                    live += 1;
                    let (ids, sums) = (body.has_id, body.checksum.is_some());
                    (ix, ids, sums, Item::Call(call, tool))
                }
                Entry::Loose { scope, mut loose } => {
                    loose.scope = c.scopes.intern(scope, &c.hs);
                    live += 1;
                    (loose.scope, loose.has_id, false, Item::Loose(loose))
                }
                Entry::Closed { scope, mut closed } => {
                    closed.scope = c.scopes.intern(scope, &c.hs);
                    let ids = !closed.ids.is_empty();
                    (closed.scope, ids, false, Item::Closed(closed))
                }
            };
            let ix = ix as usize;
            if sizes.len() <= ix {
                sizes.resize(ix + 1, [0, 0]);
            }
            sizes[ix][0] += usize::from(ids);
            sizes[ix][1] += usize::from(sums);
            items.push((seq, item));
        }
        c.by_record.reserve(live, |_| 0);
        for (ix, [ids, sums]) in sizes.into_iter().enumerate() {
            if let Some(scope) = c.scopes.slots[ix].as_mut() {
                // The tables are empty: nothing to rehash.
                scope.ids.reserve(ids, |_| 0);
                scope.by_checksum.reserve(sums, |_| 0);
            }
        }

        let mut max_seq = None::<u64>;
        for (seq, item) in items {
            max_seq = max_seq.max(seq);
            let seq = seq.unwrap_or(META_SEQ);
            match item {
                Item::Meta(m) => {
                    c.stream_time = m.stream_time;
                    c.topic_time = m.topic_time;
                    c.next_seq = c.next_seq.max(m.next_seq);
                }
                Item::Call(call, tool) => c.insert_call(seq, call, &tool),
                Item::Loose(loose) => c.insert_loose(seq, loose),
                Item::Closed(closed) => c.insert_closed(seq, *closed),
            }
        }
        c.scopes.sweep(&c.hs);
        if let Some(m) = max_seq {
            c.next_seq = c.next_seq.max(m + 1);
        }
        if let Some(d) = c.dirty.as_mut() {
            d.clear();
        }
        c.meta_dirty = None;
        c.unwritten_from = c.next_seq;
        Ok(c)
    }

    // ---------------------------------------------------------------------------------------------
    // Query

    /// A pending call or waiting result by record id, as a `Pending` / `Running` record.
    pub fn get(&self, id: &RecordId) -> Option<ToolCallRecord> {
        let seq = *self.by_record.find(self.hs.hash_one(id), |&s| {
            self.entries.record_id(s) == Some(*id)
        })?;
        self.entries.live(seq).map(|l| self.view(seq, l))
    }

    /// Pending calls and waiting results of a session (any source or thread), oldest first.
    pub fn pending_in_session(&self, session: &SessionId) -> Vec<ToolCallRecord> {
        let mut seqs: Vec<u64> = self
            .entries
            .live
            .iter()
            .filter(|(_, l)| {
                let ix = match &***l {
                    Live::Call(c) => c.scope,
                    Live::Loose(l) => l.scope,
                };
                &self.scopes.get(ix).key.session == session
            })
            .map(|(&seq, _)| seq)
            .collect();
        seqs.sort_unstable();
        seqs.into_iter()
            .filter_map(|seq| self.entries.live(seq).map(|l| self.view(seq, l)))
            .collect()
    }

    /// Every pending call and waiting result, oldest first.
    pub fn pending_views(&self) -> impl Iterator<Item = ToolCallRecord> + '_ {
        self.entries
            .live_seqs()
            .into_iter()
            .filter_map(|seq| self.entries.live(seq).map(|l| self.view(seq, l)))
    }

    /// A pending entry as the query API shows it.
    fn view(&self, seq: u64, live: &Live) -> ToolCallRecord {
        match live {
            Live::Call(call) => {
                let phase = if call.started_at().is_some() {
                    Phase::Running
                } else {
                    Phase::Pending
                };
                let link = Link {
                    seq,
                    strategy: Strategy::Unmatched,
                    candidates: 0,
                };
                let scope = self.scopes.get(call.scope);
                let tool = scope.tool_name(call.tool).to_owned();
                let mut r = record_of_call(call.clone(), &scope.key, tool, None, phase, None, link);
                r.status.completed_at = None;
                r.status.duration_ms = None;
                r
            }
            Live::Loose(loose) => record_of_loose(
                (**loose).clone(),
                &self.scopes.get(loose.scope).key,
                Phase::Pending,
                "waiting for its announce",
            ),
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Events

    fn dispatch(&mut self, event: Event, out: &mut Effects) -> Outcome {
        let Event {
            source,
            session,
            thread,
            turn,
            call_id,
            time,
            attributes,
            body,
        } = event;
        let scope = self.scopes.intern(
            ScopeKey {
                source,
                session,
                thread,
            },
            &self.hs,
        );
        let env = Envelope {
            scope,
            turn,
            call_id,
            time,
            attributes,
        };
        match body {
            EventBody::Announce(a) => self.on_announce(env, a, out),
            EventBody::Completion(c) => self.on_completion(env, c, out),
            EventBody::TurnEnd(_) => self.on_turn_end(&env, Deadline::TurnEnded),
            EventBody::TurnAborted(_) => self.on_turn_end(&env, Deadline::TurnAborted),
            EventBody::ExecutionStart(s) => {
                let subject = Subject {
                    tool: s.tool,
                    args: None,
                    checksum: Some(Sum::of(&s.checksum)),
                };
                self.on_fact(env, subject, Fact::ExecStart { at: time })
            }
            EventBody::ExecutionEnd(e) => {
                let end = ExecEnd {
                    at: time,
                    is_error: e.is_error,
                    duration_ms: e.duration_ms,
                };
                let subject = Subject {
                    tool: e.tool,
                    args: None,
                    checksum: Some(Sum::of(&e.checksum)),
                };
                self.on_fact(
                    env,
                    subject,
                    Fact::ExecEnd {
                        end,
                        started_at: e.started_at,
                    },
                )
            }
            EventBody::Approval(a) => {
                let fact = Fact::Approval {
                    at: time,
                    decision: a.decision,
                    by: a.by,
                    reason: a.reason,
                };
                self.on_fact(
                    env,
                    Subject {
                        tool: a.tool,
                        args: a.args,
                        checksum: a.checksum.as_ref().map(Sum::of),
                    },
                    fact,
                )
            }
            EventBody::HookDecision(h) => {
                let entry = HookDecisionEntry {
                    hook: h.hook,
                    decision: h.decision,
                    policy_id: h.policy_id,
                    policy_version: h.policy_version,
                    reason: h.reason,
                    at: time,
                };
                self.on_fact(
                    env,
                    Subject {
                        tool: h.tool,
                        args: h.args,
                        checksum: h.checksum.as_ref().map(Sum::of),
                    },
                    Fact::Hook { entry },
                )
            }
        }
    }

    /// The entry of scope `ix` that holds call id `id`.
    fn holder(&self, ix: ScopeIx, id: &CallId) -> Option<u64> {
        id_holder(self.scopes.get(ix), &self.entries, &self.hs, id.as_str())
    }

    fn on_announce(&mut self, env: Envelope, a: Announce, out: &mut Effects) -> Outcome {
        let Envelope {
            scope: ix,
            turn,
            call_id,
            time,
            attributes,
        } = env;
        // 1. A call id seen before in this scope: a repeat, a late repeat, or the announce that a
        //    waiting result was waiting for.
        let held = call_id.as_ref().and_then(|id| self.holder(ix, id));
        if let Some(seq) = held {
            match self.entries.live_mut(seq) {
                Some(Live::Call(call)) => {
                    if self.scopes.get(ix).tool_name(call.tool) != a.tool {
                        return Outcome::Rejected("conflicting_call_id");
                    }
                    call.events += 1;
                    call.duplicates += 1;
                    call.updated_at = call.updated_at.max(time);
                    let mut new_sum = None;
                    if call.args.is_none() && a.args.is_some() {
                        let before = call_bytes(call);
                        let old = call.checksum;
                        let sum = a
                            .checksum
                            .as_ref()
                            .map_or_else(|| Sum(digest_of_json(&a.tool, a.args.as_ref())), Sum::of);
                        call.checksum = Some(sum);
                        call.args = a.args;
                        self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
                        if old != Some(sum) {
                            new_sum = Some((old, sum));
                        }
                    }
                    if let Some((old, sum)) = new_sum {
                        // The call is filed under its checksum from now on (and no longer under
                        // the one its first announce claimed, if that differed).
                        let scope = self.scopes.get_mut(ix);
                        if let Some(old) = old {
                            remove_sum(scope, &self.hs, &old, seq);
                        }
                        insert_sum(scope, &self.entries, &self.hs, &sum, seq);
                    }
                    self.touch(seq);
                    return Outcome::Duplicate;
                }
                Some(Live::Loose(_)) => {} // handled below, when the call exists
                None => return self.late(seq),
            }
        }

        // Idempotency key: a retry inside the window collapses into the first call's record —
        // unless events of this very call already wait under its id: then it stays a call of its
        // own, so that what they say is not lost.
        let awaited =
            held.is_some_and(|seq| matches!(self.entries.live(seq), Some(Live::Loose(_))));
        if !awaited {
            let idem_key = a
                .side_effects
                .as_ref()
                .and_then(|s| s.idempotency_key.as_deref());
            if let Some(key) = idem_key {
                if let Some(outcome) = self.collapse(ix, key, call_id.as_ref(), time, out) {
                    return outcome;
                }
            }
        }

        let seq = self.next_seq();
        let (key, has_id, record_id) = self.record_key(ix, call_id);
        let checksum = match (&a.checksum, &a.args) {
            (Some(cs), _) => Some(Sum::of(cs)),
            (None, Some(args)) => Some(Sum(digest_of_json(&a.tool, Some(args)))),
            (None, None) => None,
        };
        let mut call = Call {
            scope: ix,
            tool: 0,
            key,
            has_id,
            record_id,
            turn: turn.map(|t| t.0.into_boxed_str()),
            args: a.args,
            checksum,
            created_at: time,
            updated_at: time,
            deadline: time.plus_millis(self.config.call_timeout_ms),
            why: Deadline::Timeout,
            denied: false,
            events: 1,
            duplicates: 0,
            attempts: 1,
            more: None,
        };
        if a.side_effects.is_some()
            || a.agent.is_some()
            || a.execution.is_some()
            || a.hook_context.is_some()
            || attributes.is_some()
        {
            call.set_more(More {
                side_effects: a.side_effects,
                agent: a.agent,
                execution: a.execution,
                hook_context: a.hook_context,
                attributes,
                ..More::default()
            });
        }

        // Symmetric matching: results and facts that arrived before their announce.
        let (done_link, fact_groups) = self.find_loose_for(&call, &a.tool);
        self.insert_call(seq, Box::new(Live::Call(call)), &a.tool);
        self.touch(seq);
        for group in fact_groups {
            self.absorb_loose(seq, group);
        }
        match done_link {
            Some(link) => {
                let done = self.absorb_loose(seq, link.seq);
                self.finish_with(seq, done, link, out);
                Outcome::Matched(link.strategy)
            }
            None => Outcome::Pending,
        }
    }

    /// A retry with an idempotency key already seen inside the window.
    fn collapse(
        &mut self,
        ix: ScopeIx,
        key: &str,
        call_id: Option<&CallId>,
        time: Timestamp,
        out: &mut Effects,
    ) -> Option<Outcome> {
        let window = self.config.idempotency_window_ms;
        let seq = *self.scopes.get(ix).idem.get(key)?;
        if let Some(call) = self.entries.call_mut(seq) {
            if time.millis_since(call.created_at) > window {
                return None;
            }
            let before = call_bytes(call);
            call.attempts += 1;
            call.events += 1;
            call.updated_at = call.updated_at.max(time);
            if let Some(id) = call_id {
                if call.call_id() != Some(id.as_str()) && !call.aliases().contains(id) {
                    call.more_mut().aliases.push(id.clone());
                }
            }
            self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
        } else if let Some(closed) = self.entries.closed.get_mut(&seq) {
            let record = &mut closed.idem.as_mut()?.record;
            if time.millis_since(record.created_at) > window {
                return None;
            }
            record.metadata.revision += 1;
            record.correlation.attempts += 1;
            record.correlation.events_merged += 1;
            record.updated_at = record.updated_at.max(time);
            out.records.push(record.clone());
            if let Some(id) = call_id {
                if !closed.ids.contains(id) {
                    closed.ids.push(id.clone());
                }
            }
        } else {
            return None;
        }
        if let Some(id) = call_id {
            let scope = self.scopes.get_mut(ix);
            point_id(
                scope,
                &self.entries,
                &self.hs,
                id.as_str(),
                seq,
                false,
                false,
            );
        }
        self.touch(seq);
        Some(Outcome::Collapsed)
    }

    fn on_completion(&mut self, env: Envelope, c: Completion, out: &mut Effects) -> Outcome {
        let Envelope {
            scope: ix,
            turn,
            call_id,
            time,
            attributes,
        } = env;
        let checksum = match (&c.checksum, &c.tool, &c.args) {
            (Some(cs), _, _) => Some(Sum::of(cs)),
            (None, Some(tool), Some(args)) => Some(Sum(digest_of_json(tool, Some(args)))),
            _ => None,
        };
        let done = Done {
            at: time,
            result: c.result,
            is_error: c.is_error,
            cancelled: c.cancelled,
            started_at: c.started_at,
            duration_ms: c.duration_ms,
        };
        if let Some(seq) = call_id.as_ref().and_then(|id| self.holder(ix, id)) {
            match self.entries.live_mut(seq) {
                Some(Live::Call(call)) => {
                    let before = call_bytes(call);
                    call.events += 1;
                    merge_call_attributes(call, attributes);
                    self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
                    let link = Link {
                        seq,
                        strategy: Strategy::CallId,
                        candidates: 1,
                    };
                    self.finish_with(seq, Some(done), link, out);
                    return Outcome::Matched(Strategy::CallId);
                }
                Some(Live::Loose(loose)) => {
                    // More about a call not yet announced.
                    let before = loose_bytes(loose);
                    loose.events += 1;
                    loose.updated_at = loose.updated_at.max(time);
                    let outcome = if loose.done.is_some() {
                        loose.duplicates += 1;
                        Outcome::Duplicate
                    } else {
                        loose.done = Some(done);
                        if loose.tool.is_none() {
                            loose.tool = c.tool.map(String::into_boxed_str);
                        }
                        if loose.checksum.is_none() {
                            loose.checksum = checksum;
                        }
                        merge_attributes(&mut loose.attributes, attributes);
                        Outcome::Pending
                    };
                    self.pending_bytes = self.pending_bytes + loose_bytes(loose) - before;
                    self.touch(seq);
                    return outcome;
                }
                None => return self.late(seq),
            }
        }

        let hintless = call_id.is_none() && checksum.is_none() && c.tool.is_none();
        let hints = Hints {
            call_id: call_id.as_ref().map(CallId::as_str),
            turn: turn.as_ref().map(TurnId::as_str),
            checksum: checksum.as_ref(),
            tool: c.tool.as_deref(),
            oldest: hintless,
            fact: None,
        };
        if let Some(link) = self.find_call(ix, &hints) {
            if let Some(call) = self.entries.call_mut(link.seq) {
                let before = call_bytes(call);
                call.events += 1;
                merge_call_attributes(call, attributes);
                self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
            }
            self.finish_with(link.seq, Some(done), link, out);
            return Outcome::Matched(link.strategy);
        }

        // 5. Nothing to link to yet: wait for the announce.
        let env = Envelope {
            scope: ix,
            turn,
            call_id,
            time,
            attributes,
        };
        let subject = Subject {
            tool: c.tool,
            args: c.args,
            checksum,
        };
        self.park(env, subject, Some(done), None);
        Outcome::Pending
    }

    fn on_fact(&mut self, env: Envelope, subject: Subject, fact: Fact) -> Outcome {
        let Envelope {
            scope: ix,
            turn,
            call_id,
            time,
            attributes,
        } = env;
        let Subject {
            tool,
            args,
            checksum,
        } = subject;
        let checksum = checksum.or_else(|| match (&tool, &args) {
            (Some(tool), Some(args)) => Some(Sum(digest_of_json(tool, Some(args)))),
            _ => None,
        });
        if let Some(seq) = call_id.as_ref().and_then(|id| self.holder(ix, id)) {
            match self.entries.live_mut(seq) {
                Some(Live::Call(_)) => {
                    self.merge_fact(seq, fact, time, attributes);
                    return Outcome::Merged;
                }
                Some(Live::Loose(loose)) => {
                    let before = loose_bytes(loose);
                    loose.events += 1;
                    loose.updated_at = loose.updated_at.max(time);
                    let outcome = if loose.facts.contains(&fact) {
                        loose.duplicates += 1;
                        Outcome::Duplicate
                    } else {
                        loose.facts.push(fact);
                        merge_attributes(&mut loose.attributes, attributes);
                        Outcome::Pending
                    };
                    self.pending_bytes = self.pending_bytes + loose_bytes(loose) - before;
                    self.touch(seq);
                    return outcome;
                }
                None => return self.late(seq),
            }
        }
        let hints = Hints {
            call_id: call_id.as_ref().map(CallId::as_str),
            turn: turn.as_ref().map(TurnId::as_str),
            checksum: checksum.as_ref(),
            // A tool name alone is a weak hint for facts; use it only when there is no checksum.
            tool: if checksum.is_none() {
                tool.as_deref()
            } else {
                None
            },
            oldest: false,
            fact: Some(&fact),
        };
        if let Some(link) = self.find_call(ix, &hints) {
            self.merge_fact(link.seq, fact, time, attributes);
            return Outcome::Merged;
        }
        let env = Envelope {
            scope: ix,
            turn,
            call_id,
            time,
            attributes,
        };
        self.park(
            env,
            Subject {
                tool,
                args,
                checksum,
            },
            None,
            Some(fact),
        );
        Outcome::Pending
    }

    fn on_turn_end(&mut self, env: &Envelope, why: Deadline) -> Outcome {
        let (ix, turn, time) = (env.scope, env.turn.as_ref(), env.time);
        let at = time.plus_millis(self.config.turn_grace_ms);
        let seqs: Vec<u64> = self.scopes.get(ix).calls().map(|p| p.seq).collect();
        for seq in seqs {
            let Some(call) = self.entries.call_mut(seq) else {
                continue;
            };
            if turn.is_some() && call.turn.as_deref() != turn.map(TurnId::as_str) {
                continue;
            }
            if at < call.deadline || (call.why == Deadline::Timeout && at == call.deadline) {
                let old = call.deadline;
                call.deadline = at;
                if call.why != Deadline::Denied {
                    call.why = why;
                }
                self.timers.remove(&(old, seq));
                self.timers.insert((at, seq));
                self.touch(seq);
            }
        }
        Outcome::Applied
    }

    /// An event for a call already closed and published.
    fn late(&mut self, _seq: u64) -> Outcome {
        Outcome::Late
    }

    // ---------------------------------------------------------------------------------------------
    // Matching

    /// Rules 2–4 for a result-side event: the pending call it belongs to.
    fn find_call(&self, ix: ScopeIx, hints: &Hints<'_>) -> Option<Link> {
        let scope = self.scopes.get(ix);
        let (e, hs) = (&self.entries, &self.hs);
        let turn = hints.turn.map(|t| turn_hash(hs, t));
        if let Some(sum) = hints.checksum {
            let cands = scope
                .by_checksum
                .iter_hash(hs.hash_one(sum))
                .filter_map(|&seq| e.call(seq).map(|call| Pending::of(seq, call, hs)));
            if let Some(link) = pick(e, hints, turn, cands, Some(sum), Strategy::Checksum) {
                return Some(link);
            }
        }
        if let Some(tool) = hints.tool {
            if let Some(&t) = scope.tool_ix.get(tool) {
                let cands = scope.tools[t as usize].calls.iter().copied();
                if let Some(link) = pick(e, hints, turn, cands, None, Strategy::ToolFifo) {
                    return Some(link);
                }
            }
        }
        if hints.oldest {
            return pick(e, hints, turn, scope.calls(), None, Strategy::Oldest);
        }
        None
    }

    /// Symmetric matching for a new call (not yet inserted; its tool is `tool`): the waiting
    /// result it takes (if any) and the waiting fact-only groups that belong to it.
    fn find_loose_for(&self, call: &Call, tool: &str) -> (Option<Link>, Vec<u64>) {
        let scope = self.scopes.get(call.scope);
        if let Some(id) = call.call_id() {
            if let Some(seq) = id_holder(scope, &self.entries, &self.hs, id) {
                if let Some(Live::Loose(loose)) = self.entries.live(seq) {
                    let link = Link {
                        seq,
                        strategy: Strategy::CallId,
                        candidates: 1,
                    };
                    return if loose.done.is_some() {
                        (Some(link), Vec::new())
                    } else {
                        (None, vec![seq])
                    };
                }
            }
        }
        let fits = |loose: &Loose| -> bool {
            if call.has_id && loose.has_id {
                return false;
            }
            !matches!((&call.turn, &loose.turn), (Some(a), Some(b)) if a != b)
        };
        // Candidates per rule, oldest first by (time, arrival).
        let mut best: [Option<(Timestamp, u64)>; 3] = [None; 3];
        let mut counts = [0u32; 3];
        let mut facts = Vec::new();
        for &seq in &scope.loose {
            let Some(Live::Loose(loose)) = self.entries.live(seq) else {
                continue;
            };
            if !fits(loose) {
                continue;
            }
            if loose.done.is_none() {
                let same = match (&loose.checksum, &loose.tool) {
                    (Some(cs), _) => call.checksum.as_ref() == Some(cs),
                    (None, Some(t)) => &**t == tool,
                    (None, None) => false,
                };
                if same && loose.facts.iter().all(|f| lacks(call, f)) {
                    facts.push(seq);
                }
                continue;
            }
            let rule = if loose.checksum.is_some() && loose.checksum == call.checksum {
                0
            } else if loose.tool.as_deref() == Some(tool) {
                1
            } else if loose.hintless() {
                2
            } else {
                continue;
            };
            counts[rule] += 1;
            let key = (loose.first_at, seq);
            if best[rule].is_none_or(|b| key < b) {
                best[rule] = Some(key);
            }
        }
        let strategies = [Strategy::Checksum, Strategy::ToolFifo, Strategy::Oldest];
        let link = (0..3).find_map(|rule| {
            best[rule].map(|(_, seq)| Link {
                seq,
                strategy: strategies[rule],
                candidates: counts[rule],
            })
        });
        (link, facts)
    }

    // ---------------------------------------------------------------------------------------------
    // State changes

    /// Moves a loose group into the call `seq`: its facts are merged, its result returned.
    fn absorb_loose(&mut self, seq: u64, loose_seq: u64) -> Option<Done> {
        let Live::Loose(loose) = *self.remove_live(loose_seq)? else {
            return None;
        };
        self.touch(loose_seq);
        let Loose {
            key,
            has_id,
            facts,
            done,
            events,
            duplicates,
            updated_at,
            attributes,
            ..
        } = *loose;
        for fact in facts {
            self.apply_fact(seq, fact);
        }
        let mut took_id = false;
        if let Some(call) = self.entries.call_mut(seq) {
            let before = call_bytes(call);
            call.events += events;
            call.duplicates += duplicates;
            call.updated_at = call.updated_at.max(updated_at);
            merge_call_attributes(call, attributes);
            // The loose group's id now names this call (fallback link of an id-less announce).
            if has_id && !call.has_id {
                call.more_mut().aliases.push(CallId(key.to_string()));
                took_id = true;
            }
            self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
        }
        if took_id {
            if let Some(ix) = self.entries.call(seq).map(|c| c.scope) {
                let scope = self.scopes.get_mut(ix);
                point_id(scope, &self.entries, &self.hs, &key, seq, false, false);
            }
        }
        done
    }

    fn merge_fact(
        &mut self,
        seq: u64,
        fact: Fact,
        time: Timestamp,
        attributes: Option<Map<String, Value>>,
    ) {
        if let Some(call) = self.entries.call_mut(seq) {
            let before = call_bytes(call);
            call.events += 1;
            call.updated_at = call.updated_at.max(time);
            merge_call_attributes(call, attributes);
            self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
        }
        self.apply_fact(seq, fact);
    }

    /// Applies a fact to a pending call; a denial shortens its deadline.
    fn apply_fact(&mut self, seq: u64, fact: Fact) {
        let grace = self.config.turn_grace_ms;
        let Some(call) = self.entries.call_mut(seq) else {
            return;
        };
        let before = call_bytes(call);
        let mut deny_at = None;
        match fact {
            Fact::ExecStart { at } => {
                let more = call.more_mut();
                more.started_at = Some(more.started_at.map_or(at, |s| s.min(at)));
            }
            Fact::ExecEnd { end, started_at } => {
                let more = call.more_mut();
                if more.started_at.is_none() {
                    more.started_at = started_at;
                }
                more.exec_end = Some(end);
            }
            Fact::Approval {
                at,
                decision,
                by,
                reason,
            } => {
                let approval = call.more_mut().approval.get_or_insert(ApprovalState {
                    required: true,
                    status: decision,
                    requested_at: None,
                    approved_by: None,
                    approved_at: None,
                    reason: None,
                });
                match decision {
                    ApprovalDecision::Requested => {
                        approval.requested_at = Some(at);
                    }
                    ApprovalDecision::Approved | ApprovalDecision::Denied => {
                        approval.status = decision;
                        approval.approved_by = by;
                        approval.approved_at = Some(at);
                        approval.reason = reason;
                        if decision == ApprovalDecision::Denied {
                            deny_at = Some(at);
                        }
                    }
                }
            }
            Fact::Hook { entry } => {
                if entry.decision == HookVerdict::Deny {
                    deny_at = Some(entry.at);
                }
                call.more_mut().hooks.push(entry);
            }
        }
        self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
        if let Some(at) = deny_at {
            call.denied = true;
            let at = at.plus_millis(grace);
            if at < call.deadline || call.why != Deadline::Denied {
                let old = call.deadline;
                call.deadline = call.deadline.min(at);
                call.why = Deadline::Denied;
                let new = call.deadline;
                self.timers.remove(&(old, seq));
                self.timers.insert((new, seq));
            }
        }
        self.touch(seq);
    }

    /// Parks a result-side event until its announce comes (or its grace runs out).
    fn park(&mut self, env: Envelope, subject: Subject, done: Option<Done>, fact: Option<Fact>) {
        let Envelope {
            scope: ix,
            turn,
            call_id,
            time,
            attributes,
        } = env;
        let Subject {
            tool,
            args,
            checksum,
        } = subject;
        let seq = self.next_seq();
        let (key, has_id, record_id) = self.record_key(ix, call_id);
        let loose = Box::new(Loose {
            scope: ix,
            key,
            has_id,
            record_id,
            turn: turn.map(|t| t.0.into_boxed_str()),
            tool: tool.map(String::into_boxed_str),
            args,
            checksum,
            done,
            facts: fact.into_iter().collect(),
            first_at: time,
            updated_at: time,
            events: 1,
            duplicates: 0,
            deadline: time.plus_millis(self.config.orphan_grace_ms),
            attributes,
        });
        self.insert_loose(seq, loose);
        self.touch(seq);
    }

    /// Closes a pending call with its result (or without one), publishing its record.
    fn finish_with(&mut self, seq: u64, done: Option<Done>, link: Link, out: &mut Effects) {
        let Some(call) = self.entries.call_mut(seq) else {
            return;
        };
        if let Some(d) = &done {
            call.updated_at = call.updated_at.max(d.at);
        }
        let phase = match &done {
            _ if call.denied => Phase::Denied,
            Some(d) if d.cancelled => Phase::Interrupted,
            Some(d) if d.is_error => Phase::Failed,
            Some(_) => Phase::Succeeded,
            None => Phase::TimedOut,
        };
        self.close_call(seq, done, phase, None, link, out);
    }

    fn close_call(
        &mut self,
        seq: u64,
        done: Option<Done>,
        phase: Phase,
        reason: Option<&str>,
        link: Link,
        out: &mut Effects,
    ) {
        // The tool slot may go with the call: take the name first.
        let tool = match self.entries.call(seq) {
            Some(c) => self.scopes.get(c.scope).tool_name(c.tool).to_owned(),
            None => return,
        };
        let Some(live) = self.remove_live(seq) else {
            return;
        };
        let Live::Call(call) = *live else {
            return;
        };
        self.touch(seq);
        let mut ids: Vec<CallId> = call.call_id().map(CallId::from).into_iter().collect();
        ids.extend(call.aliases().iter().cloned());
        let idem = call.idempotency_key().map(str::to_owned);
        let (ix, updated_at) = (call.scope, call.updated_at);
        let record = record_of_call(
            call,
            &self.scopes.get(ix).key,
            tool,
            done,
            phase,
            reason,
            link,
        );
        if !ids.is_empty() || idem.is_some() {
            let window = if idem.is_some() {
                self.config
                    .dedupe_window_ms
                    .max(self.config.idempotency_window_ms)
            } else {
                self.config.dedupe_window_ms
            };
            let expires = self.stream_time.unwrap_or(updated_at).plus_millis(window);
            let closed = Closed {
                scope: ix,
                expires,
                ids,
                idem: idem.map(|key| {
                    Box::new(Idempotent {
                        key,
                        record: record.clone(),
                    })
                }),
            };
            self.insert_closed(seq, closed);
        }
        out.records.push(record);
    }

    fn close_loose(&mut self, seq: u64, phase: Phase, reason: &str, out: &mut Effects) {
        let Some(live) = self.remove_live(seq) else {
            return;
        };
        let Live::Loose(loose) = *live else {
            return;
        };
        self.touch(seq);
        let (ix, updated_at, call_id) = (
            loose.scope,
            loose.updated_at,
            loose.call_id().map(CallId::from),
        );
        out.records.push(record_of_loose(
            *loose,
            &self.scopes.get(ix).key,
            phase,
            reason,
        ));
        if let Some(id) = call_id {
            let expires = self
                .stream_time
                .unwrap_or(updated_at)
                .plus_millis(self.config.dedupe_window_ms);
            self.insert_closed(
                seq,
                Closed {
                    scope: ix,
                    expires,
                    ids: vec![id],
                    idem: None,
                },
            );
        }
    }

    fn fire_timers(&mut self, out: &mut Effects) {
        let Some(now) = self.stream_time else { return };
        while let Some(&(at, seq)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            if let Some(live) = self.entries.live(seq) {
                match live {
                    Live::Call(call) => {
                        let (phase, reason) = match call.why {
                            Deadline::Timeout => {
                                (Phase::TimedOut, "no result within the call timeout")
                            }
                            Deadline::TurnEnded => {
                                (Phase::Interrupted, "turn ended without a result")
                            }
                            Deadline::TurnAborted => (Phase::Interrupted, "turn aborted"),
                            Deadline::Denied => (Phase::Denied, "denied; no result reported"),
                        };
                        let link = Link {
                            seq,
                            strategy: Strategy::Unmatched,
                            candidates: 0,
                        };
                        self.close_call(seq, None, phase, Some(reason), link, out);
                    }
                    Live::Loose(_) => self.close_loose(
                        seq,
                        Phase::Orphaned,
                        "no matching announce within the orphan grace",
                        out,
                    ),
                }
            } else if self.entries.closed.contains_key(&seq) {
                self.expire_closed(seq);
            }
        }
    }

    fn enforce_caps(&mut self, out: &mut Effects) {
        while self.entries.live.len() > self.config.max_pending {
            let Some(seq) = self.entries.oldest_live() else {
                break;
            };
            let Some(live) = self.entries.live(seq) else {
                break;
            };
            let reason = "evicted: the partition's pending-state cap was reached";
            match live {
                Live::Call(_) => {
                    let link = Link {
                        seq,
                        strategy: Strategy::Unmatched,
                        candidates: 0,
                    };
                    self.close_call(seq, None, Phase::Evicted, Some(reason), link, out);
                }
                Live::Loose(_) => self.close_loose(seq, Phase::Evicted, reason, out),
            }
        }
        while self.entries.closed.len() > self.config.max_remembered {
            let Some(&seq) = self.entries.closed.keys().next() else {
                break;
            };
            self.expire_closed(seq);
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Indexes

    /// The key a new entry's record id derives from — its call id, or `@topic:offset` of the event
    /// being applied — whether that is a call id, and the record id.
    fn record_key(&self, ix: ScopeIx, call_id: Option<CallId>) -> (Box<str>, bool, RecordId) {
        let (key, has_id) = match call_id {
            Some(id) => (id.0.into_boxed_str(), true),
            None => (
                format!("@{}:{}", self.pos.topic, self.pos.offset).into_boxed_str(),
                false,
            ),
        };
        let sk = &self.scopes.get(ix).key;
        let record_id = RecordId::derive(&sk.source, &sk.session, sk.thread.as_ref(), &key);
        (key, has_id, record_id)
    }

    fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    fn touch(&mut self, seq: u64) {
        if seq == META_SEQ {
            if self.dirty.is_some() {
                self.meta_dirty = Some(self.pos);
            }
        } else if let Some(d) = self.dirty.as_mut() {
            d.push((seq, self.pos));
        }
    }

    /// Files a new pending call (a [`Live::Call`] whose `scope` is set; its `tool` slot is set
    /// here) under every index.
    fn insert_call(&mut self, seq: u64, mut live: Box<Live>, tool: &str) {
        let Live::Call(call) = &mut *live else {
            debug_assert!(false, "insert_call takes calls");
            return;
        };
        let ix = call.scope;
        let scope = self.scopes.get_mut(ix);
        scope.refs += 1;
        let t = scope.tool_slot(tool);
        scope.tools[t as usize]
            .calls
            .push(Pending::of(seq, call, &self.hs));
        call.tool = t;
        if let Some(key) = call.idempotency_key() {
            claim(&mut scope.idem, key, seq);
        }
        self.timers.insert((call.deadline, seq));
        self.pending_bytes += call_bytes(call);
        self.pending_calls += 1;
        let record_h = self.hs.hash_one(call.record_id);
        self.entries.live.insert(seq, live);
        // The tables below may grow, which reads the keys of their entries (this one included)
        // from `entries`: file the call there first.
        let (entries, hs) = (&self.entries, &self.hs);
        self.by_record
            .insert_unique(record_h, seq, |&s| record_hash(entries, hs, s));
        let Some(call) = entries.call(seq) else {
            return;
        };
        let scope = self.scopes.get_mut(ix);
        if let Some(sum) = &call.checksum {
            insert_sum(scope, entries, hs, sum, seq);
        }
        if let Some(id) = call.call_id() {
            point_id(scope, entries, hs, id, seq, true, true);
        }
        for id in call.aliases() {
            point_id(scope, entries, hs, id.as_str(), seq, false, true);
        }
    }

    fn insert_loose(&mut self, seq: u64, loose: Box<Loose>) {
        let ix = loose.scope;
        let scope = self.scopes.get_mut(ix);
        scope.refs += 1;
        scope.loose.insert(seq);
        self.timers.insert((loose.deadline, seq));
        self.pending_bytes += loose_bytes(&loose);
        let record_h = self.hs.hash_one(loose.record_id);
        let has_id = loose.has_id;
        self.entries.live.insert(seq, Box::new(Live::Loose(loose)));
        let (entries, hs) = (&self.entries, &self.hs);
        self.by_record
            .insert_unique(record_h, seq, |&s| record_hash(entries, hs, s));
        if has_id {
            if let Some(id) = entries.primary_id(seq) {
                point_id(self.scopes.get_mut(ix), entries, hs, id, seq, true, true);
            }
        }
    }

    fn insert_closed(&mut self, seq: u64, closed: Closed) {
        let ix = closed.scope;
        let scope = self.scopes.get_mut(ix);
        scope.refs += 1;
        if let Some(idem) = &closed.idem {
            claim(&mut scope.idem, &idem.key, seq);
        }
        self.timers.insert((closed.expires, seq));
        self.entries.closed.insert(seq, closed);
        let (entries, hs) = (&self.entries, &self.hs);
        let Some(closed) = entries.closed.get(&seq) else {
            return;
        };
        let scope = self.scopes.get_mut(ix);
        for (i, id) in closed.ids.iter().enumerate() {
            point_id(scope, entries, hs, id.as_str(), seq, i == 0, true);
        }
    }

    /// Takes a live entry out of every index.
    fn remove_live(&mut self, seq: u64) -> Option<Box<Live>> {
        let live = self.entries.live.remove(&seq)?;
        let hs = &self.hs;
        self.pending_bytes -= live_bytes(&live);
        let ix = match &*live {
            Live::Call(call) => {
                self.pending_calls -= 1;
                self.timers.remove(&(call.deadline, seq));
                remove_record(&mut self.by_record, hs, &call.record_id, seq);
                let scope = self.scopes.get_mut(call.scope);
                scope.remove_tool_call(call.tool, seq);
                if let Some(sum) = &call.checksum {
                    remove_sum(scope, hs, sum, seq);
                }
                if let Some(id) = call.call_id() {
                    release_id(scope, hs, id, seq, true);
                }
                for id in call.aliases() {
                    release_id(scope, hs, id.as_str(), seq, false);
                }
                if let Some(key) = call.idempotency_key() {
                    if scope.idem.get(key) == Some(&seq) {
                        scope.idem.remove(key);
                    }
                }
                call.scope
            }
            Live::Loose(loose) => {
                self.timers.remove(&(loose.deadline, seq));
                remove_record(&mut self.by_record, hs, &loose.record_id, seq);
                let scope = self.scopes.get_mut(loose.scope);
                scope.loose.remove(&seq);
                if let Some(id) = loose.call_id() {
                    release_id(scope, hs, id, seq, true);
                }
                loose.scope
            }
        };
        self.scopes.unref(ix);
        Some(live)
    }

    fn expire_closed(&mut self, seq: u64) {
        let Some(closed) = self.entries.closed.remove(&seq) else {
            return;
        };
        self.timers.remove(&(closed.expires, seq));
        self.touch(seq);
        let scope = self.scopes.get_mut(closed.scope);
        for (i, id) in closed.ids.iter().enumerate() {
            release_id(scope, &self.hs, id.as_str(), seq, i == 0);
        }
        if let Some(idem) = &closed.idem {
            if scope.idem.get(&idem.key) == Some(&seq) {
                scope.idem.remove(&idem.key);
            }
        }
        self.scopes.unref(closed.scope);
    }
}

/// Points `key` at entry `seq` unless a newer entry holds it: where a remembered closed call and a
/// newer call share an id or an idempotency key, the newer one keeps it — whether the closed one
/// was closed after the newer one started, or the changelog returned them in any order.
fn claim<K, Q>(map: &mut HashMap<K, u64>, key: &Q, seq: u64)
where
    K: std::hash::Hash + Eq + std::borrow::Borrow<Q>,
    Q: std::hash::Hash + Eq + ToOwned<Owned = K> + ?Sized,
{
    match map.get_mut(key) {
        Some(held) if *held > seq => {}
        Some(held) => *held = seq,
        None => {
            map.insert(key.to_owned(), seq);
        }
    }
}

/// The entry of `scope` that call id `id` names.
fn id_holder(scope: &Scope, e: &Entries, hs: &Hasher, id: &str) -> Option<u64> {
    scope
        .ids
        .find(hs.hash_one(id), |&s| e.primary_id(s) == Some(id))
        .or_else(|| scope.more_ids.get(id))
        .copied()
}

fn id_hash(e: &Entries, hs: &Hasher, seq: u64) -> u64 {
    let id = e.primary_id(seq);
    debug_assert!(id.is_some(), "an entry filed by id has one");
    hs.hash_one(id.unwrap_or_default())
}

/// Makes call id `id` name entry `seq` (already in `e`). `primary`: `id` is the entry's
/// [`Entries::primary_id`], filed in the `ids` table; other ids go to `more_ids`. With
/// `only_if_newer`, an id held by a newer entry stays there (see [`claim`]).
fn point_id(
    scope: &mut Scope,
    e: &Entries,
    hs: &Hasher,
    id: &str,
    seq: u64,
    primary: bool,
    only_if_newer: bool,
) {
    let h = hs.hash_one(id);
    match scope.ids.find_entry(h, |&s| e.primary_id(s) == Some(id)) {
        Ok(slot) => {
            let held = *slot.get();
            if (only_if_newer && held > seq) || (held == seq && primary) {
                return;
            }
            slot.remove();
        }
        Err(_) => {
            if let Some(&held) = scope.more_ids.get(id) {
                if (only_if_newer && held > seq) || (held == seq && !primary) {
                    return;
                }
                scope.more_ids.remove(id);
            }
        }
    }
    if primary {
        scope.ids.insert_unique(h, seq, |&s| id_hash(e, hs, s));
    } else {
        scope.more_ids.insert(id.into(), seq);
    }
}

/// Forgets that `id` names entry `seq`, if it still does. `primary` as in [`point_id`]. The entry
/// may already be out of `Entries`: its slot is found by sequence number.
fn release_id(scope: &mut Scope, hs: &Hasher, id: &str, seq: u64, primary: bool) {
    if primary {
        if let Ok(slot) = scope.ids.find_entry(hs.hash_one(id), |&s| s == seq) {
            slot.remove();
            return;
        }
    }
    if scope.more_ids.get(id) == Some(&seq) {
        scope.more_ids.remove(id);
    }
}

fn insert_sum(scope: &mut Scope, e: &Entries, hs: &Hasher, sum: &Sum, seq: u64) {
    scope
        .by_checksum
        .insert_unique(hs.hash_one(sum), seq, |&s| {
            let sum = e.call(s).and_then(|c| c.checksum);
            debug_assert!(sum.is_some(), "a call filed by checksum has one");
            hs.hash_one(sum.unwrap_or(Sum([0; 32])))
        });
}

fn remove_sum(scope: &mut Scope, hs: &Hasher, sum: &Sum, seq: u64) {
    if let Ok(slot) = scope
        .by_checksum
        .find_entry(hs.hash_one(sum), |&s| s == seq)
    {
        slot.remove();
    }
}

fn record_hash(e: &Entries, hs: &Hasher, seq: u64) -> u64 {
    let id = e.record_id(seq);
    debug_assert!(id.is_some(), "a record id is filed for a live entry");
    id.map_or(0, |id| hs.hash_one(id))
}

fn remove_record(table: &mut HashTable<u64>, hs: &Hasher, id: &RecordId, seq: u64) {
    if let Ok(slot) = table.find_entry(hs.hash_one(id), |&s| s == seq) {
        slot.remove();
    }
}

/// Picks among candidate calls `cands` the oldest by (created time, arrival) that fits the hints,
/// preferring one that lacks the hinted fact. `turn`: the hash of the hinted turn. `sum`: only
/// calls with this checksum count (the checksum table may offer others). A candidate is read from
/// the entries only when its slot cannot decide alone.
fn pick(
    e: &Entries,
    hints: &Hints<'_>,
    turn: Option<u32>,
    cands: impl Iterator<Item = Pending>,
    sum: Option<&Sum>,
    strategy: Strategy,
) -> Option<Link> {
    let mut first: Option<(Timestamp, u64)> = None;
    let mut first_lacking: Option<(Timestamp, u64)> = None;
    let mut candidates = 0u32;
    for p in cands {
        #[cfg(debug_assertions)]
        if let Some(call) = e.call(p.seq) {
            let hs = Hasher::default(); // not the correlator's: compare presence only
            let now = Pending::of(p.seq, call, &hs);
            debug_assert_eq!(p.created_at, call.created_at, "slot of {} is stale", p.seq);
            debug_assert_eq!(p.turn().is_some(), now.turn().is_some());
            debug_assert!(!p.has_id() || call.has_any_id(), "ids stay");
        }
        if hints.call_id.is_some() && p.has_id() {
            continue; // two different ids are two different calls
        }
        let turn_to_check = match (turn, p.turn()) {
            (Some(a), Some(b)) if a != b => continue,
            (Some(_), Some(_)) => true,
            _ => false,
        };
        let mut lacking = true;
        if turn_to_check || sum.is_some() || hints.call_id.is_some() || hints.fact.is_some() {
            let Some(call) = e.call(p.seq) else { continue };
            if sum.is_some() && call.checksum.as_ref() != sum {
                continue;
            }
            if hints.call_id.is_some() && call.has_any_id() {
                continue;
            }
            if let (Some(a), Some(b)) = (hints.turn, call.turn.as_deref()) {
                if a != b {
                    continue;
                }
            }
            lacking = hints.fact.is_none_or(|f| lacks(call, f));
        }
        candidates += 1;
        let key = (p.created_at, p.seq);
        if first.is_none_or(|f| key < f) {
            first = Some(key);
        }
        if lacking && first_lacking.is_none_or(|f| key < f) {
            first_lacking = Some(key);
        }
    }
    first_lacking.or(first).map(|(_, seq)| Link {
        seq,
        strategy,
        candidates,
    })
}

/// Whether the call still lacks what `fact` would add (so identical calls each get their own).
fn lacks(call: &Call, fact: &Fact) -> bool {
    match fact {
        Fact::ExecStart { .. } => call.started_at().is_none(),
        Fact::ExecEnd { .. } => call.exec_end().is_none(),
        Fact::Approval { decision, .. } => match decision {
            ApprovalDecision::Requested => call.approval().is_none(),
            _ => call
                .approval()
                .is_none_or(|a| a.status == ApprovalDecision::Requested),
        },
        Fact::Hook { entry } => !call.hooks().iter().any(|h| h.hook == entry.hook),
    }
}

fn merge_attributes(into: &mut Option<Map<String, Value>>, from: Option<Map<String, Value>>) {
    match (into.as_mut(), from) {
        (_, None) => {}
        (None, Some(m)) => *into = Some(m),
        (Some(a), Some(m)) => a.extend(m),
    }
}

/// [`merge_attributes`] into a call, allocating its rarely set part only when there are some.
fn merge_call_attributes(call: &mut Call, from: Option<Map<String, Value>>) {
    if from.is_some() {
        merge_attributes(&mut call.more_mut().attributes, from);
    }
}

fn encode(entry: &EntryRef<'_>) -> Vec<u8> {
    crate::codec::encode(entry)
}

// -------------------------------------------------------------------------------------------------
// The memory estimate. `benches/processor` measures the real figure (RSS); these constants are
// what it found each structure costs per entry.

/// A glibc malloc chunk for a request of `n` bytes: `n` plus an 8-byte header, rounded up to 16,
/// at least 32. Nothing is allocated for 0 bytes.
const fn chunk(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    let c = (n + 8 + 15) & !15;
    if c < 32 {
        32
    } else {
        c
    }
}

/// One entry of a B-tree with 16-byte entries (`timers`: (time, seq)). Entries come in ascending
/// order, so a full leaf splits into one of 6 entries, one entry moved up and the rest: a 208-byte
/// leaf per 7 entries, and a 304-byte inner node per ~7 leaves.
const BTREE_ENTRY: usize = 37;
/// One entry of a hash map with 16-byte buckets (`live`: seq → box): a bucket and a control byte
/// at the load a table that doubles when 7/8 full has on average (0.65).
const MAP_SLOT: usize = 26;
/// One entry of a B-tree set of 8-byte keys (a scope's loose groups).
const BTREE_SET_ENTRY: usize = 24;
/// One `u64` slot of a hash table (8 bytes and a control byte) at the load a table that doubles
/// when 7/8 full has on average (0.65).
const TABLE_SLOT: usize = 14;
/// One [`Pending`] in a growing vector (a tool's calls), with the slack of doubling.
const VEC_SLOT: usize = std::mem::size_of::<Pending>() * 11 / 8;
/// Per entry of a JSON object kept in memory (`serde_json::Map`): node share, key, small value.
const MAP_ENTRY: usize = 128;
/// Per hook decision, approval or fact kept.
const FACT: usize = 160;

/// Bytes held by a verbatim JSON value (its text, boxed).
fn json_bytes(j: &Json) -> usize {
    chunk(j.as_str().len())
}

fn str_bytes(s: &str) -> usize {
    chunk(s.len())
}

fn map_bytes(m: &Map<String, Value>) -> usize {
    m.len() * MAP_ENTRY
}

fn more_bytes(m: &More) -> usize {
    chunk(std::mem::size_of::<More>())
        + m.aliases
            .iter()
            .map(|a| 24 + str_bytes(a.as_str()) + TABLE_SLOT + 24)
            .sum::<usize>()
        + m.side_effects
            .as_ref()
            .and_then(|s| s.idempotency_key.as_deref())
            .map_or(0, |k| str_bytes(k) * 2 + TABLE_SLOT + 24)
        + m.agent.as_deref().map_or(0, str_bytes)
        + m.execution.as_deref().map_or(0, str_bytes)
        + m.hook_context.as_ref().map_or(0, map_bytes)
        + m.attributes.as_ref().map_or(0, map_bytes)
        + m.hooks.len() * FACT
        + m.approval.as_ref().map_or(0, |_| FACT)
}

/// The estimate for one pending call: its allocation, its strings and JSON, and its entries in
/// `live`, `timers`, `by_record`, its tool slot, and the scope's id and checksum tables.
fn call_bytes(call: &Call) -> usize {
    chunk(std::mem::size_of::<Live>())
        + BTREE_ENTRY
        + MAP_SLOT
        + TABLE_SLOT
        + VEC_SLOT
        + str_bytes(&call.key)
        + call.turn.as_deref().map_or(0, str_bytes)
        + call.args.as_ref().map_or(0, json_bytes)
        + if call.has_id { TABLE_SLOT } else { 0 }
        + if call.checksum.is_some() {
            TABLE_SLOT
        } else {
            0
        }
        + call.more.as_deref().map_or(0, more_bytes)
}

fn loose_bytes(loose: &Loose) -> usize {
    chunk(std::mem::size_of::<Live>())
        + chunk(std::mem::size_of::<Loose>())
        + BTREE_ENTRY
        + MAP_SLOT
        + TABLE_SLOT
        + BTREE_SET_ENTRY
        + str_bytes(&loose.key)
        + if loose.has_id { TABLE_SLOT } else { 0 }
        + loose.turn.as_deref().map_or(0, str_bytes)
        + loose.tool.as_deref().map_or(0, str_bytes)
        + loose.args.as_ref().map_or(0, json_bytes)
        + loose
            .done
            .as_ref()
            .and_then(|d| d.result.as_ref())
            .map_or(0, json_bytes)
        + loose.facts.len() * FACT
        + loose.attributes.as_ref().map_or(0, map_bytes)
}

fn live_bytes(live: &Live) -> usize {
    match live {
        Live::Call(c) => call_bytes(c),
        Live::Loose(l) => loose_bytes(l),
    }
}

fn approval_of_facts(
    facts: Vec<Fact>,
) -> (
    Option<ApprovalState>,
    Vec<HookDecisionEntry>,
    Option<Timestamp>,
    Option<ExecEnd>,
) {
    let mut approval: Option<ApprovalState> = None;
    let mut hooks = Vec::new();
    let mut started = None;
    let mut end = None;
    for fact in facts {
        match fact {
            Fact::ExecStart { at } => started = Some(at),
            Fact::ExecEnd { end: e, started_at } => {
                end = Some(e);
                started = started.or(started_at);
            }
            Fact::Approval {
                at,
                decision,
                by,
                reason,
            } => {
                let a = approval.get_or_insert(ApprovalState {
                    required: true,
                    status: decision,
                    requested_at: None,
                    approved_by: None,
                    approved_at: None,
                    reason: None,
                });
                if decision == ApprovalDecision::Requested {
                    a.requested_at = Some(at);
                } else {
                    a.status = decision;
                    a.approved_by = by;
                    a.approved_at = Some(at);
                    a.reason = reason;
                }
            }
            Fact::Hook { entry } => hooks.push(entry),
        }
    }
    (approval, hooks, started, end)
}

fn record_of_call(
    call: Call,
    scope: &ScopeKey,
    tool: String,
    done: Option<Done>,
    phase: Phase,
    reason: Option<&str>,
    link: Link,
) -> ToolCallRecord {
    let more = call.more.map(|m| *m).unwrap_or_default();
    let started_at = done
        .as_ref()
        .and_then(|d| d.started_at)
        .or(more.started_at)
        .or(Some(call.created_at));
    let completed_at = done
        .as_ref()
        .map(|d| d.at)
        .or(more.exec_end.as_ref().map(|e| e.at));
    let duration_ms = done
        .as_ref()
        .and_then(|d| d.duration_ms)
        .or(more.exec_end.as_ref().and_then(|e| e.duration_ms))
        .or_else(|| Some(completed_at?.millis_since(started_at?)));
    let is_error = done
        .as_ref()
        .map_or(more.exec_end.as_ref().is_some_and(|e| e.is_error), |d| {
            d.is_error
        });
    let side_effects = more.side_effects.unwrap_or_default();
    let replay = ReplayPolicy::derive(&side_effects);
    let key = call.key.into_string();
    ToolCallRecord {
        api_version: toolcalls_model::record::API_VERSION.into(),
        kind: toolcalls_model::record::KIND.into(),
        metadata: Metadata {
            name: call.record_id,
            revision: 1,
            source: scope.source.clone(),
            session: scope.session.clone(),
            thread: scope.thread.clone(),
            turn: call.turn.map(|t| TurnId(t.into_string())),
        },
        stream_id: call.has_id.then(|| CallId(key.clone())),
        checksum: call.checksum.map(|s| s.checksum()),
        created_at: call.created_at,
        updated_at: call.updated_at,
        spec: Spec {
            execution_ref: more.execution.map(|name| Ref { name }),
            agent_ref: more.agent.map(|name| Ref { name }),
            tool_ref: Some(Ref { name: tool }),
            input: call.args,
            side_effects,
            approval: more.approval,
            hook_context: more.hook_context,
        },
        status: Status {
            phase,
            started_at,
            completed_at,
            duration_ms,
            output: done.and_then(|d| d.result),
            is_error,
            hook_decisions: more.hooks,
            reason: reason.map(str::to_owned),
        },
        correlation: Correlation {
            strategy: link.strategy,
            confidence: link.confidence(),
            candidates: link.candidates,
            events_merged: call.events,
            duplicates: call.duplicates,
            attempts: call.attempts,
            key,
        },
        replay,
        attributes: more.attributes,
    }
}

fn record_of_loose(loose: Loose, scope: &ScopeKey, phase: Phase, reason: &str) -> ToolCallRecord {
    let (approval, hooks, started, end) = approval_of_facts(loose.facts);
    let done = loose.done;
    let started_at = done.as_ref().and_then(|d| d.started_at).or(started);
    let completed_at = done.as_ref().map(|d| d.at).or(end.as_ref().map(|e| e.at));
    let duration_ms = done
        .as_ref()
        .and_then(|d| d.duration_ms)
        .or(end.as_ref().and_then(|e| e.duration_ms))
        .or_else(|| Some(completed_at?.millis_since(started_at?)));
    let is_error = done
        .as_ref()
        .map_or(end.as_ref().is_some_and(|e| e.is_error), |d| d.is_error);
    let key = loose.key.into_string();
    ToolCallRecord {
        api_version: toolcalls_model::record::API_VERSION.into(),
        kind: toolcalls_model::record::KIND.into(),
        metadata: Metadata {
            name: loose.record_id,
            revision: 1,
            source: scope.source.clone(),
            session: scope.session.clone(),
            thread: scope.thread.clone(),
            turn: loose.turn.map(|t| TurnId(t.into_string())),
        },
        stream_id: loose.has_id.then(|| CallId(key.clone())),
        checksum: loose.checksum.map(|s| s.checksum()),
        created_at: loose.first_at,
        updated_at: loose.updated_at,
        spec: Spec {
            execution_ref: None,
            agent_ref: None,
            tool_ref: loose.tool.map(|name| Ref {
                name: name.into_string(),
            }),
            input: loose.args,
            side_effects: Default::default(),
            approval,
            hook_context: None,
        },
        status: Status {
            phase,
            started_at,
            completed_at,
            duration_ms,
            output: done.and_then(|d| d.result),
            is_error,
            hook_decisions: hooks,
            reason: Some(reason.to_owned()),
        },
        correlation: Correlation {
            strategy: Strategy::Unmatched,
            confidence: 0.0,
            candidates: 0,
            events_merged: loose.events,
            duplicates: loose.duplicates,
            attempts: 1,
            key,
        },
        replay: ReplayPolicy::RequiresOverride,
        attributes: loose.attributes,
    }
}
