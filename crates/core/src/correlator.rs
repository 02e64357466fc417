//! The per-partition correlation state machine.

use crate::state::{
    Call, Closed, Deadline, Done, Entry, EntryRef, ExecEnd, Fact, Live, Loose, Meta, ScopeKey,
    META_KEY,
};
use crate::{ChangelogOp, Config, Effects, Outcome, Position};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Hash maps of the core use foldhash (seeded per process): ids and names come from producers, so
/// the hash must not be predictable, and SipHash showed up at 5 % of the core path's profile.
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
use std::sync::Arc;
use toolcalls_model::{
    checksum_of_json, Announce, ApprovalDecision, ApprovalState, CallId, Checksum, Completion,
    Correlation, Event, EventBody, HookDecisionEntry, HookVerdict, Json, Metadata, Phase, RecordId,
    Ref, ReplayPolicy, SessionId, Spec, Status, Strategy, Timestamp, ToolCallRecord, TurnId,
};

/// Key of the partition-wide entry in the dirty set.
const META_SEQ: u64 = u64::MAX;

/// The indexes of one scope. Everything here points into the correlator's entry maps by `seq`.
#[derive(Debug, Default)]
struct ScopeState {
    /// Call id → the live call, the loose group, or the closed call that holds it.
    ids: HashMap<CallId, u64>,
    /// Pending calls by (created time, arrival).
    calls: BTreeSet<(Timestamp, u64)>,
    by_checksum: HashMap<Checksum, BTreeSet<(Timestamp, u64)>>,
    by_tool: HashMap<String, BTreeSet<(Timestamp, u64)>>,
    /// Loose groups in arrival order.
    loose: BTreeSet<u64>,
    /// Idempotency key → the live or closed call that holds it.
    idem: HashMap<String, u64>,
}

impl ScopeState {
    fn is_empty(&self) -> bool {
        self.ids.is_empty()
            && self.calls.is_empty()
            && self.loose.is_empty()
            && self.idem.is_empty()
    }
}

/// What a result-side event offers to find its call.
struct Hints<'a> {
    call_id: Option<&'a CallId>,
    turn: Option<&'a TurnId>,
    checksum: Option<&'a Checksum>,
    tool: Option<&'a str>,
    /// Rule 4 (oldest pending) applies: only for results with no hint at all.
    oldest: bool,
    /// Prefer calls that lack this fact (so identical calls each get their own start/end).
    fact: Option<&'a Fact>,
}

/// The envelope of an event, as the handlers use it.
struct Envelope {
    scope: Arc<ScopeKey>,
    turn: Option<TurnId>,
    call_id: Option<CallId>,
    time: Timestamp,
    attributes: Option<Map<String, Value>>,
}

/// What a result-side event says about the call it belongs to.
struct Subject {
    tool: Option<String>,
    args: Option<Json>,
    checksum: Option<Checksum>,
}

/// A link found by the rules: which entry, by which strategy, among how many candidates.
#[derive(Debug, Clone, Copy)]
struct Link {
    seq: u64,
    strategy: Strategy,
    candidates: u32,
}

impl Link {
    fn confidence(&self) -> f64 {
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

/// The correlation state of one input partition. See the crate docs for the rules.
#[derive(Debug)]
pub struct Correlator {
    config: Config,
    stream_time: Option<Timestamp>,
    /// The largest event time seen per input topic (by `Position::topic`); stream time follows
    /// the smallest of them (a watermark), so a topic read ahead of the other cannot time out
    /// calls whose results are still unread there.
    topic_time: Vec<Option<Timestamp>>,
    next_seq: u64,
    live: BTreeMap<u64, Live>,
    closed: BTreeMap<u64, Closed>,
    scopes: HashMap<Arc<ScopeKey>, ScopeState>,
    /// Every entry's next deadline, (when, seq).
    timers: BTreeSet<(Timestamp, u64)>,
    /// Live entries by record id, for the query API.
    by_record: HashMap<RecordId, u64>,
    /// Entries changed since the last `take_changelog`, with the position that last changed them;
    /// `None` when the changelog is off (the embedded mode).
    dirty: Option<BTreeMap<u64, Position>>,
    /// Position of the event being applied (or the last one, during a punctuation).
    pos: Position,
    pending_bytes: usize,
}

/// A changelog that cannot be restored.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    #[error("changelog entry `{key}` is not a state entry of this version ({source}); the changelog topic was written by another program or version — point the processor at its own changelog topic")]
    Decode {
        key: String,
        source: serde_json::Error,
    },
    #[error("changelog key `{0}` is not a state key; the changelog topic was written by another program")]
    Key(String),
}

impl Correlator {
    /// An empty correlator that records changes for the changelog.
    pub fn new(config: Config) -> Self {
        Correlator {
            config,
            stream_time: None,
            topic_time: Vec::new(),
            next_seq: 0,
            live: BTreeMap::new(),
            closed: BTreeMap::new(),
            scopes: HashMap::default(),
            timers: BTreeSet::new(),
            by_record: HashMap::default(),
            dirty: Some(BTreeMap::new()),
            pos: Position::default(),
            pending_bytes: 0,
        }
    }

    /// An empty correlator that keeps no changelog (for the embedded mode and benchmarks).
    pub fn without_changelog(config: Config) -> Self {
        Correlator {
            dirty: None,
            ..Correlator::new(config)
        }
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The largest event (or punctuation) time seen.
    pub fn stream_time(&self) -> Option<Timestamp> {
        self.stream_time
    }

    /// Pending calls and waiting results.
    pub fn pending_len(&self) -> usize {
        self.live.len()
    }

    /// Pending announced calls only.
    pub fn pending_calls(&self) -> usize {
        self.live
            .values()
            .filter(|l| matches!(l, Live::Call(_)))
            .count()
    }

    /// Closed call ids remembered for de-duplication.
    pub fn remembered(&self) -> usize {
        self.closed.len()
    }

    /// An estimate of the memory held by pending entries, payloads included.
    pub fn pending_bytes(&self) -> usize {
        self.pending_bytes
    }

    /// Created time of the oldest pending entry.
    pub fn oldest_pending(&self) -> Option<Timestamp> {
        self.live
            .values()
            .map(|l| match l {
                Live::Call(c) => c.created_at,
                Live::Loose(l) => l.first_at,
            })
            .min()
    }

    /// Applies one event: links it, merges it or parks it, then fires every deadline that the new
    /// stream time has passed and enforces the state cap. Records go to `out`.
    pub fn apply(&mut self, event: Event, pos: Position, out: &mut Effects) -> Outcome {
        self.pos = pos;
        self.note_time(pos.topic, event.time);
        let outcome = self.dispatch(event, out);
        self.touch(META_SEQ);
        self.fire_timers(out);
        self.enforce_caps(out);
        outcome
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
        let watermark = self.topic_time.iter().flatten().min().copied();
        if let Some(w) = watermark {
            if self.stream_time.is_none_or(|s| w > s) {
                self.stream_time = Some(w);
            }
        }
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

    /// Moves stream time on to `now` (if later) and fires what is due: the wall-clock punctuation
    /// of an idle partition, or the runtime moving past an input topic that has gone quiet.
    pub fn advance(&mut self, now: Timestamp, out: &mut Effects) {
        if self.stream_time.is_none_or(|t| now > t) {
            self.stream_time = Some(now);
            self.touch(META_SEQ);
        }
        self.fire_timers(out);
    }

    /// Closes every pending entry now: calls as `phase` (with `reason`), waiting results as
    /// `Orphaned`. Used at the end of a finite input.
    pub fn close_all(&mut self, phase: Phase, reason: &str, out: &mut Effects) {
        let seqs: Vec<u64> = self.live.keys().copied().collect();
        for seq in seqs {
            match self.live.get(&seq) {
                Some(Live::Call(_)) => self.close_call(
                    seq,
                    None,
                    phase,
                    Some(reason),
                    Link {
                        seq,
                        strategy: Strategy::Unmatched,
                        candidates: 0,
                    },
                    out,
                ),
                Some(Live::Loose(_)) => self.close_loose(seq, Phase::Orphaned, reason, out),
                None => {}
            }
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Changelog

    /// The entries changed since the last call, in key order, with their current value.
    ///
    /// Returns nothing when the correlator was made [`without_changelog`](Self::without_changelog).
    pub fn take_changelog(&mut self) -> Vec<ChangelogOp> {
        let Some(dirty) = self.dirty.as_mut() else {
            return Vec::new();
        };
        let dirty = std::mem::take(dirty);
        let mut ops = Vec::with_capacity(dirty.len());
        for (seq, pos) in dirty {
            let (key, value) = if seq == META_SEQ {
                let meta = Meta {
                    stream_time: self.stream_time,
                    topic_time: self.topic_time.clone(),
                    next_seq: self.next_seq,
                };
                (META_KEY.to_owned(), Some(encode(&EntryRef::Meta(&meta))))
            } else {
                let value = match (self.live.get(&seq), self.closed.get(&seq)) {
                    (Some(Live::Call(c)), _) => Some(encode(&EntryRef::Call(c))),
                    (Some(Live::Loose(l)), _) => Some(encode(&EntryRef::Loose(l))),
                    (None, Some(c)) => Some(encode(&EntryRef::Closed(c))),
                    (None, None) => None,
                };
                (seq.to_string(), value)
            };
            ops.push(ChangelogOp { key, value, pos });
        }
        ops
    }

    /// Rebuilds a correlator from the latest value of every changelog key (tombstoned keys left
    /// out). The result decides exactly as the correlator that wrote the changelog would have.
    pub fn restore<K: AsRef<str>, V: AsRef<[u8]>>(
        config: Config,
        entries: impl IntoIterator<Item = (K, V)>,
    ) -> Result<Self, RestoreError> {
        let mut c = Correlator::new(config);
        // Entries are inserted oldest first, whatever order the changelog gave them in: where two
        // entries claim one id or idempotency key (a remembered closed call and a newer call with
        // the same key), the newer one holds it, as it did before the restore.
        let mut decoded = Vec::new();
        for (key, value) in entries {
            let key = key.as_ref();
            let seq = match key {
                META_KEY => None,
                _ => Some(
                    key.parse::<u64>()
                        .map_err(|_| RestoreError::Key(key.chars().take(64).collect()))?,
                ),
            };
            let entry: Entry =
                serde_json::from_slice(value.as_ref()).map_err(|source| RestoreError::Decode {
                    key: key.chars().take(64).collect(),
                    source,
                })?;
            decoded.push((seq, entry));
        }
        decoded.sort_by_key(|(seq, _)| *seq);
        let mut max_seq = None::<u64>;
        for (_, entry) in decoded {
            match entry {
                Entry::Meta(m) => {
                    c.stream_time = m.stream_time;
                    c.topic_time = m.topic_time;
                    c.next_seq = c.next_seq.max(m.next_seq);
                }
                Entry::Call(mut call) => {
                    max_seq = max_seq.max(Some(call.seq));
                    call.scope = c.intern(&call.scope);
                    c.insert_call(call);
                }
                Entry::Loose(mut loose) => {
                    max_seq = max_seq.max(Some(loose.seq));
                    loose.scope = c.intern(&loose.scope);
                    c.insert_loose(loose);
                }
                Entry::Closed(mut closed) => {
                    max_seq = max_seq.max(Some(closed.seq));
                    closed.scope = c.intern(&closed.scope);
                    c.insert_closed(*closed);
                }
            }
        }
        if let Some(m) = max_seq {
            c.next_seq = c.next_seq.max(m + 1);
        }
        if let Some(d) = c.dirty.as_mut() {
            d.clear();
        }
        Ok(c)
    }

    // ---------------------------------------------------------------------------------------------
    // Query

    /// A pending call or waiting result by record id, as a `Pending` / `Running` record.
    pub fn get(&self, id: &RecordId) -> Option<ToolCallRecord> {
        let seq = self.by_record.get(id)?;
        self.live.get(seq).map(view)
    }

    /// Pending calls and waiting results of a session (any source or thread), oldest first.
    pub fn pending_in_session(&self, session: &SessionId) -> Vec<ToolCallRecord> {
        self.live
            .values()
            .filter(|l| match l {
                Live::Call(c) => &c.scope.session == session,
                Live::Loose(l) => &l.scope.session == session,
            })
            .map(view)
            .collect()
    }

    /// Every pending call and waiting result, oldest first.
    pub fn pending_views(&self) -> impl Iterator<Item = ToolCallRecord> + '_ {
        self.live.values().map(view)
    }

    // ---------------------------------------------------------------------------------------------
    // Events

    fn dispatch(&mut self, event: Event, out: &mut Effects) -> Outcome {
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
        let scope = self.intern(&ScopeKey {
            source,
            session,
            thread,
        });
        let env = Envelope {
            scope,
            turn,
            call_id,
            time,
            attributes,
        };
        match body {
            EventBody::Announce(a) => self.on_announce(env, a, out),
            EventBody::Completion(c) => self.on_completion(env, c, out),
            EventBody::TurnEnd(_) => self.on_turn_end(&env, Deadline::TurnEnded),
            EventBody::TurnAborted(_) => self.on_turn_end(&env, Deadline::TurnAborted),
            EventBody::ExecutionStart(s) => {
                let subject = Subject {
                    tool: s.tool,
                    args: None,
                    checksum: Some(s.checksum),
                };
                self.on_fact(env, subject, Fact::ExecStart { at: time })
            }
            EventBody::ExecutionEnd(e) => {
                let end = ExecEnd {
                    at: time,
                    is_error: e.is_error,
                    duration_ms: e.duration_ms,
                };
                let subject = Subject {
                    tool: e.tool,
                    args: None,
                    checksum: Some(e.checksum),
                };
                self.on_fact(
                    env,
                    subject,
                    Fact::ExecEnd {
                        end,
                        started_at: e.started_at,
                    },
                )
            }
            EventBody::Approval(a) => {
                let fact = Fact::Approval {
                    at: time,
                    decision: a.decision,
                    by: a.by,
                    reason: a.reason,
                };
                self.on_fact(
                    env,
                    Subject {
                        tool: a.tool,
                        args: a.args,
                        checksum: a.checksum,
                    },
                    fact,
                )
            }
            EventBody::HookDecision(h) => {
                let entry = HookDecisionEntry {
                    hook: h.hook,
                    decision: h.decision,
                    policy_id: h.policy_id,
                    policy_version: h.policy_version,
                    reason: h.reason,
                    at: time,
                };
                self.on_fact(
                    env,
                    Subject {
                        tool: h.tool,
                        args: h.args,
                        checksum: h.checksum,
                    },
                    Fact::Hook { entry },
                )
            }
        }
    }

    fn on_announce(&mut self, env: Envelope, a: Announce, out: &mut Effects) -> Outcome {
        let Envelope {
            scope,
            turn,
            call_id,
            time,
            attributes,
        } = env;
        // 1. A call id seen before in this scope: a repeat, a late repeat, or the announce that a
        //    waiting result was waiting for.
        if let Some(id) = &call_id {
            if let Some(&seq) = self.scopes.get(&scope).and_then(|s| s.ids.get(id)) {
                match self.live.get_mut(&seq) {
                    Some(Live::Call(call)) => {
                        if call.tool != a.tool {
                            return Outcome::Rejected("conflicting_call_id");
                        }
                        call.events += 1;
                        call.duplicates += 1;
                        call.updated_at = call.updated_at.max(time);
                        if call.args.is_none() && a.args.is_some() {
                            call.checksum = a
                                .checksum
                                .clone()
                                .or_else(|| Some(checksum_of_json(&a.tool, a.args.as_ref())));
                            call.args = a.args;
                            let (created, checksum) = (call.created_at, call.checksum.clone());
                            if let (Some(cs), Some(state)) = (checksum, self.scopes.get_mut(&scope))
                            {
                                state
                                    .by_checksum
                                    .entry(cs)
                                    .or_default()
                                    .insert((created, seq));
                            }
                        }
                        self.touch(seq);
                        return Outcome::Duplicate;
                    }
                    Some(Live::Loose(_)) => {} // handled below, when the call exists
                    None => return self.late(seq),
                }
            }
        }

        // Idempotency key: a retry inside the window collapses into the first call's record —
        // unless events of this very call already wait under its id: then it stays a call of its
        // own, so that what they say is not lost.
        let idem_key = a
            .side_effects
            .as_ref()
            .and_then(|s| s.idempotency_key.clone());
        let awaited = call_id
            .as_ref()
            .and_then(|id| self.scopes.get(&scope)?.ids.get(id))
            .is_some_and(|seq| matches!(self.live.get(seq), Some(Live::Loose(_))));
        if let Some(key) = idem_key.as_ref().filter(|_| !awaited) {
            if let Some(outcome) = self.collapse(&scope, key, call_id.as_ref(), time, out) {
                return outcome;
            }
        }

        let seq = self.next_seq();
        let call_key = match &call_id {
            Some(id) => id.as_str().to_owned(),
            None => format!("@{}:{}", self.pos.topic, self.pos.offset),
        };
        let record_id = RecordId::derive(
            &scope.source,
            &scope.session,
            scope.thread.as_ref(),
            &call_key,
        );
        let checksum = a.checksum.or_else(|| {
            a.args
                .as_ref()
                .map(|args| checksum_of_json(&a.tool, Some(args)))
        });
        let call = Box::new(Call {
            scope: scope.clone(),
            seq,
            key: call_key,
            record_id,
            call_id,
            aliases: Vec::new(),
            turn,
            tool: a.tool,
            args: a.args,
            checksum,
            side_effects: a.side_effects,
            agent: a.agent,
            execution: a.execution,
            hook_context: a.hook_context,
            created_at: time,
            updated_at: time,
            started_at: None,
            exec_end: None,
            approval: None,
            hooks: Vec::new(),
            denied: false,
            events: 1,
            duplicates: 0,
            attempts: 1,
            deadline: time.plus_millis(self.config.call_timeout_ms),
            why: Deadline::Timeout,
            attributes,
        });

        // Symmetric matching: results and facts that arrived before their announce.
        let (done_link, fact_groups) = self.find_loose_for(&call);
        self.insert_call(call);
        self.touch(seq);
        for group in fact_groups {
            self.absorb_loose(seq, group);
        }
        match done_link {
            Some(link) => {
                let done = self.absorb_loose(seq, link.seq);
                self.finish_with(seq, done, link, out);
                Outcome::Matched(link.strategy)
            }
            None => Outcome::Pending,
        }
    }

    /// A retry with an idempotency key already seen inside the window.
    fn collapse(
        &mut self,
        scope: &Arc<ScopeKey>,
        key: &str,
        call_id: Option<&CallId>,
        time: Timestamp,
        out: &mut Effects,
    ) -> Option<Outcome> {
        let window = self.config.idempotency_window_ms;
        let seq = *self.scopes.get(scope)?.idem.get(key)?;
        if let Some(Live::Call(call)) = self.live.get_mut(&seq) {
            if time.millis_since(call.created_at) > window {
                return None;
            }
            call.attempts += 1;
            call.events += 1;
            call.updated_at = call.updated_at.max(time);
            if let Some(id) = call_id {
                if call.call_id.as_ref() != Some(id) && !call.aliases.contains(id) {
                    call.aliases.push(id.clone());
                }
            }
        } else if let Some(closed) = self.closed.get_mut(&seq) {
            let record = closed.record.as_mut()?;
            if time.millis_since(record.created_at) > window {
                return None;
            }
            record.metadata.revision += 1;
            record.correlation.attempts += 1;
            record.correlation.events_merged += 1;
            record.updated_at = record.updated_at.max(time);
            out.records.push((**record).clone());
            if let Some(id) = call_id {
                if !closed.ids.contains(id) {
                    closed.ids.push(id.clone());
                }
            }
        } else {
            return None;
        }
        if let Some(id) = call_id {
            self.scopes.get_mut(scope)?.ids.insert(id.clone(), seq);
        }
        self.touch(seq);
        Some(Outcome::Collapsed)
    }

    fn on_completion(&mut self, env: Envelope, c: Completion, out: &mut Effects) -> Outcome {
        let Envelope {
            scope,
            turn,
            call_id,
            time,
            attributes,
        } = env;
        let checksum = c.checksum.or_else(|| match (&c.tool, &c.args) {
            (Some(tool), Some(args)) => Some(checksum_of_json(tool, Some(args))),
            _ => None,
        });
        let done = Done {
            at: time,
            result: c.result,
            is_error: c.is_error,
            cancelled: c.cancelled,
            started_at: c.started_at,
            duration_ms: c.duration_ms,
        };
        if let Some(id) = &call_id {
            if let Some(&seq) = self.scopes.get(&scope).and_then(|s| s.ids.get(id)) {
                match self.live.get_mut(&seq) {
                    Some(Live::Call(call)) => {
                        call.events += 1;
                        merge_attributes(&mut call.attributes, attributes);
                        let link = Link {
                            seq,
                            strategy: Strategy::CallId,
                            candidates: 1,
                        };
                        self.finish_with(seq, Some(done), link, out);
                        return Outcome::Matched(Strategy::CallId);
                    }
                    Some(Live::Loose(loose)) => {
                        // More about a call not yet announced.
                        loose.events += 1;
                        loose.updated_at = loose.updated_at.max(time);
                        let outcome = if loose.done.is_some() {
                            loose.duplicates += 1;
                            Outcome::Duplicate
                        } else {
                            loose.done = Some(done);
                            if loose.tool.is_none() {
                                loose.tool = c.tool;
                            }
                            if loose.checksum.is_none() {
                                loose.checksum = checksum;
                            }
                            merge_attributes(&mut loose.attributes, attributes);
                            Outcome::Pending
                        };
                        self.touch(seq);
                        return outcome;
                    }
                    None => return self.late(seq),
                }
            }
        }

        let hintless = call_id.is_none() && checksum.is_none() && c.tool.is_none();
        let hints = Hints {
            call_id: call_id.as_ref(),
            turn: turn.as_ref(),
            checksum: checksum.as_ref(),
            tool: c.tool.as_deref(),
            oldest: hintless,
            fact: None,
        };
        if let Some(link) = self.find_call(&scope, &hints) {
            if let Some(Live::Call(call)) = self.live.get_mut(&link.seq) {
                call.events += 1;
                merge_attributes(&mut call.attributes, attributes);
            }
            self.finish_with(link.seq, Some(done), link, out);
            return Outcome::Matched(link.strategy);
        }

        // 5. Nothing to link to yet: wait for the announce.
        let env = Envelope {
            scope,
            turn,
            call_id,
            time,
            attributes,
        };
        let subject = Subject {
            tool: c.tool,
            args: c.args,
            checksum,
        };
        self.park(env, subject, Some(done), None);
        Outcome::Pending
    }

    fn on_fact(&mut self, env: Envelope, subject: Subject, fact: Fact) -> Outcome {
        let Envelope {
            scope,
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
        let checksum = checksum.or_else(|| match (&tool, &args) {
            (Some(tool), Some(args)) => Some(checksum_of_json(tool, Some(args))),
            _ => None,
        });
        if let Some(id) = &call_id {
            if let Some(&seq) = self.scopes.get(&scope).and_then(|s| s.ids.get(id)) {
                match self.live.get_mut(&seq) {
                    Some(Live::Call(_)) => {
                        self.merge_fact(seq, fact, time, attributes);
                        return Outcome::Merged;
                    }
                    Some(Live::Loose(loose)) => {
                        loose.events += 1;
                        loose.updated_at = loose.updated_at.max(time);
                        let outcome = if loose.facts.contains(&fact) {
                            loose.duplicates += 1;
                            Outcome::Duplicate
                        } else {
                            loose.facts.push(fact);
                            merge_attributes(&mut loose.attributes, attributes);
                            Outcome::Pending
                        };
                        self.touch(seq);
                        return outcome;
                    }
                    None => return self.late(seq),
                }
            }
        }
        let hints = Hints {
            call_id: call_id.as_ref(),
            turn: turn.as_ref(),
            checksum: checksum.as_ref(),
            // A tool name alone is a weak hint for facts; use it only when there is no checksum.
            tool: if checksum.is_none() {
                tool.as_deref()
            } else {
                None
            },
            oldest: false,
            fact: Some(&fact),
        };
        if let Some(link) = self.find_call(&scope, &hints) {
            self.merge_fact(link.seq, fact, time, attributes);
            return Outcome::Merged;
        }
        let env = Envelope {
            scope,
            turn,
            call_id,
            time,
            attributes,
        };
        self.park(
            env,
            Subject {
                tool,
                args,
                checksum,
            },
            None,
            Some(fact),
        );
        Outcome::Pending
    }

    fn on_turn_end(&mut self, env: &Envelope, why: Deadline) -> Outcome {
        let (scope, turn, time) = (&env.scope, env.turn.as_ref(), env.time);
        let Some(state) = self.scopes.get(scope) else {
            return Outcome::Applied;
        };
        let at = time.plus_millis(self.config.turn_grace_ms);
        let seqs: Vec<u64> = state.calls.iter().map(|&(_, seq)| seq).collect();
        for seq in seqs {
            let Some(Live::Call(call)) = self.live.get_mut(&seq) else {
                continue;
            };
            if turn.is_some() && call.turn.as_ref() != turn {
                continue;
            }
            if at < call.deadline || (call.why == Deadline::Timeout && at == call.deadline) {
                let old = call.deadline;
                call.deadline = at;
                if call.why != Deadline::Denied {
                    call.why = why;
                }
                self.timers.remove(&(old, seq));
                self.timers.insert((at, seq));
                self.touch(seq);
            }
        }
        Outcome::Applied
    }

    /// An event for a call already closed and published.
    fn late(&mut self, _seq: u64) -> Outcome {
        Outcome::Late
    }

    // ---------------------------------------------------------------------------------------------
    // Matching

    /// Rules 2–4 for a result-side event: the pending call it belongs to.
    fn find_call(&self, scope: &Arc<ScopeKey>, hints: &Hints<'_>) -> Option<Link> {
        let state = self.scopes.get(scope)?;
        let fits = |seq: u64| -> Option<&Call> {
            let Some(Live::Call(call)) = self.live.get(&seq) else {
                return None;
            };
            if hints.call_id.is_some() && (call.call_id.is_some() || !call.aliases.is_empty()) {
                return None; // two different ids are two different calls
            }
            if let (Some(a), Some(b)) = (hints.turn, call.turn.as_ref()) {
                if a != b {
                    return None;
                }
            }
            Some(call)
        };
        let pick = |set: &BTreeSet<(Timestamp, u64)>, strategy: Strategy| -> Option<Link> {
            let mut first = None;
            let mut first_lacking = None;
            let mut candidates = 0u32;
            for &(_, seq) in set {
                let Some(call) = fits(seq) else { continue };
                candidates += 1;
                first.get_or_insert(seq);
                if first_lacking.is_none() && hints.fact.is_none_or(|f| lacks(call, f)) {
                    first_lacking = Some(seq);
                }
            }
            first_lacking.or(first).map(|seq| Link {
                seq,
                strategy,
                candidates,
            })
        };
        if let Some(cs) = hints.checksum {
            if let Some(link) = state
                .by_checksum
                .get(cs)
                .and_then(|set| pick(set, Strategy::Checksum))
            {
                return Some(link);
            }
        }
        if let Some(tool) = hints.tool {
            if let Some(link) = state
                .by_tool
                .get(tool)
                .and_then(|set| pick(set, Strategy::ToolFifo))
            {
                return Some(link);
            }
        }
        if hints.oldest {
            return pick(&state.calls, Strategy::Oldest);
        }
        None
    }

    /// Symmetric matching for a new call: the waiting result it takes (if any) and the waiting
    /// fact-only groups that belong to it.
    fn find_loose_for(&self, call: &Call) -> (Option<Link>, Vec<u64>) {
        let Some(state) = self.scopes.get(&call.scope) else {
            return (None, Vec::new());
        };
        if let Some(id) = &call.call_id {
            if let Some(&seq) = state.ids.get(id) {
                if let Some(Live::Loose(loose)) = self.live.get(&seq) {
                    let link = Link {
                        seq,
                        strategy: Strategy::CallId,
                        candidates: 1,
                    };
                    return if loose.done.is_some() {
                        (Some(link), Vec::new())
                    } else {
                        (None, vec![seq])
                    };
                }
            }
        }
        let fits = |loose: &Loose| -> bool {
            if call.call_id.is_some() && loose.call_id.is_some() {
                return false;
            }
            !matches!((&call.turn, &loose.turn), (Some(a), Some(b)) if a != b)
        };
        // Candidates per rule, oldest first by (time, arrival).
        let mut best: [Option<(Timestamp, u64)>; 3] = [None; 3];
        let mut counts = [0u32; 3];
        let mut facts = Vec::new();
        for &seq in &state.loose {
            let Some(Live::Loose(loose)) = self.live.get(&seq) else {
                continue;
            };
            if !fits(loose) {
                continue;
            }
            if loose.done.is_none() {
                let same = match (&loose.checksum, &loose.tool) {
                    (Some(cs), _) => call.checksum.as_ref() == Some(cs),
                    (None, Some(tool)) => &call.tool == tool,
                    (None, None) => false,
                };
                if same && loose.facts.iter().all(|f| lacks(call, f)) {
                    facts.push(seq);
                }
                continue;
            }
            let rule = if loose.checksum.is_some() && loose.checksum == call.checksum {
                0
            } else if loose.tool.as_deref() == Some(call.tool.as_str()) {
                1
            } else if loose.hintless() {
                2
            } else {
                continue;
            };
            counts[rule] += 1;
            let key = (loose.first_at, seq);
            if best[rule].is_none_or(|b| key < b) {
                best[rule] = Some(key);
            }
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

    // ---------------------------------------------------------------------------------------------
    // State changes

    /// Moves a loose group into the call `seq`: its facts are merged, its result returned.
    fn absorb_loose(&mut self, seq: u64, loose_seq: u64) -> Option<Done> {
        let Some(Live::Loose(loose)) = self.remove_live(loose_seq) else {
            return None;
        };
        self.touch(loose_seq);
        let Loose {
            call_id,
            facts,
            done,
            events,
            duplicates,
            updated_at,
            attributes,
            ..
        } = *loose;
        for fact in facts {
            self.apply_fact(seq, fact);
        }
        if let Some(Live::Call(call)) = self.live.get_mut(&seq) {
            call.events += events;
            call.duplicates += duplicates;
            call.updated_at = call.updated_at.max(updated_at);
            merge_attributes(&mut call.attributes, attributes);
            if let Some(id) = call_id {
                // The loose group's id now names this call (fallback link of an id-less announce).
                if call.call_id.is_none() {
                    if let Some(state) = self.scopes.get_mut(&call.scope) {
                        state.ids.insert(id.clone(), seq);
                    }
                    call.aliases.push(id);
                }
            }
        }
        done
    }

    fn merge_fact(
        &mut self,
        seq: u64,
        fact: Fact,
        time: Timestamp,
        attributes: Option<Map<String, Value>>,
    ) {
        if let Some(Live::Call(call)) = self.live.get_mut(&seq) {
            call.events += 1;
            call.updated_at = call.updated_at.max(time);
            merge_attributes(&mut call.attributes, attributes);
        }
        self.apply_fact(seq, fact);
    }

    /// Applies a fact to a pending call; a denial shortens its deadline.
    fn apply_fact(&mut self, seq: u64, fact: Fact) {
        let grace = self.config.turn_grace_ms;
        let Some(Live::Call(call)) = self.live.get_mut(&seq) else {
            return;
        };
        let mut deny_at = None;
        match fact {
            Fact::ExecStart { at } => {
                call.started_at = Some(call.started_at.map_or(at, |s| s.min(at)));
            }
            Fact::ExecEnd { end, started_at } => {
                if call.started_at.is_none() {
                    call.started_at = started_at;
                }
                call.exec_end = Some(end);
            }
            Fact::Approval {
                at,
                decision,
                by,
                reason,
            } => {
                let approval = call.approval.get_or_insert(ApprovalState {
                    required: true,
                    status: decision,
                    requested_at: None,
                    approved_by: None,
                    approved_at: None,
                    reason: None,
                });
                match decision {
                    ApprovalDecision::Requested => {
                        approval.requested_at = Some(at);
                    }
                    ApprovalDecision::Approved | ApprovalDecision::Denied => {
                        approval.status = decision;
                        approval.approved_by = by;
                        approval.approved_at = Some(at);
                        approval.reason = reason;
                        if decision == ApprovalDecision::Denied {
                            deny_at = Some(at);
                        }
                    }
                }
            }
            Fact::Hook { entry } => {
                if entry.decision == HookVerdict::Deny {
                    deny_at = Some(entry.at);
                }
                call.hooks.push(entry);
            }
        }
        if let Some(at) = deny_at {
            call.denied = true;
            let at = at.plus_millis(grace);
            if at < call.deadline || call.why != Deadline::Denied {
                let old = call.deadline;
                call.deadline = call.deadline.min(at);
                call.why = Deadline::Denied;
                let new = call.deadline;
                self.timers.remove(&(old, seq));
                self.timers.insert((new, seq));
            }
        }
        self.touch(seq);
    }

    /// Parks a result-side event until its announce comes (or its grace runs out).
    fn park(&mut self, env: Envelope, subject: Subject, done: Option<Done>, fact: Option<Fact>) {
        let Envelope {
            scope,
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
        let key = match &call_id {
            Some(id) => id.as_str().to_owned(),
            None => format!("@{}:{}", self.pos.topic, self.pos.offset),
        };
        let record_id =
            RecordId::derive(&scope.source, &scope.session, scope.thread.as_ref(), &key);
        let loose = Box::new(Loose {
            scope,
            seq,
            key,
            record_id,
            call_id,
            turn,
            tool,
            args,
            checksum,
            done,
            facts: fact.into_iter().collect(),
            first_at: time,
            updated_at: time,
            events: 1,
            duplicates: 0,
            deadline: time.plus_millis(self.config.orphan_grace_ms),
            attributes,
        });
        self.insert_loose(loose);
        self.touch(seq);
    }

    /// Closes a pending call with its result (or without one), publishing its record.
    fn finish_with(&mut self, seq: u64, done: Option<Done>, link: Link, out: &mut Effects) {
        let Some(Live::Call(call)) = self.live.get_mut(&seq) else {
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
        self.close_call(seq, done, phase, None, link, out);
    }

    fn close_call(
        &mut self,
        seq: u64,
        done: Option<Done>,
        phase: Phase,
        reason: Option<&str>,
        link: Link,
        out: &mut Effects,
    ) {
        let Some(Live::Call(call)) = self.remove_live(seq) else {
            return;
        };
        self.touch(seq);
        let mut ids: Vec<CallId> = call.call_id.iter().cloned().collect();
        ids.extend(call.aliases.iter().cloned());
        let idem = call.idempotency_key().map(str::to_owned);
        let (scope, record_id, updated_at) = (call.scope.clone(), call.record_id, call.updated_at);
        let record = record_of_call(*call, done, phase, reason, link);
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
                scope,
                seq,
                record_id,
                ids,
                record: idem.is_some().then(|| Box::new(record.clone())),
                idempotency_key: idem,
                expires,
            };
            self.insert_closed(closed);
        } else {
            self.drop_scope_if_empty(&scope);
        }
        out.records.push(record);
    }

    fn close_loose(&mut self, seq: u64, phase: Phase, reason: &str, out: &mut Effects) {
        let Some(Live::Loose(loose)) = self.remove_live(seq) else {
            return;
        };
        self.touch(seq);
        let (scope, record_id, updated_at, call_id) = (
            loose.scope.clone(),
            loose.record_id,
            loose.updated_at,
            loose.call_id.clone(),
        );
        out.records.push(record_of_loose(*loose, phase, reason));
        if let Some(id) = call_id {
            let expires = self
                .stream_time
                .unwrap_or(updated_at)
                .plus_millis(self.config.dedupe_window_ms);
            self.insert_closed(Closed {
                scope,
                seq,
                record_id,
                ids: vec![id],
                idempotency_key: None,
                record: None,
                expires,
            });
        } else {
            self.drop_scope_if_empty(&scope);
        }
    }

    fn fire_timers(&mut self, out: &mut Effects) {
        let Some(now) = self.stream_time else { return };
        while let Some(&(at, seq)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            if let Some(live) = self.live.get(&seq) {
                match live {
                    Live::Call(call) => {
                        let (phase, reason) = match call.why {
                            Deadline::Timeout => {
                                (Phase::TimedOut, "no result within the call timeout")
                            }
                            Deadline::TurnEnded => {
                                (Phase::Interrupted, "turn ended without a result")
                            }
                            Deadline::TurnAborted => (Phase::Interrupted, "turn aborted"),
                            Deadline::Denied => (Phase::Denied, "denied; no result reported"),
                        };
                        let link = Link {
                            seq,
                            strategy: Strategy::Unmatched,
                            candidates: 0,
                        };
                        self.close_call(seq, None, phase, Some(reason), link, out);
                    }
                    Live::Loose(_) => self.close_loose(
                        seq,
                        Phase::Orphaned,
                        "no matching announce within the orphan grace",
                        out,
                    ),
                }
            } else if self.closed.contains_key(&seq) {
                self.expire_closed(seq);
            }
        }
    }

    fn enforce_caps(&mut self, out: &mut Effects) {
        while self.live.len() > self.config.max_pending {
            let Some((&seq, live)) = self.live.first_key_value() else {
                break;
            };
            let reason = "evicted: the partition's pending-state cap was reached";
            match live {
                Live::Call(_) => {
                    let link = Link {
                        seq,
                        strategy: Strategy::Unmatched,
                        candidates: 0,
                    };
                    self.close_call(seq, None, Phase::Evicted, Some(reason), link, out);
                }
                Live::Loose(_) => self.close_loose(seq, Phase::Evicted, reason, out),
            }
        }
        while self.closed.len() > self.config.max_remembered {
            let Some(&seq) = self.closed.keys().next() else {
                break;
            };
            self.expire_closed(seq);
        }
    }

    // ---------------------------------------------------------------------------------------------
    // Indexes

    fn intern(&mut self, key: &ScopeKey) -> Arc<ScopeKey> {
        if let Some((k, _)) = self.scopes.get_key_value(key) {
            return k.clone();
        }
        let k = Arc::new(key.clone());
        self.scopes.insert(k.clone(), ScopeState::default());
        k
    }

    fn next_seq(&mut self) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    fn touch(&mut self, seq: u64) {
        if let Some(d) = self.dirty.as_mut() {
            d.insert(seq, self.pos);
        }
    }

    fn insert_call(&mut self, call: Box<Call>) {
        let seq = call.seq;
        let state = self.scopes.entry(call.scope.clone()).or_default();
        let at = (call.created_at, seq);
        state.calls.insert(at);
        if let Some(cs) = &call.checksum {
            match state.by_checksum.get_mut(cs) {
                Some(set) => {
                    set.insert(at);
                }
                None => {
                    state.by_checksum.insert(cs.clone(), BTreeSet::from([at]));
                }
            }
        }
        // Look up before inserting: the key is cloned only for a tool the scope has not seen.
        match state.by_tool.get_mut(call.tool.as_str()) {
            Some(set) => {
                set.insert(at);
            }
            None => {
                state
                    .by_tool
                    .insert(call.tool.clone(), BTreeSet::from([at]));
            }
        }
        for id in call.call_id.iter().chain(call.aliases.iter()) {
            claim(&mut state.ids, id, seq);
        }
        if let Some(key) = call.idempotency_key() {
            claim(&mut state.idem, key, seq);
        }
        self.timers.insert((call.deadline, seq));
        self.by_record.insert(call.record_id, seq);
        self.pending_bytes += call_bytes(&call);
        self.live.insert(seq, Live::Call(call));
    }

    fn insert_loose(&mut self, loose: Box<Loose>) {
        let seq = loose.seq;
        let state = self.scopes.entry(loose.scope.clone()).or_default();
        state.loose.insert(seq);
        if let Some(id) = &loose.call_id {
            claim(&mut state.ids, id, seq);
        }
        self.timers.insert((loose.deadline, seq));
        self.by_record.insert(loose.record_id, seq);
        self.pending_bytes += loose_bytes(&loose);
        self.live.insert(seq, Live::Loose(loose));
    }

    fn insert_closed(&mut self, closed: Closed) {
        let seq = closed.seq;
        let state = self.scopes.entry(closed.scope.clone()).or_default();
        for id in &closed.ids {
            claim(&mut state.ids, id, seq);
        }
        if let Some(key) = &closed.idempotency_key {
            claim(&mut state.idem, key, seq);
        }
        self.timers.insert((closed.expires, seq));
        self.closed.insert(seq, closed);
    }

    /// Takes a live entry out of every index.
    fn remove_live(&mut self, seq: u64) -> Option<Live> {
        let live = self.live.remove(&seq)?;
        match &live {
            Live::Call(call) => {
                self.pending_bytes -= call_bytes(call);
                self.timers.remove(&(call.deadline, seq));
                self.by_record.remove(&call.record_id);
                if let Some(state) = self.scopes.get_mut(&call.scope) {
                    let at = (call.created_at, seq);
                    state.calls.remove(&at);
                    if let Some(cs) = &call.checksum {
                        remove_from(&mut state.by_checksum, cs, at);
                    }
                    remove_from(&mut state.by_tool, &call.tool, at);
                    for id in call.call_id.iter().chain(call.aliases.iter()) {
                        if state.ids.get(id) == Some(&seq) {
                            state.ids.remove(id);
                        }
                    }
                    if let Some(key) = call.idempotency_key() {
                        if state.idem.get(key) == Some(&seq) {
                            state.idem.remove(key);
                        }
                    }
                }
            }
            Live::Loose(loose) => {
                self.pending_bytes -= loose_bytes(loose);
                self.timers.remove(&(loose.deadline, seq));
                self.by_record.remove(&loose.record_id);
                if let Some(state) = self.scopes.get_mut(&loose.scope) {
                    state.loose.remove(&seq);
                    if let Some(id) = &loose.call_id {
                        if state.ids.get(id) == Some(&seq) {
                            state.ids.remove(id);
                        }
                    }
                }
            }
        }
        Some(live)
    }

    fn expire_closed(&mut self, seq: u64) {
        let Some(closed) = self.closed.remove(&seq) else {
            return;
        };
        self.timers.remove(&(closed.expires, seq));
        self.touch(seq);
        if let Some(state) = self.scopes.get_mut(&closed.scope) {
            for id in &closed.ids {
                if state.ids.get(id) == Some(&seq) {
                    state.ids.remove(id);
                }
            }
            if let Some(key) = &closed.idempotency_key {
                if state.idem.get(key) == Some(&seq) {
                    state.idem.remove(key);
                }
            }
        }
        self.drop_scope_if_empty(&closed.scope);
    }

    fn drop_scope_if_empty(&mut self, scope: &Arc<ScopeKey>) {
        if self.scopes.get(scope).is_some_and(ScopeState::is_empty) {
            self.scopes.remove(scope);
        }
    }
}

/// Points `key` at entry `seq` unless a newer entry holds it: where a remembered closed call and a
/// newer call share an id or an idempotency key, the newer one keeps it — whether the closed one
/// was closed after the newer one started, or the changelog returned them in any order.
fn claim<K, Q>(map: &mut HashMap<K, u64>, key: &Q, seq: u64)
where
    K: std::hash::Hash + Eq + std::borrow::Borrow<Q>,
    Q: std::hash::Hash + Eq + ToOwned<Owned = K> + ?Sized,
{
    match map.get_mut(key) {
        Some(held) if *held > seq => {}
        Some(held) => *held = seq,
        None => {
            map.insert(key.to_owned(), seq);
        }
    }
}

fn remove_from<
    K: std::hash::Hash + Eq + std::borrow::Borrow<Q>,
    Q: std::hash::Hash + Eq + ?Sized,
>(
    map: &mut HashMap<K, BTreeSet<(Timestamp, u64)>>,
    key: &Q,
    at: (Timestamp, u64),
) {
    if let Some(set) = map.get_mut(key) {
        set.remove(&at);
        if set.is_empty() {
            map.remove(key);
        }
    }
}

/// Whether the call still lacks what `fact` would add (so identical calls each get their own).
fn lacks(call: &Call, fact: &Fact) -> bool {
    match fact {
        Fact::ExecStart { .. } => call.started_at.is_none(),
        Fact::ExecEnd { .. } => call.exec_end.is_none(),
        Fact::Approval { decision, .. } => match decision {
            ApprovalDecision::Requested => call.approval.is_none(),
            _ => call
                .approval
                .as_ref()
                .is_none_or(|a| a.status == ApprovalDecision::Requested),
        },
        Fact::Hook { entry } => !call.hooks.iter().any(|h| h.hook == entry.hook),
    }
}

fn merge_attributes(into: &mut Option<Map<String, Value>>, from: Option<Map<String, Value>>) {
    match (into.as_mut(), from) {
        (_, None) => {}
        (None, Some(m)) => *into = Some(m),
        (Some(a), Some(m)) => a.extend(m),
    }
}

fn encode(entry: &EntryRef<'_>) -> Vec<u8> {
    serde_json::to_vec(entry).expect("state entries always serialize")
}

/// Bytes held by a verbatim JSON value (its text and the box around it).
fn json_bytes(j: &Json) -> usize {
    2 * std::mem::size_of::<usize>() + j.as_str().len()
}

fn call_bytes(call: &Call) -> usize {
    std::mem::size_of::<Call>()
        + call.key.len()
        + call.tool.len()
        + call.call_id.as_ref().map_or(0, |c| c.as_str().len())
        + call.args.as_ref().map_or(0, json_bytes)
        + call.checksum.as_ref().map_or(0, |_| 64)
}

fn loose_bytes(loose: &Loose) -> usize {
    std::mem::size_of::<Loose>()
        + loose.key.len()
        + loose.call_id.as_ref().map_or(0, |c| c.as_str().len())
        + loose.args.as_ref().map_or(0, json_bytes)
        + loose
            .done
            .as_ref()
            .and_then(|d| d.result.as_ref())
            .map_or(0, json_bytes)
}

fn approval_of_facts(
    facts: Vec<Fact>,
) -> (
    Option<ApprovalState>,
    Vec<HookDecisionEntry>,
    Option<Timestamp>,
    Option<ExecEnd>,
) {
    let mut approval: Option<ApprovalState> = None;
    let mut hooks = Vec::new();
    let mut started = None;
    let mut end = None;
    for fact in facts {
        match fact {
            Fact::ExecStart { at } => started = Some(at),
            Fact::ExecEnd { end: e, started_at } => {
                end = Some(e);
                started = started.or(started_at);
            }
            Fact::Approval {
                at,
                decision,
                by,
                reason,
            } => {
                let a = approval.get_or_insert(ApprovalState {
                    required: true,
                    status: decision,
                    requested_at: None,
                    approved_by: None,
                    approved_at: None,
                    reason: None,
                });
                if decision == ApprovalDecision::Requested {
                    a.requested_at = Some(at);
                } else {
                    a.status = decision;
                    a.approved_by = by;
                    a.approved_at = Some(at);
                    a.reason = reason;
                }
            }
            Fact::Hook { entry } => hooks.push(entry),
        }
    }
    (approval, hooks, started, end)
}

fn record_of_call(
    call: Call,
    done: Option<Done>,
    phase: Phase,
    reason: Option<&str>,
    link: Link,
) -> ToolCallRecord {
    let started_at = done
        .as_ref()
        .and_then(|d| d.started_at)
        .or(call.started_at)
        .or(Some(call.created_at));
    let completed_at = done
        .as_ref()
        .map(|d| d.at)
        .or(call.exec_end.as_ref().map(|e| e.at));
    let duration_ms = done
        .as_ref()
        .and_then(|d| d.duration_ms)
        .or(call.exec_end.as_ref().and_then(|e| e.duration_ms))
        .or_else(|| Some(completed_at?.millis_since(started_at?)));
    let is_error = done
        .as_ref()
        .map_or(call.exec_end.as_ref().is_some_and(|e| e.is_error), |d| {
            d.is_error
        });
    let side_effects = call.side_effects.unwrap_or_default();
    let replay = ReplayPolicy::derive(&side_effects);
    let scope = Arc::unwrap_or_clone(call.scope);
    ToolCallRecord {
        api_version: toolcalls_model::record::API_VERSION.to_owned(),
        kind: toolcalls_model::record::KIND.to_owned(),
        metadata: Metadata {
            name: call.record_id,
            revision: 1,
            source: scope.source,
            session: scope.session,
            thread: scope.thread,
            turn: call.turn,
        },
        stream_id: call.call_id,
        checksum: call.checksum,
        created_at: call.created_at,
        updated_at: call.updated_at,
        spec: Spec {
            execution_ref: call.execution.map(|name| Ref { name }),
            agent_ref: call.agent.map(|name| Ref { name }),
            tool_ref: Some(Ref { name: call.tool }),
            input: call.args,
            side_effects,
            approval: call.approval,
            hook_context: call.hook_context,
        },
        status: Status {
            phase,
            started_at,
            completed_at,
            duration_ms,
            output: done.and_then(|d| d.result),
            is_error,
            hook_decisions: call.hooks,
            reason: reason.map(str::to_owned),
        },
        correlation: Correlation {
            strategy: link.strategy,
            confidence: link.confidence(),
            candidates: link.candidates,
            events_merged: call.events,
            duplicates: call.duplicates,
            attempts: call.attempts,
            key: call.key,
        },
        replay,
        attributes: call.attributes,
    }
}

fn record_of_loose(loose: Loose, phase: Phase, reason: &str) -> ToolCallRecord {
    let (approval, hooks, started, end) = approval_of_facts(loose.facts);
    let done = loose.done;
    let started_at = done.as_ref().and_then(|d| d.started_at).or(started);
    let completed_at = done.as_ref().map(|d| d.at).or(end.as_ref().map(|e| e.at));
    let duration_ms = done
        .as_ref()
        .and_then(|d| d.duration_ms)
        .or(end.as_ref().and_then(|e| e.duration_ms))
        .or_else(|| Some(completed_at?.millis_since(started_at?)));
    let is_error = done
        .as_ref()
        .map_or(end.as_ref().is_some_and(|e| e.is_error), |d| d.is_error);
    let scope = Arc::unwrap_or_clone(loose.scope);
    ToolCallRecord {
        api_version: toolcalls_model::record::API_VERSION.to_owned(),
        kind: toolcalls_model::record::KIND.to_owned(),
        metadata: Metadata {
            name: loose.record_id,
            revision: 1,
            source: scope.source,
            session: scope.session,
            thread: scope.thread,
            turn: loose.turn,
        },
        stream_id: loose.call_id,
        checksum: loose.checksum,
        created_at: loose.first_at,
        updated_at: loose.updated_at,
        spec: Spec {
            execution_ref: None,
            agent_ref: None,
            tool_ref: loose.tool.map(|name| Ref { name }),
            input: loose.args,
            side_effects: Default::default(),
            approval,
            hook_context: None,
        },
        status: Status {
            phase,
            started_at,
            completed_at,
            duration_ms,
            output: done.and_then(|d| d.result),
            is_error,
            hook_decisions: hooks,
            reason: Some(reason.to_owned()),
        },
        correlation: Correlation {
            strategy: Strategy::Unmatched,
            confidence: 0.0,
            candidates: 0,
            events_merged: loose.events,
            duplicates: loose.duplicates,
            attempts: 1,
            key: loose.key,
        },
        replay: ReplayPolicy::RequiresOverride,
        attributes: loose.attributes,
    }
}

/// A pending entry as the query API shows it.
fn view(live: &Live) -> ToolCallRecord {
    match live {
        Live::Call(call) => {
            let phase = if call.started_at.is_some() {
                Phase::Running
            } else {
                Phase::Pending
            };
            let link = Link {
                seq: call.seq,
                strategy: Strategy::Unmatched,
                candidates: 0,
            };
            let mut r = record_of_call((**call).clone(), None, phase, None, link);
            r.status.completed_at = None;
            r.status.duration_ms = None;
            r
        }
        Live::Loose(loose) => record_of_loose(
            (**loose).clone(),
            Phase::Pending,
            "waiting for its announce",
        ),
    }
}
