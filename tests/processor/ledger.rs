//! The ledger through the broker: a seeded mixed workload (`toolcalls-workload`: ids on most
//! calls, identical id-less calls, announces and results delivered twice, results before their
//! announce, many sessions interleaved over the partitions), published to a fresh processor with
//! the default correlation settings, gives exactly the ground truth — as local mode does
//! (tests/ledger.rs).

use crate::harness::*;
use toolcalls_model::{Event, ToolCallRecord};
use toolcalls_workload::{check, generate, Spec};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_workload_through_the_processor_gives_the_ground_truth() {
    let mut s = settings("ledger");
    s.core = toolcalls_core::Config::default();
    create_topics(&s, 4).await;
    let spec = Spec {
        seed: 11,
        calls: 1_500,
        ..Spec::default()
    };
    let w = generate(&spec);
    let events: Vec<Event> = w
        .lines
        .iter()
        .map(|l| Event::decode(l.as_bytes()).expect("a generated event"))
        .collect();
    produce_events(&s, &events);
    let _running = Proc::spawn(&s, "i0", None);
    // Every input applied and committed, then everything published is read.
    let (group, announce, completion) = (
        s.group.clone(),
        s.topics.announce.clone(),
        s.topics.completion.clone(),
    );
    let inputs = events.len() as i64;
    tokio::task::spawn_blocking(move || {
        wait_until("every input committed", || {
            committed_total(&group, &announce) + committed_total(&group, &completion) == inputs
        })
    })
    .await
    .unwrap();
    let topic = s.topics.records.clone();
    let msgs = tokio::task::spawn_blocking(move || read_to_end(&topic))
        .await
        .unwrap();
    let records: Vec<ToolCallRecord> = msgs
        .iter()
        .map(|m| serde_json::from_slice(m.payload.as_deref().unwrap()).expect("a record"))
        .collect();
    if let Err(e) = check(&records, &w.truth) {
        panic!("seed {}: {e}", spec.seed);
    }
}
