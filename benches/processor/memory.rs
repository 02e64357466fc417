//! Memory per pending call: resident set size before and after one correlator holds `calls`
//! pending calls with tiny payloads, minus the payload bytes, against the correlator's own
//! estimate (`Correlator::pending_bytes`).
//!
//! The workspace forbids unsafe code, so there is no counting global allocator: the figure is what
//! the OS sees (glibc malloc, chunk headers and rounding included), which is also what a
//! container limit sees.

use std::time::Instant;
use toolcalls_core::{Config, Correlator, Effects, Position};
use toolcalls_model::Event;

/// What each pending call carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// `callId` (8 bytes) and `tool` (1 byte), no arguments: no checksum is computed.
    Bare,
    /// As `Bare`, plus `args: {"n": <int>}`: the correlator computes and indexes a checksum.
    Args,
    /// No `callId` (the call is keyed by its input position), `tool` and `args`.
    Idless,
}

impl Variant {
    pub fn parse(s: &str) -> Option<Variant> {
        match s {
            "bare" => Some(Variant::Bare),
            "args" => Some(Variant::Args),
            "idless" => Some(Variant::Idless),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Variant::Bare => "bare",
            Variant::Args => "args",
            Variant::Idless => "idless",
        }
    }
}

/// Sessions the calls are spread over (one correlation scope each).
const SESSIONS: usize = 1000;

fn event(variant: Variant, i: usize) -> Vec<u8> {
    let session = i % SESSIONS;
    let mut s = format!(
        r#"{{"v":1,"kind":"announce","source":"s","session":"s{session:04}","time":"2026-05-10T10:00:00.000Z","tool":"t""#
    );
    if variant != Variant::Idless {
        s.push_str(&format!(r#","callId":"c{i:07}""#));
    }
    if variant != Variant::Bare {
        s.push_str(&format!(r#","args":{{"n":{i}}}"#));
    }
    s.push('}');
    s.into_bytes()
}

/// Resident set size in bytes, from /proc/self/statm and the page size in /proc/self/auxv.
pub fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("reading /proc/self/statm");
    let pages: usize = statm
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("statm: resident pages");
    pages * page_size()
}

fn page_size() -> usize {
    const AT_PAGESZ: u64 = 6;
    let auxv = std::fs::read("/proc/self/auxv").unwrap_or_default();
    auxv.chunks_exact(16)
        .find_map(|pair| {
            let key = u64::from_ne_bytes(pair[..8].try_into().ok()?);
            let value = u64::from_ne_bytes(pair[8..].try_into().ok()?);
            (key == AT_PAGESZ).then_some(value as usize)
        })
        .unwrap_or(4096)
}

fn config(calls: usize) -> Config {
    Config {
        max_pending: calls + 1,
        ..Config::default()
    }
}

pub fn run(calls: usize, variant: Variant) {
    println!(
        "memory: variant={} calls={calls} sessions={SESSIONS} page={}B",
        variant.name(),
        page_size()
    );
    // The call's own payload, as the event carries it: call id, tool and the arguments' JSON text
    // (the session and source are shared by every call of a scope).
    let id_len = if variant == Variant::Idless { 0 } else { 8 };
    let args_text: usize = if variant == Variant::Bare {
        0
    } else {
        (0..calls).map(|i| format!(r#"{{"n":{i}}}"#).len()).sum()
    };
    let payload = (id_len + 1) as f64 + args_text as f64 / calls as f64;

    // `size_of::<Call>()` is private to the core; one call's estimate minus its strings gives it.
    let struct_size = {
        let mut c = Correlator::without_changelog(config(1));
        let mut fx = Effects::default();
        let e = Event::decode(&event(Variant::Bare, 0)).expect("valid event");
        c.apply(e, Position::new(0, 0), &mut fx);
        // key (a copy of the call id) + tool + call id
        c.pending_bytes() - (8 + 1 + 8)
    };

    let before = rss();
    let start = Instant::now();
    let mut c = Correlator::without_changelog(config(calls));
    let mut fx = Effects::default();
    for i in 0..calls {
        let e = Event::decode(&event(variant, i)).expect("valid event");
        c.apply(e, Position::new(0, i as i64), &mut fx);
        assert!(fx.records.is_empty(), "no call may close");
    }
    let elapsed = start.elapsed();
    let after = rss();
    assert_eq!(c.pending_calls(), calls);
    let held = after.saturating_sub(before) as f64 / calls as f64;
    let estimate = c.pending_bytes() as f64 / calls as f64;
    println!(
        "memory: {calls} pending calls applied in {:.2}s; RSS {:.1} MiB -> {:.1} MiB",
        elapsed.as_secs_f64(),
        before as f64 / 1048576.0,
        after as f64 / 1048576.0
    );
    // For reference, the arguments as a serde_json::Value alone in a vector (minus the vector's
    // 32 B slots), measured while the correlator is still alive so no freed memory is reused.
    let args_as_value = if variant == Variant::Bare {
        0.0
    } else {
        let before = rss();
        let values: Vec<serde_json::Value> =
            (0..calls).map(|i| serde_json::json!({ "n": i })).collect();
        let after = rss();
        let per = after.saturating_sub(before) as f64 / calls as f64
            - std::mem::size_of::<serde_json::Value>() as f64;
        drop(values);
        per
    };
    drop(c);
    println!("memory: size_of::<Call>() = {struct_size} B (from the estimate of one call)");
    if variant != Variant::Bare {
        println!("memory: the same args alone as serde_json::Value: {args_as_value:.0} B each");
    }
    println!(
        "memory: RESULT variant={} rss_per_call={held:.0}B payload={payload:.1}B overhead={:.0}B (target <= 400) pending_bytes_estimate={estimate:.0}B",
        variant.name(),
        held - payload
    );
}
