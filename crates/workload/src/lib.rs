//! Seeded mixed workloads of v1 events, with the ground truth beside them.
//!
//! What a ledger sees in production, in one reproducible input: many sessions interleaved, most
//! calls with native ids and some without (their results carry the tool and arguments, as hook
//! payloads do), identical id-less calls in one turn, announces delivered twice (some copies after
//! the result), results delivered twice, results before their announce, and — with
//! [`Spec::max_disorder_ms`] — arrival order that differs from event time within a bound. Every
//! call is completed, so a correct ledger holds exactly one `Succeeded` or `Failed` record per call
//! of [`Workload::truth`] and nothing else.

mod jitter;

pub use jitter::{delay_results, disorder_ms};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use toolcalls_model::{Phase, ToolCallRecord};

/// What to generate. [`Spec::default`] is the mix of docs/ARCHITECTURE.md, "Repeats".
#[derive(Debug, Clone)]
pub struct Spec {
    pub seed: u64,
    /// Calls to make.
    pub calls: usize,
    /// Sessions they are spread over (all of them interleaved).
    pub sessions: usize,
    /// Percent of calls without a native id.
    pub idless: u64,
    /// Percent of id-less calls that repeat the tool and arguments of the previous id-less call of
    /// their turn (a moment later, with the same result).
    pub identical: u64,
    /// Percent of announces delivered twice; half of the copies come after the result.
    pub announce_twice: u64,
    /// Percent of results delivered twice.
    pub result_twice: u64,
    /// Percent of results delivered before their announce.
    pub early: u64,
    /// Delay each result's delivery by up to this many milliseconds of event time (its timestamp
    /// intact), so that it may arrive after later announces of its scope. 0: none.
    pub max_disorder_ms: u64,
}

impl Default for Spec {
    fn default() -> Self {
        Spec {
            seed: 1,
            calls: 2_000,
            sessions: 40,
            idless: 20,
            identical: 15,
            announce_twice: 10,
            result_twice: 5,
            early: 5,
            max_disorder_ms: 0,
        }
    }
}

/// One call as it really happened.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TruthCall {
    pub session: String,
    pub call_id: Option<String>,
    pub tool: String,
    /// The arguments' JSON text, as the announce carries it.
    pub input: String,
    /// The result's JSON text, as the completion carries it.
    pub output: String,
    pub failed: bool,
    /// The announce's event time, in milliseconds since the Unix epoch.
    pub created_ms: i64,
}

/// The generated input and its ground truth.
#[derive(Debug, Clone)]
pub struct Workload {
    /// v1 events as JSON lines, in delivery order.
    pub lines: Vec<String>,
    /// Every call, in the order they were made.
    pub truth: Vec<TruthCall>,
}

/// A tiny deterministic generator (xorshift64), so a seed always gives the same workload.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// 2026-05-10T10:00:00Z, where generated sessions start.
const BASE_MS: i64 = 1_778_407_200_000;

const TOOLS: [&str; 5] = ["Read", "Bash", "Grep", "Edit", "WebFetch"];

/// Per session: its clock, turn and last id-less call (for identical repeats).
struct Session {
    name: String,
    clock: i64,
    turn: u32,
    calls_in_turn: u32,
    last_idless: Option<(String, Value, String, bool)>,
}

/// A delivery: when it is delivered (sort key), then the line.
struct Delivery {
    at: (i64, u64),
    line: String,
}

/// Generates the workload `spec` describes.
pub fn generate(spec: &Spec) -> Workload {
    let mut rng = Rng::new(spec.seed);
    let mut sessions: Vec<Session> = (0..spec.sessions.max(1))
        .map(|i| Session {
            name: format!("session-{i:03}"),
            clock: BASE_MS + i as i64 * 7,
            turn: 0,
            calls_in_turn: 0,
            last_idless: None,
        })
        .collect();
    let mut truth = Vec::with_capacity(spec.calls);
    let mut out: Vec<Delivery> = Vec::new();
    let mut tiebreak = 0u64;
    let mut deliver = |out: &mut Vec<Delivery>, at: i64, line: String| {
        tiebreak += 1;
        out.push(Delivery {
            at: (at, tiebreak),
            line,
        });
    };
    for i in 0..spec.calls {
        let s = &mut sessions[rng.below(spec.sessions.max(1) as u64) as usize];
        s.clock += 20 + rng.below(400) as i64;
        if s.calls_in_turn >= 2 + rng.below(6) as u32 {
            s.turn += 1;
            s.calls_in_turn = 0;
            s.last_idless = None;
        }
        s.calls_in_turn += 1;
        let turn = format!("turn-{}", s.turn);
        let with_id = !rng.chance(spec.idless);
        let (tool, args, output, failed) = match (&s.last_idless, with_id) {
            (Some(last), false) if rng.chance(spec.identical) => last.clone(),
            _ => {
                let tool = TOOLS[rng.below(TOOLS.len() as u64) as usize].to_owned();
                let args = args_of(&tool, i, &mut rng);
                let failed = rng.chance(5);
                let output = serde_json::to_string(&result_of(&tool, i, failed)).expect("JSON");
                (tool, args, output, failed)
            }
        };
        if !with_id {
            s.last_idless = Some((tool.clone(), args.clone(), output.clone(), failed));
        }
        let created = s.clock;
        let done_at = created + 30 + rng.below(600) as i64;
        let call_id = with_id.then(|| format!("toolu_{:016x}", rng.next_u64()));
        let input = serde_json::to_string(&args).expect("JSON");
        let mut announce = json!({
            "v": 1, "kind": "announce", "source": "claude-code", "session": s.name,
            "turn": turn, "time": rfc3339(created), "tool": tool, "args": args,
        });
        let mut completion = json!({
            "v": 1, "kind": "completion", "source": "claude-code", "session": s.name,
            "turn": turn, "time": rfc3339(done_at),
            "result": serde_json::from_str::<Value>(&output).expect("JSON"), "isError": failed,
        });
        match &call_id {
            Some(id) => {
                announce["callId"] = json!(id);
                completion["callId"] = json!(id);
            }
            None => {
                completion["tool"] = json!(tool);
                completion["args"] = args.clone();
            }
        }
        let announce = announce.to_string();
        let completion = completion.to_string();
        // Identical id-less calls get their results in call order: which of two identical calls
        // a result belongs to is then the same for every reader.
        let identical = !with_id
            && truth.iter().rev().take(8).any(|t: &TruthCall| {
                t.session == s.name && t.call_id.is_none() && t.input == input && t.tool == tool
            });
        let early = !identical && rng.chance(spec.early);
        let delay = if identical {
            0
        } else {
            rng.below(spec.max_disorder_ms + 1) as i64
        };
        let result_at = if early { created - 1 } else { done_at + delay };
        deliver(&mut out, created, announce.clone());
        deliver(&mut out, result_at, completion.clone());
        if rng.chance(spec.announce_twice) {
            let copy_at = if rng.chance(50) {
                done_at + delay + 1 + rng.below(2_000) as i64
            } else {
                created + rng.below((done_at - created).max(1) as u64) as i64
            };
            deliver(&mut out, copy_at, announce);
        }
        if rng.chance(spec.result_twice) {
            deliver(
                &mut out,
                result_at.max(created) + 1 + rng.below(3_000) as i64,
                completion,
            );
        }
        truth.push(TruthCall {
            session: s.name.clone(),
            call_id,
            tool,
            input,
            output,
            failed,
            created_ms: created,
        });
    }
    out.sort_by_key(|d| d.at);
    Workload {
        lines: out.into_iter().map(|d| d.line).collect(),
        truth,
    }
}

/// The call a record stands for, in the ground truth's terms.
fn as_truth(r: &ToolCallRecord) -> TruthCall {
    TruthCall {
        session: r.metadata.session.to_string(),
        call_id: r.stream_id.as_ref().map(|id| id.to_string()),
        tool: r.spec.tool_ref.as_ref().map_or("", |t| &t.name).to_owned(),
        input: r.spec.input.as_ref().map_or("", |j| j.as_str()).to_owned(),
        output: r
            .status
            .output
            .as_ref()
            .map_or("", |j| j.as_str())
            .to_owned(),
        failed: r.status.phase == Phase::Failed,
        created_ms: r.created_at.millis(),
    }
}

/// Compares records with the truth; the message lists what differs.
pub fn check(records: &[ToolCallRecord], truth: &[TruthCall]) -> Result<(), String> {
    let mut problems = Vec::new();
    for r in records {
        if !matches!(r.status.phase, Phase::Succeeded | Phase::Failed) {
            problems.push(format!(
                "record {} is {:?}: {:?}",
                r.metadata.name, r.status.phase, r.status.reason
            ));
        }
    }
    let mut want: BTreeMap<TruthCall, i32> = BTreeMap::new();
    for t in truth {
        *want.entry(t.clone()).or_default() += 1;
    }
    for r in records {
        *want.entry(as_truth(r)).or_default() -= 1;
    }
    for (call, n) in want.into_iter().filter(|(_, n)| *n != 0) {
        let what = if n > 0 { "missing" } else { "extra" };
        problems.push(format!("{what} ×{}: {call:?}", n.abs()));
    }
    match problems.len() {
        0 => Ok(()),
        n => Err(format!(
            "{n} problems in {} records for {} calls:\n{}",
            records.len(),
            truth.len(),
            problems[..n.min(20)].join("\n")
        )),
    }
}

fn args_of(tool: &str, i: usize, rng: &mut Rng) -> Value {
    let n = rng.below(1_000_000);
    match tool {
        "Read" => json!({"file_path": format!("/repo/src/module_{n}.rs"), "limit": 200}),
        "Bash" => json!({"command": format!("cargo test case_{n}"), "timeout": 120000}),
        "Grep" => json!({"pattern": format!("fn handle_{n}"), "path": "/repo"}),
        "Edit" => {
            json!({"file_path": format!("/repo/lib_{n}.rs"), "old_string": "a", "new_string": format!("b{i}")})
        }
        _ => json!({"url": format!("https://docs.example.com/{n}"), "prompt": "Summarise"}),
    }
}

fn result_of(tool: &str, i: usize, failed: bool) -> Value {
    if failed {
        json!(format!("{tool} failed: error {i}"))
    } else {
        json!(format!("{tool} output of call {i}\nline 2\nline 3"))
    }
}

/// Milliseconds since the epoch as RFC 3339 UTC with milliseconds.
pub fn rfc3339(ms: i64) -> String {
    let (secs, milli) = (ms.div_euclid(1000), ms.rem_euclid(1000));
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    )
}

/// Howard Hinnant's days-from-civil inverse.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_as_rfc3339() {
        assert_eq!(rfc3339(BASE_MS), "2026-05-10T10:00:00.000Z");
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
    }

    #[test]
    fn a_seed_gives_one_workload_with_the_mix_asked_for() {
        let spec = Spec::default();
        let a = generate(&spec);
        let b = generate(&spec);
        assert_eq!(a.lines, b.lines);
        assert_eq!(a.truth, b.truth);
        assert_ne!(
            generate(&Spec {
                seed: 2,
                ..spec.clone()
            })
            .lines,
            a.lines
        );
        let calls = a.truth.len();
        assert_eq!(calls, spec.calls);
        let idless = a.truth.iter().filter(|t| t.call_id.is_none()).count();
        assert!(
            (calls * 15 / 100..calls * 25 / 100).contains(&idless),
            "{idless}"
        );
        // Two events per call, plus the copies.
        let extra = a.lines.len() - 2 * calls;
        assert!(
            (calls * 10 / 100..calls * 20 / 100).contains(&extra),
            "{extra}"
        );
        let mut identical = a.truth.clone();
        identical.sort_by(|x, y| (&x.session, &x.input).cmp(&(&y.session, &y.input)));
        assert!(identical
            .windows(2)
            .any(|w| w[0].session == w[1].session && w[0].input == w[1].input));
    }
}
