//! Filing entries in the tables that find them — per scope by call id, by checksum, by
//! idempotency key and in its tool slot, per partition by record id and deadline — and taking
//! them out again. The tables hold sequence numbers only; a key is read from its entry (in
//! [`Entries`]) to compare on lookup and, but in the id tables ([`Filed`]), to rehash on growth
//! (docs/ARCHITECTURE.md, Correlation → Memory).

use super::entries::Entries;
use super::footprint::{call_bytes, live_bytes, waiting_bytes};
use super::hasher::{HashMap, Hasher, SPREAD};
use super::scopes::{Pending, Scope};
use super::timers::Kind;
use super::Correlator;
use crate::state::{position_key, Closed, Digest, Live, ScopeIx, WaitingResult};
use hashbrown::HashTable;
use std::hash::BuildHasher;
use toolcalls_model::{CallId, RecordId};

impl Correlator {
    pub(super) fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// The key a new entry's record id derives from — its call id, or `@topic:offset` of the event
    /// being applied — whether that is a call id, and the record id.
    pub(super) fn record_key(
        &self,
        ix: ScopeIx,
        call_id: Option<CallId>,
    ) -> (Box<str>, bool, RecordId) {
        let (key, has_id) = match call_id {
            Some(id) => (id.0.into_boxed_str(), true),
            None => (position_key(self.pos).into_boxed_str(), false),
        };
        let sk = &self.scopes.get(ix).key;
        let record_id = RecordId::derive(&sk.source, &sk.session, sk.thread.as_ref(), &key);
        (key, has_id, record_id)
    }

    /// Files a new pending call (a [`Live::Call`] whose `scope` is set; its `tool` slot is set
    /// here) under every index.
    pub(super) fn insert_call(
        &mut self,
        seq: u64,
        mut live: Box<Live>,
        tool: &str,
        repeat: Option<u64>,
    ) {
        let Live::Call(call) = &mut *live else {
            debug_assert!(false, "insert_call takes calls");
            return;
        };
        call.elide_key();
        let ix = call.scope;
        let scope = self.scopes.get_mut(ix);
        scope.refs += 1;
        scope.id_calls += u32::from(call.has_id);
        if let Some(key) = repeat {
            scope.repeats.insert(key, seq);
        }
        for &key in call.kept_repeats() {
            scope.repeats.insert(key, seq);
        }
        let slot = scope.tool_slot(tool);
        scope.tools[slot as usize]
            .calls
            .push(Pending::of(seq, call, &self.hs));
        call.tool = slot;
        if let Some(key) = call.idempotency_key() {
            claim(&mut scope.idem, key, seq);
        }
        scope.timers.insert(call.deadline, seq, Kind::Call);
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
        if let Some(digest) = &call.checksum {
            insert_checksum(scope, entries, hs, digest, seq);
        }
        if let Some(id) = call.call_id() {
            file_id(scope, entries, hs, id, Filed::live(seq), IdSlot::Primary);
        }
        for id in call.aliases() {
            file_id(
                scope,
                entries,
                hs,
                id.as_str(),
                Filed::live(seq),
                IdSlot::Alias,
            );
        }
    }

    pub(super) fn insert_waiting(
        &mut self,
        seq: u64,
        waiting: Box<WaitingResult>,
        repeat: Option<u64>,
    ) {
        let ix = waiting.scope;
        let scope = self.scopes.get_mut(ix);
        scope.refs += 1;
        scope.waiting.insert(seq);
        if let Some(key) = repeat {
            scope.repeats.insert(key, seq);
            self.waiting_repeats.insert(seq, key);
        }
        scope.timers.insert(waiting.deadline, seq, Kind::Waiting);
        self.pending_bytes += waiting_bytes(&waiting);
        let record_h = self.hs.hash_one(waiting.record_id);
        let has_id = waiting.has_id;
        self.entries
            .live
            .insert(seq, Box::new(Live::Waiting(waiting)));
        let (entries, hs) = (&self.entries, &self.hs);
        self.by_record
            .insert_unique(record_h, seq, |&s| record_hash(entries, hs, s));
        if has_id {
            if let Some(id) = entries.primary_id(seq) {
                file_id(
                    self.scopes.get_mut(ix),
                    entries,
                    hs,
                    id,
                    Filed::live(seq),
                    IdSlot::Primary,
                );
            }
        }
    }

    /// Remembers closed entry `seq`, filing its ids but those `filed` says are in place already
    /// (see [`Correlator::close_live_call`]).
    pub(super) fn insert_closed(&mut self, seq: u64, closed: Closed, filed: &IdsFiled) {
        let ix = closed.scope;
        let scope = self.scopes.get_mut(ix);
        scope.refs += 1;
        if let Some(idem) = &closed.idem {
            claim(&mut scope.idem, &idem.key, seq);
        }
        for &key in &closed.repeats {
            scope.repeats.insert(key, seq);
        }
        scope.id_calls += u32::from(closed.announced_with_id);
        scope.timers.insert(closed.expires, seq, Kind::Closed);
        // Most closed calls keep the ids they had pending: then nothing needs the entry again.
        let unfiled = (0..closed.ids.len()).any(|i| !filed.has(i));
        self.entries.insert_closed(seq, closed);
        if !unfiled {
            return;
        }
        let (entries, hs) = (&self.entries, &self.hs);
        let Some(closed) = entries.closed.get(&seq) else {
            return;
        };
        let scope = self.scopes.get_mut(ix);
        for (i, id) in closed.ids.iter().enumerate() {
            if !filed.has(i) {
                let at = Filed::closed(seq);
                file_id(scope, entries, hs, id.as_str(), at, IdSlot::of_closed(i));
            }
        }
    }

    /// Takes a pending call with an id out of every index but the id tables, to be remembered
    /// as a closed call under the same number at once: its ids — first its own, then its
    /// aliases, as [`Closed::ids`] lists them — keep naming it where they do, instead of being
    /// taken out and filed again (the churn made the id tables rehash, reading every key). The
    /// ids that name another entry by now are left out of the returned [`IdsFiled`], so that
    /// filing the closed call treats them as it always does.
    pub(super) fn close_live_call(&mut self, seq: u64) -> Option<(Box<Live>, IdsFiled)> {
        let filed = match self.entries.live(seq)? {
            Live::Call(call) if call.has_id => {
                let scope = self.scopes.get_mut(call.scope);
                let hs = &self.hs;
                let primary = call.call_id().into_iter().map(|id| (id, IdSlot::Primary));
                let aliases = call.aliases().iter().map(|id| (id.as_str(), IdSlot::Alias));
                let missing: Vec<usize> = primary
                    .chain(aliases)
                    .enumerate()
                    .filter(|&(_, (id, slot))| !keep_for_closed(scope, hs, id, seq, slot))
                    .map(|(i, _)| i)
                    .collect();
                IdsFiled::AllBut(missing)
            }
            _ => IdsFiled::None,
        };
        let keep = matches!(filed, IdsFiled::AllBut(_));
        self.take_live(seq, keep).map(|live| (live, filed))
    }

    /// Takes a live entry out of every index.
    pub(super) fn remove_live(&mut self, seq: u64) -> Option<Box<Live>> {
        self.take_live(seq, false)
    }

    /// Takes a live entry out of every index, or — `keep_ids`, for a call only — every index
    /// but the id tables.
    fn take_live(&mut self, seq: u64, keep_ids: bool) -> Option<Box<Live>> {
        let live = self.entries.live.remove(&seq)?;
        let hs = &self.hs;
        self.pending_bytes -= live_bytes(&live);
        let ix = match &*live {
            Live::Call(call) => {
                self.pending_calls -= 1;
                remove_record(&mut self.by_record, hs, &call.record_id, seq);
                let scope = self.scopes.get_mut(call.scope);
                scope.timers.remove(call.deadline, seq, Kind::Call);
                scope.id_calls -= u32::from(call.has_id);
                // A call's repeat key stays filed: a call leaves only by closing, and the
                // closed call that takes its number is remembered by that key.
                scope.remove_tool_call(call.tool, seq);
                if let Some(digest) = &call.checksum {
                    remove_checksum(scope, hs, digest, seq);
                }
                if !keep_ids {
                    if let Some(id) = call.call_id() {
                        release_id(scope, hs, id, seq, IdSlot::Primary);
                    }
                    for id in call.aliases() {
                        release_id(scope, hs, id.as_str(), seq, IdSlot::Alias);
                    }
                }
                if let Some(key) = call.idempotency_key() {
                    if scope.idem.get(key) == Some(&seq) {
                        scope.idem.remove(key);
                    }
                }
                call.scope
            }
            Live::Waiting(waiting) => {
                remove_record(&mut self.by_record, hs, &waiting.record_id, seq);
                let scope = self.scopes.get_mut(waiting.scope);
                scope.timers.remove(waiting.deadline, seq, Kind::Waiting);
                scope.waiting.remove(&seq);
                if let Some(id) = waiting.call_id() {
                    release_id(scope, hs, id, seq, IdSlot::Primary);
                }
                if let Some(key) = self.waiting_repeats.remove(&seq) {
                    release_repeat(scope, key, seq);
                }
                waiting.scope
            }
        };
        self.scopes.unref(ix);
        Some(live)
    }

    /// Forgets a remembered closed call: its ids and idempotency key name nothing any more.
    pub(super) fn expire_closed(&mut self, seq: u64) {
        let Some(closed) = self.entries.closed.remove(&seq) else {
            return;
        };
        self.touch(seq);
        let scope = self.scopes.get_mut(closed.scope);
        scope.timers.remove(closed.expires, seq, Kind::Closed);
        for (i, id) in closed.ids.iter().enumerate() {
            release_id(scope, &self.hs, id.as_str(), seq, IdSlot::of_closed(i));
        }
        if let Some(idem) = &closed.idem {
            if scope.idem.get(&idem.key) == Some(&seq) {
                scope.idem.remove(&idem.key);
            }
        }
        for &key in &closed.repeats {
            release_repeat(scope, key, seq);
        }
        scope.id_calls -= u32::from(closed.announced_with_id);
        self.scopes.unref(closed.scope);
    }
}

/// Takes repeat key `key` out of the scope's table if it names entry `seq`.
fn release_repeat(scope: &mut Scope, key: u64, seq: u64) {
    if scope.repeats.get(&key) == Some(&seq) {
        scope.repeats.remove(&key);
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

/// Which ids of a closed call are filed already as it is remembered: none (a call taken out of
/// every index, or restored), or all but those at the listed places of [`Closed::ids`].
pub(super) enum IdsFiled {
    None,
    AllBut(Vec<usize>),
}

impl IdsFiled {
    fn has(&self, i: usize) -> bool {
        match self {
            IdsFiled::None => false,
            IdsFiled::AllBut(missing) => !missing.contains(&i),
        }
    }
}

/// Whether `id` names pending call `seq` in `slot`'s table of `scope`; if so, it names the
/// closed call `seq` from now on (which must be remembered before the table is touched again).
fn keep_for_closed(scope: &mut Scope, hs: &Hasher, id: &str, seq: u64, slot: IdSlot) -> bool {
    match slot {
        IdSlot::Primary => {
            let held = scope
                .ids
                .find_mut(Filed::table_hash(hs.hash_one(id)), |&at| {
                    Filed::untagged(at) == Filed::live(seq)
                });
            held.map(|at| *at |= Filed::CLOSED).is_some()
        }
        IdSlot::Alias => scope.aliases.get(id) == Some(&seq),
    }
}

/// Which of a scope's id tables an id of an entry is filed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum IdSlot {
    /// The entry's first id ([`Entries::primary_id`]), in `ids`: its key is read from the entry.
    Primary,
    /// Any other id (collapsed retries, ids taken over from waiting results), in `aliases`.
    Alias,
}

impl IdSlot {
    /// The slot of a closed call's `i`-th id.
    fn of_closed(i: usize) -> IdSlot {
        if i == 0 {
            IdSlot::Primary
        } else {
            IdSlot::Alias
        }
    }
}

/// How the `ids` table of a scope files an entry: its sequence number, with [`Filed::CLOSED`] set
/// for a remembered closed call, so that reading its key on a probe looks in the one map that
/// holds it, and the top [`Filed::TAG_BITS`] bits of its id's hash, from which the table's hash is
/// made: a rehash as the table grows reads no entry (reading every entry's id through its map
/// cost as much as the lookups). Sequence numbers stay below [`SEQ_LIMIT`](super::SEQ_LIMIT).
///
/// The table tells at most 2^16 hashes apart per scope, so in a scope that holds more ids than
/// that a lookup compares the keys of the few entries that share its tag.
pub(super) struct Filed;

impl Filed {
    const CLOSED: u64 = super::SEQ_LIMIT;
    const TAG_BITS: u32 = 16;
    const TAG_SHIFT: u32 = u64::BITS - Self::TAG_BITS;

    /// Pending entry `seq`, before [`Filed::with_tag`].
    fn live(seq: u64) -> u64 {
        debug_assert!(seq < Self::CLOSED, "entry numbers stay below SEQ_LIMIT");
        seq
    }

    /// Remembered closed call `seq`, before [`Filed::with_tag`].
    fn closed(seq: u64) -> u64 {
        Self::live(seq) | Self::CLOSED
    }

    /// `at` ([`Filed::live`] or [`Filed::closed`]) tagged with the id whose hash is `id_hash`.
    fn with_tag(at: u64, id_hash: u64) -> u64 {
        (id_hash >> Self::TAG_SHIFT << Self::TAG_SHIFT) | at
    }

    /// `at` without its tag: [`Filed::live`] or [`Filed::closed`] of its entry.
    fn untagged(at: u64) -> u64 {
        at & ((Self::CLOSED << 1) - 1)
    }

    fn seq(at: u64) -> u64 {
        at & (Self::CLOSED - 1)
    }

    /// Whether `at` may file the id whose hash is `id_hash`: their tags are equal.
    fn tagged(at: u64, id_hash: u64) -> bool {
        at >> Self::TAG_SHIFT == id_hash >> Self::TAG_SHIFT
    }

    /// The table's hash of an id whose hash is `id_hash`, and of what files it: the tag, spread
    /// over the 64 bits (the table takes the bucket from the low bits and a control byte from
    /// the top seven).
    fn table_hash(id_hash: u64) -> u64 {
        (id_hash >> Self::TAG_SHIFT).wrapping_mul(SPREAD)
    }

    /// The id an entry is filed under in the `ids` table.
    fn key(entries: &Entries, at: u64) -> Option<&str> {
        if at & Self::CLOSED != 0 {
            entries.closed_primary_id(Self::seq(at))
        } else {
            entries.live_primary_id(Self::seq(at))
        }
    }

    /// Whether `at` files `id`, whose hash is `id_hash`; the entry is read only when the tags
    /// are equal.
    fn files(entries: &Entries, at: u64, id: &str, id_hash: u64) -> bool {
        Self::tagged(at, id_hash) && Self::key(entries, at) == Some(id)
    }
}

/// The entry of `scope` that call id `id` names.
pub(super) fn id_holder(scope: &Scope, entries: &Entries, hs: &Hasher, id: &str) -> Option<u64> {
    let h = hs.hash_one(id);
    scope
        .ids
        .find(Filed::table_hash(h), |&at| Filed::files(entries, at, id, h))
        .map(|&at| Filed::seq(at))
        .or_else(|| scope.aliases.get(id).copied())
}

/// Files id `id` of entry `seq` (already in `entries`) as the entry is inserted, new or restored:
/// an id held by a newer entry stays there (see [`claim`]).
fn file_id(scope: &mut Scope, entries: &Entries, hs: &Hasher, id: &str, at: u64, slot: IdSlot) {
    point_id(scope, entries, hs, id, at, slot, true);
}

/// Makes alias `id` name entry `seq` (already in `entries`), whichever entry it named before: a
/// retry collapsed into the call, or the id of a waiting result the call took over.
pub(super) fn take_id(scope: &mut Scope, entries: &Entries, hs: &Hasher, id: &str, seq: u64) {
    point_id(
        scope,
        entries,
        hs,
        id,
        Filed::live(seq),
        IdSlot::Alias,
        false,
    );
}

/// Makes `id` name entry `at` (as [`Filed`] numbers it), filed in `slot`'s table: out of
/// whichever table held it before, unless it names that entry there already or — with
/// `newer_keeps` — a newer entry. Used through [`file_id`] (`newer_keeps`) and [`take_id`].
fn point_id(
    scope: &mut Scope,
    entries: &Entries,
    hs: &Hasher,
    id: &str,
    at: u64,
    slot: IdSlot,
    newer_keeps: bool,
) {
    let seq = Filed::seq(at);
    let primary = slot == IdSlot::Primary;
    let h = hs.hash_one(id);
    match scope
        .ids
        .find_entry(Filed::table_hash(h), |&at| Filed::files(entries, at, id, h))
    {
        Ok(found) => {
            let held = Filed::seq(*found.get());
            if (newer_keeps && held > seq) || (held == seq && primary) {
                return;
            }
            found.remove();
        }
        Err(_) => {
            if let Some(&held) = scope.aliases.get(id) {
                if (newer_keeps && held > seq) || (held == seq && !primary) {
                    return;
                }
                scope.aliases.remove(id);
            }
        }
    }
    if primary {
        scope
            .ids
            .insert_unique(Filed::table_hash(h), Filed::with_tag(at, h), |&at| {
                Filed::table_hash(at)
            });
    } else {
        scope.aliases.insert(id.into(), seq);
    }
}

/// Forgets that `id` names entry `seq`, if it still does. The entry may already be out of
/// [`Entries`]: its place in `ids` is found by sequence number.
fn release_id(scope: &mut Scope, hs: &Hasher, id: &str, seq: u64, slot: IdSlot) {
    if slot == IdSlot::Primary {
        let h = hs.hash_one(id);
        if let Ok(held) = scope
            .ids
            .find_entry(Filed::table_hash(h), |&at| Filed::seq(at) == seq)
        {
            held.remove();
            return;
        }
    }
    if scope.aliases.get(id) == Some(&seq) {
        scope.aliases.remove(id);
    }
}

pub(super) fn insert_checksum(
    scope: &mut Scope,
    entries: &Entries,
    hs: &Hasher,
    digest: &Digest,
    seq: u64,
) {
    scope
        .by_checksum
        .insert_unique(hs.hash_one(digest), seq, |&s| {
            let digest = entries.call(s).and_then(|c| c.checksum);
            debug_assert!(digest.is_some(), "a call filed by checksum has one");
            hs.hash_one(digest.unwrap_or(Digest([0; 32])))
        });
}

pub(super) fn remove_checksum(scope: &mut Scope, hs: &Hasher, digest: &Digest, seq: u64) {
    if let Ok(held) = scope
        .by_checksum
        .find_entry(hs.hash_one(digest), |&s| s == seq)
    {
        held.remove();
    }
}

fn record_hash(entries: &Entries, hs: &Hasher, seq: u64) -> u64 {
    let id = entries.record_id(seq);
    debug_assert!(id.is_some(), "a record id is filed for a live entry");
    id.map_or(0, |id| hs.hash_one(id))
}

fn remove_record(table: &mut HashTable<u64>, hs: &Hasher, id: &RecordId, seq: u64) {
    if let Ok(held) = table.find_entry(hs.hash_one(id), |&s| s == seq) {
        held.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::Filed;
    use crate::{Config, Correlator, Effects, Outcome, Position};
    use std::collections::HashMap;
    use std::hash::BuildHasher;
    use toolcalls_model::{Event, Strategy};

    fn event(kind: &str, id: &str, at_ms: u64, body: &str) -> Event {
        let line = format!(
            r#"{{"v":1,"kind":"{kind}","source":"test","session":"s","callId":"{id}","time":"2026-01-01T00:00:{:02}.{:03}Z",{body}}}"#,
            at_ms / 1000,
            at_ms % 1000
        );
        Event::decode(line.as_bytes()).expect("a valid event")
    }

    /// Ids whose hashes share the id table's tag are told apart by their keys: each result pairs
    /// with its own announce, and a repeat of a closed call's result is known as late.
    #[test]
    fn ids_that_share_a_tag_keep_their_own_calls() {
        let mut c = Correlator::without_changelog(Config::default());
        let mut by_tag: HashMap<u64, Vec<String>> = HashMap::new();
        let shared = (0..200_000)
            .map(|n| format!("toolu_{n}"))
            .find_map(|id| {
                let tag = Filed::table_hash(c.hs.hash_one(id.as_str()));
                let ids = by_tag.entry(tag).or_default();
                ids.push(id);
                (ids.len() == 4).then(|| ids.clone())
            })
            .expect("four ids among 200,000 share one of 65,536 tags");
        let (mut out, mut offset) = (Effects::default(), 0);
        let mut apply = |c: &mut Correlator, e: Event| {
            offset += 1;
            c.apply(e, Position { topic: 0, offset }, &mut out)
        };
        // The first three are announced; the fourth only ever answers.
        for (i, id) in shared[..3].iter().enumerate() {
            let args = format!(r#""tool":"Read","args":{{"n":{i}}}"#);
            assert_eq!(
                apply(&mut c, event("announce", id, 0, &args)),
                Outcome::Pending
            );
        }
        let done = |i: usize| format!(r#""result":"r{i}""#);
        for (at, i) in [(10, 1), (20, 2), (30, 0)] {
            assert_eq!(
                apply(&mut c, event("completion", &shared[i], at, &done(i))),
                Outcome::Matched(Strategy::CallId),
                "{}",
                shared[i]
            );
        }
        assert_eq!(
            apply(&mut c, event("completion", &shared[3], 40, &done(3))),
            Outcome::Pending
        );
        assert_eq!(
            apply(&mut c, event("completion", &shared[2], 50, &done(2))),
            Outcome::Late
        );
        let records = std::mem::take(&mut out.records);
        assert_eq!(records.len(), 3);
        for record in records {
            let id = record.stream_id.as_ref().expect("an id").as_str();
            let i = shared.iter().position(|s| s == id).expect("a shared id");
            let input = record.spec.input.as_ref().expect("arguments").as_str();
            assert_eq!(input, format!(r#"{{"n":{i}}}"#), "{id}");
            let output = record.status.output.as_ref().expect("a result").as_str();
            assert_eq!(output, format!(r#""r{i}""#), "{id}");
        }
    }
}
