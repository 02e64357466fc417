//! What an event adds to an entry besides its own fact or result: its attributes, the counting of
//! an event for a waiting result, and an approval folded into the approval state.

use super::footprint::waiting_bytes;
use super::Envelope;
use crate::state::{Call, WaitingResult};
use crate::Outcome;
use serde_json::{Map, Value};
use toolcalls_model::{ApprovalDecision, ApprovalState, Timestamp};

/// Another event `env` for a waiting result (its call not announced yet): counted, and `add`
/// files what it says — or returns `false` when the entry holds that already: a duplicate.
/// `pending_bytes` follows the entry's size.
pub(super) fn add_to_waiting(
    waiting: &mut WaitingResult,
    pending_bytes: &mut usize,
    env: Envelope,
    add: impl FnOnce(&mut WaitingResult) -> bool,
) -> Outcome {
    let before = waiting_bytes(waiting);
    waiting.events = waiting.events.saturating_add(1);
    waiting.updated_at = waiting.updated_at.max(env.time);
    let outcome = if add(waiting) {
        merge_attributes(&mut waiting.attributes, env.attributes);
        Outcome::Pending
    } else {
        waiting.duplicates = waiting.duplicates.saturating_add(1);
        Outcome::Duplicate
    };
    *pending_bytes = *pending_bytes + waiting_bytes(waiting) - before;
    outcome
}

/// Folds an approval event into a call's approval state: the first event makes it (approval is
/// then required); a request sets when it was asked for, a decision who decided, when and why.
pub(super) fn fold_approval(
    approval: &mut Option<ApprovalState>,
    at: Timestamp,
    decision: ApprovalDecision,
    by: Option<String>,
    reason: Option<String>,
) {
    let approval = approval.get_or_insert(ApprovalState {
        required: true,
        status: decision,
        requested_at: None,
        approved_by: None,
        approved_at: None,
        reason: None,
    });
    match decision {
        ApprovalDecision::Requested => approval.requested_at = Some(at),
        ApprovalDecision::Approved | ApprovalDecision::Denied => {
            approval.status = decision;
            approval.approved_by = by;
            approval.approved_at = Some(at);
            approval.reason = reason;
        }
    }
}

/// Adds an event's attributes to an entry's (the event's win where both have a key).
pub(super) fn merge_attributes(
    into: &mut Option<Map<String, Value>>,
    from: Option<Map<String, Value>>,
) {
    match (into.as_mut(), from) {
        (_, None) => {}
        (None, Some(m)) => *into = Some(m),
        (Some(a), Some(m)) => a.extend(m),
    }
}

/// [`merge_attributes`] into a call, allocating its extras only when there are some.
pub(super) fn merge_call_attributes(call: &mut Call, from: Option<Map<String, Value>>) {
    if from.is_some() {
        merge_attributes(&mut call.extras_mut().attributes, from);
    }
}
