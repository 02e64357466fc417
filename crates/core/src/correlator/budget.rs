//! The facts budget: how many bytes of a call's record its facts take — hook decisions, an
//! approval, execution timing, the attributes its events brought — so that no call's record, nor
//! its changelog entry, outgrows what a Kafka message may hold however many facts arrive for it
//! (`Config::max_facts_bytes`; docs/ARCHITECTURE.md, Correlation → Facts). Its arguments and
//! result are one event each, and bounded by the size of an input message.

use crate::state::{Call, Fact, WaitingResult};
use serde_json::{Map, Value};
use toolcalls_model::{ApprovalState, HookDecisionEntry};

/// What a fact's fixed parts take in a record: its keys, times and decision.
const FACT_FRAME: usize = 128;

/// The bytes a text takes written as a JSON string: quotes and escapes included (a control
/// character at its widest, `\u001f`).
fn text_bytes(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

fn texts<'a>(texts: impl IntoIterator<Item = Option<&'a str>>) -> usize {
    texts.into_iter().flatten().map(text_bytes).sum()
}

fn hook_bytes(h: &HookDecisionEntry) -> usize {
    FACT_FRAME
        + texts([
            Some(h.hook.as_str()),
            h.policy_id.as_deref(),
            h.policy_version.as_deref(),
            h.reason.as_deref(),
        ])
}

fn approval_bytes(a: &ApprovalState) -> usize {
    FACT_FRAME + texts([a.approved_by.as_deref(), a.reason.as_deref()])
}

/// The bytes a fact adds to a record.
pub(super) fn fact_bytes(fact: &Fact) -> usize {
    match fact {
        Fact::ExecStart { .. } | Fact::ExecEnd { .. } => FACT_FRAME,
        Fact::Approval { by, reason, .. } => FACT_FRAME + texts([by.as_deref(), reason.as_deref()]),
        Fact::Hook { entry } => hook_bytes(entry),
    }
}

/// The bytes attributes take in a record.
pub(super) fn attributes_bytes(attributes: Option<&Map<String, Value>>) -> usize {
    attributes.map_or(0, |m| {
        serde_json::to_vec(m).map_or(usize::MAX / 4, |text| text.len())
    })
}

/// What the facts of a pending call take.
pub(super) fn of_call(call: &Call) -> usize {
    let Some(x) = &call.extras else {
        return 0;
    };
    let timing =
        FACT_FRAME * (usize::from(x.started_at.is_some()) + usize::from(x.exec_end.is_some()));
    x.hooks.iter().map(hook_bytes).sum::<usize>()
        + x.approval.as_ref().map_or(0, approval_bytes)
        + timing
        + attributes_bytes(x.attributes.as_ref())
}

/// What the facts of a waiting result take.
pub(super) fn of_waiting(waiting: &WaitingResult) -> usize {
    waiting.facts.iter().map(fact_bytes).sum::<usize>()
        + attributes_bytes(waiting.attributes.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_counts_as_written() {
        for s in ["", "plain", "a \"quote\" and a \\", "\u{1}\n\t", "é ☃"] {
            let written = serde_json::to_string(s).unwrap().len();
            assert!(text_bytes(s) >= written, "{s:?}");
            if !s.bytes().any(|b| b < 0x20) {
                assert_eq!(text_bytes(s), written, "{s:?}");
            }
        }
    }
}
