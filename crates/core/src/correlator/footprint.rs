//! The memory estimate of pending entries ([`Correlator::pending_bytes`](super::Correlator::pending_bytes),
//! the `toolcalls_state_pending_bytes` gauge). `benches/processor` measures the real figure (the
//! resident set, `benches/processor/README.md` §3); the constants here are what it found each
//! structure costs per entry.

use super::scopes::Pending;
use crate::state::{Call, Extras, Live, WaitingResult};
use crate::Position;
use serde_json::{Map, Value};
use toolcalls_model::Json;

/// The heap bytes behind a request of `n` bytes: `n` plus an 8-byte header, rounded up to 16, at
/// least 32; nothing for 0 bytes. That is glibc's rule; mimalloc, which the binaries use, has no
/// header and its own size classes, and the estimate stays within a few percent of either
/// (benches/processor/README.md §3), so one rule serves both.
const fn alloc_size(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    let c = (n + 8 + 15) & !15;
    if c < 32 {
        32
    } else {
        c
    }
}

/// One deadline in a scope's timers (`timers.rs`): 16 bytes in a sorted run, with the slack of
/// a growing vector.
const TIMER: usize = 16 * 11 / 8;
/// One entry of a hash map with 16-byte buckets (`live`: seq → box): a bucket and a control byte
/// at the load a table that doubles when 7/8 full has on average (0.65).
const MAP_SLOT: usize = 26;
/// One entry of a B-tree set of 8-byte keys (a scope's waiting results).
const BTREE_SET_ENTRY: usize = 24;
/// One `u64` slot of a hash table (8 bytes and a control byte) at the load a table that doubles
/// when 7/8 full has on average (0.65).
const TABLE_SLOT: usize = 14;
/// One [`Pending`] in a growing vector (a tool's calls), with the slack of doubling.
const VEC_SLOT: usize = std::mem::size_of::<Pending>() * 11 / 8;
/// Per entry of a JSON object kept in memory (`serde_json::Map`): node share, key, small value.
const MAP_ENTRY: usize = 128;
/// Per hook decision, approval or fact kept.
const FACT: usize = 160;

/// Bytes held by a verbatim JSON value (its text, boxed).
fn json_bytes(j: &Json) -> usize {
    alloc_size(j.as_str().len())
}

fn str_bytes(s: &str) -> usize {
    alloc_size(s.len())
}

fn map_bytes(m: &Map<String, Value>) -> usize {
    m.len() * MAP_ENTRY
}

fn extras_bytes(x: &Extras) -> usize {
    alloc_size(std::mem::size_of::<Extras>())
        + x.aliases
            .iter()
            .map(|a| 24 + str_bytes(a.as_str()) + TABLE_SLOT + 24)
            .sum::<usize>()
        + x.side_effects
            .as_ref()
            .and_then(|s| s.idempotency_key.as_deref())
            .map_or(0, |k| str_bytes(k) * 2 + TABLE_SLOT + 24)
        + x.agent.as_deref().map_or(0, str_bytes)
        + x.execution.as_deref().map_or(0, str_bytes)
        + x.hook_context.as_ref().map_or(0, map_bytes)
        + x.attributes.as_ref().map_or(0, map_bytes)
        + x.hooks.len() * FACT
        + x.approval.as_ref().map_or(0, |_| FACT)
        + positions_bytes(&x.positions)
        // Each kept repeat key, and its entry in the scope's table of repeat keys.
        + x.repeats.len() * (8 + TABLE_SLOT)
}

/// Bytes held by a list of input positions.
/// By length, not capacity: the estimate depends on what an entry holds, so a restored entry
/// (whose list is allocated at its length) is estimated as the one that was written.
fn positions_bytes(p: &[Position]) -> usize {
    alloc_size(std::mem::size_of_val(p))
}

/// The estimate for one pending call: its allocation, its strings and JSON, and its entries in
/// `live`, `timers`, `by_record`, its tool slot, and the scope's id (or repeat key) and checksum
/// tables.
pub(super) fn call_bytes(call: &Call) -> usize {
    alloc_size(std::mem::size_of::<Live>())
        + TIMER
        + MAP_SLOT
        + TABLE_SLOT
        + VEC_SLOT
        + str_bytes(&call.key)
        + call.turn.as_deref().map_or(0, str_bytes)
        + call.args.as_ref().map_or(0, json_bytes)
        // Filed by its id, or by the repeat key of its announce (`repeats.rs`).
        + if call.has_id { TABLE_SLOT } else { MAP_SLOT }
        + if call.checksum.is_some() {
            TABLE_SLOT
        } else {
            0
        }
        + call.extras.as_deref().map_or(0, extras_bytes)
}

/// The estimate for one waiting result, as [`call_bytes`] for a call (plus its second box).
pub(super) fn waiting_bytes(waiting: &WaitingResult) -> usize {
    alloc_size(std::mem::size_of::<Live>())
        + alloc_size(std::mem::size_of::<WaitingResult>())
        + TIMER
        + MAP_SLOT
        + TABLE_SLOT
        + BTREE_SET_ENTRY
        + str_bytes(&waiting.key)
        + match (waiting.has_id, &waiting.done) {
            (true, _) => TABLE_SLOT,
            (false, Some(_)) => MAP_SLOT,
            (false, None) => 0,
        }
        + waiting.turn.as_deref().map_or(0, str_bytes)
        + waiting.tool.as_deref().map_or(0, str_bytes)
        + waiting.args.as_ref().map_or(0, json_bytes)
        + waiting
            .done
            .as_ref()
            .and_then(|d| d.result.as_ref())
            .map_or(0, json_bytes)
        + waiting.facts.len() * FACT
        + positions_bytes(&waiting.positions)
        + waiting.attributes.as_ref().map_or(0, map_bytes)
}

pub(super) fn live_bytes(live: &Live) -> usize {
    match live {
        Live::Call(call) => call_bytes(call),
        Live::Waiting(waiting) => waiting_bytes(waiting),
    }
}
