//! The notes of scopes dropped after they forgot every call of their own: each one's key and the
//! latest close of the calls it forgot (`forgotten.rs` says what they are for), bounded by
//! `max_forgotten_sessions`.

use super::hasher::{Hasher, SeqMap};
use crate::state::ScopeKey;
use hashbrown::HashTable;
use std::collections::BTreeSet;
use std::hash::BuildHasher;
use toolcalls_model::Timestamp;

/// A scope dropped after it forgot every call of its own: its key and the latest close of the
/// calls it forgot.
#[derive(Debug, Clone)]
pub(super) struct ForgottenScope {
    pub(super) key: ScopeKey,
    pub(super) upto: Timestamp,
}

/// The notes of dropped scopes, by their changelog number (which a scope made again under the
/// same key takes back, so the note's key in the changelog is overwritten, not left behind).
#[derive(Debug, Default)]
pub(super) struct ForgottenScopes {
    by_seq: SeqMap<ForgottenScope>,
    /// Changelog numbers by the hash of their key.
    by_key: HashTable<u64>,
    /// The notes in the order they go past the bound: the oldest `upto` first.
    order: BTreeSet<(Timestamp, u64)>,
}

impl ForgottenScopes {
    pub(super) fn len(&self) -> usize {
        self.by_seq.len()
    }

    pub(super) fn get(&self, seq: u64) -> Option<&ForgottenScope> {
        self.by_seq.get(&seq)
    }

    /// Notes scope `seq`, replacing a note under the same number.
    pub(super) fn insert(&mut self, seq: u64, note: ForgottenScope, hs: &Hasher) {
        self.remove(seq, hs);
        let by_seq = &self.by_seq;
        self.by_key.insert_unique(hs.hash_one(&note.key), seq, |s| {
            by_seq.get(s).map_or(0, |n| hs.hash_one(&n.key))
        });
        self.order.insert((note.upto, seq));
        self.by_seq.insert(seq, note);
    }

    /// The note of the scope `key`, taken out: its changelog number and time.
    pub(super) fn take(&mut self, key: &ScopeKey, hs: &Hasher) -> Option<(u64, Timestamp)> {
        if self.by_seq.is_empty() {
            return None;
        }
        let by_seq = &self.by_seq;
        let seq = *self.by_key.find(hs.hash_one(key), |s| {
            by_seq.get(s).is_some_and(|n| n.key == *key)
        })?;
        let note = self.remove(seq, hs)?;
        Some((seq, note.upto))
    }

    fn remove(&mut self, seq: u64, hs: &Hasher) -> Option<ForgottenScope> {
        let note = self.by_seq.remove(&seq)?;
        if let Ok(slot) = self
            .by_key
            .find_entry(hs.hash_one(&note.key), |&s| s == seq)
        {
            slot.remove();
        }
        self.order.remove(&(note.upto, seq));
        Some(note)
    }

    /// Takes out the notes past `max`, those that forgot longest ago first; their numbers.
    pub(super) fn trim(&mut self, max: usize, hs: &Hasher) -> Vec<u64> {
        let mut gone = Vec::new();
        while self.by_seq.len() > max {
            let Some(&(_, seq)) = self.order.first() else {
                break;
            };
            self.remove(seq, hs);
            gone.push(seq);
        }
        gone
    }
}
