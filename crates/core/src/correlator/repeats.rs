//! Repeats of events without a call id (docs/ARCHITECTURE.md, Correlation → Repeats).
//!
//! An event with an id is recognised as a repeat by its id. One without an id is recognised by
//! its *repeat key*: a hash of what it says — its kind, tool, checksum and event time to the
//! millisecond, and for a completion its result — within its scope. Two distinct calls with the
//! same tool and arguments in one scope are told apart by the time they were made (the ADK breaks
//! checksum ties the same way, by creation time); only a copy of the same event has the same
//! key. The key is a 64-bit hash defined here ([`Fold`]), so that it is the same in every process
//! and version: the changelog keeps the keys of closed calls (see `Closed::repeats`). It is not
//! a cryptographic hash — it need not be: every field but the result's text is part of it
//! verbatim or as the SHA-256 checksum, and a producer that can forge a collision inside its own
//! session can forge the events themselves.
//!
//! Each scope maps repeat keys to the entry that holds the event: the pending call its announce
//! opened, the waiting result its completion parked, or the closed call either went into. The
//! entries are filed and taken out with the ids (`indexes.rs`).

use crate::state::{Call, Digest, Done, WaitingResult};
use toolcalls_model::{Json, Timestamp};

const ANNOUNCE: u8 = 1;
const COMPLETION: u8 = 2;

/// The repeat key of an announce without an id.
pub(crate) fn announce_key(tool: &str, checksum: Option<&Digest>, time: Timestamp) -> u64 {
    let mut h = Fold::new(ANNOUNCE);
    text(&mut h, Some(tool));
    digest(&mut h, checksum);
    h.word(time.millis() as u64);
    h.finish()
}

/// The repeat key of a completion without an id.
pub(crate) fn completion_key(tool: Option<&str>, checksum: Option<&Digest>, done: &Done) -> u64 {
    let mut h = Fold::new(COMPLETION);
    text(&mut h, tool);
    digest(&mut h, checksum);
    h.word(done.at.millis() as u64);
    h.word(u64::from(done.is_error) | (u64::from(done.cancelled) << 1));
    text(&mut h, done.result.as_ref().map(Json::as_str));
    h.finish()
}

/// The repeat key of a pending call's announce, when it had no id.
pub(crate) fn of_call(call: &Call, tool: &str) -> Option<u64> {
    (!call.has_id).then(|| announce_key(tool, call.checksum.as_ref(), call.created_at))
}

/// The repeat key of a waiting result's completion, when it had no id.
pub(crate) fn of_waiting(waiting: &WaitingResult) -> Option<u64> {
    let done = waiting.done.as_ref().filter(|_| !waiting.has_id)?;
    Some(completion_key(
        waiting.tool.as_deref(),
        waiting.checksum.as_ref(),
        done,
    ))
}

/// A field that may be absent, length-prefixed so that no two field lists hash the same text.
fn text(h: &mut Fold, s: Option<&str>) {
    match s {
        Some(s) => {
            h.word(1 + s.len() as u64);
            h.bytes(s.as_bytes());
        }
        None => h.word(0),
    }
}

fn digest(h: &mut Fold, d: Option<&Digest>) {
    match d {
        Some(d) => {
            h.word(1);
            h.bytes(&d.0);
        }
        None => h.word(0),
    }
}

/// A 64-bit hash defined here, word by word, so that a key never changes with a dependency: each
/// 8-byte little-endian word is folded in by a 64×64→128-bit multiply whose halves are xored (the
/// mixing step of wyhash), the tail padded with zeros after the length was folded in.
pub(crate) struct Fold(u64);

impl Fold {
    const K0: u64 = 0xa076_1d64_78bd_642f;
    const K1: u64 = 0xe703_7ed1_a0b4_28db;

    fn new(kind: u8) -> Fold {
        Fold(Self::K0 ^ u64::from(kind))
    }

    fn word(&mut self, w: u64) {
        let m = u128::from(self.0 ^ w) * u128::from(Self::K1);
        self.0 = (m as u64) ^ ((m >> 64) as u64);
    }

    fn bytes(&mut self, b: &[u8]) {
        let mut chunks = b.chunks_exact(8);
        for c in &mut chunks {
            self.word(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(last));
        }
    }

    fn finish(mut self) -> u64 {
        self.word(Self::K0);
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANNOUNCE_PINNED: u64 = 6_937_049_739_436_059_413;
    const COMPLETION_PINNED: u64 = 4_272_216_368_484_731_414;

    fn done(at: i64, result: &str) -> Done {
        Done {
            at: Timestamp::from_millis(at),
            result: Some(Json::parse(result).unwrap()),
            is_error: false,
            cancelled: false,
            started_at: None,
            duration_ms: None,
            pos: crate::Position::default(),
        }
    }

    /// The keys are a format (the changelog keeps them): these values must never change.
    #[test]
    fn keys_are_stable() {
        let d = Digest([7; 32]);
        let t = Timestamp::from_millis(1_700_000_000_123);
        assert_eq!(announce_key("Read", Some(&d), t), ANNOUNCE_PINNED);
        assert_eq!(
            completion_key(Some("Read"), None, &done(1_700_000_000_123, "\"text\"")),
            COMPLETION_PINNED
        );
    }

    #[test]
    fn a_key_changes_with_every_field() {
        let d = Digest([7; 32]);
        let t = Timestamp::from_millis(1_000);
        let base = announce_key("Read", Some(&d), t);
        assert_eq!(base, announce_key("Read", Some(&d), t));
        assert_ne!(base, announce_key("Write", Some(&d), t));
        assert_ne!(base, announce_key("Read", None, t));
        assert_ne!(base, announce_key("Read", Some(&d), t.plus_millis(1)));

        let c = completion_key(Some("Read"), Some(&d), &done(1_000, "1"));
        assert_eq!(c, completion_key(Some("Read"), Some(&d), &done(1_000, "1")));
        assert_ne!(c, completion_key(Some("Read"), Some(&d), &done(1_000, "2")));
        assert_ne!(c, completion_key(None, Some(&d), &done(1_000, "1")));
        assert_ne!(c, completion_key(Some("Read"), Some(&d), &done(1_001, "1")));
        let mut failed = done(1_000, "1");
        failed.is_error = true;
        assert_ne!(c, completion_key(Some("Read"), Some(&d), &failed));
        // An announce and a completion never share a key.
        assert_ne!(
            base,
            completion_key(Some("Read"), Some(&d), &done(1_000, "1"))
        );
    }
}
