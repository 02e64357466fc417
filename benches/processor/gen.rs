//! Input of the processor benchmark: [`toolcalls_benches::mix`] in chunks, patched so that event
//! time never goes back and ids never repeat across chunks.
//!
//! `mix` spaces calls one second apart and prints the hour modulo 12, so past 43,200 calls its
//! clock would jump back twelve hours (and, with the default 30-minute call timeout, time out
//! every call announced after the jump). Each chunk of [`CHUNK`] calls gets its own day, its own
//! call-id prefix and its own turn names.

use toolcalls_model::{Event, EventKind};

/// Calls per chunk: 40,000 seconds of event time stay within one day of `mix`'s clock.
pub const CHUNK: usize = 40_000;

/// About 2.1 v1 events per call (JSON bytes, arrival order), `calls` calls.
pub fn events(calls: usize, seed: u64) -> Vec<Vec<u8>> {
    let chunks = calls.div_ceil(CHUNK);
    assert!(chunks <= 12 * 28, "at most {} calls", 12 * 28 * CHUNK);
    let mut out = Vec::with_capacity(calls * 22 / 10);
    for k in 0..chunks {
        let n = (calls - k * CHUNK).min(CHUNK);
        let (month, day) = (1 + k / 28, 1 + k % 28);
        let patches: [(&[u8], Vec<u8>); 3] = [
            (
                b"\"time\":\"2026-05-10T",
                format!("\"time\":\"2026-{month:02}-{day:02}T").into_bytes(),
            ),
            (
                b"\"callId\":\"toolu_01",
                format!("\"callId\":\"toolu_{k:03}").into_bytes(),
            ),
            (
                b"\"turn\":\"turn-",
                format!("\"turn\":\"t{k}-").into_bytes(),
            ),
        ];
        for e in toolcalls_benches::mix(n, seed.wrapping_add(k as u64)) {
            let mut e = e;
            for (from, to) in &patches {
                e = replace_all(&e, from, to);
            }
            out.push(e);
        }
    }
    out
}

/// The announces of [`events`] only: a state of calls that all stay pending.
pub fn announces(calls: usize, seed: u64) -> Vec<Vec<u8>> {
    events(calls, seed)
        .into_iter()
        .filter(|e| {
            Event::decode(e)
                .map(|e| e.kind() == EventKind::Announce)
                .unwrap_or(false)
        })
        .collect()
}

fn replace_all(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len() + 16);
    let mut i = 0;
    while i < hay.len() {
        if hay[i] == from[0] && hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}
