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

use crate::state::{Call, Digest, Done, ExecEnd, Fact, WaitingResult};
use toolcalls_model::checksum::digest_of_json;
use toolcalls_model::{ApprovalDecision, HookDecisionEntry, Json, Timestamp};

const ANNOUNCE: u8 = 1;
const COMPLETION: u8 = 2;
const EXEC_START: u8 = 3;
const EXEC_END: u8 = 4;
const APPROVAL: u8 = 5;
const HOOK: u8 = 6;
const TOOL: u8 = 7;

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

/// The repeat key of a waiting entry without an id: of its completion, or of the one fact about
/// a call known by its checksum that it holds.
pub(crate) fn of_waiting(waiting: &WaitingResult) -> Option<u64> {
    if waiting.has_id {
        return None;
    }
    match (&waiting.done, &waiting.facts[..], &waiting.checksum) {
        (Some(done), _, _) => Some(completion_key(
            waiting.tool.as_deref(),
            waiting.checksum.as_ref(),
            done,
        )),
        (None, [fact], Some(checksum)) => Some(fact_key(fact, checksum)),
        _ => None,
    }
}

/// The repeat key of a fact without an id about a call known by its checksum: what the fact
/// says, to the millisecond. A call's state holds each fact it took ([`of_facts`]), so the keys
/// of a closed call's facts are made from it.
pub(crate) fn fact_key(fact: &Fact, checksum: &Digest) -> u64 {
    match fact {
        Fact::ExecStart { at } => exec_start_key(checksum, *at),
        Fact::ExecEnd { end, .. } => exec_end_key(checksum, end),
        Fact::Approval { at, decision, .. } => approval_key(checksum, *decision, *at),
        Fact::Hook { entry } => hook_key(checksum, entry),
    }
}

fn exec_start_key(checksum: &Digest, at: Timestamp) -> u64 {
    let mut h = Fold::new(EXEC_START);
    digest(&mut h, Some(checksum));
    h.word(at.millis() as u64);
    h.finish()
}

fn exec_end_key(checksum: &Digest, end: &ExecEnd) -> u64 {
    let mut h = Fold::new(EXEC_END);
    digest(&mut h, Some(checksum));
    h.word(end.at.millis() as u64);
    h.word(u64::from(end.is_error));
    h.word(end.duration_ms.map_or(0, |d| d.saturating_add(1)));
    h.finish()
}

/// By decision and time only: what a call keeps of an approval (the last decision's `by` and
/// `reason`) cannot give back a request's.
fn approval_key(checksum: &Digest, decision: ApprovalDecision, at: Timestamp) -> u64 {
    let mut h = Fold::new(APPROVAL);
    digest(&mut h, Some(checksum));
    text(&mut h, Some(decision.as_str()));
    h.word(at.millis() as u64);
    h.finish()
}

fn hook_key(checksum: &Digest, entry: &HookDecisionEntry) -> u64 {
    let mut h = Fold::new(HOOK);
    digest(&mut h, Some(checksum));
    text(&mut h, Some(&entry.hook));
    text(&mut h, Some(entry.decision.as_str()));
    text(&mut h, entry.policy_id.as_deref());
    text(&mut h, entry.policy_version.as_deref());
    text(&mut h, entry.reason.as_deref());
    h.word(entry.at.millis() as u64);
    h.finish()
}

/// What a fact that names its tool but no arguments or checksum is known by in place of a
/// checksum: the checksum of the tool without arguments, as the audit reads such a fact.
pub(crate) fn tool_digest(tool: &str) -> Digest {
    Digest(digest_of_json(tool, None))
}

/// The repeat keys of the facts call took, as [`fact_key`] gives them for the facts that brought
/// them — by its checksum, and by its tool's [`tool_digest`] for facts that named only the tool
/// (`tool`): a copy of one that comes after the call closed is late.
pub(crate) fn of_facts(call: &Call, tool: &str) -> Vec<u64> {
    let has_facts = call.started_at().is_some()
        || call.exec_end().is_some()
        || call.approval().is_some()
        || !call.hooks().is_empty();
    if !has_facts {
        return Vec::new();
    }
    let by_tool = tool_digest(tool);
    let mut keys = Vec::new();
    for checksum in call.checksum.iter().filter(|c| **c != by_tool) {
        keys_of_facts(call, checksum, &mut keys);
    }
    keys_of_facts(call, &by_tool, &mut keys);
    keys
}

fn keys_of_facts(call: &Call, checksum: &Digest, keys: &mut Vec<u64>) {
    if let Some(at) = call.started_at() {
        keys.push(exec_start_key(checksum, at));
    }
    if let Some(end) = call.exec_end() {
        keys.push(exec_end_key(checksum, end));
    }
    if let Some(a) = call.approval() {
        if let Some(at) = a.requested_at {
            keys.push(approval_key(checksum, ApprovalDecision::Requested, at));
        }
        if let Some(at) = a.approved_at {
            keys.push(approval_key(checksum, a.status, at));
        }
    }
    keys.extend(call.hooks().iter().map(|e| hook_key(checksum, e)));
}

/// The key of a tool's name that a remembered closed call keeps (`Closed::tool`), never 0 (which
/// stands for a tool not known). Sixteen bits fit where the entry had padding; two tools share a
/// key once in 65,535, and then a conflict is taken for a repeat, as without the key.
pub(crate) fn tool_key(tool: &str) -> u16 {
    let mut h = Fold::new(TOOL);
    text(&mut h, Some(tool));
    ((h.finish() >> 48) as u16).max(1)
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
    const TOOL_PINNED: u16 = 47_610;

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
        assert_eq!(tool_key("Read"), TOOL_PINNED);
        assert_ne!(tool_key("Read"), tool_key("Write"));
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
