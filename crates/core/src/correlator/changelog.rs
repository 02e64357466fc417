//! The changelog: which entries changed since the last checkpoint, their values, and the restore
//! that rebuilds a correlator from them (docs/ARCHITECTURE.md, Correlation → State and restore).
//! The values' bytes are `codec`'s.

use super::forgotten_scopes::ForgottenScope;
use super::indexes::IdsFiled;
use super::window::Held;
use super::{repeats, scopes, Correlator, RestoreError, META_SEQ, RESTORED_SEQ_LIMIT, SCOPE_BIT};
use crate::codec::{decode, encode};
use crate::decimal;
use crate::state::{Closed, Entry, EntryRef, Live, Meta, ScopeKey, WaitingResult, META_KEY};
use crate::{ChangelogOp, Config, Position};
use toolcalls_model::Timestamp;

/// A decoded changelog entry whose scope is interned, waiting to be inserted.
enum Item {
    Meta(Meta),
    /// A [`Live::Call`] and its tool name.
    Call(Box<Live>, Box<str>),
    Waiting(Box<WaitingResult>),
    Closed(Box<Closed>),
    /// A scope's clocks, whether it is idle and the time up to which it forgot its calls; the
    /// scope is interned already.
    Scope(u32, [Option<Timestamp>; 2], bool, Option<Timestamp>),
    /// The note of a dropped scope (`forgotten.rs`): its key and that time.
    Forgotten(ScopeKey, Timestamp),
    /// An event held in the reorder window, and its scope (interned already).
    Held(u32, Box<Held>),
}

impl Correlator {
    /// Notes that entry `seq` (or the partition-wide entry, [`META_SEQ`]) changed, at the position
    /// of the event being applied.
    pub(super) fn touch(&mut self, seq: u64) {
        if seq == META_SEQ {
            if self.dirty.is_some() {
                self.meta_dirty = Some(self.change_pos);
            }
        } else if let Some(d) = self.dirty.as_mut() {
            // An event changes its entry several times in a row: one note will do.
            if d.last() != Some(&(seq, self.change_pos)) {
                d.push((seq, self.change_pos));
            }
        }
    }

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
        for (i, &(seq, logged_pos)) in dirty.iter().enumerate() {
            if dirty.get(i + 1).is_some_and(|&(next, _)| next == seq) {
                continue;
            }
            let mut pos = logged_pos;
            let (key, value) = if seq != META_SEQ && seq & SCOPE_BIT != 0 {
                let seq = seq & !SCOPE_BIT;
                let value = match self.scopes.by_seq.get(&seq) {
                    Some(&ix) => {
                        let scope = self.scopes.get_mut(ix);
                        if let Some(at) = scope.changed_at.take() {
                            pos = at;
                        }
                        let scope = self.scopes.get(ix);
                        Some(encode(&EntryRef::Scope {
                            scope: &scope.key,
                            clocks: scope.clocks,
                            idle: scope.idle,
                            forgot_upto: scope.forgot_upto,
                            dropped: false,
                        }))
                    }
                    None => match self.scopes.forgotten.get(seq) {
                        Some(note) => Some(encode(&EntryRef::Scope {
                            scope: &note.key,
                            clocks: [None; 2],
                            idle: false,
                            forgot_upto: Some(note.upto),
                            dropped: true,
                        })),
                        None if seq >= self.unwritten_from => continue,
                        None => None,
                    },
                };
                (numbered_key(SCOPE_KEY_PREFIX, seq), value)
            } else if seq == META_SEQ {
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
                    (Some(Live::Waiting(waiting)), _) => Some(encode(&EntryRef::Waiting {
                        scope: &self.scopes.get(waiting.scope).key,
                        waiting,
                    })),
                    (None, Some(closed)) => Some(encode(&EntryRef::Closed {
                        scope: &self.scopes.get(closed.scope).key,
                        closed,
                    })),
                    (None, None) => match self.held_entry(seq) {
                        Some(value) => Some(value),
                        None if seq >= self.unwritten_from => continue,
                        None => None,
                    },
                };
                (numbered_key("", seq), value)
            };
            ops.push(ChangelogOp { key, value, pos });
        }
        self.unwritten_from = self.next_seq;
        ops
    }

    /// The entry number a changelog key stands for; `None` for the partition-wide entry and for
    /// keys this program does not write.
    pub fn changelog_key_seq(key: &str) -> Option<u64> {
        key.parse().ok().filter(|&seq| seq < RESTORED_SEQ_LIMIT)
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
        } else if let Some(seq) = scope_key_seq(key) {
            dirty.push((seq | SCOPE_BIT, Position::RESTATED));
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
        let mut restored = Correlator::new(config);
        // Entries are inserted oldest first, whatever order the changelog gave them in: where two
        // entries claim one id or idempotency key (a remembered closed call and a newer call with
        // the same key), the newer one holds it, as it did before the restore. Sorting before
        // decoding also makes the entries' memory follow their order.
        let entries = entries.into_iter();
        let mut raw = Vec::with_capacity(entries.size_hint().0);
        for (key, value) in entries {
            let key = key.as_ref();
            let foreign = || RestoreError::Key(key.chars().take(64).collect());
            let (seq, scope_key) = match key {
                META_KEY => (None, false),
                _ => match scope_key_seq(key) {
                    Some(seq) => (Some(seq), true),
                    None => (key.parse::<u64>().ok(), false),
                },
            };
            if seq.is_some_and(|seq| seq >= RESTORED_SEQ_LIMIT)
                || (seq.is_none() && key != META_KEY)
            {
                return Err(foreign());
            }
            raw.push((seq, scope_key, value));
        }
        raw.sort_by_key(|(seq, _, _)| *seq);
        // One number names one entry: a scope's key (`s<seq>`) and an entry's (`<seq>`) never share
        // it in a changelog this program wrote, and two entries under one number would each take
        // the other's place in the tables.
        if let Some(pair) = raw
            .windows(2)
            .find(|w| w[0].0.is_some() && w[0].0 == w[1].0)
        {
            return Err(RestoreError::Duplicate(pair[0].0.unwrap_or_default()));
        }

        // Decode, and make every scope with how many entries its tables will hold, so that the
        // tables are made at their size once instead of growing (growing reads every key back
        // from its entry).
        let mut sizes: Vec<[usize; 2]> = Vec::new();
        let mut live = 0;
        let mut items = Vec::with_capacity(raw.len());
        for (seq, scope_key, value) in raw {
            let key = || match seq {
                None => META_KEY.to_owned(),
                Some(s) if scope_key => numbered_key(SCOPE_KEY_PREFIX, s),
                Some(s) => s.to_string(),
            };
            let entry: Entry = decode(value.as_ref())
                .map_err(|source| RestoreError::Decode { key: key(), source })?;
            drop(value);
            // Each kind of entry under its kind of key.
            if seq.is_none() != matches!(entry, Entry::Meta(_))
                || scope_key != matches!(entry, Entry::Scope { .. })
            {
                return Err(RestoreError::Key(key()));
            }
            let (ix, ids, digests, item) = match entry {
                Entry::Meta(m) => {
                    items.push((seq, Item::Meta(m)));
                    continue;
                }
                Entry::Call {
                    scope,
                    tool,
                    mut call,
                } => {
                    let ix = restored.scopes.intern(scope, &restored.hs);
                    let Live::Call(body) = &mut *call else {
                        unreachable!("decoded as a call")
                    };
                    body.scope = ix;
                    live += 1;
                    let (ids, digests) = (body.has_id, body.checksum.is_some());
                    (ix, ids, digests, Item::Call(call, tool))
                }
                Entry::Waiting { scope, mut waiting } => {
                    waiting.scope = restored.scopes.intern(scope, &restored.hs);
                    live += 1;
                    (waiting.scope, waiting.has_id, false, Item::Waiting(waiting))
                }
                Entry::Scope {
                    scope,
                    dropped: true,
                    forgot_upto: Some(upto),
                    ..
                } => {
                    items.push((seq, Item::Forgotten(scope, upto)));
                    continue;
                }
                Entry::Scope {
                    scope,
                    clocks,
                    idle,
                    forgot_upto,
                    ..
                } => {
                    let ix = restored.scopes.intern(scope, &restored.hs);
                    items.push((seq, Item::Scope(ix, clocks, idle, forgot_upto)));
                    continue;
                }
                Entry::Held { event, pos, wall } => {
                    let key = crate::state::ScopeKey {
                        source: event.source.clone(),
                        session: event.session.clone(),
                        thread: event.thread.clone(),
                    };
                    let ix = restored.scopes.intern(key, &restored.hs);
                    let held = Box::new(Held {
                        event: *event,
                        pos,
                        wall,
                    });
                    items.push((seq, Item::Held(ix, held)));
                    continue;
                }
                Entry::Closed { scope, mut closed } => {
                    closed.scope = restored.scopes.intern(scope, &restored.hs);
                    let ids = !closed.ids.is_empty();
                    (closed.scope, ids, false, Item::Closed(closed))
                }
            };
            let ix = ix as usize;
            if sizes.len() <= ix {
                sizes.resize(ix + 1, [0, 0]);
            }
            sizes[ix][0] += usize::from(ids);
            sizes[ix][1] += usize::from(digests);
            items.push((seq, item));
        }
        restored.by_record.reserve(live, |_| 0);
        for (ix, [ids, digests]) in sizes.into_iter().enumerate() {
            if let Some(scope) = restored.scopes.slots[ix].as_mut() {
                // The tables are empty: nothing to rehash.
                scope.ids.reserve(ids, |_| 0);
                scope.by_checksum.reserve(digests, |_| 0);
            }
        }

        let mut max_seq = None::<u64>;
        for (seq, item) in items {
            max_seq = max_seq.max(seq);
            let seq = seq.unwrap_or(META_SEQ);
            match item {
                Item::Meta(m) => {
                    restored.stream_time = m.stream_time;
                    restored.topic_time = m.topic_time;
                    restored.next_seq = restored.next_seq.max(m.next_seq);
                }
                Item::Call(call, tool) => {
                    let repeat = match &*call {
                        Live::Call(c) => repeats::of_call(c, &tool),
                        Live::Waiting(_) => None,
                    };
                    restored.insert_call(seq, call, &tool, repeat);
                }
                Item::Waiting(waiting) => {
                    let repeat = repeats::of_waiting(&waiting);
                    restored.insert_waiting(seq, waiting, repeat);
                }
                Item::Closed(closed) => restored.insert_closed(seq, *closed, &IdsFiled::None),
                Item::Scope(ix, clocks, idle, forgot_upto) => {
                    let topics = restored.config.input_topics;
                    let scope = restored.scopes.get_mut(ix);
                    scope.clocks = clocks;
                    scope.clock = scopes::watermark(&clocks, topics);
                    scope.idle = idle;
                    // A note of the scope restored before it may have set a later time.
                    scope.forgot_upto = scope.forgot_upto.max(forgot_upto);
                    scope.seq = Some(seq);
                    restored.scopes.by_seq.insert(seq, ix);
                }
                Item::Forgotten(key, upto) => restored.restore_note(seq, key, upto),
                Item::Held(ix, held) => restored.restore_held(ix, seq, *held),
            }
        }
        restored.restore_arrived();
        let max_notes = restored.config.max_forgotten_sessions;
        restored.scopes.sweep(&restored.hs, max_notes);
        // A scope kept without entries (a checkpoint fell between its last entry going and its
        // own key being written as gone) is written as gone now.
        let dropped = std::mem::take(&mut restored.scopes.dropped);
        if let Some(m) = max_seq {
            restored.next_seq = restored.next_seq.max(m + 1);
        }
        if let Some(d) = restored.dirty.as_mut() {
            d.clear();
            d.extend(
                dropped
                    .into_iter()
                    .map(|seq| (seq | SCOPE_BIT, Position::RESTATED)),
            );
        }
        restored.meta_dirty = None;
        restored.arm_blocked();
        restored.unwritten_from = restored.next_seq;
        Ok(restored)
    }

    /// Takes the note of dropped scope `seq` back. Where a scope under its key was restored too,
    /// or another note (a changelog that was not compacted as this program writes it), one
    /// keeps the later time and the other's key is written as gone.
    fn restore_note(&mut self, seq: u64, key: ScopeKey, mut upto: Timestamp) {
        if let Some(ix) = self.scopes.find(&key, &self.hs) {
            let scope = self.scopes.get_mut(ix);
            scope.forgot_upto = scope.forgot_upto.max(Some(upto));
            self.scopes.dropped.push(seq);
            return;
        }
        if let Some((other, time)) = self.scopes.forgotten.take(&key, &self.hs) {
            upto = upto.max(time);
            self.scopes.dropped.push(other);
        }
        let note = ForgottenScope { key, upto };
        self.scopes.forgotten.insert(seq, note, &self.hs);
    }
}

/// Scope entries are keyed `s<seq>`: a scope's number comes from the entries' sequence, but it is
/// no entry (`clock.rs`).
const SCOPE_KEY_PREFIX: &str = "s";

/// `prefix` followed by `seq` in decimal, as a key (without the formatting machinery: a
/// checkpoint makes one per changed entry).
fn numbered_key(prefix: &str, seq: u64) -> String {
    let mut buf = [0; decimal::U64_DIGITS];
    let digits = decimal::digits(seq, &mut buf);
    let mut key = String::with_capacity(prefix.len() + digits.len());
    key.push_str(prefix);
    key.push_str(digits);
    key
}

/// The number of a scope's changelog key.
fn scope_key_seq(key: &str) -> Option<u64> {
    key.strip_prefix(SCOPE_KEY_PREFIX)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn numbered_keys_are_decimal() {
        for n in [0, 7, 10, 99, 12345, u64::MAX] {
            assert_eq!(super::numbered_key("", n), n.to_string());
            assert_eq!(super::numbered_key("s", n), format!("s{n}"));
        }
    }
}
