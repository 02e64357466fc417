//! An announce: a repeat of a call already seen (docs/ARCHITECTURE.md, Correlation → Repeats), a
//! retry collapsed by its idempotency key (→ Idempotency keys), or a new call, which takes the
//! result and facts already waiting for it (→ Rules, "matching is symmetric").

use super::footprint::call_bytes;
use super::indexes::{insert_checksum, remove_checksum, take_id};
use super::merge::merge_call_attributes;
use super::repeats;
use super::{Correlator, Envelope};
use crate::state::{
    Call, DeadlineCause, Digest, Done, Extras, Live, PackedPos, ScopeIx, WaitingResult,
};
use crate::{Effects, Outcome};
use toolcalls_model::checksum::digest_of_json;
use toolcalls_model::{Announce, CallId, Timestamp};

impl Correlator {
    pub(super) fn on_announce(
        &mut self,
        env: Envelope,
        announce: Announce,
        out: &mut Effects,
    ) -> Outcome {
        let (ix, time) = (env.scope, env.time);
        // Computed once, and only when needed: for an event without an id, or a new call.
        let (mut checksum, mut repeat) = (None, None);
        if env.call_id.is_none() {
            checksum = Some(digest_of(&announce));
            // Without an id, a copy is known by its repeat key (`repeats.rs`).
            let key = repeats::announce_key(&announce.tool, checksum.flatten().as_ref(), time);
            repeat = Some(key);
            if let Some(&seq) = self.scopes.get(ix).repeats.get(&key) {
                if let Some(call) = self.entries.call_mut(seq) {
                    call.events = call.events.saturating_add(1);
                    call.duplicates = call.duplicates.saturating_add(1);
                    self.note_repeat(seq);
                    self.touch(seq);
                    return Outcome::Duplicate;
                }
                if self.entries.closed.contains_key(&seq) {
                    return Outcome::Late;
                }
            }
        }
        // A call id seen before in this scope: a repeat, a late repeat, or the announce that a
        // waiting result was waiting for.
        let held = env.call_id.as_ref().and_then(|id| self.holder(ix, id));
        if let Some(seq) = held {
            match self.entries.live_mut(seq) {
                Some(Live::Call(call)) => {
                    if self.scopes.get(ix).tool_name(call.tool) != announce.tool {
                        return Outcome::Rejected("conflicting_call_id");
                    }
                    call.events = call.events.saturating_add(1);
                    call.duplicates = call.duplicates.saturating_add(1);
                    call.updated_at = call.updated_at.max(time);
                    let mut new_digest = None;
                    let brings_args = call.args.is_none() && announce.args.is_some();
                    if brings_args {
                        let before = call_bytes(call);
                        let old = call.checksum;
                        let digest = announce.checksum.as_ref().map_or_else(
                            || Digest(digest_of_json(&announce.tool, announce.args.as_ref())),
                            Digest::of,
                        );
                        call.checksum = Some(digest);
                        call.args = announce.args;
                        self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
                        if old != Some(digest) {
                            new_digest = Some((old, digest));
                        }
                    }
                    if let Some((old, digest)) = new_digest {
                        // The repeat brought the arguments: file the call under their checksum
                        // (and not under the one its first announce claimed, if that differs).
                        let scope = self.scopes.get_mut(ix);
                        if let Some(old) = old {
                            remove_checksum(scope, &self.hs, &old, seq);
                        }
                        insert_checksum(scope, &self.entries, &self.hs, &digest, seq);
                    }
                    if brings_args {
                        self.note_merged(seq);
                    } else {
                        self.note_repeat(seq);
                    }
                    self.touch(seq);
                    return Outcome::Duplicate;
                }
                Some(Live::Waiting(_)) => {} // taken below, once the call exists
                // A remembered closed call: its record is published already. Another tool under
                // its id is another call, which the id cannot name.
                None => {
                    let known = self.entries.closed.get(&seq).map_or(0, |c| c.tool);
                    if known != 0 && known != repeats::tool_key(&announce.tool) {
                        return Outcome::Rejected("conflicting_call_id");
                    }
                    return Outcome::Late;
                }
            }
        }

        // Idempotency key: a retry inside the window collapses into the first call's record —
        // unless events of this very call already wait under its id: then it stays a call of its
        // own, so that what they say is not lost.
        let awaited =
            held.is_some_and(|seq| matches!(self.entries.live(seq), Some(Live::Waiting(_))));
        if !awaited {
            let idem_key = announce
                .side_effects
                .as_ref()
                .and_then(|s| s.idempotency_key.as_deref());
            if let Some(key) = idem_key {
                let retry = (key, env.call_id.as_ref(), repeat);
                if let Some(outcome) = self.collapse(ix, retry, time, out) {
                    return outcome;
                }
            }
        }

        if held.is_none() && self.older_than_remembered(ix, time) {
            return Outcome::Late;
        }
        let checksum = checksum.unwrap_or_else(|| digest_of(&announce));
        let seq = self.next_seq();
        let (key, has_id, record_id) = self.record_key(ix, env.call_id);
        let mut call = Call {
            scope: ix,
            tool: 0,
            key,
            has_id,
            record_id,
            turn: env.turn.map(|t| t.0),
            args: announce.args,
            checksum,
            created_at: time,
            updated_at: time,
            deadline: time.plus_millis(self.config.call_timeout_ms),
            cause: DeadlineCause::Timeout,
            denied: false,
            events: 1,
            duplicates: 0,
            attempts: 1,
            pos: PackedPos::NONE,
            extras: None,
        };
        if announce.side_effects.is_some()
            || announce.agent.is_some()
            || announce.execution.is_some()
            || announce.hook_context.is_some()
            || env.attributes.is_some()
        {
            call.set_extras(Extras {
                side_effects: announce.side_effects,
                agent: announce.agent,
                execution: announce.execution,
                hook_context: announce.hook_context,
                attributes: env.attributes,
                ..Extras::default()
            });
        }

        call.add_position(self.pos);

        // Results and facts that arrived before their announce.
        let (done_link, fact_entries) = self.find_waiting_for(&call, &announce.tool);
        self.insert_call(seq, Box::new(Live::Call(call)), &announce.tool, repeat);
        self.touch(seq);
        for waiting_seq in fact_entries {
            self.absorb_waiting(seq, waiting_seq);
        }
        match done_link {
            Some(link) => {
                let repeat = self.waiting_repeats.get(&link.seq).copied();
                let (done, answered_by) = self.absorb_waiting(seq, link.seq);
                self.finish_with(seq, done, link, answered_by.as_ref(), out);
                if let Some(key) = repeat {
                    self.remember_repeat(seq, key);
                }
                Outcome::Matched(link.strategy)
            }
            None => Outcome::Pending,
        }
    }

    /// A retry with an idempotency key already seen inside the window: counted as an attempt of
    /// the call that holds the key, or published as a new revision of its record if that call is
    /// closed already. `None`: no such call inside the window.
    ///
    /// `retry`: the idempotency key, the retry's call id and, without one, its repeat key — filed
    /// under a closed call it is published into, so that a copy of the retry is late, not one
    /// more attempt and revision.
    fn collapse(
        &mut self,
        ix: ScopeIx,
        (key, call_id, repeat): (&str, Option<&CallId>, Option<u64>),
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
            call.attempts = call.attempts.saturating_add(1);
            call.events = call.events.saturating_add(1);
            call.updated_at = call.updated_at.max(time);
            if let Some(id) = call_id {
                if call.call_id() != Some(id.as_str()) && !call.aliases().contains(id) {
                    call.extras_mut().aliases.push(id.clone());
                }
            }
            // A retry without an id: its copies are told by its key, as the call's own are.
            if let Some(key) = repeat {
                call.keep_repeat(key);
                self.scopes.get_mut(ix).repeats.insert(key, seq);
            }
            self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
            self.note_merged(seq);
        } else if let Some(closed) = self.entries.closed.get_mut(&seq) {
            let record = &mut closed.idem.as_mut()?.record;
            if time.millis_since(record.created_at) > window {
                return None;
            }
            record.metadata.revision = record.metadata.revision.saturating_add(1);
            record.correlation.attempts = record.correlation.attempts.saturating_add(1);
            record.correlation.events_merged = record.correlation.events_merged.saturating_add(1);
            record.updated_at = record.updated_at.max(time);
            record.provenance.insert(self.pos.topic, self.pos.offset);
            out.records.push(record.clone());
            if let Some(id) = call_id {
                if !closed.ids.contains(id) {
                    closed.ids.push(id.clone());
                }
            }
            if let Some(repeat) = repeat {
                self.remember_repeat(seq, repeat);
            }
        } else {
            return None;
        }
        if let Some(id) = call_id {
            take_id(
                self.scopes.get_mut(ix),
                &self.entries,
                &self.hs,
                id.as_str(),
                seq,
            );
        }
        self.touch(seq);
        Some(Outcome::Collapsed)
    }

    /// Moves the waiting result `waiting_seq` into the call `seq`: its facts are merged, its
    /// result returned with the call id it came under, which names the attempt it answers.
    pub(super) fn absorb_waiting(
        &mut self,
        seq: u64,
        waiting_seq: u64,
    ) -> (Option<Done>, Option<CallId>) {
        // Taking the entry out releases its repeat key: the call keeps it.
        let repeat = self.waiting_repeats.get(&waiting_seq).copied();
        let Some(live) = self.remove_live(waiting_seq) else {
            return (None, None);
        };
        let Live::Waiting(waiting) = *live else {
            return (None, None);
        };
        self.touch(waiting_seq);
        let WaitingResult {
            key,
            has_id,
            facts,
            done,
            events,
            duplicates,
            updated_at,
            attributes,
            positions,
            ..
        } = *waiting;
        let given = self.keys_given(seq);
        for fact in facts {
            self.apply_fact(seq, fact);
        }
        self.keep_keys_lost(seq, given.into_iter().chain(repeat));
        let mut took_id = false;
        if let Some(call) = self.entries.call_mut(seq) {
            let before = call_bytes(call);
            call.events = call.events.saturating_add(events);
            call.duplicates = call.duplicates.saturating_add(duplicates);
            call.add_positions(positions);
            call.updated_at = call.updated_at.max(updated_at);
            merge_call_attributes(call, attributes);
            if let Some(key) = repeat {
                let ix = call.scope;
                self.scopes.get_mut(ix).repeats.insert(key, seq);
            }
            // An id-less announce linked by a fallback: the waiting result's id names the call.
            if has_id && !call.has_id {
                call.extras_mut().aliases.push(CallId(key.to_string()));
                took_id = true;
            }
            self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
        }
        if took_id {
            if let Some(ix) = self.entries.call(seq).map(|c| c.scope) {
                take_id(self.scopes.get_mut(ix), &self.entries, &self.hs, &key, seq);
            }
        }
        let answered_by = (has_id && done.is_some()).then(|| CallId::from(key.into_string()));
        (done, answered_by)
    }
}

/// The checksum an announce names, or else that of its tool and arguments (none without either).
fn digest_of(announce: &Announce) -> Option<Digest> {
    match (&announce.checksum, &announce.args) {
        (Some(cs), _) => Some(Digest::of(cs)),
        (None, Some(args)) => Some(Digest(digest_of_json(&announce.tool, Some(args)))),
        (None, None) => None,
    }
}
