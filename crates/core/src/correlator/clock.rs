//! Time per scope (docs/ARCHITECTURE.md, Correlation → Time).
//!
//! Each scope (a session, or a thread of one) keeps its own clock: the largest event time of its
//! events. Its deadlines — call timeouts, turn and orphan graces, remembered ids expiring — fire
//! as *its* clock passes them, never before the partition's stream time does (which with two
//! input topics is their watermark). So sessions from different months that share a partition,
//! as a backfill publishes them, each keep the deadlines they would keep alone.
//!
//! A session that stops sending would keep its pending calls forever, so a scope goes *idle*
//! once it sent nothing for `session_idle` of wall clock, which the runtime tells the correlator
//! ([`Correlator::tick`]). An idle scope's deadlines follow the partition's stream time, as every
//! deadline did before scopes had clocks; its next event makes it active again. Measuring
//! idleness in wall time keeps a backfill's sessions active while their events still flow,
//! however far apart in event time they are. Where there is no wall clock (local mode, tests),
//! [`Correlator::advance`] — the runtime saying that time moved on without input — makes every
//! scope idle.
//!
//! The clock is kept in the changelog (one entry per scope), so a restored partition fires its
//! deadlines at the same events. Idleness is not (it is wall time): after a restore, a scope's
//! idle wait starts again.

use super::{hasher, scopes, Correlator, SCOPE_BIT};
use crate::state::{DeadlineCause, Live, ScopeIx};
use crate::Effects;
use toolcalls_model::{Phase, Timestamp};

impl Correlator {
    /// An event of scope `ix` at `time` came on the input topic being read: its clock moves on
    /// and it is active again.
    pub(super) fn scope_event(&mut self, ix: ScopeIx, time: Timestamp) {
        let (wall, topics) = (self.wall, self.config.input_topics);
        let topic = usize::from(self.pos.topic.min(1));
        let scope = self.scopes.get_mut(ix);
        let was_idle = std::mem::replace(&mut scope.idle, false);
        scope.active_wall = wall;
        if scope.clocks[topic].is_some_and(|c| c >= time) && !was_idle {
            return;
        }
        scope.clocks[topic] = Some(scope.clocks[topic].map_or(time, |c| c.max(time)));
        scope.clock = scopes::watermark(&scope.clocks, topics);
        self.scope_changed(ix);
    }

    /// Notes that scope `ix`'s changelog entry changed, at the position of the event being
    /// applied: numbered if it was not, and one note per checkpoint.
    pub(super) fn scope_changed(&mut self, ix: ScopeIx) {
        let scope = self.scopes.get_mut(ix);
        if scope.changed_at.replace(self.change_pos).is_some() {
            return;
        }
        let seq = match scope.seq {
            Some(seq) => seq,
            None => {
                let seq = self.next_seq();
                let scope = self.scopes.get_mut(ix);
                scope.seq = Some(seq);
                self.scopes.by_seq.insert(seq, ix);
                seq
            }
        };
        self.touch(seq | SCOPE_BIT);
    }

    /// The time scope `ix`'s deadlines are measured against: its own clock, held back by the
    /// partition's stream time; the stream time itself once the scope is idle.
    fn scope_now(&self, ix: ScopeIx) -> Option<Timestamp> {
        let scope = self.scopes.get(ix);
        let stream = self.stream_time?;
        if scope.idle {
            return Some(stream);
        }
        Some(scope.clock?.min(stream))
    }

    /// Fires the deadlines of scope `ix` its time has passed. A deadline its own clock has passed
    /// but stream time not yet (or any, once it is idle) waits for stream time.
    pub(super) fn fire_scope(&mut self, ix: ScopeIx, out: &mut Effects) {
        let Some(now) = self.scope_now(ix) else {
            return;
        };
        loop {
            let Some(slot) = self.scopes.slots.get(ix as usize).and_then(Option::as_ref) else {
                return;
            };
            let Some((at, seq)) = slot.timers.first() else {
                return;
            };
            if at > now {
                let waits_for_stream = slot.idle || slot.clock.is_some_and(|c| at <= c);
                if let (true, Some(scope_seq)) = (waits_for_stream, slot.seq) {
                    self.blocked.insert((at, scope_seq));
                }
                return;
            }
            self.scopes.get_mut(ix).timers.pop_first();
            self.fire_one(seq, out);
        }
    }

    /// After a restore: numbers the scopes a changelog of an older format left without a number,
    /// and files those whose next deadline waits for stream time (see
    /// [`Correlator::fire_scope`]).
    pub(super) fn arm_blocked(&mut self) {
        for ix in 0..self.scopes.slots.len() {
            let Some(scope) = self.scopes.slots[ix].as_ref() else {
                continue;
            };
            let seq = match scope.seq {
                Some(seq) => seq,
                None => {
                    let seq = self.next_seq();
                    self.scopes.slots[ix].as_mut().expect("a scope").seq = Some(seq);
                    self.scopes.by_seq.insert(seq, ix as ScopeIx);
                    seq
                }
            };
            let Some(scope) = self.scopes.slots[ix].as_ref() else {
                continue;
            };
            if let Some((at, _)) = scope.timers.first() {
                if scope.idle || scope.clock.is_some_and(|c| at <= c) {
                    self.blocked.insert((at, seq));
                }
            }
        }
    }

    /// Fires the deadlines that were waiting for stream time to reach them.
    pub(super) fn fire_blocked(&mut self, out: &mut Effects) {
        let Some(stream) = self.stream_time else {
            return;
        };
        while let Some(&(at, scope_seq)) = self.blocked.first() {
            if at > stream {
                break;
            }
            self.blocked.pop_first();
            if let Some(&ix) = self.scopes.by_seq.get(&scope_seq) {
                self.fire_scope(ix, out);
            }
        }
    }

    /// Marks idle the scopes that are (see the module docs) and fires what that makes due.
    pub(super) fn check_idle(&mut self, out: &mut Effects) {
        if self.stream_time.is_none() {
            return;
        }
        let (idle_ms, wall, change_pos) = (self.config.session_idle_ms, self.wall, self.change_pos);
        let mut went_idle = Vec::new();
        for slot in self.scopes.slots.iter_mut() {
            let Some(scope) = slot.as_mut() else {
                continue;
            };
            if scope.idle || scope.timers.is_empty() {
                continue;
            }
            if let (Some(now), None) = (wall, scope.active_wall) {
                // The runtime tells the time for the first time since its last event.
                scope.active_wall = Some(now);
            }
            let quiet = match (wall, scope.active_wall) {
                (Some(now), Some(since)) => now >= since.plus_millis(idle_ms),
                (Some(_), None) => false,
                (None, _) => true,
            };
            if quiet {
                scope.idle = true;
                if let (Some(seq), Some((at, _))) = (scope.seq, scope.timers.first()) {
                    let logged = scope.changed_at.replace(change_pos).is_some();
                    went_idle.push((seq, at, logged));
                }
            }
        }
        // Fired in deadline order across the scopes, as `fire_blocked` does.
        for (seq, at, logged) in went_idle {
            if !logged {
                self.touch(seq | SCOPE_BIT);
            }
            self.blocked.insert((at, seq));
        }
        self.fire_blocked(out);
    }

    /// Closes entry `seq`, whose deadline came: a call as its deadline's cause says, a waiting
    /// result `Orphaned` (after its last try at a call), a remembered call forgotten.
    fn fire_one(&mut self, seq: u64, out: &mut Effects) {
        let cause = match self.entries.live(seq) {
            Some(Live::Call(call)) => Some(call.cause),
            Some(Live::Waiting(_)) => None,
            None => {
                if self.ended {
                    return;
                }
                if let Some(closed) = self.entries.closed.get(&seq) {
                    let (ix, closed_at) = (closed.scope, self.closed_at(closed));
                    self.note_forgotten(ix, closed_at);
                    self.expire_closed(seq);
                }
                return;
            }
        };
        match cause {
            Some(cause) => {
                let (phase, reason) = match cause {
                    DeadlineCause::Timeout => {
                        (Phase::TimedOut, "no result within the call timeout")
                    }
                    DeadlineCause::TurnEnded => (Phase::Interrupted, "turn ended without a result"),
                    DeadlineCause::TurnAborted => (Phase::Interrupted, "turn aborted"),
                    DeadlineCause::Denied => (Phase::Denied, "denied; no result reported"),
                };
                self.close_unanswered(seq, phase, reason, out);
            }
            None if !self.last_resort(seq, out) => {
                let reason = "no matching announce within the orphan grace";
                self.close_waiting(seq, Phase::Orphaned, reason, out);
            }
            None => {}
        }
    }

    /// Drops the scopes left without entries; their changelog keys are written as gone. Tables
    /// a burst left mostly empty give their memory back.
    pub(super) fn sweep_scopes(&mut self) {
        self.scopes
            .sweep(&self.hs, self.config.max_forgotten_sessions);
        self.entries.shrink_if_sparse();
        hasher::shrink_if_sparse(&mut self.waiting_repeats);
        for seq in std::mem::take(&mut self.scopes.dropped) {
            self.touch(seq | SCOPE_BIT);
        }
    }

    /// Tells the correlator the wall clock (the runtime does, at each punctuation): events held
    /// in the reorder window for its length are applied (`disorder.rs`), scopes quiet for
    /// `session_idle` of it go idle, and what that makes due fires.
    pub fn tick(&mut self, wall: Timestamp, out: &mut Effects) {
        self.wall = Some(wall);
        self.release_waited(out);
        self.check_idle(out);
        self.sweep_scopes();
    }
}
