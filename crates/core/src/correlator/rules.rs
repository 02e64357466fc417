//! The matching rules: how a result (or a fact) finds its pending call, how a new call finds the
//! result waiting for it, and how sure each link is. The rules, their order, their limits and
//! their confidence values are docs/ARCHITECTURE.md, Correlation → Rules:
//!
//! 1. same call id: [`Correlator::holder`], which each handler tries before the others;
//! 2. same checksum;
//! 3. same tool name, first in first out;
//! 4. no hint at all: the oldest pending call. Rules 2–4 are [`Correlator::find_call`], which
//!    chooses among each rule's candidates with [`pick`];
//! 5. no link: the result waits, and a new call looks for it with the same rules
//!    ([`Correlator::find_waiting_for`]).
//!
//! Where the announces of a scope carry call ids, an event with an id is linked by rule 1 only:
//! its own announce may still come. A checksum rules out calls with another checksum under every
//! rule. Once a waiting result's grace has run out, rules 2–4 get one last try without those two
//! limits (`result.rs`, `last_resort`).

use super::entries::Entries;
use super::indexes::id_holder;
use super::scopes::{turn_hash, Pending};
use super::Correlator;
use crate::state::{Call, Digest, Fact, Live, ScopeIx, WaitingResult};
use std::hash::BuildHasher;
use toolcalls_model::{ApprovalDecision, CallId, Strategy, Timestamp};

/// What a result-side event offers to find its call.
pub(super) struct Hints<'a> {
    pub(super) call_id: Option<&'a str>,
    pub(super) turn: Option<&'a str>,
    pub(super) checksum: Option<&'a Digest>,
    pub(super) tool: Option<&'a str>,
    /// Rule 4 (oldest pending) applies: only for results with no hint at all.
    pub(super) oldest: bool,
    /// Prefer calls that lack this fact (so identical calls each get their own start/end).
    pub(super) fact: Option<&'a Fact>,
    /// The event's own announce did not come within its grace: the fallbacks may link it where
    /// they would otherwise let it wait — an event with an id to an id-less call where calls
    /// carry ids, an event with a checksum to a call with another one.
    pub(super) last_resort: bool,
}

/// A link found by the rules: which entry, by which strategy, among how many candidates.
#[derive(Debug, Clone, Copy)]
pub(super) struct Link {
    pub(super) seq: u64,
    pub(super) strategy: Strategy,
    pub(super) candidates: u32,
}

impl Link {
    /// Rule 1: the entry that holds the event's call id.
    pub(super) fn call_id(seq: u64) -> Link {
        Link {
            seq,
            strategy: Strategy::CallId,
            candidates: 1,
        }
    }

    /// No link: a call closed by a deadline, the state cap or the end of the input, or shown
    /// while pending.
    pub(super) fn unmatched(seq: u64) -> Link {
        Link {
            seq,
            strategy: Strategy::Unmatched,
            candidates: 0,
        }
    }

    /// The confidence table (docs/ARCHITECTURE.md, Correlation → Rules).
    pub(super) fn confidence(&self) -> f64 {
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

impl Correlator {
    /// Rule 1: the entry of scope `ix` that holds call id `id` — a pending call, a waiting result,
    /// or a remembered closed call (then the event is a late repeat).
    pub(super) fn holder(&self, ix: ScopeIx, id: &CallId) -> Option<u64> {
        id_holder(self.scopes.get(ix), &self.entries, &self.hs, id.as_str())
    }

    /// Rules 2–4 for a result-side event: the pending call it belongs to.
    pub(super) fn find_call(&self, ix: ScopeIx, hints: &Hints<'_>) -> Option<Link> {
        let scope = self.scopes.get(ix);
        // An event with an id, where calls carry ids, belongs to the call announced with that id:
        // it takes no other call while that announce may still come.
        if hints.call_id.is_some() && scope.calls_carry_ids() && !hints.last_resort {
            return None;
        }
        let (entries, hs) = (&self.entries, &self.hs);
        let turn = hints.turn.map(|t| turn_hash(hs, t));
        if let Some(digest) = hints.checksum {
            let cands = scope
                .by_checksum
                .iter_hash(hs.hash_one(digest))
                .filter_map(|&seq| entries.call(seq).map(|call| Pending::of(seq, call, hs)));
            if let Some(link) = pick(
                entries,
                hints,
                turn,
                cands,
                Some(digest),
                Strategy::Checksum,
            ) {
                return Some(link);
            }
        }
        if let Some(tool) = hints.tool {
            if let Some(&slot) = scope.tool_ix.get(tool) {
                let cands = scope.tools[slot as usize].calls.iter().copied();
                if let Some(link) = pick(entries, hints, turn, cands, None, Strategy::ToolFifo) {
                    return Some(link);
                }
            }
        }
        if hints.oldest {
            return pick(entries, hints, turn, scope.calls(), None, Strategy::Oldest);
        }
        None
    }

    /// The rules the other way round, for a new call (not yet inserted; its tool is `tool`): the
    /// waiting result it takes (if any) and the waiting entries of facts alone that belong to it.
    pub(super) fn find_waiting_for(&self, call: &Call, tool: &str) -> (Option<Link>, Vec<u64>) {
        let scope = self.scopes.get(call.scope);
        // What waits under the call's id is its own: its result is the link, and the facts
        // waiting without an id that fit the call are taken beside it, as they are without one.
        let by_id = call
            .call_id()
            .and_then(|id| id_holder(scope, &self.entries, &self.hs, id))
            .and_then(|seq| match self.entries.live(seq) {
                Some(Live::Waiting(waiting)) => Some((seq, waiting.done.is_some())),
                _ => None,
            });
        // The fallbacks' limits: never two ids, never two different turns, and never an event
        // with an id waiting for its own announce where calls carry ids.
        let fits = |waiting: &WaitingResult| -> bool {
            if waiting.has_id && (call.has_id || scope.calls_carry_ids()) {
                return false;
            }
            !matches!((&call.turn, &waiting.turn), (Some(a), Some(b)) if a != b)
        };
        // Candidates per rule (checksum, tool, oldest), oldest first by (time, arrival).
        let mut best: [Option<(Timestamp, u64)>; 3] = [None; 3];
        let mut counts = [0u32; 3];
        let mut facts = Vec::new();
        for &seq in &scope.waiting {
            let Some(Live::Waiting(waiting)) = self.entries.live(seq) else {
                continue;
            };
            if !fits(waiting) || by_id.is_some_and(|(own, _)| own == seq) {
                continue;
            }
            if waiting.done.is_none() {
                let same = match (&waiting.checksum, &waiting.tool) {
                    (Some(digest), _) => call.checksum.as_ref() == Some(digest),
                    (None, Some(t)) => &**t == tool,
                    (None, None) => false,
                };
                if same && waiting.facts.iter().all(|f| lacks(call, f)) {
                    facts.push(seq);
                }
                continue;
            }
            if by_id.is_some() {
                continue;
            }
            let rule = if waiting.checksum.is_some() && waiting.checksum == call.checksum {
                0
            } else if waiting.checksum.is_some() && call.checksum.is_some() {
                continue; // two checksums: two calls
            } else if waiting.tool.as_deref() == Some(tool) {
                1
            } else if waiting.hintless() {
                2
            } else {
                continue;
            };
            counts[rule] += 1;
            let key = (waiting.first_at, seq);
            if best[rule].is_none_or(|b| key < b) {
                best[rule] = Some(key);
            }
        }
        match by_id {
            Some((seq, true)) => return (Some(Link::call_id(seq)), facts),
            Some((seq, false)) => {
                facts.insert(0, seq);
                return (None, facts);
            }
            None => {}
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
}

/// Picks among candidate calls `cands` the oldest by (created time, arrival) that fits the hints,
/// preferring one that lacks the hinted fact, and for an event without an id one without an id.
/// `turn`: the hash of the hinted turn. `digest`: only calls with this checksum count (the
/// checksum table may offer others). A candidate is read from the entries only when its slot
/// cannot decide alone.
fn pick(
    entries: &Entries,
    hints: &Hints<'_>,
    turn: Option<u32>,
    cands: impl Iterator<Item = Pending>,
    digest: Option<&Digest>,
    strategy: Strategy,
) -> Option<Link> {
    // An event without an id prefers a call without one: a call announced with an id gets its
    // own result by that id. It still takes one (hook payloads without `tool_use_id` find the
    // transcript's call) when no id-less call fits.
    let mut first: Option<(bool, Timestamp, u64)> = None;
    let mut first_lacking: Option<(bool, Timestamp, u64)> = None;
    let mut candidates = 0u32;
    for cand in cands {
        #[cfg(debug_assertions)]
        if let Some(call) = entries.call(cand.seq) {
            let hs = super::hasher::Hasher::default(); // not the correlator's: compare presence only
            let fresh = Pending::of(cand.seq, call, &hs);
            debug_assert_eq!(
                cand.created_at, call.created_at,
                "slot of {} is stale",
                cand.seq
            );
            debug_assert_eq!(cand.turn().is_some(), fresh.turn().is_some());
            debug_assert!(!cand.has_id() || call.has_any_id(), "ids stay");
        }
        if hints.call_id.is_some() && cand.has_id() {
            continue; // two different ids are two different calls
        }
        let turn_to_check = match (turn, cand.turn()) {
            (Some(a), Some(b)) if a != b => continue,
            (Some(_), Some(_)) => true,
            _ => false,
        };
        let mut lacking = true;
        // A checksum rules out the calls whose checksum differs, under every rule: they are
        // other calls. Only the last resort looks past it (two sources may hash one call apart).
        let other_checksums = hints.checksum.is_some() && !hints.last_resort;
        if turn_to_check
            || digest.is_some()
            || other_checksums
            || hints.call_id.is_some()
            || hints.fact.is_some()
        {
            let Some(call) = entries.call(cand.seq) else {
                continue;
            };
            if digest.is_some() && call.checksum.as_ref() != digest {
                continue;
            }
            if other_checksums
                && call.checksum.is_some()
                && call.checksum.as_ref() != hints.checksum
            {
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
        // Whether the call has an id now (the slot knows only whether it had one when filed).
        let has_id_now = || entries.call(cand.seq).is_some_and(Call::has_any_id);
        let key = (
            hints.call_id.is_none() && (cand.has_id() || has_id_now()),
            cand.created_at,
            cand.seq,
        );
        if first.is_none_or(|f| key < f) {
            first = Some(key);
        }
        if lacking && first_lacking.is_none_or(|f| key < f) {
            first_lacking = Some(key);
        }
    }
    first_lacking.or(first).map(|(_, _, seq)| Link {
        seq,
        strategy,
        candidates,
    })
}

/// Whether the call holds exactly what `fact` says: a copy of a fact it took.
pub(super) fn holds(call: &Call, fact: &Fact) -> bool {
    match fact {
        Fact::ExecStart { at } => call.started_at() == Some(*at),
        Fact::ExecEnd { end, .. } => call.exec_end() == Some(end),
        Fact::Approval { at, decision, .. } => call.approval().is_some_and(|a| match decision {
            ApprovalDecision::Requested => a.requested_at == Some(*at),
            _ => a.status == *decision && a.approved_at == Some(*at),
        }),
        Fact::Hook { entry } => call.hooks().contains(entry),
    }
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
