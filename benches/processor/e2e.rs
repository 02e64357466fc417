//! End to end through the broker: the processor against a plain consume → produce copy of the
//! same preloaded input, in the same run, exactly-once and at-least-once.
//!
//! Every run gets its own consumer group and output topics and reads the shared input topics from
//! the beginning. A run starts when its first input message is consumed (the copy notes it in its
//! loop; for the processor the bench polls `toolcalls_input_events_total` every millisecond) and
//! ends when an observer outside the run sees the group's committed offsets at the end of every
//! input partition (polled every 10 ms) — with transactions the offsets commit together with the
//! outputs, so that is the instant the last output became visible. Group join and the
//! processor's (empty) restore come before the start and are reported apart.

use crate::copy::{self, CopyPlan};
use crate::cpu::{self, Usage};
use crate::kafka::{self, metric, Ends, OffsetWatch, WAIT};
use prometheus::Registry;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use toolcalls_processor::metrics::sum;
use toolcalls_processor::Guarantee;

pub struct Plan {
    pub brokers: String,
    pub calls: usize,
    pub partitions: i32,
    pub rounds: usize,
    pub seed: u64,
    /// Correlation settings of the processor: the defaults, or graces of a month (`long`).
    pub long_graces: bool,
    /// The broker's process, for CPU accounting.
    pub broker_pid: Option<u32>,
    /// Runs to do (`copy-eos`, `processor-eos`, `copy-alo`, `processor-alo`); empty = all.
    pub only: Vec<String>,
    /// Print a timeline of each processor run in steps of this length (`--timeline MS`).
    pub timeline: Option<Duration>,
    /// The processor's `align_wait_ms`, when not its default (`--align-wait-ms`; 0 = arrival order).
    pub align_wait_ms: Option<u64>,
}

/// One measured run.
#[derive(Debug, Clone)]
pub struct Run {
    pub what: &'static str,
    pub events: usize,
    /// First input consumed → last output committed.
    pub busy: Duration,
    /// Start of the client → first input consumed (group join, restore).
    pub startup: Duration,
    pub note: String,
    /// CPU spent from the first input to the end.
    pub cpu: Usage,
}

impl Run {
    pub fn rate(&self) -> f64 {
        self.events as f64 / self.busy.as_secs_f64()
    }
}

/// The shared input.
pub struct Input {
    pub topics: [String; 2],
    pub ends: Ends,
    pub events: usize,
}

pub fn prepare(rt: &tokio::runtime::Runtime, plan: &Plan, events: &[Vec<u8>]) -> Input {
    let base = kafka::unique("bench-in");
    let topics = [format!("{base}.announce"), format!("{base}.completion")];
    for t in &topics {
        kafka::create_topic(rt, &plan.brokers, t, plan.partitions);
    }
    let bytes: usize = events.iter().map(Vec::len).sum();
    let took = kafka::preload(&plan.brokers, &topics, events);
    println!(
        "e2e: preloaded {} events ({:.1} MB, {:.0} B/event) into 2 x {} partitions in {:.2}s ({:.0} events/s, lz4, idempotent producer)",
        events.len(),
        bytes as f64 / 1e6,
        bytes as f64 / events.len() as f64,
        plan.partitions,
        took.as_secs_f64(),
        events.len() as f64 / took.as_secs_f64()
    );
    let ends = kafka::read_ends(&plan.brokers, &topics, plan.partitions, events.len());
    let per: Vec<String> = ends
        .0
        .iter()
        .map(|(t, p, o)| {
            let short = if t.ends_with(".announce") { "a" } else { "c" };
            format!("{short}{p}={o}")
        })
        .collect();
    println!("e2e: input ends {}", per.join(" "));
    Input {
        topics,
        ends,
        events: events.len(),
    }
}

pub fn copy_run(rt: &tokio::runtime::Runtime, plan: &Plan, input: &Input, eos: bool) -> Run {
    let group = kafka::unique(if eos {
        "bench-copy-eos"
    } else {
        "bench-copy-alo"
    });
    let output = format!("{group}.out");
    kafka::create_topic(rt, &plan.brokers, &output, plan.partitions);
    let cp = CopyPlan {
        brokers: plan.brokers.clone(),
        inputs: input.topics.clone(),
        output,
        group: group.clone(),
        partitions: plan.partitions,
        exactly_once: eos,
        commit_interval: Duration::from_millis(100),
        ends: input.ends.clone(),
    };
    let watch = OffsetWatch::new(&plan.brokers, &group, &input.ends);
    let first: Arc<OnceLock<Instant>> = Arc::new(OnceLock::new());
    let limit = Instant::now() + WAIT;
    let t0 = Instant::now();
    let worker = {
        let first = first.clone();
        std::thread::Builder::new()
            .name("copy".into())
            .spawn(move || copy::run(&cp, &first, limit))
            .expect("spawning the copy thread")
    };
    kafka::wait_for(
        "the copy's first message",
        Duration::from_millis(1),
        limit,
        || first.get().is_some() || worker.is_finished(),
    );
    let mark = cpu::mark(plan.broker_pid);
    // Until the observer sees the end, or the copy thread ends (a failure shows at once).
    let mut seen_end = false;
    let t = kafka::wait_for("the copy", Duration::from_millis(10), limit, || {
        seen_end = watch.at_end() == input.ends.total_partitions();
        seen_end || worker.is_finished()
    });
    let usage = cpu::since(&mark, plan.broker_pid);
    let stats = worker
        .join()
        .expect("the copy thread")
        .unwrap_or_else(|e| panic!("copy failed: {e}"));
    let done = if seen_end {
        t
    } else {
        watch.wait_done(Duration::from_millis(10), limit)
    };
    let first = *first.get().expect("first message");
    let self_done = stats.done.expect("copy finished");
    Run {
        what: if eos { "copy exactly-once" } else { "copy at-least-once" },
        events: input.events,
        busy: done - first,
        startup: first - t0,
        note: format!(
            "{} copied, {} batches, {:.2}s flushing+committing, own end {:+.0} ms from the observer's",
            stats.copied,
            stats.batches,
            stats.commit_time.as_secs_f64(),
            (self_done.saturating_duration_since(done).as_secs_f64()
                - done.saturating_duration_since(self_done).as_secs_f64())
                * 1000.0
        ),
        cpu: usage,
    }
}

pub fn processor_run(
    rt: &tokio::runtime::Runtime,
    plan: &Plan,
    input: &Input,
    guarantee: Guarantee,
) -> Run {
    let eos = guarantee == Guarantee::ExactlyOnce;
    let group = kafka::unique(if eos {
        "bench-proc-eos"
    } else {
        "bench-proc-alo"
    });
    let mut settings = kafka::settings(&plan.brokers, &group, &input.topics);
    settings.guarantee = guarantee;
    if let Some(ms) = plan.align_wait_ms {
        settings.align_wait_ms = ms;
    }
    if plan.long_graces {
        // Replaying a backlog, one input topic can run ahead of the other by more than the
        // default graces in event time; see README.md ("Event-time timeouts on a backlog").
        settings.core = toolcalls_core::Config {
            max_pending: toolcalls_core::Config::default().max_pending,
            ..crate::restore::pending_config()
        };
    }
    kafka::create_processor_topics(rt, &settings, plan.partitions);
    let watch = OffsetWatch::new(&plan.brokers, &group, &input.ends);
    let registry = Registry::new();
    let limit = Instant::now() + WAIT;
    let t0 = Instant::now();
    let running = rt
        .block_on(toolcalls_processor::start(settings, registry.clone()))
        .expect("starting the processor");
    let first = kafka::wait_for(
        "the processor's first input",
        Duration::from_millis(1),
        limit,
        || metric(&registry, "toolcalls_input_events_total") > 0.0,
    );
    let mark = cpu::mark(plan.broker_pid);
    let timeline = plan
        .timeline
        .map(|step| Timeline::start(step, registry.clone(), plan.broker_pid));
    let done = watch.wait_done(Duration::from_millis(10), limit);
    let usage = cpu::since(&mark, plan.broker_pid);
    if let Some(t) = timeline {
        t.finish();
    }
    let read = metric(&registry, "toolcalls_input_events_total");
    let records = metric(&registry, "toolcalls_output_records_total");
    let phases: Vec<String> = [
        "Succeeded",
        "Failed",
        "Denied",
        "Interrupted",
        "TimedOut",
        "Evicted",
        "Orphaned",
    ]
    .iter()
    .filter_map(|phase| {
        let n = sum(
            &registry,
            "toolcalls_output_records_total",
            &[("phase", phase)],
        );
        (n > 0.0).then(|| format!("{phase} {n:.0}"))
    })
    .collect();
    let dlq = metric(&registry, "toolcalls_dlq_messages_total");
    let committed = sum(
        &registry,
        "toolcalls_output_transactions_total",
        &[("result", "committed")],
    );
    let aborted = sum(
        &registry,
        "toolcalls_output_transactions_total",
        &[("result", "aborted")],
    );
    let (batches, batch_secs) =
        kafka::histogram(&registry, "toolcalls_processing_batch_duration_seconds");
    let (commits, commit_secs) =
        kafka::histogram(&registry, "toolcalls_output_commit_duration_seconds");
    let paused = metric(&registry, "toolcalls_consumer_partitions_paused");
    let (restores, restore_secs) =
        kafka::histogram(&registry, "toolcalls_restore_duration_seconds");
    kafka::stop(rt, running);
    assert_eq!(read as usize, input.events, "every input event read once");
    assert_eq!(dlq, 0.0, "no dead letters expected");
    assert_eq!(aborted, 0.0, "no aborted batch expected");
    Run {
        what: if eos {
            "processor exactly-once"
        } else {
            "processor at-least-once"
        },
        events: input.events,
        busy: done - first,
        startup: first - t0,
        note: format!(
            "{records:.0} records ({}), {batches} input batches taking {batch_secs:.2}s in partition tasks, {commits} commits taking {commit_secs:.2}s, {committed:.0} transactions committed, {paused:.0} partitions paused at the end; startup restored {restores} empty partitions in {restore_secs:.2}s (sum)",
            phases.join(", ")
        ),
        cpu: usage,
    }
}

pub fn run(rt: &tokio::runtime::Runtime, plan: &Plan) -> Vec<Run> {
    let events = crate::gen::events(plan.calls, plan.seed);
    let input = prepare(rt, plan, &events);
    drop(events);
    let mut runs = Vec::new();
    for round in 0..plan.rounds {
        // Alternate the order so neither side always runs on a fresher broker.
        let order: [(bool, bool); 4] = if round % 2 == 0 {
            [(false, true), (true, true), (false, false), (true, false)]
        } else {
            [(true, true), (false, true), (true, false), (false, false)]
        };
        for (processor, eos) in order {
            let name = match (processor, eos) {
                (false, true) => "copy-eos",
                (true, true) => "processor-eos",
                (false, false) => "copy-alo",
                (true, false) => "processor-alo",
            };
            if !plan.only.is_empty() && !plan.only.iter().any(|o| o == name) {
                continue;
            }
            let r = if processor {
                let g = if eos {
                    Guarantee::ExactlyOnce
                } else {
                    Guarantee::AtLeastOnce
                };
                processor_run(rt, plan, &input, g)
            } else {
                copy_run(rt, plan, &input, eos)
            };
            println!(
                "e2e: round {} {:<24} {:>8.0} events/s  ({} events in {:.2}s; startup {:.2}s; {})",
                round + 1,
                r.what,
                r.rate(),
                r.events,
                r.busy.as_secs_f64(),
                r.startup.as_secs_f64(),
                r.note
            );
            println!("e2e:         {}", r.cpu.describe(r.events));
            println!("e2e:         {}", r.cpu.describe_threads(r.events));
            runs.push(r);
        }
    }
    let mean = |what: &str| {
        let rates: Vec<f64> = runs
            .iter()
            .filter(|r| r.what == what)
            .map(Run::rate)
            .collect();
        rates.iter().sum::<f64>() / rates.len() as f64
    };
    if !plan.only.is_empty() {
        return runs;
    }
    for (p, c) in [
        ("processor exactly-once", "copy exactly-once"),
        ("processor at-least-once", "copy at-least-once"),
    ] {
        println!(
            "e2e: RESULT {p} {:.0} events/s vs {c} {:.0} events/s: ratio {:.2} (target >= 0.9; mean of {} rounds)",
            mean(p),
            mean(c),
            mean(p) / mean(c),
            plan.rounds
        );
    }
    println!(
        "e2e: RESULT processor exactly-once / copy at-least-once: ratio {:.2}",
        mean("processor exactly-once") / mean("copy at-least-once")
    );
    runs
}

/// A sampler of a processor run: every step, what the run read, wrote and committed, and where
/// the CPU went. It shows when the cores wait, and on what.
struct Timeline {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Timeline {
    fn start(step: Duration, registry: Registry, broker_pid: Option<u32>) -> Timeline {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            println!("e2e: timeline   ms   events  (completions)  records  commits  paused  me_cpu  broker_cpu  idle (CPU in cores)");
            let t0 = Instant::now();
            let sample = || {
                let committed = sum(
                    &registry,
                    "toolcalls_output_transactions_total",
                    &[("result", "committed")],
                );
                let completions = sum(
                    &registry,
                    "toolcalls_input_events_total",
                    &[("kind", "completion")],
                );
                (
                    metric(&registry, "toolcalls_input_events_total"),
                    metric(&registry, "toolcalls_output_records_total"),
                    committed,
                    completions,
                )
            };
            let mut last = (sample(), cpu::mark(broker_pid));
            while !flag.load(std::sync::atomic::Ordering::Acquire) {
                std::thread::sleep(step);
                let now = (sample(), cpu::mark(broker_pid));
                let usage = cpu::since(&last.1, broker_pid);
                let secs = usage.wall.as_secs_f64();
                println!(
                    "e2e: timeline {:5} {:8.0} ({:8.0}) {:8.0} {:8.0} {:7.0} {:7.2} {:11.2} {:5.2}",
                    t0.elapsed().as_millis(),
                    now.0 .0 - last.0 .0,
                    now.0 .3 - last.0 .3,
                    now.0 .1 - last.0 .1,
                    now.0 .2 - last.0 .2,
                    metric(&registry, "toolcalls_consumer_partitions_paused"),
                    usage.me / secs,
                    usage.broker / secs,
                    usage.idle / secs,
                );
                last = now;
            }
        });
        Timeline { stop, thread }
    }

    fn finish(self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        let _ = self.thread.join();
    }
}
