//! Calls pending across a restart complete correctly after their state is restored.

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_calls_survive_a_restart() {
    let s = settings("restart");
    create_topics(&s, 2).await;
    let (announces, completions) = synth("restart", 4, 5);
    let want = expected_phases(&s.core, announces.iter().chain(&completions).cloned());

    let first = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start");
    produce_events(&s, &announces);
    let session = announces[0].session.as_str().to_owned();
    let addr = first.api_addr.expect("the query API is on");
    wait_pending("announces pending in the first instance", addr, &session, 5).await;
    stop_in_time(first).await;

    // A new instance restores the pending calls before it reads anything new.
    let second = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("restart");
    let addr = second.api_addr.expect("the query API is on");
    wait_pending("restored pending calls", addr, &session, 5).await;
    let (_, metrics) = http_get(second.http_addr, "/metrics").await;
    assert!(
        metrics.contains("toolcalls_restore_records_total"),
        "{metrics}"
    );
    produce_events(&s, &completions);
    let records = read_at_least(&s.topics.records, want.len()).await;
    check_downstream(&records, &want, true);
    stop_in_time(second).await;
}
