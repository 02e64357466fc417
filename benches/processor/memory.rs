//! Memory per pending call: resident set size before and after one correlator holds `calls`
//! pending calls with tiny payloads, minus the payload bytes, against the correlator's own
//! estimate (`Correlator::pending_bytes`), which the `toolcalls_state_pending_bytes` gauge shows.
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
    /// The announces of the processor bench's input (`gen.rs`): 100–200 B of arguments, a turn,
    /// 80 % with a `callId`, 200 sessions per chunk. Not a target; it checks the estimate against
    /// calls shaped like real ones.
    Mix,
}

impl Variant {
    pub fn parse(s: &str) -> Option<Variant> {
        match s {
            "bare" => Some(Variant::Bare),
            "args" => Some(Variant::Args),
            "idless" => Some(Variant::Idless),
            "mix" => Some(Variant::Mix),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Variant::Bare => "bare",
            Variant::Args => "args",
            Variant::Idless => "idless",
            Variant::Mix => "mix",
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
        max_pending_bytes: usize::MAX,
        ..Config::default()
    }
}

pub fn run(calls: usize, variant: Variant) {
    if variant == Variant::Mix {
        return run_mix(calls);
    }
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

    // The core's estimate for one call of this variant alone (its allocations and its share of
    // the indexes; see `pending_bytes` in crates/core).
    let one_call_estimate = {
        let mut c = Correlator::without_changelog(config(1));
        let mut fx = Effects::default();
        let e = Event::decode(&event(variant, 0)).expect("valid event");
        c.apply(e, Position::new(0, 0), &mut fx);
        c.pending_bytes()
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
    println!("memory: pending_bytes() of a single such call: {one_call_estimate} B");
    if variant != Variant::Bare {
        println!("memory: the same args alone as serde_json::Value: {args_as_value:.0} B each");
    }
    println!(
        "memory: RESULT variant={} rss_per_call={held:.0}B payload={payload:.1}B overhead={:.0}B (target <= 400) pending_bytes_estimate={estimate:.0}B ({:+.1}% of rss_per_call)",
        variant.name(),
        held - payload,
        100.0 * (estimate - held) / held
    );
}

/// [`Variant::Mix`]: the same measurement over realistic announces. The input is generated before
/// the first reading, so it is not counted; the payload of each pending call is its id, tool,
/// turn and argument text (repeated announces are not new calls and add nothing).
fn run_mix(calls: usize) {
    // Generated on another thread: glibc gives it its own arena, so the memory the generator frees
    // is not reused by the correlator below (which would hide it from the RSS reading).
    let announces = std::thread::spawn(move || crate::gen::announces(calls, 42))
        .join()
        .expect("generating the input");
    println!(
        "memory: variant=mix calls={calls} announces={} page={}B",
        announces.len(),
        page_size()
    );
    let before = rss();
    let start = Instant::now();
    // Month-long graces: `mix` spaces calls a second apart, so the default timeout would close them.
    let mut c = Correlator::without_changelog(crate::restore::pending_config());
    let mut fx = Effects::default();
    let mut payload = 0usize;
    for (i, bytes) in announces.iter().enumerate() {
        let e = Event::decode(bytes).expect("valid event");
        let mut own = e.call_id.as_ref().map_or(0, |id| id.as_str().len())
            + e.turn.as_ref().map_or(0, |t| t.as_str().len());
        if let toolcalls_model::EventBody::Announce(a) = &e.body {
            own += a.tool.len() + a.args.as_ref().map_or(0, |j| j.as_str().len());
        }
        if c.apply(e, Position::new(0, i as i64), &mut fx) == toolcalls_core::Outcome::Pending {
            payload += own;
        }
        assert!(fx.records.is_empty(), "no call may close");
    }
    let elapsed = start.elapsed();
    let after = rss();
    let pending = c.pending_calls();
    let held = after.saturating_sub(before) as f64 / pending as f64;
    let estimate = c.pending_bytes() as f64 / pending as f64;
    let payload = payload as f64 / pending as f64;
    println!(
        "memory: {pending} pending calls applied in {:.2}s; RSS {:.1} MiB -> {:.1} MiB",
        elapsed.as_secs_f64(),
        before as f64 / 1048576.0,
        after as f64 / 1048576.0
    );
    drop(c);
    println!(
        "memory: RESULT variant=mix rss_per_call={held:.0}B payload={payload:.1}B overhead={:.0}B pending_bytes_estimate={estimate:.0}B ({:+.1}% of rss_per_call)",
        held - payload,
        100.0 * (estimate - held) / held
    );
}
