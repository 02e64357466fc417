//! The reconciliation: what the records, dead letters and pending state claim about the input
//! positions, and what the inputs turn out to hold.
//!
//! Claims are gathered first (records, dead letters, pending calls), then the inputs stream past
//! once: each position is looked up, and only the positions nothing claims are kept until the
//! end, when they are matched to a record by the identity of their event (a repeat of an event
//! merged into that record). Memory is a few dozen bytes per claimed position; the inputs are
//! never held.

use super::attempts::{no_later_attempt, Attempt};
pub use super::discrepancy::Discrepancy;
use super::identity::{
    fact_of_event, id_identity, identities, idless_copy_identity, result_says, scope_of, text_hash,
};
use super::input::{InputKey, Pos, Range};
use super::record_head::{facts_held, has_result, key_input_number, unlisted, RecordHead};
use foldhash::fast::RandomState;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use toolcalls_model::record::{Origin, Provenance};
use toolcalls_model::{DecodeError, Event, EventBody, EventKind, Phase, RecordId, ToolCallRecord};

type Map<K, V> = HashMap<K, V, RandomState>;

struct Input {
    key: InputKey,
    range: Range,
    /// How the runtime numbered this input for the core: its input number, and what to add to a
    /// position to get the core's offset (a record key `@input:offset` derives from it).
    core: (u16, i64),
    /// The input was read (to the end of its range).
    read: bool,
}

/// What kind of claim a record makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Published,
    Pending,
}

struct RecordInfo {
    id: RecordId,
    kind: Kind,
    latest: u32,
    /// A hash of the first copy of the latest revision.
    content: u64,
    /// [`scope_of`] its source, session and thread: every event a record merges is of its
    /// scope.
    /// `None` for an event held in the reorder window, which no record holds yet.
    scope: Option<u64>,
    /// Its phase carries a result (`Succeeded`, `Failed`): it merged a completion.
    has_result: bool,
    /// Its phase is `Succeeded`: any later attempt's result is late for it.
    succeeded: bool,
    /// The by-id identity ([`identities`]) of the call id its key names: its first attempt's.
    first_attempt: Option<u64>,
    /// The input number its key names, for a call opened without an id (`@<input>:<offset>`):
    /// the number the run gave the file, which need not be the audit's.
    key_input: Option<u16>,
    /// What the hook decisions and approval decisions its content holds say
    /// ([`fact_held_hash`](super::identity::fact_held_hash)).
    facts_held: Vec<u64>,
    /// What the first result without a call id it lists says ([`result_says`]), and whether one
    /// that says something else followed.
    idless_result: Option<u64>,
    two_results: bool,
    /// The kinds of the events it lists that the inputs showed: [`ANNOUNCE`], [`COMPLETION`].
    merged: u8,
    /// It lists a position the audit does not read (another input, past a range, nothing
    /// there), or none: what it merged cannot be checked whole.
    partial: bool,
    /// Its id derives from an event it lists, as the correlator derives it.
    id_derived: bool,
    /// A hash of the first call id among the events it lists, and whether another followed:
    /// a call's events carry one id, retries collapsed by idempotency key (`collapsed`) aside.
    call_id: Option<u64>,
    mixed_ids: bool,
    collapsed: bool,
    /// Its call has an idempotency key: a result after it closed without one revises it.
    idempotent: bool,
    /// The listed event furthest into its input: (input, offset, event time in ms). An event
    /// of its call that comes before it there, no later in event time, was applied before it.
    last: Option<(u32, i64, i64)>,
    /// A hash of its tool's name (`spec.toolRef.name`), when it names one.
    tool: Option<u64>,
    /// How many copies of its events it may have counted without listing them: the core lists
    /// the first [`MAX_LISTED_REPEATS`](toolcalls_core::MAX_LISTED_REPEATS) copies an entry
    /// takes, and counts the rest.
    unlisted: u32,
}

const ANNOUNCE: u8 = 1;
const COMPLETION: u8 = 2;

/// The kind bit of an event, for [`RecordInfo::merged`].
fn kind_bit(event: &Event) -> u8 {
    match event.body {
        EventBody::Announce(_) => ANNOUNCE,
        EventBody::Completion(_) => COMPLETION,
        _ => 0,
    }
}

#[derive(Clone, Copy)]
struct Claim {
    record: u32,
    revision: u32,
    seen: bool,
}

/// What the audit found, counted.
#[derive(Debug, Default, Clone)]
pub struct Counts {
    pub records: u64,
    pub record_ids: u64,
    /// Copies of a record at a revision already read, byte for byte the same.
    pub identical_copies: u64,
    pub revisions: u64,
    pub dead_letters: u64,
    pub pending_calls: u64,
    /// Events held in the reorder window (`--max-disorder`), from the changelog.
    pub held_events: u64,
    pub inputs: u64,
    pub in_records: u64,
    pub dead_lettered: u64,
    pub pending: u64,
    pub repeats: u64,
    /// Events of a call that came after its record was published without one of their kind
    /// (a result after the call timed out, an announce after its result was published
    /// `Orphaned`): `Late`, counted, as the correlator counts them.
    pub late: u64,
    pub turn_events: u64,
    /// Lines `toolcalls local` refused on input (it reports them on stderr; it has no dead-letter
    /// file).
    pub bad_lines: u64,
    /// Positions records, dead letters or pending calls name outside the audited inputs.
    pub outside: u64,
}

/// The key a record came with, which the audit checks against its id.
#[derive(Debug, Clone, Copy)]
pub enum RecordKey<'a> {
    /// A line of a records file: no key.
    Unkeyed,
    /// A message of the records topic and its key, which the processor makes the record's id
    /// (hyphenated, lower case).
    Message(Option<&'a [u8]>),
}

/// The audit's state; see the module docs.
pub struct Ledger {
    inputs: Vec<Input>,
    by_key: Map<InputKey, u32>,
    records: Vec<RecordInfo>,
    by_id: Map<RecordId, u32>,
    /// The content hash of each revision but a record's latest, by (record, revision): rare.
    older: Map<(u32, u32), u64>,
    claims: Map<Pos, Claim>,
    /// Dead-lettered positions: the reason, and whether the input held something there.
    dead: Map<Pos, (Box<str>, bool)>,
    /// Identity of an event merged into a record → the record.
    identities: Map<u64, u32>,
    /// Input events nothing claims, resolved at the end.
    unclaimed: Vec<Unclaimed>,
    /// Per record and call id (its by-id identity), the announce and results it lists: which of
    /// a call's attempts (collapsed retries) it holds a result of.
    attempts: Map<(u32, u64), Attempt>,
    /// Whether an input that is not a valid event counts as a bad line (files: `toolcalls local`
    /// reports them and goes on) or must be dead-lettered (topics).
    bad_lines_expected: bool,
    pub counts: Counts,
    pub discrepancies: Vec<Discrepancy>,
}

/// An input event nothing claims: its identity, kind bit, a description and the record it
/// would be in.
struct Unclaimed {
    pos: Pos,
    /// Its event time, in ms.
    time: i64,
    /// For an announce with a call id, a hash of its tool's name.
    tool: Option<u64>,
    identity: Option<u64>,
    /// For a fact with a call id, what it says ([`identities`]).
    says: Option<u64>,
    kind: u8,
    /// For a result with a call id, what it says ([`result_says`]).
    result: Option<u64>,
    /// A result with a call id that reports an outcome (not a cancellation).
    outcome: bool,
    /// For a hook decision or an approval with a call id, what it says as a record holds it
    /// ([`fact_held_hash`](super::identity::fact_held_hash)).
    fact: Option<u64>,
    event: String,
    expected: Option<RecordId>,
}

/// What an input position holds: an event, or bytes that are not one (and why).
pub enum Content<'a> {
    Event(&'a Event),
    Invalid(&'a str),
}

impl Ledger {
    pub fn new(bad_lines_expected: bool) -> Ledger {
        Ledger {
            inputs: Vec::new(),
            by_key: Map::default(),
            records: Vec::new(),
            by_id: Map::default(),
            older: Map::default(),
            claims: Map::default(),
            dead: Map::default(),
            identities: Map::default(),
            unclaimed: Vec::new(),
            attempts: Map::default(),
            bad_lines_expected,
            counts: Counts::default(),
            discrepancies: Vec::new(),
        }
    }

    /// Adds an input to audit over `range`, numbered for the core as `core` says; its number.
    pub fn add_input(&mut self, key: InputKey, range: Range, core: (u16, i64)) -> u32 {
        if let Some(&n) = self.by_key.get(&key) {
            return n;
        }
        let n = self.inputs.len() as u32;
        self.by_key.insert(key.clone(), n);
        self.inputs.push(Input {
            key,
            range,
            core,
            read: false,
        });
        n
    }

    /// Another name for input `n` (a file by its path as given and as canonical path).
    pub fn alias(&mut self, key: InputKey, n: u32) {
        self.by_key.entry(key).or_insert(n);
    }

    pub fn input(&self, key: &InputKey) -> Option<u32> {
        self.by_key.get(key).copied()
    }

    /// `input/offset` as reports name it.
    pub fn show(&self, (n, at): Pos) -> String {
        match &self.inputs[n as usize].key {
            InputKey::Topic(t, p) => format!("{t}/{p}@{at}"),
            InputKey::Lines(f) => format!("{f}:{at}"),
            InputKey::Events(f) => format!("{f}#{at}"),
        }
    }

    /// The input position a record's origin names, if it is one the audit covers.
    fn resolve(
        &mut self,
        origin: &Origin,
        resolve: &mut dyn FnMut(&InputKey) -> Option<u32>,
    ) -> Result<Option<u32>, String> {
        let key = match origin {
            Origin::Topic(t) => InputKey::Topic(t.topic.to_string(), t.partition),
            Origin::Lines(f) => InputKey::Lines(f.file.to_string()),
            Origin::Events(f) => InputKey::Events(f.file.to_string()),
            Origin::Input(i) => {
                return Err(format!(
                    "its provenance names input {} by number: the runtime did not name it",
                    i.input
                ))
            }
        };
        Ok(self.by_key.get(&key).copied().or_else(|| resolve(&key)))
    }

    /// A record as published: `text` its bytes, `at` where it was read. `resolve` finds inputs
    /// the ledger does not know by that name (files by another path).
    pub fn add_record(
        &mut self,
        text: &[u8],
        key: RecordKey<'_>,
        at: &dyn Fn() -> String,
        resolve: &mut dyn FnMut(&InputKey) -> Option<u32>,
    ) {
        self.counts.records += 1;
        let head: RecordHead = match serde_json::from_slice(text) {
            Ok(h) => h,
            Err(e) => {
                self.discrepancies.push(Discrepancy::BadRecord {
                    at: at(),
                    why: format!("not a ToolCall record: {e}"),
                });
                return;
            }
        };
        let mut h = std::hash::DefaultHasher::new();
        text.trim_ascii_end().hash(&mut h);
        let content = h.finish();
        let (id, revision) = (head.metadata.name, head.metadata.revision);
        if let RecordKey::Message(key) = key {
            let mut buf = [0u8; 36];
            let expected = id.0.hyphenated().encode_lower(&mut buf).as_bytes();
            if key != Some(expected) {
                let key = key.map_or_else(
                    || "none".to_owned(),
                    |k| format!("{:?}", String::from_utf8_lossy(k)),
                );
                self.discrepancies.push(Discrepancy::BadRecord {
                    at: at(),
                    why: format!(
                        "its key is {key}, not its id {id}: the topic is compacted by key, so a revision under another key is never replaced, and one under another record's id replaces that record"
                    ),
                });
            }
        }
        let why = if head.metadata.scope().is_none() {
            Some("its metadata names no source or no session: every record names both")
        } else if revision == 0 {
            Some("its revision is 0: a record's revisions count from 1")
        } else {
            None
        };
        if let Some(why) = why {
            self.discrepancies.push(Discrepancy::BadRecord {
                at: at(),
                why: why.to_owned(),
            });
        }
        if head.provenance.0.is_empty() {
            self.discrepancies.push(Discrepancy::BadRecord {
                at: at(),
                why: "it lists no input position: a record lists the events merged into it, so one that lists none is accounted for by no input (records written before provenance was added cannot be audited)".to_owned(),
            });
        }
        let record = match self.by_id.get(&id) {
            Some(&n) => {
                let info = &mut self.records[n as usize];
                let scope = head.metadata.scope();
                if scope.is_some() && info.scope.is_some() && scope != info.scope {
                    self.discrepancies.push(Discrepancy::BadRecord {
                        at: at(),
                        why: format!("its source, session or thread is not that of revision {} of the same record: every revision of a record is of the scope its id derives from", info.latest),
                    });
                }
                let seen = if revision == info.latest {
                    Some(info.content)
                } else if revision > info.latest {
                    // A later revision: the earlier one's content is kept for its copies.
                    self.older.insert((n, info.latest), info.content);
                    info.latest = revision;
                    info.content = content;
                    self.counts.revisions += 1;
                    None
                } else {
                    // An earlier revision read after a later one: a copy only if it was read
                    // before; the first time, its claims are made like any revision's.
                    match self.older.entry((n, revision)) {
                        std::collections::hash_map::Entry::Occupied(o) => Some(*o.get()),
                        std::collections::hash_map::Entry::Vacant(v) => {
                            v.insert(content);
                            self.counts.revisions += 1;
                            None
                        }
                    }
                };
                match seen {
                    Some(c) if c == content => {
                        self.counts.identical_copies += 1;
                        return; // its claims are made
                    }
                    Some(_) => self.discrepancies.push(Discrepancy::ConflictingCopies {
                        record: id,
                        revision,
                    }),
                    None => {}
                }
                n
            }
            None => {
                let scope = head.metadata.scope();
                self.new_record(id, Kind::Published, revision, content, scope)
            }
        };
        if revision == self.records[record as usize].latest {
            let info = &mut self.records[record as usize];
            info.has_result = head.status.as_ref().is_some_and(|s| has_result(s.phase));
            info.collapsed = head.correlation.as_ref().is_some_and(|c| c.attempts > 1);
            info.idempotent = head
                .spec
                .as_ref()
                .and_then(|s| s.side_effects.as_ref())
                .is_some_and(|e| e.idempotency_key.is_some());
            info.unlisted = head
                .correlation
                .as_ref()
                .map_or(0, |c| unlisted(c.duplicates));
            info.succeeded = head
                .status
                .as_ref()
                .is_some_and(|s| s.phase == Phase::Succeeded);
            info.facts_held = facts_held(head.spec.as_ref(), head.status.as_ref());
            info.tool = head
                .spec
                .and_then(|s| s.tool_ref)
                .map(|t| text_hash(&t.name));
        }
        let key_input = head
            .correlation
            .as_ref()
            .and_then(|c| c.key.as_deref())
            .and_then(key_input_number);
        if revision == self.records[record as usize].latest {
            let first_attempt = head.correlation.as_ref().and_then(|c| {
                let key = c.key.as_deref().filter(|k| !k.starts_with('@'))?;
                let meta = &head.metadata;
                let (source, session) = (meta.source.as_deref()?, meta.session.as_deref()?);
                Some(id_identity(source, session, meta.thread.as_deref(), key))
            });
            let info = &mut self.records[record as usize];
            info.key_input = key_input;
            info.first_attempt = first_attempt;
        }
        self.claim_all(record, revision, &head.provenance, at, resolve);
    }

    /// A call or waiting result still pending (the changelog's state), as the query API shows it.
    pub fn add_pending(
        &mut self,
        pending: &ToolCallRecord,
        at: &dyn Fn() -> String,
        resolve: &mut dyn FnMut(&InputKey) -> Option<u32>,
    ) {
        self.counts.pending_calls += 1;
        let meta = &pending.metadata;
        let thread = meta.thread.as_ref().map(|t| t.as_str());
        let scope = scope_of(meta.source.as_str(), meta.session.as_str(), thread);
        let record = self.new_record(pending.id(), Kind::Pending, 0, 0, Some(scope));
        let info = &mut self.records[record as usize];
        info.has_result = has_result(pending.status.phase);
        info.unlisted = unlisted(pending.correlation.duplicates);
        self.claim_all(record, 0, &pending.provenance, at, resolve);
    }

    /// An event held in the reorder window (the changelog's state): accounted for, still to be
    /// applied. It counts as pending, under no record.
    pub fn add_held(&mut self, pos: Option<Pos>) {
        self.counts.held_events += 1;
        match pos {
            Some(pos) if self.inputs[pos.0 as usize].range.contains(pos.1) => {
                let none = RecordId::parse("00000000-0000-0000-0000-000000000000").expect("a UUID");
                let record = self.new_record(none, Kind::Pending, 0, 0, None);
                self.claim(pos, record, 0);
            }
            _ => self.counts.outside += 1,
        }
    }

    fn new_record(
        &mut self,
        id: RecordId,
        kind: Kind,
        latest: u32,
        content: u64,
        scope: Option<u64>,
    ) -> u32 {
        let n = self.records.len() as u32;
        self.records.push(RecordInfo {
            id,
            kind,
            latest,
            content,
            scope,
            has_result: false,
            succeeded: false,
            first_attempt: None,
            key_input: None,
            facts_held: Vec::new(),
            idless_result: None,
            two_results: false,
            merged: 0,
            partial: scope.is_none(),
            id_derived: false,
            call_id: None,
            mixed_ids: false,
            collapsed: false,
            idempotent: false,
            last: None,
            tool: None,
            unlisted: 0,
        });
        if kind == Kind::Published {
            self.by_id.insert(id, n);
            self.counts.record_ids += 1;
        }
        n
    }

    fn claim_all(
        &mut self,
        record: u32,
        revision: u32,
        provenance: &Provenance,
        at: &dyn Fn() -> String,
        resolve: &mut dyn FnMut(&InputKey) -> Option<u32>,
    ) {
        if provenance.0.is_empty() {
            self.records[record as usize].partial = true;
        }
        for origin in &provenance.0 {
            let input = match self.resolve(origin, resolve) {
                Ok(Some(n)) => n,
                Ok(None) => {
                    self.counts.outside += origin.positions().len() as u64;
                    self.records[record as usize].partial = true;
                    continue;
                }
                Err(why) => {
                    self.discrepancies
                        .push(Discrepancy::BadRecord { at: at(), why });
                    self.records[record as usize].partial = true;
                    continue;
                }
            };
            let range = self.inputs[input as usize].range;
            for &offset in origin.positions() {
                if !range.contains(offset) {
                    self.counts.outside += 1;
                    self.records[record as usize].partial = true;
                    continue;
                }
                self.claim((input, offset), record, revision);
            }
        }
    }

    fn claim(&mut self, pos: Pos, record: u32, revision: u32) {
        let claim = Claim {
            record,
            revision,
            seen: false,
        };
        let Some(old) = self.claims.get_mut(&pos) else {
            self.claims.insert(pos, claim);
            return;
        };
        if old.record == record {
            old.revision = old.revision.max(revision);
            return;
        }
        let (a, b) = (
            &self.records[old.record as usize],
            &self.records[record as usize],
        );
        let d = match (a.kind, b.kind) {
            (Kind::Published, Kind::Published) | (Kind::Pending, Kind::Pending) => {
                Discrepancy::ClaimedTwice {
                    at: self.show(pos),
                    first: a.id,
                    second: b.id,
                }
            }
            (Kind::Published, Kind::Pending) => Discrepancy::RecordAndPending {
                at: self.show(pos),
                record: a.id,
                pending: b.id,
            },
            (Kind::Pending, Kind::Published) => Discrepancy::RecordAndPending {
                at: self.show(pos),
                record: b.id,
                pending: a.id,
            },
        };
        self.discrepancies.push(d);
    }

    /// A dead letter of the input at `pos`, for `reason`.
    pub fn add_dead_letter(&mut self, pos: Option<Pos>, reason: &str) {
        self.counts.dead_letters += 1;
        match pos {
            Some(pos) if self.inputs[pos.0 as usize].range.contains(pos.1) => {
                self.dead
                    .entry(pos)
                    .or_insert_with(|| (reason.into(), false));
            }
            _ => self.counts.outside += 1,
        }
    }

    /// A dead letter's reason against what its input holds: a reason of decoding is given to an
    /// input that is no event, a refusal of the correlator to an event. The other reasons (size,
    /// time, key, a panic) are the runtime's own, which the input alone cannot confirm.
    fn check_dead_letter(&mut self, pos: Pos, reason: &str, input: &Content<'_>) {
        // `too_large` is the runtime's size limit, which the audit's decoding does not apply.
        let decoding = DecodeError::REASONS.contains(&reason) && reason != "too_large";
        let holds = match input {
            Content::Event(_) if decoding => "a valid event".to_owned(),
            Content::Invalid(why) if toolcalls_core::REFUSAL_REASONS.contains(&reason) => {
                format!("not a valid event ({why})")
            }
            _ => return,
        };
        self.discrepancies.push(Discrepancy::DeadLetterMismatch {
            at: self.show(pos),
            reason: reason.to_owned(),
            holds,
        });
    }

    /// What the input at `pos` holds: an event, or an input that is not one (and why).
    pub fn input_event(&mut self, pos: Pos, input: Content<'_>) {
        self.counts.inputs += 1;
        let dead = self.dead.get_mut(&pos).map(|(reason, seen)| {
            *seen = true;
            reason.clone()
        });
        if let Some(reason) = &dead {
            self.check_dead_letter(pos, reason, &input);
        }
        if let Some(claim) = self.claims.get_mut(&pos) {
            claim.seen = true;
            let claim = *claim;
            let info = &self.records[claim.record as usize];
            let (id, scope) = (info.id, info.scope);
            match info.kind {
                Kind::Published => self.counts.in_records += 1,
                Kind::Pending => self.counts.pending += 1,
            }
            if let Some(reason) = &dead {
                let reason = reason.to_string();
                self.discrepancies.push(Discrepancy::RecordAndDeadLetter {
                    at: self.show(pos),
                    record: id,
                    reason,
                });
            }
            match input {
                Content::Event(event) => {
                    for identity in identities(event).into_iter().flatten() {
                        self.identities.insert(identity, claim.record);
                    }
                    // A fact's copy without its id is its call's repeat too: the correlator
                    // files a call's facts under what they say, whoever named the call.
                    if let Some(identity) = idless_copy_identity(event) {
                        self.identities.insert(identity, claim.record);
                    }
                    let key_input = self.records[claim.record as usize].key_input;
                    let derived = self.records[claim.record as usize].id_derived
                        || self.record_id_of(pos, event, key_input) == Some(id);
                    let info = &mut self.records[claim.record as usize];
                    info.merged |= kind_bit(event);
                    info.id_derived = derived;
                    if let Some(call_id) = &event.call_id {
                        let mut h = std::hash::DefaultHasher::new();
                        call_id.as_str().hash(&mut h);
                        let h = h.finish();
                        info.mixed_ids |= info.call_id.is_some_and(|first| first != h);
                        info.call_id.get_or_insert(h);
                    }
                    if info.last.is_none_or(|(i, o, _)| (i, o) < pos) {
                        info.last = Some((pos.0, pos.1, event.time.millis()));
                    }
                    let (source, session) = (event.source.as_str(), event.session.as_str());
                    let thread = event.thread.as_ref().map(|t| t.as_str());
                    if scope.is_some_and(|scope| scope != scope_of(source, session, thread)) {
                        self.discrepancies.push(Discrepancy::OtherScope {
                            at: self.show(pos),
                            record: id,
                            source: source.to_owned(),
                            session: match thread {
                                Some(t) => format!("{session} thread={t}"),
                                None => session.to_owned(),
                            },
                        });
                    }
                    if event.call_id.is_none() {
                        self.check_idless(pos, claim.record, event);
                    }
                    let collapsed = self.records[claim.record as usize].collapsed;
                    if let (true, EventBody::Announce(_) | EventBody::Completion(_)) =
                        (collapsed, &event.body)
                    {
                        // Events without an id are filed under 0: a call's first attempt.
                        let id = identities(event)[0].unwrap_or(0);
                        self.attempts
                            .entry((claim.record, id))
                            .or_default()
                            .listed(pos, event);
                    }
                }
                // The record and this reading of the input disagree on what is there.
                Content::Invalid(reason) if dead.is_none() => {
                    self.discrepancies.push(Discrepancy::NoSuchInput {
                        at: self.show(pos),
                        record: id,
                        not_an_event: Some(reason.to_owned()),
                    });
                }
                Content::Invalid(_) => {}
            }
            return;
        }
        if dead.is_some() {
            self.counts.dead_lettered += 1;
            return;
        }
        match input {
            Content::Invalid(_) if self.bad_lines_expected => self.counts.bad_lines += 1,
            Content::Invalid(reason) => {
                let d = Discrepancy::Undecodable {
                    at: self.show(pos),
                    reason: reason.to_owned(),
                };
                self.discrepancies.push(d);
            }
            Content::Event(event)
                if matches!(event.kind(), EventKind::TurnEnd | EventKind::TurnAborted) =>
            {
                self.counts.turn_events += 1;
            }
            Content::Event(event) => {
                let [by_id, by_content] = identities(event);
                let says = by_id.and(by_content);
                // An announce opens a call of its own; what else would go into another's.
                let expected = (event.call_id.is_some()
                    || matches!(event.body, EventBody::Announce(_)))
                .then(|| self.record_id_of(pos, event, None))
                .flatten();
                let tool = match (&event.call_id, &event.body) {
                    (Some(_), EventBody::Announce(a)) => Some(text_hash(&a.tool)),
                    _ => None,
                };
                let result = match (&event.call_id, &event.body) {
                    (Some(_), EventBody::Completion(c)) => Some(result_says(c)),
                    _ => None,
                };
                let outcome = matches!(
                    (&event.call_id, &event.body),
                    (Some(_), EventBody::Completion(c)) if !c.cancelled
                );
                let fact = event.call_id.as_ref().and_then(|_| fact_of_event(event));
                self.unclaimed.push(Unclaimed {
                    pos,
                    time: event.time.millis(),
                    tool,
                    identity: by_id.or(by_content),
                    says,
                    kind: kind_bit(event),
                    result,
                    outcome,
                    fact,
                    event: describe(event),
                    expected,
                });
            }
        }
    }

    /// The id of the record that `event`, at `pos`, would open: derived from its call id, or
    /// without one from its position as the core numbers it (`@input:offset`). A file's number
    /// is the one the run gave it, the order of its files, which a record's key says
    /// (`key_input`): the audit may be given them in another order, or some of them.
    fn record_id_of(&self, pos: Pos, event: &Event, key_input: Option<u16>) -> Option<RecordId> {
        let key = match &event.call_id {
            Some(id) => id.as_str().to_owned(),
            None => {
                let input = &self.inputs[pos.0 as usize];
                let (mut number, shift) = input.core;
                if let (Some(n), InputKey::Lines(_) | InputKey::Events(_)) = (key_input, &input.key)
                {
                    number = n;
                }
                format!("@{number}:{}", pos.1.checked_add(shift)?)
            }
        };
        let thread = event.thread.as_ref();
        Some(RecordId::derive(
            &event.source,
            &event.session,
            thread,
            &key,
        ))
    }

    /// How many positions of the audited inputs the outputs claim.
    pub fn claimed_positions(&self) -> usize {
        self.claims.len()
    }

    /// An event without a call id that record `ix` lists: of the record's tool, where it names
    /// one, and, for a result, saying what the record's other results without an id say.
    fn check_idless(&mut self, pos: Pos, ix: u32, event: &Event) {
        let named = match &event.body {
            EventBody::Announce(a) => Some(a.tool.as_str()),
            // A checksum links a result whatever tool it names; so for a fact.
            EventBody::Completion(c) if c.checksum.is_none() => c.tool.as_deref(),
            EventBody::Approval(a) if a.checksum.is_none() => a.tool.as_deref(),
            EventBody::HookDecision(d) if d.checksum.is_none() => d.tool.as_deref(),
            _ => None,
        };
        let info = &mut self.records[ix as usize];
        // A retry's announce may name another tool: the key, not the tool, collapsed it. Results
        // and facts without an id still join the call by its own tool.
        let retry = info.collapsed && matches!(event.body, EventBody::Announce(_));
        if retry || info.kind != Kind::Published {
            return;
        }
        if let EventBody::Completion(c) = &event.body {
            let says = result_says(c);
            match info.idless_result {
                Some(first) if first != says => info.two_results = true,
                Some(_) => {}
                None => info.idless_result = Some(says),
            }
        }
        let Some(tool) = named else {
            return;
        };
        if info.tool.is_some_and(|t| t != text_hash(tool)) {
            let record = info.id;
            let d = Discrepancy::OtherTool {
                at: self.show(pos),
                record,
                tool: tool.to_owned(),
            };
            self.discrepancies.push(d);
        }
    }

    /// Whether record `ix` lists a result of the attempt (call id) of result `u`.
    fn lists_a_result_of(&self, ix: u32, u: &Unclaimed) -> bool {
        u.identity
            .and_then(|id| self.attempts.get(&(ix, id)))
            .is_some_and(|a| !a.results.is_empty())
    }

    /// Whether result `u`, of an attempt of record `ix` the record lists no result of, is late
    /// as the correlator takes it (docs/ARCHITECTURE.md, Correlation → Idempotency keys): once an
    /// attempt succeeded, when it says what a result the record lists says, or when its attempt
    /// may have been applied no later than one whose result the record lists (an earlier attempt's result
    /// after a later one's). A later attempt's result that says something else is the call's
    /// outcome: the record's next revision lists it.
    fn late_for_its_attempts(&self, ix: u32, succeeded: bool, u: &Unclaimed) -> bool {
        if succeeded {
            return true;
        }
        let attempts: Vec<(u64, &Attempt)> = self
            .attempts
            .iter()
            .filter(|((r, _), _)| *r == ix)
            .map(|((_, id), a)| (*id, a))
            .collect();
        if u.result
            .is_some_and(|says| attempts.iter().any(|(_, a)| a.results.contains(&says)))
        {
            return true;
        }
        let own = u
            .identity
            .and_then(|id| self.attempts.get(&(ix, id)))
            .and_then(|a| a.announce);
        // A result that names no id answers the first attempt.
        let first = attempts.iter().filter_map(|(_, a)| a.announce).min();
        let Some(own) = own else {
            return false;
        };
        // Its record's key is the first attempt's id: every attempt came no earlier.
        if u.identity.is_some() && u.identity == self.records[ix as usize].first_attempt {
            return true;
        }
        attempts
            .iter()
            .filter(|(_, a)| !a.results.is_empty() || a.answered_late)
            .filter_map(|(id, a)| if *id == 0 { first } else { a.announce })
            .any(|answered| no_later_attempt(own, answered))
    }

    /// Marks the attempts of calls that collapsed retries whose result is in no record but says
    /// what a result the record lists says ([`Attempt::answered_late`]).
    fn note_late_answers(&mut self) {
        let mut late = Vec::new();
        for u in &self.unclaimed {
            let (Some(id), Some(says)) = (u.identity, u.result) else {
                continue;
            };
            let Some(&ix) = self.identities.get(&id) else {
                continue;
            };
            if !self.records[ix as usize].collapsed {
                continue;
            }
            let listed = self
                .attempts
                .iter()
                .any(|((r, _), a)| *r == ix && a.results.contains(&says));
            if listed {
                late.push((ix, id));
            }
        }
        for key in late {
            self.attempts.entry(key).or_default().answered_late = true;
        }
    }

    /// Input `n` was read to the end of its range.
    pub fn input_done(&mut self, n: u32) {
        self.inputs[n as usize].read = true;
    }

    /// Resolves what nothing claimed, and checks the claims no input answered: the report.
    pub fn finish(&mut self) {
        let mut claims: Vec<(Pos, Claim)> = self.claims.iter().map(|(p, c)| (*p, *c)).collect();
        claims.sort_unstable_by_key(|(p, _)| *p);
        for (_, claim) in claims.iter().filter(|(_, c)| !c.seen) {
            self.records[claim.record as usize].partial = true;
        }
        self.note_late_answers();
        for u in std::mem::take(&mut self.unclaimed) {
            let ix = u.identity.and_then(|i| self.identities.get(&i)).copied();
            let record = ix.map(|r| &self.records[r as usize]);
            // Applied before an event its record lists: while its call was pending. Not for a
            // record revised after it was published (a retry collapsed into it, a later result
            // of an idempotent call): a revision lists events that came after the call had
            // closed, and the late events between them.
            let before_its_record = record.is_some_and(|r| {
                !r.collapsed
                    && r.latest <= 1
                    && r.last.is_some_and(|(input, offset, time)| {
                        input == u.pos.0 && offset > u.pos.1 && time >= u.time
                    })
            });
            // A copy of an event its record merged, which the record counted without listing.
            let unlisted_copy = record.is_some_and(|r| {
                before_its_record
                    && r.unlisted > 0
                    && (u.kind == 0 || r.merged & u.kind != 0)
                    && u.says.is_none_or(|s| self.identities.contains_key(&s))
            });
            let other_attempt = record.is_some_and(|r| {
                u.result.is_some() && r.collapsed && !r.partial && r.merged & COMPLETION != 0
            }) && ix.is_some_and(|ix| !self.lists_a_result_of(ix, &u));
            // A result of an idempotent call its record closed without one: the correlator
            // publishes it as the record's next revision, lost when no record lists it.
            let revision_lost =
                u.outcome && record.is_some_and(|r| r.idempotent && !r.has_result && !r.partial);
            // The announce of an attempt whose result its record lists, and not its announce: a
            // retry joins its call by its announce, so the record merged it and lost it.
            let attempt_announce_lost = u.kind == ANNOUNCE
                && u.tool.is_some()
                && record.is_some_and(|r| r.collapsed && !r.partial)
                && ix
                    .zip(u.identity)
                    .and_then(|key| self.attempts.get(&key))
                    .is_some_and(|a| a.announce.is_none() && !a.results.is_empty());
            if let (true, Some(ix)) = (unlisted_copy, ix) {
                self.records[ix as usize].unlisted -= 1;
                self.counts.repeats += 1;
                continue;
            }
            match record {
                // Another tool under the id of a pending or remembered call: the correlator
                // refuses it, which local mode says on stderr only (the processor dead-letters
                // it).
                Some(r) if u.tool.is_some() && r.tool.is_some() && u.tool != r.tool => {
                    let at = self.show(u.pos);
                    self.discrepancies.push(Discrepancy::Refused {
                        at,
                        event: u.event,
                        record: r.id,
                    });
                }
                // Applied while its call was pending, not after the record went out: it went
                // into another record under this id, which the outputs lack.
                Some(r) if before_its_record => {
                    let at = self.show(u.pos);
                    self.discrepancies.push(Discrepancy::Superseded {
                        at,
                        event: u.event,
                        record: r.id,
                    });
                }
                // A fact its record holds — its hook decision or approval is in the record's
                // content — without listing it, nor any event that says the same.
                Some(r)
                    if u.fact.is_some_and(|f| r.facts_held.contains(&f))
                        && u.says.is_some_and(|s| !self.identities.contains_key(&s))
                        && !r.partial =>
                {
                    let at = self.show(u.pos);
                    self.discrepancies.push(Discrepancy::Unlisted {
                        at,
                        event: u.event,
                        record: r.id,
                    });
                }
                // A fact its record holds none like: it came once its call had closed, and the
                // correlator took it as late, as it does a result after a deadline.
                Some(r)
                    if u.says.is_some_and(|s| !self.identities.contains_key(&s)) && !r.partial =>
                {
                    self.counts.late += 1;
                }
                // A result of an attempt of a collapsed call whose own result the record does
                // not list, while it lists another attempt's: late, or the lost outcome.
                Some(r)
                    if other_attempt
                        && self.late_for_its_attempts(ix.unwrap_or_default(), r.succeeded, &u) =>
                {
                    self.counts.late += 1;
                }
                // That lost outcome; or the announce of a retry whose result is listed.
                Some(_) if other_attempt || attempt_announce_lost => {
                    let at = self.show(u.pos);
                    self.discrepancies.push(Discrepancy::Missing {
                        at,
                        event: u.event,
                        expected: u.expected,
                    });
                }
                // A copy of an event the record merged (the correlator's `Duplicate`, or
                // `Late` once the record was published), or one the audit cannot judge.
                Some(r) if u.kind == 0 || r.merged & u.kind != 0 || r.partial => {
                    self.counts.repeats += 1;
                }
                // Its record merged none of its kind, and says it has none: the call had
                // closed before it came. An announce is late only for a record published
                // without one (`Orphaned`): a record with a result had its call, so an announce
                // of its id went into it, however late its result came. Nor is a result of an
                // idempotent call its record closed without one: the correlator publishes it as
                // the record's next revision.
                Some(r)
                    if !(r.has_result && (u.kind == COMPLETION || u.kind == ANNOUNCE))
                        && !revision_lost =>
                {
                    self.counts.late += 1
                }
                // Not there, its record has a result but lists no result event or announce, or
                // the revision its idempotent call's result made is lost.
                _ => {
                    let at = self.show(u.pos);
                    self.discrepancies.push(Discrepancy::Missing {
                        at,
                        event: u.event,
                        expected: u.expected,
                    });
                }
            }
        }
        let mut unseen: Vec<(Pos, String)> = self
            .dead
            .iter()
            .filter(|(pos, (_, seen))| !seen && self.inputs[pos.0 as usize].read)
            .map(|(pos, (reason, _))| (*pos, reason.to_string()))
            .collect();
        unseen.sort_unstable();
        for (pos, reason) in unseen {
            let at = self.show(pos);
            self.discrepancies
                .push(Discrepancy::DeadLetterOfNothing { at, reason });
        }
        for (pos, claim) in claims {
            let info = &self.records[claim.record as usize];
            if !claim.seen && self.inputs[pos.0 as usize].read {
                let d = Discrepancy::NoSuchInput {
                    at: self.show(pos),
                    record: info.id,
                    not_an_event: None,
                };
                self.discrepancies.push(d);
            } else if info.kind == Kind::Published && claim.revision < info.latest {
                let d = Discrepancy::DroppedByRevision {
                    at: self.show(pos),
                    record: info.id,
                    revision: claim.revision,
                    latest: info.latest,
                };
                self.discrepancies.push(d);
            }
        }
        let whole = self.records.iter().filter(|r| !r.partial);
        let mut found = Vec::new();
        for r in whole {
            if !r.id_derived {
                found.push(Discrepancy::ForeignId { record: r.id });
            }
            if r.mixed_ids && !r.collapsed {
                found.push(Discrepancy::MixedIds { record: r.id });
            }
            if r.kind == Kind::Published && r.has_result && r.merged & COMPLETION == 0 {
                found.push(Discrepancy::NoResult { record: r.id });
            }
            if r.two_results {
                found.push(Discrepancy::TwoResults { record: r.id });
            }
        }
        self.discrepancies.extend(found);
    }
}

/// An event in a few words, for a report.
fn describe(e: &Event) -> String {
    let mut s = format!(
        "{} source={} session={}",
        e.kind().as_str(),
        e.source,
        e.session
    );
    if let Some(t) = &e.thread {
        s += &format!(" thread={t}");
    }
    match &e.call_id {
        Some(id) => s += &format!(" callId={id}"),
        None => {
            let tool = match &e.body {
                EventBody::Announce(a) => Some(a.tool.as_str()),
                EventBody::Completion(c) => c.tool.as_deref(),
                _ => None,
            };
            if let Some(t) = tool {
                s += &format!(" tool={t}");
            }
            s += &format!(" time={}", e.time.to_rfc3339());
        }
    }
    s
}
