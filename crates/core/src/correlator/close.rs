//! Closing entries: a call with its record published and its ids remembered, a waiting result as
//! an `Orphaned` record; the deadlines that close them (call timeout, turn end, denial, orphan
//! grace, remembered ids expiring), and the state cap (docs/ARCHITECTURE.md, Correlation →
//! Phases, → Repeats and → Time).

use super::indexes::IdsFiled;
use super::record::{record_of_call, record_of_waiting};
use super::repeats;
use super::rules::Link;
use super::timers::Kind;
use super::{Correlator, Envelope};
use crate::state::{Closed, ClosedIds, DeadlineCause, Done, Idempotent, Live, ScopeIx};
use crate::{Effects, Outcome};
use toolcalls_model::{CallId, Phase, Timestamp, TurnId};

impl Correlator {
    /// Closes every pending entry now: calls as `phase` (with `reason`), waiting results as
    /// `Orphaned`. Used at the end of a finite input.
    pub fn close_all(&mut self, phase: Phase, reason: &str, out: &mut Effects) {
        for seq in self.entries.live_seqs() {
            match self.entries.live(seq) {
                Some(Live::Call(_)) => self.close_unanswered(seq, phase, reason, out),
                Some(Live::Waiting(_)) => self.close_waiting(seq, Phase::Orphaned, reason, out),
                None => {}
            }
        }
        self.sweep_scopes();
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
            // A call announced after the turn ended is not of it: a copy of a turn end (at
            // least once, or a file read again) must not close the calls that came after it.
            if call.created_at > time {
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
                let timers = &mut self.scopes.get_mut(ix).timers;
                timers.remove(old, seq, Kind::Call);
                timers.insert(at, seq, Kind::Call);
                self.touch(seq);
            }
        }
        Outcome::Applied
    }

    /// Closes pending call `seq` without a result (a deadline passed, the input ended).
    pub(super) fn close_unanswered(
        &mut self,
        seq: u64,
        phase: Phase,
        reason: &str,
        out: &mut Effects,
    ) {
        let link = Link::unmatched(seq);
        self.close_call(seq, None, phase, Some(reason), link, None, out);
    }

    /// Closes a pending call: publishes its record and remembers it — its ids, the repeat keys
    /// of an announce without one and of the facts it took, its idempotency key — for
    /// `dedupe_window` (or the idempotency window if that is longer). `answered_by`: the call id
    /// the result `done` named, which tells a retry's result from the first attempt's.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn close_call(
        &mut self,
        seq: u64,
        done: Option<Done>,
        phase: Phase,
        reason: Option<&str>,
        link: Link,
        answered_by: Option<&CallId>,
        out: &mut Effects,
    ) {
        // The tool slot may go with the call: take the name first.
        let (tool, keys) = match self.entries.call(seq) {
            Some(c) => {
                let tool = self.scopes.get(c.scope).tool_name(c.tool);
                // One allocation of the exact size (none for a call with an id and no facts).
                let mut keys: Vec<u64> = repeats::of_facts(c, tool);
                keys.extend(repeats::of_call(c, tool));
                for &key in c.kept_repeats() {
                    if !keys.contains(&key) {
                        keys.push(key);
                    }
                }
                let keys = keys.into_boxed_slice();
                (tool.to_owned(), keys)
            }
            None => return,
        };
        let tool_key = repeats::tool_key(&tool);
        let Some((live, filed)) = self.close_live_call(seq) else {
            return;
        };
        let Live::Call(call) = *live else {
            return;
        };
        self.touch(seq);
        let announced_with_id = call.has_id;
        let mut ids: ClosedIds = call.call_id().map(CallId::from).into_iter().collect();
        ids.extend(call.aliases().iter().cloned());
        let idem = call.idempotency_key().map(str::to_owned);
        // A result that named no id of the call answers its first attempt.
        let answered = match (
            answered_by.and_then(|id| ids.iter().position(|i| i == id)),
            &done,
        ) {
            (Some(index), _) => attempt_of(index, announced_with_id),
            (None, Some(_)) => 1,
            (None, None) => 0,
        };
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
        let repeats = keys;
        if !ids.is_empty() || idem.is_some() || !repeats.is_empty() {
            let window = self.remembered_for(idem.is_some());
            let expires = self.remembered_from(ix, updated_at).plus_millis(window);
            let closed = Closed {
                scope: ix,
                expires,
                ids,
                announced_with_id,
                tool: tool_key,
                repeats,
                idem: idem.map(|key| {
                    Box::new(Idempotent {
                        key,
                        record: record.clone(),
                        answered,
                    })
                }),
            };
            self.insert_closed(seq, closed, &filed);
        }
        out.records.push(record);
    }

    /// Closes a waiting result: publishes its record and remembers its id, or the repeat key of
    /// its completion.
    pub(super) fn close_waiting(
        &mut self,
        seq: u64,
        phase: Phase,
        reason: &str,
        out: &mut Effects,
    ) {
        let repeat = self.waiting_repeats.get(&seq).copied();
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
        let tool = waiting.tool.as_deref().map_or(0, repeats::tool_key);
        out.records.push(record_of_waiting(
            *waiting,
            &self.scopes.get(ix).key,
            phase,
            reason,
        ));
        if call_id.is_some() || repeat.is_some() {
            let expires = self
                .remembered_from(ix, updated_at)
                .plus_millis(self.config.dedupe_window_ms);
            self.insert_closed(
                seq,
                Closed {
                    scope: ix,
                    expires,
                    ids: call_id.into_iter().collect(),
                    announced_with_id: false,
                    tool,
                    repeats: repeat.into_iter().collect(),
                    idem: None,
                },
                &IdsFiled::None,
            );
        }
    }

    /// How long a closed entry is remembered: `dedupe_window`, or the idempotency window if that
    /// is longer and the call has an idempotency key (its retries collapse into it).
    fn remembered_for(&self, idempotent: bool) -> u64 {
        let dedupe = self.config.dedupe_window_ms;
        if idempotent {
            dedupe.max(self.config.idempotency_window_ms)
        } else {
            dedupe
        }
    }

    /// When closed entry `closed` was closed, by its scope's clock: when its remembering started.
    pub(super) fn closed_at(&self, closed: &Closed) -> Timestamp {
        let window = self.remembered_for(closed.idem.is_some());
        let window = i64::try_from(window).unwrap_or(i64::MAX);
        Timestamp::from_millis(closed.expires.millis().saturating_sub(window))
    }

    /// When the remembering of a closed entry of scope `ix` last changed at `updated_at` starts:
    /// now, by the scope's clock.
    fn remembered_from(&self, ix: ScopeIx, updated_at: Timestamp) -> Timestamp {
        self.scopes
            .get(ix)
            .clock
            .map_or(updated_at, |c| c.max(updated_at))
    }

    /// Files repeat key `key` of an event without an id under the closed call `seq` its event
    /// went into, so that a copy of the event counts as a late repeat of that call.
    pub(super) fn remember_repeat(&mut self, seq: u64, key: u64) {
        let Some(closed) = self.entries.closed.get_mut(&seq) else {
            return;
        };
        if closed.repeats.contains(&key) {
            return;
        }
        closed.repeats = closed.repeats.iter().copied().chain([key]).collect();
        self.scopes.get_mut(closed.scope).repeats.insert(key, seq);
        self.touch(seq);
    }

    /// Over `max_pending` entries or `max_pending_bytes`, closes the oldest pending entries as
    /// `Evicted`; over `max_remembered`, forgets the oldest remembered ids.
    pub(super) fn enforce_caps(&mut self, out: &mut Effects) {
        while self.entries.live.len() > self.config.max_pending
            || (self.pending_bytes > self.config.max_pending_bytes && !self.entries.live.is_empty())
        {
            let Some(seq) = self.entries.oldest_live() else {
                break;
            };
            let Some(live) = self.entries.live(seq) else {
                break;
            };
            let reason = if self.entries.live.len() > self.config.max_pending {
                "evicted: the partition's pending-state cap (max_pending) was reached"
            } else {
                "evicted: the partition's pending-bytes cap (max_pending_bytes) was reached"
            };
            match live {
                Live::Call(_) => {
                    let link = Link::unmatched(seq);
                    self.close_call(seq, None, Phase::Evicted, Some(reason), link, None, out);
                }
                Live::Waiting(_) => self.close_waiting(seq, Phase::Evicted, reason, out),
            }
        }
        while self.entries.closed.len() > self.config.max_remembered {
            let Some(seq) = self.entries.oldest_closed() else {
                break;
            };
            self.expire_closed(seq);
        }
    }
}

/// The attempt an id of a call names, from its index among the call's ids (the first call's,
/// then each retry's): a call announced without an id of its own had an attempt before its
/// first id.
pub(super) fn attempt_of(index: usize, announced_with_id: bool) -> u32 {
    (index as u32 + 1).saturating_add(u32::from(!announced_with_id))
}
