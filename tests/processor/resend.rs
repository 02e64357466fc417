//! A session's events delivered again once the session is forgotten — a follower restarted
//! without its checkpoints sends every file again, days later — are late, not calls opened a
//! second time under the names of its records; across a restart too, the partition's note of the
//! session coming back from the changelog.

use crate::cluster::metric;
use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_sent_again_after_it_was_forgotten_gives_no_second_record() {
    let mut s = settings("resend");
    s.core.session_idle_ms = 300;
    create_topics(&s, 1).await;
    let (announces, completions) = synth("resend-x", 1, 3);
    let (mut later_announces, mut later_completions) = synth("resend-y", 1, 1);
    // Another session of the partition, two hours on: stream time passes the dedupe window.
    for e in later_announces.iter_mut().chain(&mut later_completions) {
        e.time = e.time.plus_millis(2 * 3600 * 1000);
    }
    let gauge = |page: &str| metric(page, "toolcalls_state_forgotten_sessions");

    let first = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start");
    produce_events(&s, &announces);
    produce_events(&s, &completions);
    read_at_least(&s.topics.records, 3).await;
    produce_events(&s, &later_announces);
    produce_events(&s, &later_completions);
    // The first session goes idle, its calls are forgotten by stream time, it is dropped: noted.
    let http = first.http_addr;
    wait_until_async("the forgotten session noted", || async move {
        gauge(&http_get(http, "/metrics").await.1) == 1.0
    })
    .await;
    stop_in_time(first).await;

    let second = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("restart");
    let http = second.http_addr;
    wait_until_async("the note restored", || async move {
        gauge(&http_get(http, "/metrics").await.1) == 1.0
    })
    .await;
    // Its file read again.
    produce_events(&s, &announces);
    produce_events(&s, &completions);
    let copies = (announces.len() + completions.len()) as f64;
    wait_until_async("the copies applied", || async move {
        metric(
            &http_get(http, "/metrics").await.1,
            "toolcalls_correlation_outcomes_total",
        ) >= copies
    })
    .await;
    let page = http_get(http, "/metrics").await.1;
    let late = "toolcalls_correlation_outcomes_total{outcome=\"late\"}";
    let outcomes: Vec<_> = page
        .lines()
        .filter(|l| l.contains("outcomes_total{"))
        .collect();
    assert_eq!(metric(&page, late), copies, "{outcomes:#?}");
    stop_in_time(second).await;

    let records = read_to_end(&s.topics.records);
    let keys: std::collections::BTreeSet<_> = records.iter().map(Msg::key_str).collect();
    assert_eq!(records.len(), 4, "one record per call: {keys:#?}");
    assert_eq!(keys.len(), 4);
}
