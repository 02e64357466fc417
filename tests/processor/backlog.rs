//! A backlog read from the start with short deadlines: the announce topic is read far ahead of the
//! completion topic. Stream time is the watermark of both topics, so no call times out while its
//! result is still unread; and once the completion topic has gone quiet, it no longer holds time
//! back, so calls that never get a result do time out.

use crate::harness::*;
use std::collections::BTreeMap;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backlog_is_correlated_as_if_read_in_time_order() {
    let mut s = settings("backlog");
    s.core.call_timeout_ms = 10_000;
    s.core.orphan_grace_ms = 10_000;
    s.core.turn_grace_ms = 10_000;
    s.input_idle_ms = 1_000;
    create_topics(&s, 1).await;
    // 3 sessions × 120 calls, one per second of event time: two minutes, far past the timeouts.
    let (mut announces, mut completions) = synth("backlog", 3, 120);
    // Each topic in event-time order across sessions, as live traffic writes it.
    announces.sort_by_key(|e| e.time);
    completions.sort_by_key(|e| e.time);
    let results_end = completions.last().unwrap().time;
    // A session whose calls never get a result, announced after the last result: only the rule
    // that stops waiting for a quiet topic can time them out (its newest announce is 25 s later).
    let lonely: Vec<_> = [5_000u64, 6_000, 7_000, 8_000, 30_000]
        .iter()
        .enumerate()
        .map(|(i, ms)| {
            let t = results_end.plus_millis(*ms).to_rfc3339();
            toolcalls_model::Event::decode(
                format!(
                    r#"{{"v":1,"kind":"announce","source":"synth","session":"lonely","callId":"l{i}","time":"{t}","tool":"wait"}}"#
                )
                .as_bytes(),
            )
            .unwrap()
        })
        .collect();
    // Worst case for a reader: every announce is in the log before any result.
    produce_events(&s, &announces);
    produce_events(&s, &lonely);
    produce_events(&s, &completions);

    let running = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start");
    // The four lonely calls whose deadline (10 s) falls before the newest announce time out; the
    // fifth waits for the idle-partition punctuation, later than this read.
    let want = announces.len() + 4;
    let records = tokio::task::spawn_blocking({
        let topic = s.topics.records.clone();
        move || read_until(&topic, |r| r.len() >= want)
    })
    .await
    .unwrap();
    let mut phases: BTreeMap<(bool, String), usize> = BTreeMap::new();
    for r in &records {
        let json = r.json();
        let lonely = json["metadata"]["session"]
            .as_str()
            .unwrap()
            .starts_with("lonely");
        *phases
            .entry((lonely, json["status"]["phase"].as_str().unwrap().to_owned()))
            .or_default() += 1;
    }
    assert_eq!(
        phases,
        BTreeMap::from([
            ((false, "Succeeded".to_owned()), announces.len()),
            ((true, "TimedOut".to_owned()), 4),
        ]),
        "every call with a result succeeded; the calls without one timed out once the results ran dry"
    );
    stop_in_time(running).await;
}
