//! What an event or a record says, hashed: the identities by which a repeat of an event is
//! known, what a result or a fact says, the scope of a record and of an event.

use std::hash::{Hash, Hasher};
use toolcalls_model::checksum::digest_of_json;
use toolcalls_model::{Event, EventBody};

/// What a hook decision or an approval says, as a record holds it: a hook decision whole, an
/// approval's decision and its time.
pub(super) fn fact_held_hash(
    hook: Option<&toolcalls_model::HookDecisionEntry>,
    approval: Option<(&str, i64)>,
) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    match (hook, approval) {
        (Some(e), _) => {
            6u8.hash(&mut h);
            let says = (
                &e.hook,
                e.decision.as_str(),
                &e.policy_id,
                &e.policy_version,
                &e.reason,
            );
            says.hash(&mut h);
            e.at.millis().hash(&mut h);
        }
        (None, Some((decision, at))) => {
            5u8.hash(&mut h);
            (decision, at).hash(&mut h);
        }
        (None, None) => {}
    }
    h.finish()
}

/// What a hook decision or an approval event says, as a record would hold it.
pub(super) fn fact_of_event(event: &Event) -> Option<u64> {
    match &event.body {
        EventBody::HookDecision(d) => {
            let entry = toolcalls_model::HookDecisionEntry {
                hook: d.hook.clone(),
                decision: d.decision,
                policy_id: d.policy_id.clone(),
                policy_version: d.policy_version.clone(),
                reason: d.reason.clone(),
                at: event.time,
            };
            Some(fact_held_hash(Some(&entry), None))
        }
        EventBody::Approval(a) => Some(fact_held_hash(
            None,
            Some((a.decision.as_str(), event.time.millis())),
        )),
        _ => None,
    }
}

/// A hash of what a result says: error or not, cancelled or not, its output.
pub(super) fn result_says(c: &toolcalls_model::Completion) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    (c.is_error, c.cancelled).hash(&mut h);
    c.result.as_ref().map(|r| r.as_str()).hash(&mut h);
    h.finish()
}

/// A hash of a text: a tool's name.
pub(super) fn text_hash(text: &str) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// A hash of a source, a session and a thread: a record's scope, and an event's.
pub(super) fn scope_of(source: &str, session: &str, thread: Option<&str>) -> u64 {
    let mut h = std::hash::DefaultHasher::new();
    (source, session, thread).hash(&mut h);
    h.finish()
}

/// The identities of an event by which a repeat of it is known (docs/ARCHITECTURE.md,
/// Correlation → Repeats): its call id in its scope, and what it says — for an event without an
/// id, its kind, tool, checksum, event time to the millisecond, and for a completion its result;
/// for a fact (with an id or without) what [`says`] hashes and its time.
pub(super) fn identities(e: &Event) -> [Option<u64>; 2] {
    let mut h = scope_hasher(
        e.source.as_str(),
        e.session.as_str(),
        e.thread.as_ref().map(|t| t.as_str()),
    );
    if let Some(id) = &e.call_id {
        id_part(&mut h, id.as_str());
        let by_id = h.finish();
        // A fact is one of the several its call may take: what it says tells a copy from another.
        let content = says(&mut h, &e.body, false).then(|| {
            e.time.millis().hash(&mut h);
            h.finish()
        });
        return [Some(by_id), content];
    }
    match &e.body {
        EventBody::Announce(a) => {
            let digest = match (&a.checksum, &a.args) {
                (Some(c), _) => Some(c.digest()),
                (None, Some(args)) => Some(digest_of_json(&a.tool, Some(args))),
                (None, None) => None,
            };
            1u8.hash(&mut h);
            a.tool.hash(&mut h);
            digest.hash(&mut h);
        }
        EventBody::Completion(c) => {
            let digest = match (&c.checksum, &c.tool, &c.args) {
                (Some(cs), _, _) => Some(cs.digest()),
                (None, Some(tool), Some(args)) => Some(digest_of_json(tool, Some(args))),
                _ => None,
            };
            2u8.hash(&mut h);
            c.tool.hash(&mut h);
            digest.hash(&mut h);
            (c.is_error, c.cancelled).hash(&mut h);
            c.result.as_ref().map(|r| r.as_str()).hash(&mut h);
        }
        // A fact without an id is the correlator's repeat when it says the same about the same
        // checksum at the same time (core's `correlator/repeats.rs`): hashed from what it says.
        _ => {
            if !says(&mut h, &e.body, true) {
                return [None, None];
            }
        }
    }
    e.time.millis().hash(&mut h);
    [None, Some(h.finish())]
}

/// The identity of a copy of fact `e` that came without `e`'s call id; `None` for an event
/// without one, or no fact.
pub(super) fn idless_copy_identity(e: &Event) -> Option<u64> {
    let is_fact = !matches!(
        e.body,
        EventBody::Announce(_)
            | EventBody::Completion(_)
            | EventBody::TurnEnd(_)
            | EventBody::TurnAborted(_)
    );
    if e.call_id.is_none() || !is_fact {
        return None;
    }
    let copy = Event {
        call_id: None,
        ..e.clone()
    };
    identities(&copy)[1]
}

/// A hasher that has taken a scope: the start of every identity.
pub(super) fn scope_hasher(
    source: &str,
    session: &str,
    thread: Option<&str>,
) -> std::hash::DefaultHasher {
    let mut h = std::hash::DefaultHasher::new();
    source.hash(&mut h);
    session.hash(&mut h);
    thread.hash(&mut h);
    h
}

pub(super) fn id_part(h: &mut std::hash::DefaultHasher, id: &str) {
    0u8.hash(h);
    id.hash(h);
}

/// The by-id identity of call id `id` in a scope, as [`identities`] makes it of an event.
pub(super) fn id_identity(source: &str, session: &str, thread: Option<&str>, id: &str) -> u64 {
    let mut h = scope_hasher(source, session, thread);
    id_part(&mut h, id);
    h.finish()
}

/// Hashes what a fact says — its kind, the checksum it is about, its outcome, decision, hook,
/// policy and reason — and whether `body` is a fact. `checksum_needed`: a fact that names no
/// checksum (nor the tool and arguments to make one) is not hashed, as without an id the
/// correlator finds its copies by the checksum.
pub(super) fn says(
    h: &mut std::hash::DefaultHasher,
    body: &EventBody,
    checksum_needed: bool,
) -> bool {
    match body {
        EventBody::ExecutionStart(x) => {
            3u8.hash(h);
            Some(x.checksum.digest()).hash(h);
        }
        EventBody::ExecutionEnd(x) => {
            4u8.hash(h);
            Some(x.checksum.digest()).hash(h);
            (x.is_error, x.duration_ms).hash(h);
        }
        EventBody::Approval(a) => {
            let digest = fact_digest(a.checksum.as_ref(), a.tool.as_deref(), a.args.as_ref());
            if digest.is_none() && checksum_needed {
                return false;
            }
            5u8.hash(h);
            digest.hash(h);
            a.decision.hash(h);
        }
        EventBody::HookDecision(d) => {
            let digest = fact_digest(d.checksum.as_ref(), d.tool.as_deref(), d.args.as_ref());
            if digest.is_none() && checksum_needed {
                return false;
            }
            6u8.hash(h);
            digest.hash(h);
            let says = (
                &d.hook,
                d.decision,
                &d.policy_id,
                &d.policy_version,
                &d.reason,
            );
            says.hash(h);
        }
        EventBody::Announce(_)
        | EventBody::Completion(_)
        | EventBody::TurnEnd(_)
        | EventBody::TurnAborted(_) => return false,
    }
    true
}

/// The checksum a fact is about: its own, or that of the tool and arguments it names.
pub(super) fn fact_digest(
    checksum: Option<&toolcalls_model::Checksum>,
    tool: Option<&str>,
    args: Option<&toolcalls_model::Json>,
) -> Option<[u8; 32]> {
    match (checksum, tool) {
        (Some(c), _) => Some(c.digest()),
        (None, Some(tool)) => Some(digest_of_json(tool, args)),
        (None, None) => None,
    }
}
