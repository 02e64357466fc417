//! A message whose processing panics is dead-lettered (reason `panic`) after one rewind, instead
//! of being replayed — and panicking — for ever; the rest of the partition flows on.

use crate::harness::*;
use toolcalls_core::{replay, FinishMode};
use toolcalls_model::Event;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_panics_is_dead_lettered_and_the_partition_goes_on() {
    let mut s = settings("poison");
    s.commit_interval_ms = 50;
    // The fifth message applied panics (the hit count is per process, so the replay after the
    // rewind would not panic again on its own: only the dead-lettering keeps it from being applied).
    s.failpoint = Some("panic_in_apply:5".into());
    create_topics(&s, 2).await;
    let (announces, completions) = synth("poison", 2, 6);
    let running = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start");
    produce_events(&s, &announces);
    produce_events(&s, &completions);

    let dlq = tokio::task::spawn_blocking({
        let topic = s.topics.dlq.clone();
        move || read_until(&topic, |r| !r.is_empty())
    })
    .await
    .unwrap();
    let poisoned = &dlq[0];
    assert_eq!(poisoned.headers["toolcalls.reason"], "panic");
    assert!(
        poisoned.headers["toolcalls.error"].contains("failpoint panic_in_apply"),
        "{:?}",
        poisoned.headers
    );
    let bad = Event::decode(poisoned.payload.as_deref().unwrap()).expect("the source event");

    // Every other event is correlated as if the poisoned one had never been sent.
    let rest: Vec<Event> = announces
        .iter()
        .chain(&completions)
        .filter(|e| **e != bad)
        .cloned()
        .collect();
    assert_eq!(rest.len(), announces.len() + completions.len() - 1);
    let expected = replay(&s.core, rest, FinishMode::Keep);
    let want = phases(&expected.records);
    let records = read_until_keys(&s.topics.records, &want).await;
    running.stop().await.expect("clean stop");
    let records_all = tokio::task::spawn_blocking({
        let topic = s.topics.records.clone();
        move || read_to_end(&topic)
    })
    .await
    .unwrap();
    assert!(records_all.len() >= records.len());
    // Tansu shows aborted batches to read_committed readers: identical copies are allowed.
    check_downstream(&records_all, &want, false);
    let dlq = tokio::task::spawn_blocking({
        let topic = s.topics.dlq.clone();
        move || read_to_end(&topic)
    })
    .await
    .unwrap();
    let panics = dlq
        .iter()
        .filter(|m| m.headers["toolcalls.reason"] == "panic")
        .map(|m| {
            (
                &m.headers["toolcalls.source.topic"],
                &m.headers["toolcalls.source.offset"],
            )
        })
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(panics.len(), 1, "one poisoned message: {dlq:?}");
    assert_eq!(dlq.len(), 1, "nothing else is dead-lettered");
}
