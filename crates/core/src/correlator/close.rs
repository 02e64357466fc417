//! Closing entries: a call with its record published and its ids remembered, a waiting result as
//! an `Orphaned` record; the deadlines that close them (call timeout, turn end, denial, orphan
//! grace, remembered ids expiring), and the state cap (docs/ARCHITECTURE.md, Correlation →
//! Phases, → Repeats and → Time).

use super::record::{record_of_call, record_of_waiting};
use super::rules::Link;
use super::{Correlator, Envelope};
use crate::state::{Closed, DeadlineCause, Done, Idempotent, Live};
use crate::{Effects, Outcome};
use toolcalls_model::{CallId, Phase, TurnId};

impl Correlator {
    /// Closes every pending entry now: calls as `phase` (with `reason`), waiting results as
    /// `Orphaned`. Used at the end of a finite input.
    pub fn close_all(&mut self, phase: Phase, reason: &str, out: &mut Effects) {
        for seq in self.entries.live_seqs() {
            match self.entries.live(seq) {
                Some(Live::Call(_)) => {
                    self.close_call(seq, None, phase, Some(reason), Link::unmatched(seq), out)
                }
                Some(Live::Waiting(_)) => self.close_waiting(seq, Phase::Orphaned, reason, out),
                None => {}
            }
        }
        self.scopes.sweep(&self.hs);
    }

    /// A turn ended or was aborted: the pending calls of the turn (of the whole scope when the
    /// event names none) close `turn_grace` later unless a result comes first.
    pub(super) fn on_turn_end(&mut self, env: &Envelope, cause: DeadlineCause) -> Outcome {
        let (ix, turn, time) = (env.scope, env.turn.as_ref(), env.time);
        let at = time.plus_millis(self.config.turn_grace_ms);
        let seqs: Vec<u64> = self.scopes.get(ix).calls().map(|p| p.seq).collect();
        for seq in seqs {
            let Some(call) = self.entries.call_mut(seq) else {
                continue;
            };
            if turn.is_some() && call.turn.as_deref() != turn.map(TurnId::as_str) {
                continue;
            }
            // A deadline only comes closer; at the same time, a turn end names the cause better
            // than the call timeout. A denial stays the cause.
            if at < call.deadline || (call.cause == DeadlineCause::Timeout && at == call.deadline) {
                let old = call.deadline;
                call.deadline = at;
                if call.cause != DeadlineCause::Denied {
                    call.cause = cause;
                }
                self.timers.remove(&(old, seq));
                self.timers.insert((at, seq));
                self.touch(seq);
            }
        }
        Outcome::Applied
    }

    /// Closes a pending call: publishes its record and, if it had ids or an idempotency key,
    /// remembers it (for `dedupe_window`, or the idempotency window if that is longer).
    pub(super) fn close_call(
        &mut self,
        seq: u64,
        done: Option<Done>,
        phase: Phase,
        reason: Option<&str>,
        link: Link,
        out: &mut Effects,
    ) {
        // The tool slot may go with the call: take the name first.
        let tool = match self.entries.call(seq) {
            Some(c) => self.scopes.get(c.scope).tool_name(c.tool).to_owned(),
            None => return,
        };
        let Some(live) = self.remove_live(seq) else {
            return;
        };
        let Live::Call(call) = *live else {
            return;
        };
        self.touch(seq);
        let mut ids: Vec<CallId> = call.call_id().map(CallId::from).into_iter().collect();
        ids.extend(call.aliases().iter().cloned());
        let idem = call.idempotency_key().map(str::to_owned);
        let (ix, updated_at) = (call.scope, call.updated_at);
        let record = record_of_call(
            call,
            &self.scopes.get(ix).key,
            tool,
            done,
            phase,
            reason,
            link,
        );
        if !ids.is_empty() || idem.is_some() {
            let window = if idem.is_some() {
                self.config
                    .dedupe_window_ms
                    .max(self.config.idempotency_window_ms)
            } else {
                self.config.dedupe_window_ms
            };
            let expires = self.stream_time.unwrap_or(updated_at).plus_millis(window);
            let closed = Closed {
                scope: ix,
                expires,
                ids,
                idem: idem.map(|key| {
                    Box::new(Idempotent {
                        key,
                        record: record.clone(),
                    })
                }),
            };
            self.insert_closed(seq, closed);
        }
        out.records.push(record);
    }

    /// Closes a waiting result: publishes its record and remembers its id, if it had one.
    fn close_waiting(&mut self, seq: u64, phase: Phase, reason: &str, out: &mut Effects) {
        let Some(live) = self.remove_live(seq) else {
            return;
        };
        let Live::Waiting(waiting) = *live else {
            return;
        };
        self.touch(seq);
        let (ix, updated_at, call_id) = (
            waiting.scope,
            waiting.updated_at,
            waiting.call_id().map(CallId::from),
        );
        out.records.push(record_of_waiting(
            *waiting,
            &self.scopes.get(ix).key,
            phase,
            reason,
        ));
        if let Some(id) = call_id {
            let expires = self
                .stream_time
                .unwrap_or(updated_at)
                .plus_millis(self.config.dedupe_window_ms);
            self.insert_closed(
                seq,
                Closed {
                    scope: ix,
                    expires,
                    ids: vec![id],
                    idem: None,
                },
            );
        }
    }

    /// Fires every deadline stream time has passed.
    pub(super) fn fire_timers(&mut self, out: &mut Effects) {
        let Some(now) = self.stream_time else { return };
        while let Some(&(at, seq)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            if let Some(live) = self.entries.live(seq) {
                match live {
                    Live::Call(call) => {
                        let (phase, reason) = match call.cause {
                            DeadlineCause::Timeout => {
                                (Phase::TimedOut, "no result within the call timeout")
                            }
                            DeadlineCause::TurnEnded => {
                                (Phase::Interrupted, "turn ended without a result")
                            }
                            DeadlineCause::TurnAborted => (Phase::Interrupted, "turn aborted"),
                            DeadlineCause::Denied => (Phase::Denied, "denied; no result reported"),
                        };
                        self.close_call(seq, None, phase, Some(reason), Link::unmatched(seq), out);
                    }
                    Live::Waiting(_) => self.close_waiting(
                        seq,
                        Phase::Orphaned,
                        "no matching announce within the orphan grace",
                        out,
                    ),
                }
            } else if self.entries.closed.contains_key(&seq) {
                self.expire_closed(seq);
            }
        }
    }

    /// Over `max_pending`, closes the oldest pending entries as `Evicted`; over `max_remembered`,
    /// forgets the oldest remembered ids.
    pub(super) fn enforce_caps(&mut self, out: &mut Effects) {
        while self.entries.live.len() > self.config.max_pending {
            let Some(seq) = self.entries.oldest_live() else {
                break;
            };
            let Some(live) = self.entries.live(seq) else {
                break;
            };
            let reason = "evicted: the partition's pending-state cap was reached";
            match live {
                Live::Call(_) => {
                    let link = Link::unmatched(seq);
                    self.close_call(seq, None, Phase::Evicted, Some(reason), link, out);
                }
                Live::Waiting(_) => self.close_waiting(seq, Phase::Evicted, reason, out),
            }
        }
        while self.entries.closed.len() > self.config.max_remembered {
            let Some(&seq) = self.entries.closed.keys().next() else {
                break;
            };
            self.expire_closed(seq);
        }
    }
}
