//! The reorder window (docs/ARCHITECTURE.md, Correlation → Disorder).
//!
//! Arrival order is not event order: results come on another topic than their announces, and
//! files merged from several producers interleave. Without ids, the fallback rules pair by the
//! order calls and results are applied in, so an id-less result applied before its announce, or
//! after the next call's result, can take the wrong call. With `max_disorder_ms` = D > 0 an
//! event is *held* instead of applied, and its session's held events are applied in event-time
//! order (arrival order on a tie) once they can no longer be overtaken:
//!
//! - when an event of the same scope (source, session, thread) at least D later has arrived — on
//!   each input topic, where there are two (the processor reads announces and completions from
//!   two topics, and one may be read ahead of the other: the scope's arrival time is the
//!   watermark of the two, as its clock is). An event that arrives more than D behind that is
//!   applied as it comes, so the window only reorders disorder up to D;
//! - when it has been held for D of wall clock, where the runtime tells the time
//!   ([`Correlator::tick`]): live traffic waits at most D (plus one punctuation);
//! - when the input ends ([`Correlator::release_all`]).
//!
//! The window is per scope, measured in the scope's own event time, so a backfill of sessions
//! from different months reorders each one as if it were alone. A held event is a changelog
//! entry of its own (its v1 encoding, its input position and its wall time of arrival), so a
//! partition that moves keeps what it held; its input offset commits as for any applied event.

use super::window::Held;
use super::{scopes, Correlator, META_SEQ};
use crate::codec::encode;
use crate::state::{EntryRef, ScopeIx, ScopeKey};
use crate::step::Released;
use crate::{Effects, Outcome, Position};
use toolcalls_model::{Event, EventKind, Timestamp};

impl Correlator {
    /// Applies `event` at once if the window is off or it came too late to be reordered;
    /// otherwise holds it, and applies the held events of its scope that the time it brings
    /// releases.
    pub(super) fn hold_or_apply(
        &mut self,
        event: Event,
        pos: Position,
        out: &mut Effects,
    ) -> Outcome {
        let window = self.config.max_disorder_ms;
        if window == 0 {
            return self.apply_now(event, pos, out);
        }
        let key = ScopeKey {
            source: event.source.clone(),
            session: event.session.clone(),
            thread: event.thread.clone(),
        };
        let ix = self.scopes.intern(key, &self.hs);
        let (time, topics) = (event.time, self.config.input_topics);
        let topic = usize::from(pos.topic.min(1));
        let scope = self.scopes.get_mut(ix);
        let before = scopes::watermark(&scope.arrived, topics);
        if before.is_some_and(|w| time.plus_millis(window) <= w) {
            // Older by the whole window than what its session has shown: nothing held can come
            // before it.
            return self.apply_now(event, pos, out);
        }
        scope.arrived[topic] = Some(scope.arrived[topic].map_or(time, |a| a.max(time)));
        let after = scopes::watermark(&scope.arrived, topics);
        scope.refs += 1;
        let seq = self.next_seq();
        self.window.insert(
            ix,
            seq,
            Held {
                event,
                pos,
                wall: self.wall,
            },
        );
        self.touch(seq);
        self.touch(META_SEQ);
        if let Some(w) = after.filter(|&w| before.is_none_or(|b| w > b)) {
            self.release_scope(ix, |t, _| t.plus_millis(window) <= w, out);
        }
        self.sweep_scopes();
        Outcome::Held
    }

    /// Applies, in order, the held events of scope `ix` from its earliest on while `due` says so
    /// (of their event time and sequence number).
    fn release_scope(
        &mut self,
        ix: ScopeIx,
        due: impl Fn(Timestamp, u64) -> bool,
        out: &mut Effects,
    ) {
        while let Some(key) = self.window.first_of(ix) {
            if !due(key.1, key.2) {
                return;
            }
            self.release(key, out);
        }
    }

    /// Applies one held event, its outcome to `out.released`.
    fn release(&mut self, key: (ScopeIx, Timestamp, u64), out: &mut Effects) {
        let Held { event, pos, .. } = self.window.remove(key);
        self.touch(key.2);
        let kind = event.kind();
        // Only an announce can be refused; keep it for the dead-letter topic.
        let copy = (kind == EventKind::Announce).then(|| Box::new(event.clone()));
        let outcome = self.apply_now(event, pos, out);
        // The held event's reference goes after it was applied, so its scope (and the scope's
        // clock and arrival time) stays while later held events of it wait.
        self.scopes.unref(key.0);
        let rejected = matches!(outcome, Outcome::Rejected(_))
            .then_some(copy)
            .flatten();
        out.released.push(Released {
            pos,
            kind,
            outcome,
            rejected,
        });
    }

    /// Applies the events held for the window's length of wall clock (with everything of their
    /// scope held before them in event time).
    pub(super) fn release_waited(&mut self, out: &mut Effects) {
        let (Some(wall), window) = (self.wall, self.config.max_disorder_ms) else {
            return;
        };
        if window == 0 || self.window.len() == 0 {
            return;
        }
        if std::mem::take(&mut self.window.unclocked) {
            // Held before the runtime told the time (a start or a restore): their wait starts now.
            let unclocked: Vec<_> = self
                .window
                .held
                .iter_mut()
                .filter(|(_, h)| h.wall.is_none())
                .map(|(&k, h)| {
                    h.wall = Some(wall);
                    k.2
                })
                .collect();
            for seq in unclocked {
                self.window.by_wall.insert((wall, seq));
            }
        }
        while let Some(&(arrived, seq)) = self.window.by_wall.first() {
            if arrived.plus_millis(window) > wall {
                break;
            }
            let (ix, time) = self.window.by_seq[&seq];
            self.release_scope(ix, |t, s| (t, s) <= (time, seq), out);
        }
        self.sweep_scopes();
    }

    /// Applies every held event, in event-time order across the scopes: the input has ended.
    pub fn release_all(&mut self, out: &mut Effects) {
        let mut order: Vec<_> = self.window.held.keys().copied().collect();
        order.sort_by_key(|&(_, time, seq)| (time, seq));
        for key in order {
            self.release(key, out);
        }
        self.sweep_scopes();
    }

    /// The changelog value of held event `seq`, if it is held.
    pub(super) fn held_entry(&self, seq: u64) -> Option<Vec<u8>> {
        let &(ix, time) = self.window.by_seq.get(&seq)?;
        let held = &self.window.held[&(ix, time, seq)];
        Some(encode(&EntryRef::Held {
            event: &held.event,
            pos: held.pos,
            wall: held.wall,
        }))
    }

    /// After a restore: a held event of scope `ix`, as its changelog entry says.
    pub(super) fn restore_held(&mut self, ix: ScopeIx, seq: u64, held: Held) {
        let scope = self.scopes.get_mut(ix);
        scope.refs += 1;
        let topic = usize::from(held.pos.topic.min(1));
        scope.arrived[topic] = scope.arrived[topic].max(Some(held.event.time));
        self.window.insert(ix, seq, held);
    }

    /// After a restore: each scope's arrival time on each topic is the larger of its clock there
    /// and its held events' times, as it was — every event that came was applied (and moved the
    /// clock of its topic) or is held.
    pub(super) fn restore_arrived(&mut self) {
        for scope in self.scopes.slots.iter_mut().flatten() {
            for (arrived, clock) in scope.arrived.iter_mut().zip(scope.clocks) {
                *arrived = (*arrived).max(clock);
            }
        }
    }

    /// Events held in the reorder window.
    pub fn held_len(&self) -> usize {
        self.window.len()
    }

    /// The input positions of the events held in the reorder window (for the audit: they are
    /// accounted for, still to be applied).
    pub fn held_positions(&self) -> impl Iterator<Item = Position> + '_ {
        self.window.held.values().map(|h| h.pos)
    }
}
