//! A completion: it finds its call by the rules (`rules.rs`) and closes it with its result, or
//! it waits for its announce (docs/ARCHITECTURE.md, Correlation → Rules and → Phases).

use super::close;
use super::footprint::call_bytes;
use super::merge::{add_to_waiting, merge_call_attributes};
use super::repeats;
use super::rules::{Hints, Link};
use super::{Correlator, Envelope, Subject};
use crate::state::{Digest, Done, Fact, Live, WaitingResult};
use crate::{Effects, Outcome};
use toolcalls_model::checksum::digest_of_json;
use toolcalls_model::{CallId, Completion, Phase, Strategy, TurnId};

impl Correlator {
    pub(super) fn on_completion(
        &mut self,
        env: Envelope,
        completion: Completion,
        out: &mut Effects,
    ) -> Outcome {
        let ix = env.scope;
        let checksum = match (&completion.checksum, &completion.tool, &completion.args) {
            (Some(cs), _, _) => Some(Digest::of(cs)),
            (None, Some(tool), Some(args)) => Some(Digest(digest_of_json(tool, Some(args)))),
            _ => None,
        };
        let done = Done {
            at: env.time,
            result: completion.result,
            is_error: completion.is_error,
            cancelled: completion.cancelled,
            started_at: completion.started_at,
            duration_ms: completion.duration_ms,
            pos: self.pos,
        };
        // Without an id, a copy is known by its repeat key (`repeats.rs`).
        let repeat = env
            .call_id
            .is_none()
            .then(|| repeats::completion_key(completion.tool.as_deref(), checksum.as_ref(), &done));
        if let Some(&seq) = repeat.and_then(|key| self.scopes.get(ix).repeats.get(&key)) {
            match self.entries.live_mut(seq) {
                Some(Live::Waiting(waiting)) => {
                    waiting.events = waiting.events.saturating_add(1);
                    waiting.duplicates = waiting.duplicates.saturating_add(1);
                    self.note_repeat(seq);
                    self.touch(seq);
                    return Outcome::Duplicate;
                }
                Some(Live::Call(_)) => {}
                None => return Outcome::Late,
            }
        }
        if let Some(seq) = env.call_id.as_ref().and_then(|id| self.holder(ix, id)) {
            match self.entries.live_mut(seq) {
                Some(Live::Call(call)) => {
                    let before = call_bytes(call);
                    call.events = call.events.saturating_add(1);
                    merge_call_attributes(call, env.attributes);
                    self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
                    self.finish_with(
                        seq,
                        Some(done),
                        Link::call_id(seq),
                        env.call_id.as_ref(),
                        out,
                    );
                    return Outcome::Matched(Strategy::CallId);
                }
                Some(Live::Waiting(waiting)) => {
                    // The result of a call not announced yet, waiting for it under its id.
                    let pending_bytes = &mut self.pending_bytes;
                    let outcome = add_to_waiting(waiting, pending_bytes, env, |entry| {
                        if entry.done.is_some() {
                            return false;
                        }
                        entry.done = Some(done);
                        if entry.tool.is_none() {
                            entry.tool = completion.tool.map(String::into_boxed_str);
                        }
                        if entry.checksum.is_none() {
                            entry.checksum = checksum;
                        }
                        true
                    });
                    if outcome == Outcome::Duplicate {
                        self.note_repeat(seq); // a new result's position is in its `Done`
                    }
                    self.touch(seq);
                    return outcome;
                }
                // A remembered closed call: its record is published already; but a retry's own
                // result may revise it.
                None => return self.revise_with_result(seq, env.call_id.as_ref(), done, out),
            }
        }

        if self.older_than_remembered(ix, env.time) {
            return Outcome::Late;
        }
        let hintless = env.call_id.is_none() && checksum.is_none() && completion.tool.is_none();
        let hints = Hints {
            call_id: env.call_id.as_ref().map(CallId::as_str),
            turn: env.turn.as_ref().map(TurnId::as_str),
            checksum: checksum.as_ref(),
            tool: completion.tool.as_deref(),
            oldest: hintless,
            fact: None,
            last_resort: false,
        };
        if let Some(link) = self.find_call(ix, &hints) {
            if let Some(call) = self.entries.call_mut(link.seq) {
                let before = call_bytes(call);
                call.events = call.events.saturating_add(1);
                merge_call_attributes(call, env.attributes);
                self.pending_bytes = self.pending_bytes + call_bytes(call) - before;
            }
            self.finish_with(link.seq, Some(done), link, env.call_id.as_ref(), out);
            if let Some(key) = repeat {
                self.remember_repeat(link.seq, key);
            }
            return Outcome::Matched(link.strategy);
        }

        // Rule 5: nothing to link to yet; wait for the announce.
        let subject = Subject {
            tool: completion.tool,
            args: completion.args,
            checksum,
        };
        self.park(env, subject, Some(done), None, repeat);
        Outcome::Pending
    }

    /// The grace of waiting result `seq` ran out: the announce it waited for (its own, by id; one
    /// with its checksum) did not come. It takes a call by the fallbacks now if one fits at all,
    /// and closes it. Whether it did.
    pub(super) fn last_resort(&mut self, seq: u64, out: &mut Effects) -> bool {
        let Some(Live::Waiting(waiting)) = self.entries.live(seq) else {
            return false;
        };
        if waiting.done.is_none() {
            return false;
        }
        let hints = Hints {
            call_id: waiting.call_id(),
            turn: waiting.turn.as_deref(),
            checksum: waiting.checksum.as_ref(),
            tool: waiting.tool.as_deref(),
            oldest: false,
            fact: None,
            last_resort: true,
        };
        let Some(link) = self.find_call(waiting.scope, &hints) else {
            return false;
        };
        let (done, answered_by) = self.absorb_waiting(link.seq, seq);
        self.finish_with(link.seq, done, link, answered_by.as_ref(), out);
        true
    }

    /// Parks a result-side event (a result, or a fact) until its announce comes or its grace runs
    /// out. `repeat`: the repeat key of a result without an id.
    pub(super) fn park(
        &mut self,
        env: Envelope,
        subject: Subject,
        done: Option<Done>,
        fact: Option<Fact>,
        repeat: Option<u64>,
    ) {
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
        let waiting = Box::new(WaitingResult {
            scope: ix,
            key,
            has_id,
            record_id,
            turn: turn.map(|t| t.0),
            tool: tool.map(String::into_boxed_str),
            args,
            checksum,
            positions: if done.is_some() {
                Vec::new()
            } else {
                vec![self.pos]
            },
            done,
            facts: fact.into_iter().collect(),
            first_at: time,
            updated_at: time,
            events: 1,
            duplicates: 0,
            deadline: time.plus_millis(self.config.orphan_grace_ms),
            attributes,
        });
        self.insert_waiting(seq, waiting, repeat);
        self.touch(seq);
    }

    /// A result under `call_id`, an id of remembered closed call `seq`. With an idempotency key,
    /// the call's attempts are its ids in order (the first call's, then each retry's): the result
    /// of a later attempt than the one its record holds, saying something else — a retry that
    /// succeeded after a failure — is the call's outcome now, published as the record's next
    /// revision, unless the record says an attempt succeeded. Anything else is late: a repeat,
    /// or an earlier attempt's result.
    fn revise_with_result(
        &mut self,
        seq: u64,
        call_id: Option<&CallId>,
        done: Done,
        out: &mut Effects,
    ) -> Outcome {
        let Some(closed) = self.entries.closed.get_mut(&seq) else {
            return Outcome::Late;
        };
        let index = call_id.and_then(|id| closed.ids.iter().position(|i| i == id));
        let announced_with_id = closed.announced_with_id;
        let (Some(idem), Some(index)) = (closed.idem.as_mut(), index) else {
            return Outcome::Late;
        };
        let attempt = close::attempt_of(index, announced_with_id);
        if attempt <= idem.answered {
            return Outcome::Late;
        }
        idem.answered = attempt;
        let status = &mut idem.record.status;
        let phase = match &done {
            d if d.cancelled => Phase::Interrupted,
            d if d.is_error => Phase::Failed,
            _ => Phase::Succeeded,
        };
        let same = status.phase == phase
            && status.output.as_ref().map(|o| o.as_str())
                == done.result.as_ref().map(|r| r.as_str());
        // Once an attempt succeeded the side effect happened: a retry's failure ("already
        // done", a conflict) does not undo it.
        if same || status.phase == Phase::Succeeded {
            self.touch(seq);
            return Outcome::Late;
        }
        let started_at = done.started_at.or(status.started_at);
        status.phase = phase;
        status.started_at = started_at;
        status.completed_at = Some(done.at);
        status.duration_ms = done
            .duration_ms
            .or_else(|| Some(done.at.millis_since(started_at?)));
        status.output = done.result;
        status.is_error = done.is_error;
        status.reason = None;
        let record = &mut idem.record;
        record.metadata.revision = record.metadata.revision.saturating_add(1);
        record.correlation.events_merged = record.correlation.events_merged.saturating_add(1);
        record.updated_at = record.updated_at.max(done.at);
        record.provenance.insert(done.pos.topic, done.pos.offset);
        out.records.push(record.clone());
        self.touch(seq);
        Outcome::Matched(Strategy::CallId)
    }

    /// Closes a pending call with its result (or without one), publishing its record. Its phase
    /// (docs/ARCHITECTURE.md, Correlation → Phases): a denial first wins over what the result says.
    pub(super) fn finish_with(
        &mut self,
        seq: u64,
        done: Option<Done>,
        link: Link,
        answered_by: Option<&CallId>,
        out: &mut Effects,
    ) {
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
        self.close_call(seq, done, phase, None, link, answered_by, out);
    }
}
