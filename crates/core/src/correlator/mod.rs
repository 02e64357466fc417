//! The per-partition correlation state machine, [`Correlator`].
//!
//! What it decides is described in docs/ARCHITECTURE.md, "Correlation (crates/core)": the rules
//! (Correlation → Rules), repeats, idempotency keys, facts, phases, time, state and restore, and
//! what a pending entry costs (Correlation → Memory). The files of this module are its jobs:
//!
//! - `mod.rs`: the correlator's fields, its accessors, [`Correlator::apply`] /
//!   [`Correlator::advance`], and the dispatch of an event to its handler. It names nothing of
//!   the job files below (each of which adds methods to `Correlator`), so that no file imports
//!   one that imports it back;
//! - `announce.rs`: an announce — a repeat, an idempotent retry, or a new call that takes the
//!   events waiting for it;
//! - `result.rs`: a completion — its call found and closed with it, or the result left waiting;
//! - `facts.rs`: execution start / end, approvals and hook decisions merged into a call;
//! - `budget.rs`: what a call's facts take in its record, which `max_facts_bytes` bounds;
//! - `merge.rs`: what any event adds to an entry (attributes, counts), and the approval fold;
//! - `provenance.rs`: the input positions of the events merged into each entry and its record;
//! - `clock.rs`: time per scope — its clock, its deadlines, idleness;
//! - `disorder.rs`: the reorder window — events held and applied in event-time order;
//! - `window.rs`: the held events themselves and their indexes;
//! - `close.rs`: closing calls and waiting results — turn ends, the state cap;
//! - `repeats.rs`: the repeat keys of events without an id, which find their copies;
//! - `forgotten.rs`: events too old for their scope to tell from a copy of a forgotten call;
//! - `forgotten_scopes.rs`: the notes kept of the scopes dropped after they forgot everything;
//! - `rules.rs`: the matching rules — how a result finds its call and a new call its waiting
//!   result — and the confidence of each link;
//! - `entries.rs`: every entry by sequence number;
//! - `scopes.rs`: the scope table and each scope's tool slots;
//! - `timers.rs`: a scope's deadlines in order;
//! - `indexes.rs`: filing entries in (and taking them out of) the id, checksum, record id and
//!   idempotency-key tables and the timers;
//! - `hasher.rs`: the hasher of all those tables;
//! - `changelog.rs`: the changelog — taking it, restoring from it, `reserve_seqs`, `restate`;
//! - `query.rs`: pending entries as records, for the query API;
//! - `record.rs`: the ToolCall record of a call or waiting result;
//! - `footprint.rs`: the memory estimate of the pending entries.

mod announce;
mod budget;
mod changelog;
mod clock;
mod close;
mod disorder;
mod entries;
mod facts;
mod footprint;
mod forgotten;
mod forgotten_scopes;
mod hasher;
mod indexes;
mod merge;
mod provenance;
mod query;
mod record;
mod repeats;
mod result;
mod rules;
mod scopes;
mod timers;
mod window;

use crate::state::{DeadlineCause, Digest, ExecEnd, Fact, Live, ScopeIx, ScopeKey};
use crate::{Config, Effects, Outcome, Position};
use entries::Entries;
use footprint::live_bytes;
use hashbrown::HashTable;
use hasher::Hasher;
use scopes::Scopes;
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use toolcalls_model::{CallId, Event, EventBody, HookDecisionEntry, Json, Timestamp, TurnId};

/// Key of the partition-wide entry in the dirty set.
const META_SEQ: u64 = u64::MAX;
/// Marks a scope's number in the dirty set (numbers stay far below it).
const SCOPE_BIT: u64 = 1 << 63;
/// Entry numbers stay below it (2^47: at half a million entries a second, a partition's fastest,
/// for eight years); the bit marks closed calls in the id tables and the bits above it tag the
/// id an entry is filed under there (`indexes::Filed`), and a changelog key at or above it is
/// not one this program writes.
const SEQ_LIMIT: u64 = 1 << 47;
/// Entry numbers a changelog may name (its keys, the `next_seq` of its partition-wide entry) stay
/// below it, so that numbering on from a corrupt or foreign changelog's largest cannot reach
/// [`SEQ_LIMIT`] (2^46 more entries).
pub(crate) const RESTORED_SEQ_LIMIT: u64 = SEQ_LIMIT / 2;

/// The correlation state of one input partition. The rules it follows: docs/ARCHITECTURE.md,
/// Correlation → Rules.
#[derive(Debug)]
pub struct Correlator {
    config: Config,
    stream_time: Option<Timestamp>,
    /// The largest event time seen per input topic (by `Position::topic`); stream time follows
    /// the smallest of them (a watermark), so a topic read ahead of the other cannot time out
    /// calls whose results are still unread there.
    topic_time: Vec<Option<Timestamp>>,
    next_seq: u64,
    entries: Entries,
    scopes: Scopes,
    /// Scopes with a deadline their own clock has passed but stream time has not (or, idle,
    /// any): (the deadline, the scope's number). See `clock.rs`.
    blocked: BTreeSet<(Timestamp, u64)>,
    /// The repeat keys of waiting results that came without an id, by sequence number
    /// (`repeats.rs`): computed once, from the result's text.
    waiting_repeats: hasher::HashMap<u64, u64>,
    /// The wall clock, as the runtime last told it ([`Correlator::tick`]); `None` in local mode.
    wall: Option<Timestamp>,
    /// Live entries by record id, for the query API.
    by_record: HashTable<u64>,
    hs: Hasher,
    /// Entries changed since the last `take_changelog`, with the position that changed them, in
    /// the order of the changes (an entry may appear more than once; the last one counts);
    /// `None` when the changelog is off (the embedded mode). A log rather than a map: a change
    /// costs a push, and `take_changelog` sorts once.
    dirty: Option<Vec<(u64, Position)>>,
    /// The partition-wide entry changed since the last `take_changelog` (every event changes
    /// it), at this position; kept apart from `dirty` so it costs nothing per event.
    meta_dirty: Option<Position>,
    /// Entries numbered from here on were never offered to the changelog (they were made after
    /// the last `take_changelog`): one that is gone again needs no tombstone, its key holds
    /// nothing. Most calls open and close between two checkpoints.
    unwritten_from: u64,
    /// Position of the event being applied (or the last one, during a punctuation): its
    /// provenance, and the key of a call it opens.
    pos: Position,
    /// Position of the input event that made the changes being made (or the last one, during a
    /// punctuation): what the changelog says changed an entry. The same as `pos`, except while
    /// an event the reorder window held is applied.
    change_pos: Position,
    /// The reorder window's held events (`disorder.rs`).
    window: window::Window,
    /// The estimate of [`live_bytes`] summed over the pending entries.
    pending_bytes: usize,
    pending_calls: usize,
    /// Set by [`Correlator::end_of_input`]: no event comes any more.
    ended: bool,
}

/// A changelog that cannot be restored.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("changelog entry `{key}` is not a state entry of this version ({source}); the changelog topic was written by another program or version — point the processor at its own changelog topic")]
    Decode {
        key: String,
        source: crate::CodecError,
    },
    #[error("changelog key `{0}` is not a state key; the changelog topic was written by another program")]
    Key(String),
    #[error("changelog keys `{0}` and `s{0}` both name entry {0}, which this program never writes; the changelog topic was written by another program — point the processor at its own changelog topic")]
    Duplicate(u64),
}

/// The envelope of an event, as the handlers use it.
struct Envelope {
    scope: ScopeIx,
    turn: Option<TurnId>,
    call_id: Option<CallId>,
    time: Timestamp,
    attributes: Option<Map<String, Value>>,
}

/// What a result-side event says about the call it belongs to.
struct Subject {
    tool: Option<String>,
    args: Option<Json>,
    checksum: Option<Digest>,
}

impl Correlator {
    /// An empty correlator that records changes for the changelog.
    pub fn new(config: Config) -> Self {
        Correlator {
            config,
            stream_time: None,
            topic_time: Vec::new(),
            next_seq: 0,
            entries: Entries::default(),
            scopes: Scopes::default(),
            blocked: BTreeSet::new(),
            waiting_repeats: hasher::HashMap::default(),
            wall: None,
            by_record: HashTable::new(),
            hs: Hasher::default(),
            dirty: Some(Vec::new()),
            meta_dirty: None,
            unwritten_from: 0,
            pos: Position::default(),
            change_pos: Position::default(),
            window: window::Window::default(),
            pending_bytes: 0,
            pending_calls: 0,
            ended: false,
        }
    }

    /// An empty correlator that keeps no changelog (for the embedded mode and benchmarks).
    pub fn without_changelog(config: Config) -> Self {
        Correlator {
            dirty: None,
            meta_dirty: None,
            ..Correlator::new(config)
        }
    }

    /// The largest event (or punctuation) time seen.
    pub fn stream_time(&self) -> Option<Timestamp> {
        self.stream_time
    }

    /// Pending calls and waiting results.
    pub fn pending_len(&self) -> usize {
        self.entries.live.len()
    }

    /// Pending announced calls only.
    pub fn pending_calls(&self) -> usize {
        self.pending_calls
    }

    /// Sessions dropped after they forgot every call of theirs, whose note is kept so that their
    /// events delivered again are late (at most `max_forgotten_sessions`; `forgotten.rs`).
    pub fn forgotten_sessions(&self) -> usize {
        self.scopes.forgotten.len()
    }

    /// An estimate of the memory held by pending entries, payloads included: each entry's
    /// allocations and its share of the maps and tables that index it (`footprint.rs`;
    /// `benches/processor` compares it with the resident set).
    pub fn pending_bytes(&self) -> usize {
        debug_assert_eq!(
            self.pending_bytes,
            self.entries
                .live
                .values()
                .map(|live| live_bytes(live))
                .sum::<usize>(),
            "pending_bytes drifted from its entries"
        );
        self.pending_bytes
    }

    /// Created time of the oldest pending entry.
    pub fn oldest_pending(&self) -> Option<Timestamp> {
        self.entries
            .live
            .values()
            .map(|live| match &**live {
                Live::Call(call) => call.created_at,
                Live::Waiting(waiting) => waiting.first_at,
            })
            .min()
    }

    /// The largest event time seen on any input topic (at or ahead of stream time).
    pub fn max_event_time(&self) -> Option<Timestamp> {
        self.topic_time
            .iter()
            .flatten()
            .max()
            .copied()
            .max(self.stream_time)
    }

    /// Applies one event: links it, merges it or parks it, then fires every deadline that the new
    /// stream time has passed and enforces the state cap. Records go to `out`. With a reorder
    /// window (`max_disorder_ms`) the event may be held instead ([`Outcome::Held`]), and events
    /// held before may be applied now (their outcomes in `out.released`).
    pub fn apply(&mut self, event: Event, pos: Position, out: &mut Effects) -> Outcome {
        self.change_pos = pos;
        self.hold_or_apply(event, pos, out)
    }

    /// [`apply`](Self::apply), the window aside.
    fn apply_now(&mut self, event: Event, pos: Position, out: &mut Effects) -> Outcome {
        self.pos = pos;
        self.note_time(pos.topic, event.time);
        let (outcome, scope) = self.dispatch(event, out);
        self.touch(META_SEQ);
        self.fire_scope(scope, out);
        self.fire_blocked(out);
        self.enforce_caps(out);
        self.sweep_scopes();
        outcome
    }

    /// Moves stream time on to `now` (if later) and fires what is due: the wall-clock punctuation
    /// of an idle partition, or the runtime moving past an input topic that has gone quiet.
    pub fn advance(&mut self, now: Timestamp, out: &mut Effects) {
        if self.stream_time.is_none_or(|t| now > t) {
            self.stream_time = Some(now);
            self.touch(META_SEQ);
        }
        self.fire_blocked(out);
        self.check_idle(out);
        self.sweep_scopes();
    }

    /// The input has ended for good (local mode, replays): fires every deadline as moving stream
    /// time to the end of time does — each pending call closes as its deadline's cause says,
    /// each waiting result as `Orphaned`, in the same order — but leaves the remembered closed
    /// calls remembered instead of forgetting them one by one: no event can come to find them.
    /// Afterwards the correlator answers for what it holds ([`Correlator::pending_views`]);
    /// events applied to it would still be deduplicated against every call it closed.
    pub fn end_of_input(&mut self, out: &mut Effects) {
        self.ended = true;
        self.advance(Timestamp::from_millis(i64::MAX), out);
    }

    /// Records an event time of input topic `topic` and moves stream time to the watermark: the
    /// smallest of the input topics' largest event times, once `config.input_topics` topics have
    /// been seen (never backwards).
    fn note_time(&mut self, topic: u16, time: Timestamp) {
        let t = usize::from(topic);
        if self.topic_time.len() <= t {
            self.topic_time.resize(t + 1, None);
        }
        if self.topic_time[t].is_none_or(|x| time > x) {
            self.topic_time[t] = Some(time);
        }
        let seen = self.topic_time.iter().flatten().count();
        if seen < usize::from(self.config.input_topics.max(1)) {
            return;
        }
        // One input (local mode numbers its files as topics): the largest time of any.
        let times = self.topic_time.iter().flatten().copied();
        let watermark = if self.config.input_topics <= 1 {
            times.max()
        } else {
            times.min()
        };
        if let Some(w) = watermark {
            if self.stream_time.is_none_or(|s| w > s) {
                self.stream_time = Some(w);
            }
        }
    }

    /// Hands an event to the handler of its kind, its scope interned and its clock moved on.
    fn dispatch(&mut self, event: Event, out: &mut Effects) -> (Outcome, ScopeIx) {
        let Event {
            source,
            session,
            thread,
            turn,
            call_id,
            time,
            attributes,
            body,
        } = event;
        let scope = self.scopes.intern(
            ScopeKey {
                source,
                session,
                thread,
            },
            &self.hs,
        );
        self.scope_event(scope, time);
        let env = Envelope {
            scope,
            turn,
            call_id,
            time,
            attributes,
        };
        let outcome = match body {
            EventBody::Announce(announce) => self.on_announce(env, announce, out),
            EventBody::Completion(completion) => self.on_completion(env, completion, out),
            EventBody::TurnEnd(_) => self.on_turn_end(&env, DeadlineCause::TurnEnded),
            EventBody::TurnAborted(_) => self.on_turn_end(&env, DeadlineCause::TurnAborted),
            EventBody::ExecutionStart(start) => {
                let subject = Subject {
                    tool: start.tool,
                    args: None,
                    checksum: Some(Digest::of(&start.checksum)),
                };
                self.on_fact(env, subject, Fact::ExecStart { at: time })
            }
            EventBody::ExecutionEnd(end) => {
                let exec_end = ExecEnd {
                    at: time,
                    is_error: end.is_error,
                    duration_ms: end.duration_ms,
                };
                let subject = Subject {
                    tool: end.tool,
                    args: None,
                    checksum: Some(Digest::of(&end.checksum)),
                };
                self.on_fact(
                    env,
                    subject,
                    Fact::ExecEnd {
                        end: exec_end,
                        started_at: end.started_at,
                    },
                )
            }
            EventBody::Approval(approval) => {
                let fact = Fact::Approval {
                    at: time,
                    decision: approval.decision,
                    by: approval.by,
                    reason: approval.reason,
                };
                self.on_fact(
                    env,
                    Subject {
                        tool: approval.tool,
                        args: approval.args,
                        checksum: approval.checksum.as_ref().map(Digest::of),
                    },
                    fact,
                )
            }
            EventBody::HookDecision(hook) => {
                let entry = HookDecisionEntry {
                    hook: hook.hook,
                    decision: hook.decision,
                    policy_id: hook.policy_id,
                    policy_version: hook.policy_version,
                    reason: hook.reason,
                    at: time,
                };
                self.on_fact(
                    env,
                    Subject {
                        tool: hook.tool,
                        args: hook.args,
                        checksum: hook.checksum.as_ref().map(Digest::of),
                    },
                    Fact::Hook { entry },
                )
            }
        };
        (outcome, scope)
    }
}
