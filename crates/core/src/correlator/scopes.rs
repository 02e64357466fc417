//! The scope table, and per scope its indexes and tool slots. Everything in a scope points into
//! [`Entries`](super::entries::Entries) by sequence number (docs/ARCHITECTURE.md, Correlation →
//! Scope and → Memory).

use super::forgotten_scopes::{ForgottenScope, ForgottenScopes};
use super::hasher::{shrink_if_sparse, HashMap, Hasher};
use super::timers::Timers;
use crate::state::{Call, ScopeIx, ScopeKey};
use hashbrown::HashTable;
use std::collections::BTreeSet;
use std::hash::BuildHasher;
use toolcalls_model::{Source, Timestamp};

/// Most slots a scope keeps named while no call of their tool is pending. A tool's calls mostly
/// come one at a time, so without them each call would make its slot (the name twice, the
/// vector, a table insert) and free it again when it closes; a scope uses a handful of tools.
const MAX_IDLE_TOOLS: u32 = 16;

/// Most distinct sources a scope table shares (a handful in practice; past it, scopes keep
/// their own).
const MAX_SHARED_SOURCES: usize = 64;

/// A tool name of a scope and its pending calls (unordered; the rules pick by created time).
#[derive(Debug, Default)]
pub(super) struct Tool {
    name: Box<str>,
    pub(super) calls: Vec<Pending>,
}

/// A pending call as its tool slot holds it: with what rules 3 and 4 filter and order on, so
/// scanning a slot reads no entry that cannot fit. While a call is pending its created time and
/// turn never change, and an id, once it names the call, stays: a candidate the slot rules out
/// is out; one it lets through is checked against the call where the slot cannot tell for sure.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pending {
    pub(super) seq: u64,
    pub(super) created_at: Timestamp,
    /// The low bits of the turn's hash ([`turn_hash`]), if the call has a turn.
    turn: u32,
    flags: u8,
}

impl Pending {
    const HAS_TURN: u8 = 1;
    /// Set when the call had an id when it was filed; an id-less call may gain one later.
    const HAS_ID: u8 = 2;

    pub(super) fn of(seq: u64, call: &Call, hs: &Hasher) -> Self {
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

    pub(super) fn turn(&self) -> Option<u32> {
        (self.flags & Self::HAS_TURN != 0).then_some(self.turn)
    }

    pub(super) fn has_id(&self) -> bool {
        self.flags & Self::HAS_ID != 0
    }
}

pub(super) fn turn_hash(hs: &Hasher, turn: &str) -> u32 {
    hs.hash_one(turn) as u32
}

/// The indexes of one scope.
#[derive(Debug)]
pub(super) struct Scope {
    pub(super) key: ScopeKey,
    /// Entries (pending and closed) and held events of this scope; at 0 the scope is dropped.
    pub(super) refs: u32,
    /// Entries by their first id ([`Entries::primary_id`](super::entries::Entries::primary_id)):
    /// live calls, waiting results, closed calls.
    pub(super) ids: HashTable<u64>,
    /// Ids beyond an entry's first (collapsed retries, ids taken over from waiting results).
    pub(super) aliases: HashMap<Box<str>, u64>,
    /// Pending calls by checksum; several calls may share one.
    pub(super) by_checksum: HashTable<u64>,
    /// Tool slots; `Call::tool` indexes them. A slot whose last call goes stays named, idle, for
    /// the tool's next call, unless `MAX_IDLE_TOOLS` are idle already: then it is freed.
    pub(super) tools: Vec<Tool>,
    free_tools: Vec<u32>,
    idle_tools: u32,
    pub(super) tool_ix: HashMap<Box<str>, u32>,
    /// Waiting results in arrival order.
    pub(super) waiting: BTreeSet<u64>,
    /// Idempotency key → the live or closed call that holds it.
    pub(super) idem: HashMap<String, u64>,
    /// Repeat key of an event without an id → the live or closed entry that holds the event
    /// (`repeats.rs`).
    pub(super) repeats: HashMap<u64, u64>,
    /// Entries (pending or remembered) of calls announced with an id of their own. While there
    /// are any, the scope's calls carry ids: a result with an id waits for its own announce
    /// instead of taking an id-less call by a fallback (docs/ARCHITECTURE.md, Correlation →
    /// Rules). Counted from the entries, so a restored scope says the same.
    pub(super) id_calls: u32,
    /// The scope's own event time: the largest event time of its events on each input topic
    /// (a third topic and beyond count as the second; the processor reads two).
    pub(super) clocks: [Option<Timestamp>; 2],
    /// Its clock, the watermark of `clocks` ([`watermark`]). Its deadlines fire as it passes
    /// them (docs/ARCHITECTURE.md, Correlation → Time).
    pub(super) clock: Option<Timestamp>,
    /// The scope went idle (`clock.rs`): its deadlines follow the partition's stream time until
    /// its next event.
    pub(super) idle: bool,
    /// Wall time when its last event came, as the runtime last told it (`Correlator::tick`);
    /// `None` until the runtime tells the time after that.
    pub(super) active_wall: Option<Timestamp>,
    /// The deadlines of its entries, (when, seq).
    pub(super) timers: Timers,
    /// Its changelog key (a sequence number of its own), once numbered.
    pub(super) seq: Option<u64>,
    /// The position of its last change since the last checkpoint, once its key is in the
    /// changelog's list of changes: one note per checkpoint will do (every event of the scope
    /// moves its clock), and the note's position is read from here.
    pub(super) changed_at: Option<crate::Position>,
    /// The largest event time of its events that came in on each input topic, applied or held
    /// in the reorder window; their [`watermark`] is what the window measures a held event's
    /// wait against (`disorder.rs`).
    pub(super) arrived: [Option<Timestamp>; 2],
    /// The latest close, by its time, of the calls it forgot by their deadline
    /// (`forgotten.rs`): an event no entry holds stamped no later is taken for a copy of one.
    pub(super) forgot_upto: Option<Timestamp>,
}

impl Scope {
    fn new(key: ScopeKey) -> Self {
        Scope {
            key,
            refs: 0,
            ids: HashTable::new(),
            aliases: HashMap::default(),
            by_checksum: HashTable::new(),
            tools: Vec::new(),
            free_tools: Vec::new(),
            idle_tools: 0,
            tool_ix: HashMap::default(),
            waiting: BTreeSet::new(),
            idem: HashMap::default(),
            repeats: HashMap::default(),
            id_calls: 0,
            clocks: [None; 2],
            clock: None,
            idle: false,
            active_wall: None,
            timers: Timers::default(),
            seq: None,
            changed_at: None,
            arrived: [None; 2],
            forgot_upto: None,
        }
    }

    /// Whether calls of this scope carry ids (see `id_calls`).
    pub(super) fn calls_carry_ids(&self) -> bool {
        self.id_calls > 0
    }

    pub(super) fn tool_name(&self, slot: u32) -> &str {
        &self.tools[slot as usize].name
    }

    /// The slot of tool `name`, for a call about to be filed in it: made if the scope has none.
    pub(super) fn tool_slot(&mut self, name: &str) -> u32 {
        if let Some(&slot) = self.tool_ix.get(name) {
            if self.tools[slot as usize].calls.is_empty() {
                self.idle_tools -= 1;
            }
            return slot;
        }
        let slot = match self.free_tools.pop() {
            Some(slot) => {
                self.tools[slot as usize].name = name.into();
                slot
            }
            None => {
                self.tools.push(Tool {
                    name: name.into(),
                    calls: Vec::new(),
                });
                (self.tools.len() - 1) as u32
            }
        };
        self.tool_ix.insert(name.into(), slot);
        slot
    }

    pub(super) fn remove_tool_call(&mut self, slot: u32, seq: u64) {
        let tool = &mut self.tools[slot as usize];
        if let Some(i) = tool.calls.iter().position(|p| p.seq == seq) {
            tool.calls.swap_remove(i);
        }
        if tool.calls.is_empty() {
            if self.idle_tools < MAX_IDLE_TOOLS {
                self.idle_tools += 1;
                // A burst's memory goes back; the name and a little room stay.
                tool.calls.shrink_to(4);
            } else {
                self.tool_ix.remove(&*tool.name);
                *tool = Tool::default();
                self.free_tools.push(slot);
            }
        } else if tool.calls.capacity() > 64 && tool.calls.len() * 4 < tool.calls.capacity() {
            tool.calls.shrink_to(tool.calls.len() * 2);
        }
    }

    /// Every pending call of the scope.
    pub(super) fn calls(&self) -> impl Iterator<Item = Pending> + '_ {
        self.tools.iter().flat_map(|t| t.calls.iter().copied())
    }
}

/// The scope table: slots indexed by [`ScopeIx`], found by key through a hash table of indexes.
#[derive(Debug, Default)]
pub(super) struct Scopes {
    /// Each scope boxed: a slot freed by a dropped scope keeps 8 bytes, not a whole scope's,
    /// for as long as the table keeps the size its busiest moment gave it.
    pub(super) slots: Vec<Option<Box<Scope>>>,
    free: Vec<ScopeIx>,
    index: HashTable<ScopeIx>,
    /// Scopes that may have no entry left; dropped at the end of the step if they still have none.
    empty: Vec<ScopeIx>,
    /// Scopes by their changelog key.
    pub(super) by_seq: HashMap<u64, ScopeIx>,
    /// Changelog keys of scopes dropped since the last look, and of notes of dropped scopes gone
    /// past their bound: their values become the scope's note in `forgotten`, or tombstones.
    pub(super) dropped: Vec<u64>,
    /// The notes of scopes dropped after they forgot everything, by changelog key
    /// (`forgotten_scopes.rs`); a scope made again under a noted key takes its note back.
    pub(super) forgotten: ForgottenScopes,
    /// The sources of its scopes, each held once (up to `MAX_SHARED_SOURCES`): the scopes of a
    /// source share its text, so finding a scope by key compares against a source that stays in
    /// cache rather than one of its own per scope.
    sources: Vec<Source>,
}

impl Scopes {
    pub(super) fn get(&self, ix: ScopeIx) -> &Scope {
        self.slots[ix as usize]
            .as_ref()
            .expect("an entry's scope exists while the entry does")
    }

    pub(super) fn get_mut(&mut self, ix: ScopeIx) -> &mut Scope {
        self.slots[ix as usize]
            .as_mut()
            .expect("an entry's scope exists while the entry does")
    }

    /// The index of the scope `key`, made if it does not exist: with its changelog key and the
    /// time up to which it forgot its calls when it was dropped and noted.
    pub(super) fn intern(&mut self, key: ScopeKey, hs: &Hasher) -> ScopeIx {
        let h = hs.hash_one(&key);
        let slots = &self.slots;
        if let Some(&ix) = self.index.find(h, |&i| {
            slots[i as usize].as_ref().is_some_and(|s| s.key == key)
        }) {
            return ix;
        }
        let noted = self.forgotten.take(&key, hs);
        let mut scope = Box::new(Scope::new(self.share_source(key)));
        if let Some((seq, upto)) = noted {
            scope.seq = Some(seq);
            scope.forgot_upto = Some(upto);
        }
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
        if let Some((seq, _)) = noted {
            self.by_seq.insert(seq, ix);
        }
        // Nothing refers to it yet: dropped at the end of the step unless an entry does by then.
        self.empty.push(ix);
        ix
    }

    /// The index of the scope `key`, if it exists.
    pub(super) fn find(&self, key: &ScopeKey, hs: &Hasher) -> Option<ScopeIx> {
        let slots = &self.slots;
        self.index
            .find(hs.hash_one(key), |&i| {
                slots[i as usize].as_ref().is_some_and(|s| s.key == *key)
            })
            .copied()
    }

    /// `key` with its source's shared text.
    fn share_source(&mut self, mut key: ScopeKey) -> ScopeKey {
        match self.sources.iter().find(|s| **s == key.source) {
            Some(shared) => key.source = shared.clone(),
            None if self.sources.len() < MAX_SHARED_SOURCES => {
                self.sources.push(key.source.clone())
            }
            None => {}
        }
        key
    }

    pub(super) fn unref(&mut self, ix: ScopeIx) {
        let scope = self.get_mut(ix);
        scope.refs -= 1;
        if scope.refs == 0 {
            self.empty.push(ix);
        }
    }

    /// Drops the scopes left without entries; of those that forgot calls of their own, keeps a
    /// note, at most `max_notes` of them.
    pub(super) fn sweep(&mut self, hs: &Hasher, max_notes: usize) {
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
            let Some(scope) = self.slots[ix as usize].take() else {
                continue;
            };
            if let Some(seq) = scope.seq {
                self.by_seq.remove(&seq);
                self.dropped.push(seq);
                if let (Some(upto), true) = (scope.forgot_upto, max_notes > 0) {
                    let note = ForgottenScope {
                        key: scope.key,
                        upto,
                    };
                    self.forgotten.insert(seq, note, hs);
                }
            }
            self.free.push(ix);
        }
        let gone = self.forgotten.trim(max_notes, hs);
        self.dropped.extend(gone);
        shrink_if_sparse(&mut self.by_seq);
    }
}

/// A scope's clock from its clocks per input topic: with one topic, its clock; with two, the
/// older of the two once both have delivered an event of the scope — so that a topic read ahead
/// of the other does not move the scope past deadlines whose events are still unread there.
pub(super) fn watermark(clocks: &[Option<Timestamp>; 2], input_topics: u16) -> Option<Timestamp> {
    if input_topics <= 1 {
        return clocks[0].max(clocks[1]);
    }
    Some(clocks[0]?.min(clocks[1]?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use toolcalls_model::SessionId;

    fn scope() -> Scope {
        Scope::new(ScopeKey {
            source: Source::from("s"),
            session: SessionId::from("x"),
            thread: None,
        })
    }

    fn file(scope: &mut Scope, tool: &str, seq: u64) -> u32 {
        let slot = scope.tool_slot(tool);
        scope.tools[slot as usize].calls.push(Pending {
            seq,
            created_at: Timestamp(0),
            turn: 0,
            flags: 0,
        });
        slot
    }

    #[test]
    fn a_tool_keeps_its_slot_between_calls() {
        let mut s = scope();
        let slot = file(&mut s, "Read", 1);
        s.remove_tool_call(slot, 1);
        assert_eq!(s.tool_name(slot), "Read", "idle, still named");
        assert!(s.tools[slot as usize].calls.is_empty());
        assert_eq!(file(&mut s, "Read", 2), slot);
        assert_eq!(s.idle_tools, 0);
        assert_eq!(file(&mut s, "Bash", 3), slot + 1);
        assert_eq!(s.calls().map(|p| p.seq).collect::<Vec<_>>(), [2, 3]);
    }

    #[test]
    fn idle_slots_are_bounded() {
        let mut s = scope();
        let tools = 3 * MAX_IDLE_TOOLS as u64;
        for seq in 0..tools {
            let slot = file(&mut s, &format!("tool-{seq}"), seq);
            s.remove_tool_call(slot, seq);
            assert!(s.idle_tools <= MAX_IDLE_TOOLS);
        }
        assert_eq!(s.idle_tools, MAX_IDLE_TOOLS);
        assert_eq!(s.tool_ix.len(), MAX_IDLE_TOOLS as usize);
        assert_eq!(
            s.tools.len(),
            MAX_IDLE_TOOLS as usize + 1,
            "freed slots are reused"
        );
        // Every named slot is found by its name, and a freed one is made again.
        for (name, &slot) in &s.tool_ix {
            assert_eq!(s.tool_name(slot), &**name);
        }
        let slot = file(&mut s, "tool-0", 99);
        assert_eq!(s.tool_name(slot), "tool-0");
        assert_eq!(s.calls().map(|p| p.seq).collect::<Vec<_>>(), [99]);
    }

    fn key(source: &str, session: &str) -> ScopeKey {
        ScopeKey {
            source: Source::from(source),
            session: SessionId::from(session),
            thread: None,
        }
    }

    #[test]
    fn scopes_of_a_source_share_its_text() {
        let hs = Hasher::default();
        let mut scopes = Scopes::default();
        let a = scopes.intern(key("claude-code", "s1"), &hs);
        let b = scopes.intern(key("claude-code", "s2"), &hs);
        let c = scopes.intern(key("codex", "s1"), &hs);
        assert_eq!(scopes.intern(key("claude-code", "s1"), &hs), a);
        let source = |ix| scopes.get(ix).key.source.0.clone();
        assert!(Arc::ptr_eq(&source(a), &source(b)));
        assert_eq!(&*source(c), "codex");
        assert_eq!(scopes.get(b).key, key("claude-code", "s2"));
    }

    #[test]
    fn past_the_bound_a_scope_keeps_its_own() {
        let hs = Hasher::default();
        let mut scopes = Scopes::default();
        for i in 0..MAX_SHARED_SOURCES + 10 {
            scopes.intern(key(&format!("source-{i}"), "s"), &hs);
        }
        assert_eq!(scopes.sources.len(), MAX_SHARED_SOURCES);
        let last = scopes.intern(key("late", "s"), &hs);
        assert_eq!(scopes.get(last).key, key("late", "s"));
    }
}
