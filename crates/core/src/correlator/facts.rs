//! Facts about a call other than its result — execution start / end, approvals, hook decisions —
//! merged into the call they belong to, or left waiting for it (docs/ARCHITECTURE.md,
//! Correlation → Facts). A denial moves the call's deadline (→ Phases).

use super::budget;
use super::footprint::call_bytes;
use super::merge::{add_to_waiting, fold_approval, merge_call_attributes};
use super::repeats;
use super::rules::{holds, Hints};
use super::timers::Kind;
use super::{Correlator, Envelope, Subject};
use crate::state::{DeadlineCause, Digest, Fact, Live};
use crate::Outcome;
use serde_json::{Map, Value};
use toolcalls_model::checksum::digest_of_json;
use toolcalls_model::{ApprovalDecision, CallId, HookVerdict, Timestamp, TurnId};

/// Why a fact that would take its call past `max_facts_bytes` is refused.
const TOO_LARGE: &str = "call_too_large";

impl Correlator {
    pub(super) fn on_fact(&mut self, env: Envelope, subject: Subject, fact: Fact) -> Outcome {
        let (ix, time) = (env.scope, env.time);
        let checksum = subject
            .checksum
            .or_else(|| match (&subject.tool, &subject.args) {
                (Some(tool), Some(args)) => Some(Digest(digest_of_json(tool, Some(args)))),
                _ => None,
            });
        // Without an id, a copy of a fact about a call known by its checksum (or, naming only
        // its tool, by the tool's) is known by its repeat key (`repeats.rs`), filed under the
        // call it went into, or its waiting entry.
        let keyed_by = checksum
            .or_else(|| subject.tool.as_deref().map(repeats::tool_digest))
            .filter(|_| env.call_id.is_none());
        let repeat = keyed_by.as_ref().map(|cs| repeats::fact_key(&fact, cs));
        if let Some(&seq) = repeat.and_then(|key| self.scopes.get(ix).repeats.get(&key)) {
            match self.entries.live(seq) {
                Some(Live::Call(_)) => return self.repeat_of_fact(seq, time),
                Some(Live::Waiting(_)) => {
                    if let Some(Live::Waiting(waiting)) = self.entries.live_mut(seq) {
                        waiting.events = waiting.events.saturating_add(1);
                        waiting.duplicates = waiting.duplicates.saturating_add(1);
                    }
                    self.note_repeat(seq);
                    self.touch(seq);
                    return Outcome::Duplicate;
                }
                None if self.entries.closed.contains_key(&seq) => return Outcome::Late,
                None => {}
            }
        }
        if let Some(seq) = env.call_id.as_ref().and_then(|id| self.holder(ix, id)) {
            let over = self.over_budget(seq, &fact, env.attributes.as_ref());
            match self.entries.live_mut(seq) {
                Some(Live::Call(call)) => {
                    if holds(call, &fact) {
                        return self.repeat_of_fact(seq, time);
                    }
                    if over {
                        return Outcome::Rejected(TOO_LARGE);
                    }
                    self.merge_fact(seq, fact, time, env.attributes);
                    return Outcome::Merged;
                }
                Some(Live::Waiting(waiting)) => {
                    if over && !waiting.facts.contains(&fact) {
                        return Outcome::Rejected(TOO_LARGE);
                    }
                    let pending_bytes = &mut self.pending_bytes;
                    let outcome = add_to_waiting(waiting, pending_bytes, env, |entry| {
                        if entry.facts.contains(&fact) {
                            return false;
                        }
                        entry.facts.push(fact);
                        true
                    });
                    if outcome == Outcome::Duplicate {
                        self.note_repeat(seq);
                    } else {
                        self.note_merged(seq);
                    }
                    self.touch(seq);
                    return outcome;
                }
                // A remembered closed call: its record is published already.
                None => return Outcome::Late,
            }
        }
        let hints = Hints {
            call_id: env.call_id.as_ref().map(CallId::as_str),
            turn: env.turn.as_ref().map(TurnId::as_str),
            checksum: checksum.as_ref(),
            // A tool name alone is a weak hint for facts; use it only when there is no checksum.
            tool: if checksum.is_none() {
                subject.tool.as_deref()
            } else {
                None
            },
            oldest: false,
            fact: Some(&fact),
            last_resort: false,
        };
        let link = self.find_call(ix, &hints);
        // The calls that lack the fact are preferred: one that holds it took a copy of it, however
        // old the copy (a fact without a checksum has no repeat key to find it by).
        if let Some(link) = &link {
            if self
                .entries
                .call(link.seq)
                .is_some_and(|call| holds(call, &fact))
            {
                return self.repeat_of_fact(link.seq, time);
            }
        }
        if self.older_than_remembered(ix, time) {
            return Outcome::Late;
        }
        if let Some(link) = link {
            if self.over_budget(link.seq, &fact, env.attributes.as_ref()) {
                return Outcome::Rejected(TOO_LARGE);
            }
            let given = self.keys_given(link.seq);
            self.merge_fact(link.seq, fact, time, env.attributes);
            if let Some(key) = repeat {
                self.scopes.get_mut(ix).repeats.insert(key, link.seq);
            }
            self.keep_keys_lost(link.seq, given.into_iter().chain(repeat));
            return Outcome::Merged;
        }
        self.park(
            env,
            Subject {
                checksum,
                ..subject
            },
            None,
            Some(fact),
            repeat,
        );
        Outcome::Pending
    }

    /// Whether `fact`, with its event's `attributes`, would take the facts of pending entry `seq`
    /// past `max_facts_bytes` (`budget.rs`).
    fn over_budget(&self, seq: u64, fact: &Fact, attributes: Option<&Map<String, Value>>) -> bool {
        let held = match self.entries.live(seq) {
            Some(Live::Call(call)) => budget::of_call(call),
            Some(Live::Waiting(waiting)) => budget::of_waiting(waiting),
            None => 0,
        };
        held + budget::fact_bytes(fact) + budget::attributes_bytes(attributes)
            > self.config.max_facts_bytes
    }

    /// A copy of a fact pending call `seq` took (at `time`): counted on the call, not merged
    /// again.
    fn repeat_of_fact(&mut self, seq: u64, time: Timestamp) -> Outcome {
        if let Some(call) = self.entries.call_mut(seq) {
            call.events = call.events.saturating_add(1);
            call.duplicates = call.duplicates.saturating_add(1);
            call.updated_at = call.updated_at.max(time);
        }
        self.note_repeat(seq);
        self.touch(seq);
        Outcome::Duplicate
    }

    /// Merges the fact of an event (at `time`, with its `attributes`) into the pending call `seq`.
    /// The repeat keys call `seq`'s state gives (its announce's, its facts'), which its closed
    /// call is remembered by; none for another entry.
    pub(super) fn keys_given(&self, seq: u64) -> Vec<u64> {
        let Some(call) = self.entries.call(seq) else {
            return Vec::new();
        };
        let tool = self.scopes.get(call.scope).tool_name(call.tool);
        let mut keys = repeats::of_facts(call, tool);
        keys.extend(repeats::of_call(call, tool));
        keys
    }

    /// Keeps in call `seq` each of `keys` its state no longer gives: a fact a later one
    /// replaced, an event whose key the state never gave (see [`Extras::repeats`]).
    ///
    /// [`Extras::repeats`]: crate::state::Extras::repeats
    pub(super) fn keep_keys_lost(&mut self, seq: u64, keys: impl IntoIterator<Item = u64>) {
        let given = self.keys_given(seq);
        let Some(call) = self.entries.call_mut(seq) else {
            return;
        };
        let before = call_bytes(call);
        for key in keys {
            if !given.contains(&key) {
                call.keep_repeat(key);
            }
        }
        self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
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
            call.events = call.events.saturating_add(1);
            call.updated_at = call.updated_at.max(time);
            merge_call_attributes(call, attributes);
            self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
        }
        self.note_merged(seq);
        self.apply_fact(seq, fact);
    }

    /// Applies a fact to a pending call; a denial moves its deadline to `turn_grace` after it.
    pub(super) fn apply_fact(&mut self, seq: u64, fact: Fact) {
        let grace = self.config.turn_grace_ms;
        let Some(call) = self.entries.call_mut(seq) else {
            return;
        };
        let before = call_bytes(call);
        let mut deny_at = None;
        match fact {
            Fact::ExecStart { at } => {
                let extras = call.extras_mut();
                extras.started_at = Some(extras.started_at.map_or(at, |s| s.min(at)));
            }
            Fact::ExecEnd { end, started_at } => {
                let extras = call.extras_mut();
                if extras.started_at.is_none() {
                    extras.started_at = started_at;
                }
                extras.exec_end = Some(end);
            }
            Fact::Approval {
                at,
                decision,
                by,
                reason,
            } => {
                fold_approval(&mut call.extras_mut().approval, at, decision, by, reason);
                if decision == ApprovalDecision::Denied {
                    deny_at = Some(at);
                }
            }
            Fact::Hook { entry } => {
                if entry.decision == HookVerdict::Deny {
                    deny_at = Some(entry.at);
                }
                call.extras_mut().hooks.push(entry);
            }
        }
        self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
        if let Some(at) = deny_at {
            call.denied = true;
            let at = at.plus_millis(grace);
            if at < call.deadline || call.cause != DeadlineCause::Denied {
                let old = call.deadline;
                call.deadline = call.deadline.min(at);
                call.cause = DeadlineCause::Denied;
                let new = call.deadline;
                let timers = &mut self.scopes.get_mut(call.scope).timers;
                timers.remove(old, seq, Kind::Call);
                timers.insert(new, seq, Kind::Call);
            }
        }
        self.touch(seq);
    }
}
