//! A real fixture session flows through and yields the records the pure core gives for it.

use crate::harness::*;
use toolcalls_adapters::{parse, Format, Options};
use toolcalls_core::{replay, FinishMode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixture_session_yields_expected_records() {
    let s = settings("flow");
    create_topics(&s, 2).await;
    let parsed = parse(
        Format::Codex,
        "rollout.jsonl",
        &fixture("codex/agentcmd-rollout-01997ea4.jsonl"),
        &Options::default(),
    );
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let events = parsed.events;
    let expected = replay(&s.core, events.clone(), FinishMode::Keep);
    assert!(!expected.records.is_empty());
    let want = phases(&expected.records);

    let running = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start");
    let (addr, ops) = (
        running.api_addr.expect("the query API is on"),
        running.http_addr,
    );
    wait_until_async("readiness", || async {
        http_get(ops, "/readyz").await.0 == 200
    })
    .await;
    produce_events(&s, &events);

    let records = read_at_least(&s.topics.records, want.len()).await;
    let got = phases_by_key(&records);
    assert_eq!(got, want, "records differ from the pure core's replay");
    assert_eq!(records.len(), want.len(), "a record was published twice");

    // Calls still pending are visible through the query API.
    let session = events[0].session.as_str().to_owned();
    let (status, body) = http_get(addr, &format!("/v1/sessions/{session}/pending")).await;
    assert_eq!(status, 200, "{body}");
    let pending: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        pending["pending"].as_array().unwrap().len(),
        expected.pending.len(),
        "{body}"
    );
    if let Some(p) = expected.pending.first() {
        let (status, body) = http_get(addr, &format!("/v1/tool-calls/{}", p.id())).await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, _) = http_get(addr, "/v1/tool-calls/not-a-uuid").await;
    assert_eq!(status, 400);

    let (status, metrics) = http_get(ops, "/metrics").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("toolcalls_output_records_total{phase=\"Succeeded\"}"),
        "{metrics}"
    );
    stop_in_time(running).await;
}
