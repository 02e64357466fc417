//! Arrival order that is not event order: each result delayed by a few positions, as results
//! read from another topic, or files merged from several producers, arrive.

use std::collections::HashMap;
use toolcalls_model::{Event, EventKind};

/// An arrival order of `events` (indexes into it) in which every completion is delayed by 0 to
/// `max_positions` positions (seeded), behind the event it is delayed past; everything else keeps
/// its order.
pub fn delay_results(events: &[Event], max_positions: usize, seed: u64) -> Vec<usize> {
    let mut state = seed;
    let mut keys: Vec<(usize, bool, usize)> = events
        .iter()
        .enumerate()
        .map(|(i, e)| {
            let delay = if e.kind() == EventKind::Completion {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((state >> 33) % (max_positions as u64 + 1)) as usize
            } else {
                0
            };
            (i + delay, delay > 0, i)
        })
        .collect();
    keys.sort_unstable();
    keys.into_iter().map(|(_, _, i)| i).collect()
}

/// How far, in event time, an event of `order` arrives behind an earlier arrival of its session
/// (source and session), at most: the reorder window that undoes this disorder.
pub fn disorder_ms(events: &[Event], order: &[usize]) -> u64 {
    let mut newest: HashMap<(&str, &str), i64> = HashMap::new();
    let mut worst = 0;
    for &i in order {
        let e = &events[i];
        let t = e.time.millis();
        let n = newest
            .entry((e.source.as_str(), e.session.as_str()))
            .or_insert(t);
        worst = worst.max(*n - t);
        *n = (*n).max(t);
    }
    worst as u64
}
