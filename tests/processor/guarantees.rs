//! System tests of the guarantees: the binary driven as an operator drives it, against the real
//! broker, `toolcalls audit` as the judge (issue 15, point 5; docs/OPERATIONS.md, "Tests").
//!
//! - **Kills.** Two instances of one group on four partitions; a seeded mixed workload
//!   (`toolcalls-workload`) published in slices while `kill -9` hits an instance that owns a
//!   partition, at random moments, each followed by a restart.
//! - **Rebalances.** One instance stays; two more join and leave (SIGTERM) at random moments
//!   while the traffic flows.
//!
//!   After either, once every input is committed: the records, less the byte-identical copies
//!   Tansu shows of aborted batches, are the ground truth exactly; nothing is dead-lettered;
//!   nothing is pending but the calls the workload makes impossible to tell apart
//!   ([`distinguishable`]); then, the instances stopped, the changelog folded at the committed
//!   offsets (what a restore rebuilds) holds exactly what they held pending, and `toolcalls
//!   audit` accounts for every input and finds no conflicting copy. Graceful hand-overs abort
//!   nothing, so where no instance reported an aborted batch every record appears once.
//! - **Byte cap.** A flood of distinct pending calls with large arguments against one instance
//!   with a small `--max-pending-bytes`: its RSS stays under the baseline plus the cap plus the
//!   stated bounds of its buffers, it stays up, the oldest calls close as `Evicted` (for
//!   `max_pending_bytes`), and ordinary calls published after the flood still complete.
//!
//! The seed (`TOOLCALLS_CHAOS_SEED`, else taken from the clock) is printed; the counts are knobs
//! (`TOOLCALLS_CHAOS_KILLS`, `TOOLCALLS_CHAOS_REBALANCES`, `TOOLCALLS_CHAOS_CALLS`,
//! `TOOLCALLS_FLOOD_CALLS`, …; see [`knob`] calls) so that a longer run is one command. Every wait
//! is bounded; the only sleeps are the random pauses of the chaos schedule itself.

use crate::cluster::*;
use crate::harness::*;
use rdkafka::message::Message;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use toolcalls_model::{Event, Phase, ToolCallRecord};
use toolcalls_workload::{check, generate, Rng, Spec, TruthCall};

/// The seeded mixed workload (docs/ARCHITECTURE.md, "Repeats": ids on most calls, identical
/// id-less calls, announces and results delivered twice, results before their announce, many
/// sessions), decoded.
fn workload(seed: u64, calls: usize) -> (Vec<Event>, Vec<TruthCall>, Vec<TruthCall>) {
    let w = generate(&Spec {
        seed,
        calls,
        sessions: 48,
        ..Spec::default()
    });
    let events = w
        .lines
        .iter()
        .map(|l| Event::decode(l.as_bytes()).expect("a generated event"))
        .collect();
    let (truth, apart) = distinguishable(&w.lines, &w.truth);
    if !apart.is_empty() {
        eprintln!(
            "seed {seed}: {} calls of the workload cannot get their result (an identical id-less \
             call's result is the same event), left out of the comparison: {apart:?}",
            apart.len()
        );
    }
    (events, truth, apart)
}

/// The ground truth, checked once every input is committed and before the instances stop: the
/// records read back, less the byte-identical copies Tansu shows of aborted batches, are the
/// workload's calls exactly (`truth`), nothing was dead-lettered, and the instances hold nothing
/// pending but the calls that cannot get their result (`apart`). On a difference it prints, for
/// each session concerned, its inputs no record lists, what the running instances hold pending
/// and what they logged about its partition. Returns the identical copies dropped and what the
/// instances hold pending.
fn check_ledger(
    test: &str,
    seed: u64,
    s: &toolcalls_processor::Settings,
    truth: &[TruthCall],
    apart: &[TruthCall],
    live: &[&Proc],
) -> (usize, BTreeMap<String, serde_json::Value>) {
    let msgs = read_to_end(&s.topics.records);
    let (records, copies) = without_identical_copies(&msgs);
    if let Err(e) = check(&records, truth) {
        let logs: Vec<_> = live.iter().map(|p| &p.log).collect();
        let report: Vec<String> = sessions_off_truth(&records, truth)
            .iter()
            .take(3)
            .map(|session| diagnose(s, session, &records, &logs))
            .collect();
        panic!(
            "{test} (seed {seed}): the ledger is not the ground truth: {e}\n{}",
            report.join("\n")
        );
    }
    let dlq = read_to_end(&s.topics.dlq);
    assert!(
        dlq.is_empty(),
        "{test} (seed {seed}): good input was dead-lettered: {:?}",
        dlq.first().map(|m| &m.headers)
    );
    // Every call completes: nothing stays pending but the calls that cannot get their result.
    // (A repeat taken for a new call would wait here, and time out later as a spurious record.)
    let addrs: Vec<_> = live
        .iter()
        .filter_map(|p| logged_api_addr(&p.log))
        .collect();
    let sessions = truth.iter().map(|t| t.session.clone()).collect();
    let held = live_pending(&addrs, &sessions);
    let expected = |v: &serde_json::Value| {
        apart.iter().any(|a| {
            v["metadata"]["session"] == a.session.as_str()
                && v["spec"]["toolRef"]["name"] == a.tool.as_str()
                && serde_json::from_str::<serde_json::Value>(&a.input)
                    .ok()
                    .as_ref()
                    == Some(&v["spec"]["input"])
        })
    };
    let unexpected: Vec<String> = held
        .values()
        .filter(|v| !expected(v))
        .map(|v| v.to_string())
        .collect();
    if !unexpected.is_empty() || held.len() != apart.len() {
        let logs: Vec<_> = live.iter().map(|p| &p.log).collect();
        let sessions: std::collections::BTreeSet<&str> = held
            .values()
            .filter(|v| !expected(v))
            .filter_map(|v| v["metadata"]["session"].as_str())
            .collect();
        let report: Vec<String> = sessions
            .iter()
            .take(3)
            .map(|session| diagnose(s, session, &records, &logs))
            .collect();
        panic!(
            "{test} (seed {seed}): {} pending calls or results, {} expected; not expected:\n{}\n{}",
            held.len(),
            apart.len(),
            unexpected.join("\n"),
            report.join("\n")
        );
    }
    (copies, held)
}

/// The judge, on the quiet pipeline (every input committed, the instances stopped): what a
/// restore would rebuild from the changelog is what the instances held pending (`held`), and
/// `toolcalls audit` accounts for every input, finds no conflicting copy and counts the identical
/// copies the test counted.
fn audit_ledger(
    test: &str,
    seed: u64,
    s: &toolcalls_processor::Settings,
    partitions: i32,
    held: &BTreeMap<String, serde_json::Value>,
    copies: usize,
) {
    let off = changelog_disagrees(s, partitions, held);
    assert!(
        off.is_empty(),
        "{test} (seed {seed}): the changelog and the instances disagree on what is pending:\n{}",
        off.join("\n")
    );
    let audit = audit(s);
    eprintln!("{test}: {}", audit.show());
    assert_eq!(
        audit.code,
        0,
        "{test} (seed {seed}): the audit found discrepancies\n{}",
        audit.show()
    );
    assert!(
        audit.stdout.contains("ok: every input is accounted for"),
        "{}",
        audit.show()
    );
    assert_eq!(
        summary_count(&audit, "outputs:", "identical copies"),
        Some(copies as u64),
        "the audit and the test count the identical copies differently\n{}",
        audit.show()
    );
}

/// A restarted instance needs the group to notice its killed predecessor: at most the session
/// timeout (6 s in the harness's settings), then a restore. The final drain gets this long.
const DRAIN: Duration = Duration::from_secs(120);

#[test]
fn kill_9_at_random_moments_loses_nothing() {
    let started = Instant::now();
    let seed = chaos_seed();
    let kills: usize = knob("TOOLCALLS_CHAOS_KILLS", 10);
    let calls: usize = knob("TOOLCALLS_CHAOS_CALLS", 3_000);
    // A kill comes 0 to this many milliseconds after its victim was seen working (owning a
    // restored partition): while it reads, correlates, writes or commits, as it falls.
    let max_pause: u64 = knob("TOOLCALLS_CHAOS_MAX_PAUSE_MS", 1_500);
    eprintln!(
        "kills: seed {seed} (TOOLCALLS_CHAOS_SEED={seed} replays it), {kills} kills, {calls} calls"
    );
    let mut rng = Rng::new(seed);
    let mut s = settings("chaos-kill");
    // The group notices a killed member when its session times out; the partitions it held
    // wait that long for a new owner. Shorter than the harness's 6 s, to fit more kills in.
    s.kafka = vec![
        ("session.timeout.ms".into(), SESSION_MS.to_string()),
        ("heartbeat.interval.ms".into(), "250".into()),
    ];
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(create_topics(&s, 4));
    let (events, truth, apart) = workload(seed, calls);
    // A slice of traffic before every kill, so that the victim has input to work on.
    let parts = slices(&events, kills + 1);
    let ids = ["k0", "k1"];
    let mut procs = ids.map(|id| Proc::spawn(&s, id, None));
    let mut publisher = Publisher::default();
    let mut next_slice = 0;
    for k in 0..kills {
        if let Some(part) = parts.get(next_slice) {
            publisher.publish(&s, part);
            next_slice += 1;
        }
        // The victim: an instance that owns a restored partition (both, after the group moved
        // past the last kill; else whichever does — wait for one).
        let working = |p: &Proc| count_lines(&p.log, "partition restored and resumed") > 0;
        wait_until("an instance to own a restored partition", || {
            procs.iter().any(working)
        });
        let candidates: Vec<usize> = (0..2).filter(|&i| working(&procs[i])).collect();
        let victim = candidates[rng.below(candidates.len() as u64) as usize];
        let pause = rng.below(max_pause + 1);
        std::thread::sleep(Duration::from_millis(pause));
        let last = procs[victim]
            .log
            .lock()
            .unwrap()
            .last()
            .map(|l| plain(l))
            .unwrap_or_default();
        let behind = publisher.published as i64 - committed_inputs(&s);
        procs[victim].kill();
        eprintln!(
            "kill {}: {} {pause} ms after it was seen working, {behind} inputs not yet committed; its last log line: {}",
            k + 1,
            ids[victim],
            last.chars().take(160).collect::<String>()
        );
        procs[victim] = Proc::spawn(&s, ids[victim], None);
    }
    for part in &parts[next_slice..] {
        publisher.publish(&s, part);
    }
    assert_eq!(publisher.published, events.len());
    wait_committed(&s, events.len(), DRAIN, &[&procs[0], &procs[1]]);
    let drained = started.elapsed();
    let (copies, held) = check_ledger("kills", seed, &s, &truth, &apart, &[&procs[0], &procs[1]]);
    for (p, id) in procs.iter_mut().zip(ids) {
        let status = p.terminate();
        assert!(
            status.success(),
            "{id} did not shut down cleanly ({status}):\n{}",
            tail(&p.log, 50)
        );
    }
    audit_ledger("kills", seed, &s, 4, &held, copies);
    eprintln!(
        "kills: seed {seed}: {kills} kills, {} events of {calls} calls committed after {:.1} s, \
         {copies} identical copies of aborted batches; test took {:.1} s",
        events.len(),
        drained.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
}

/// The group session timeout of the chaos tests (ms).
const SESSION_MS: u64 = 3_000;

#[test]
fn joins_and_leaves_while_traffic_flows_lose_nothing() {
    let started = Instant::now();
    let seed = chaos_seed();
    let changes: usize = knob("TOOLCALLS_CHAOS_REBALANCES", 10);
    let calls: usize = knob("TOOLCALLS_CHAOS_CALLS", 3_000);
    let max_pause: u64 = knob("TOOLCALLS_CHAOS_MAX_PAUSE_MS", 1_000);
    eprintln!(
        "rebalances: seed {seed} (TOOLCALLS_CHAOS_SEED={seed} replays it), at least {changes} joins and leaves, {calls} calls"
    );
    let mut rng = Rng::new(seed ^ 0x5eed);
    let mut s = settings("chaos-rebalance");
    s.kafka = vec![
        ("session.timeout.ms".into(), SESSION_MS.to_string()),
        ("heartbeat.interval.ms".into(), "250".into()),
    ];
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(create_topics(&s, 4));
    let (events, truth, apart) = workload(seed, calls);
    let parts = slices(&events, 6);
    let mut stable = Proc::spawn(&s, "r0", None);
    stable.wait_for_line("processor started");
    let ids = ["r1", "r2"];
    let mut extra: [Option<Proc>; 2] = [None, None];
    let mut aborted = 0.0;
    let mut publisher = Publisher::default();
    let (mut joins, mut leaves) = (0, 0);
    let mut next_slice = 0;
    while joins + leaves < changes {
        // Slice i goes out before change i * changes / slices: traffic all through the run.
        while next_slice < parts.len() && next_slice * changes / parts.len() <= joins + leaves {
            publisher.publish(&s, parts[next_slice]);
            next_slice += 1;
        }
        std::thread::sleep(Duration::from_millis(rng.below(max_pause + 1)));
        let which = rng.below(2) as usize;
        let step = Instant::now();
        match extra[which].take() {
            Some(mut p) => {
                if let Some(addr) = logged_http_addr(&p.log) {
                    aborted += metric(
                        &metrics_page(addr),
                        "toolcalls_output_transactions_total{result=\"aborted\"}",
                    );
                }
                let status = p.terminate();
                assert!(
                    status.success(),
                    "{} did not leave cleanly ({status}):\n{}",
                    ids[which],
                    tail(&p.log, 50)
                );
                leaves += 1;
                eprintln!(
                    "leave: {} (SIGTERM), {:.1} s",
                    ids[which],
                    step.elapsed().as_secs_f64()
                );
            }
            None => {
                let p = Proc::spawn(&s, ids[which], None);
                // Joined: it owns a partition, restored and reading.
                wait_until(
                    &format!("{} to own a restored partition", ids[which]),
                    || count_lines(&p.log, "partition restored and resumed") > 0,
                );
                joins += 1;
                eprintln!(
                    "join: {}, restored a partition after {:.1} s",
                    ids[which],
                    step.elapsed().as_secs_f64()
                );
                extra[which] = Some(p);
            }
        }
    }
    for (p, id) in extra.iter_mut().zip(ids) {
        if let Some(p) = p.as_mut() {
            let status = p.terminate();
            assert!(status.success(), "{id} did not leave cleanly ({status})");
            leaves += 1;
        }
    }
    for part in &parts[next_slice..] {
        publisher.publish(&s, part);
    }
    assert_eq!(publisher.published, events.len());
    wait_committed(&s, events.len(), DRAIN, &[&stable]);
    let page = metrics_page(logged_http_addr(&stable.log).expect("r0's HTTP address"));
    aborted += metric(
        &page,
        "toolcalls_output_transactions_total{result=\"aborted\"}",
    );
    let rebalances = metric(&page, "toolcalls_group_rebalances_total");
    let (copies, held) = check_ledger("rebalances", seed, &s, &truth, &apart, &[&stable]);
    let status = stable.terminate();
    assert!(status.success(), "r0 did not shut down cleanly ({status})");
    audit_ledger("rebalances", seed, &s, 4, &held, copies);
    eprintln!(
        "rebalances: seed {seed}: {joins} joins, {leaves} leaves ({rebalances} assignment changes seen by r0), \
         {aborted} aborted batches, {copies} identical copies; test took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    // Graceful hand-overs commit before they give partitions up: without an aborted batch no
    // record may show twice, even on a broker that shows aborted data.
    if aborted == 0.0 {
        assert_eq!(copies, 0, "records were published more than once");
    }
}

/// A flood announce: call `i` of the flood, with `bytes` of arguments of its own.
fn flood_announce(i: usize, bytes: usize) -> (String, String) {
    let session = format!("flood-s{}", i % 8);
    let line = format!("line {i} of a file read by a flood call, padded to its size\n");
    let content: String = line.repeat(bytes / line.len() + 1)[..bytes].to_owned();
    let time = toolcalls_workload::rfc3339(FLOOD_T0 + i as i64);
    let event = serde_json::json!({
        "v": 1, "kind": "announce", "source": "flood", "session": session,
        "callId": format!("flood-{i}"), "time": time, "tool": "Write",
        "args": {"file_path": format!("/flood/{i}.txt"), "content": content},
    });
    (session, event.to_string())
}

/// 2026-05-10T00:00:00Z: the flood's first event time.
const FLOOD_T0: i64 = 1_778_371_200_000;

#[test]
fn a_flood_of_large_pending_calls_stays_under_the_byte_cap() {
    let started = Instant::now();
    let flood: usize = knob("TOOLCALLS_FLOOD_CALLS", 5_000);
    let arg_bytes: usize = knob("TOOLCALLS_FLOOD_ARG_BYTES", 20_000);
    let cap: u64 = knob("TOOLCALLS_FLOOD_CAP_BYTES", 16 << 20);
    let inflight: u64 = knob("TOOLCALLS_FLOOD_INFLIGHT_BYTES", 2 << 20);
    let prefetch_kib: u64 = knob("TOOLCALLS_FLOOD_PREFETCH_KIB", 1024);
    let s = settings("bytecap");
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(create_topics(&s, 1));
    let mut args = vec![
        "--max-pending-bytes".to_owned(),
        cap.to_string(),
        "--max-inflight-bytes".into(),
        inflight.to_string(),
        "--kafka".into(),
        format!("queued.max.messages.kbytes={prefetch_kib}"),
    ];
    // The ids of closed calls remembered for de-duplication are bounded by their number
    // (`--max-remembered`, 200,000 per partition by default), not by the byte cap: a few hundred
    // bytes each, they would add tens of MiB over a long flood. Kept small here, so that what
    // the test bounds is the pending state.
    args.extend(["--max-remembered".to_owned(), "1000".into()]);
    let mut node = Node::spawn(&s, "b0", &args);
    node.wait_for_line("partition restored and resumed");
    let pid = node.child.id();
    let baseline = rss_bytes(pid).expect("the processor's RSS");

    // The flood, published from a thread while this one samples the processor's memory.
    let publisher = {
        let topic = s.topics.announce.clone();
        std::thread::spawn(move || {
            use rdkafka::producer::{BaseRecord, Producer};
            let p = producer();
            for i in 0..flood {
                let (key, payload) = flood_announce(i, arg_bytes);
                loop {
                    match p.send(BaseRecord::to(&topic).key(&key).payload(&payload)) {
                        Ok(()) => break,
                        Err((
                            rdkafka::error::KafkaError::MessageProduction(
                                rdkafka::types::RDKafkaErrorCode::QueueFull,
                            ),
                            _,
                        )) => p.poll(Duration::from_millis(10)),
                        Err((e, _)) => panic!("producing the flood: {e}"),
                    }
                }
            }
            p.flush(WAIT).expect("flush");
        })
    };
    let mut peak = baseline;
    let mut samples = Vec::new();
    let mut last_check = Instant::now();
    let deadline = Instant::now() + DRAIN;
    loop {
        assert!(
            node.running(),
            "the processor died during the flood:\n{}",
            tail(&node.log, 50)
        );
        if let Some(rss) = rss_bytes(pid) {
            peak = peak.max(rss);
            samples.push((started.elapsed().as_secs_f64(), rss));
        }
        if last_check.elapsed() > Duration::from_millis(500) {
            last_check = Instant::now();
            if publisher.is_finished()
                && committed_total(&s.group, &s.topics.announce) == flood as i64
            {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {DRAIN:?} waiting for the flood to be processed: {} of {flood} committed\n{}",
            committed_total(&s.group, &s.topics.announce),
            tail(&node.log, 20)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    publisher.join().expect("the flood's producer");
    let flooded = started.elapsed();
    let page = metrics_page(node.http);
    let evictions = metric(&page, "toolcalls_state_evictions_total");
    let aborted = metric(
        &page,
        "toolcalls_output_transactions_total{result=\"aborted\"}",
    );
    let pending_bytes = metric(&page, "toolcalls_state_pending_bytes");

    // Ordinary calls after the flood: announced and completed, in sessions of their own.
    let mut after = Vec::new();
    for i in 0..20 {
        let t = FLOOD_T0 + flood as i64 + 1_000 + i * 100;
        for line in [
            format!(
                r#"{{"v":1,"kind":"announce","source":"after","session":"after-s{}","callId":"after-{i}","time":"{}","tool":"Read","args":{{"file_path":"/after/{i}.rs"}}}}"#,
                i % 2,
                toolcalls_workload::rfc3339(t)
            ),
            format!(
                r#"{{"v":1,"kind":"completion","source":"after","session":"after-s{}","callId":"after-{i}","time":"{}","result":"ok {i}"}}"#,
                i % 2,
                toolcalls_workload::rfc3339(t + 50)
            ),
        ] {
            after.push(Event::decode(line.as_bytes()).expect("a valid event"));
        }
    }
    let want = expected_phases(&s.core, after.iter().cloned());
    assert!(want.values().all(|p| p == "Succeeded"), "{want:?}");
    Publisher::default().publish(&s, &after);
    wait_committed(&s, flood + after.len(), WAIT, &[]);
    assert!(
        node.running(),
        "the processor died after the flood:\n{}",
        tail(&node.log, 50)
    );
    if let Some(rss) = rss_bytes(pid) {
        peak = peak.max(rss);
    }

    // What was published: the flood's oldest calls evicted, for the byte cap; the later calls
    // complete.
    let (mut evicted, mut reason, mut got) = (0usize, None, std::collections::BTreeMap::new());
    let (mut seen, mut copies) = (std::collections::HashMap::new(), 0);
    scan(&s.topics.records, |m| {
        let key = String::from_utf8_lossy(m.key().unwrap_or_default()).into_owned();
        let payload = m.payload().unwrap_or_default();
        let digest = {
            use std::hash::{Hash, Hasher};
            let mut h = std::hash::DefaultHasher::new();
            payload.hash(&mut h);
            h.finish()
        };
        match seen.insert(key.clone(), digest) {
            Some(d) if d == digest => copies += 1,
            Some(_) => panic!("record {key} was published in two versions"),
            None => {}
        }
        let r: ToolCallRecord = serde_json::from_slice(payload).expect("a ToolCall record");
        if r.status.phase == Phase::Evicted {
            evicted += 1;
            reason.get_or_insert(r.status.reason.clone().unwrap_or_default());
        }
        if want.contains_key(&key) {
            got.insert(key, r.status.phase.to_string());
        }
    });
    let reason = reason.expect("no Evicted record was published");
    assert!(reason.contains("max_pending_bytes"), "{reason}");
    assert_eq!(got, want, "the calls after the flood did not all complete");
    // Most of the flood does not fit: at most the cap's worth of calls stays pending.
    let fits = cap as usize / arg_bytes;
    assert!(
        evicted + fits >= flood,
        "{evicted} of {flood} calls evicted; the cap holds about {fits}"
    );

    // The bound: the baseline, the cap, and what the buffers beside the pending state may hold,
    // each bounded by an option of this run:
    // - input read ahead, waiting for the partition task: --max-inflight-bytes (2 MiB);
    // - outputs held back while a batch commits: the same bound again (2 MiB);
    // - librdkafka's prefetch: queued.max.messages.kbytes per partition queue (1 MiB; the
    //   partition's two input topics have one each), plus the fetch response being read
    //   (max.partition.fetch.bytes, librdkafka's 1 MiB);
    // - SLACK, what no option bounds: the allocator's free pages and per-thread caches, the
    //   producer's queue of one batch's records and changelog entries until the commit flushes
    //   them, the transient copies of a chunk of input (decoded events, record JSON, changelog
    //   entries, compressed batches). Measured with this test (2 cores, debug build, 20 KB
    //   arguments), the peak RSS less the baseline, the cap and the buffers above was 25–27 MiB
    //   with this run's settings, and at most 42 MiB with larger buffers (8 MiB read-ahead, 4 MiB
    //   prefetch) and caps from 4 to 48 MiB; 48 MiB leaves a margin. Peak RSS grew by about 0.9×
    //   the cap from a cap of 4 MiB to one of 48 MiB: the state's own estimate holds. Without
    //   the cap, the flood's arguments alone (5,000 × 20 KB, 95 MiB) would not fit the bound.
    const SLACK: u64 = 48 << 20;
    let bound = baseline + cap + 2 * inflight + 2 * (prefetch_kib << 10) + (1 << 20) + SLACK;
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    eprintln!(
        "byte cap: {flood} calls of {arg_bytes} B arguments, cap {:.0} MiB: RSS baseline {:.1} MiB, peak {:.1} MiB \
         ({} samples), bound {:.1} MiB; {evictions} evictions ({evicted} Evicted records, {copies} identical copies, \
         {aborted} aborted batches), pending bytes after the flood {:.1} MiB; flood processed in {:.1} s, test took {:.1} s",
        mib(cap),
        mib(baseline),
        mib(peak),
        samples.len(),
        mib(bound),
        mib(pending_bytes as u64),
        flooded.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    let trace: Vec<String> = samples
        .iter()
        .step_by(samples.len().div_ceil(12).max(1))
        .map(|(t, rss)| format!("{t:.0}s {:.0}", mib(*rss)))
        .collect();
    eprintln!("byte cap: RSS (MiB) during the flood: {}", trace.join(", "));
    assert!(
        pending_bytes <= cap as f64,
        "the pending state's estimate ({pending_bytes}) is over the cap ({cap})"
    );
    assert!(
        peak <= bound,
        "RSS peaked at {:.1} MiB, over the bound of {:.1} MiB (baseline {:.1} MiB + cap {:.1} MiB + buffers)",
        mib(peak),
        mib(bound),
        mib(baseline),
        mib(cap)
    );
    let status = node.terminate();
    assert!(
        status.success(),
        "the processor did not shut down cleanly ({status})"
    );
}
