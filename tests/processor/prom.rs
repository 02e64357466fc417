//! A real Prometheus server (Debian's `prometheus`) scrapes a running instance.

use crate::harness::*;
use crate::scratch::Scratch;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_scrapes_the_expected_series() {
    let s = settings("prom");
    create_topics(&s, 2).await;
    let running = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start");
    let (announces, completions) = synth("prom", 2, 3);
    produce_events(&s, &announces);
    produce_events(&s, &completions);
    produce_raw(&s.topics.announce, Some(b"x"), Some(b"not json"));

    let dir = Scratch::new("prometheus");
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: toolcalls\n    static_configs:\n      - targets: ['{}']\n",
            running.http_addr
        ),
    )
    .unwrap();
    let (_prom, prom) = start_prometheus(&config, &dir).await;
    let series = [
        "toolcalls_build_info",
        "toolcalls_input_events_total",
        "toolcalls_output_records_total",
        "toolcalls_correlation_matches_total",
        "toolcalls_dlq_messages_total",
        "toolcalls_state_pending_calls",
        "toolcalls_output_transactions_total",
        "toolcalls_group_rebalances_total",
        "toolcalls_restore_duration_seconds_count",
        "toolcalls_processing_batch_duration_seconds_bucket",
        "toolcalls_ready",
        "toolcalls_consumer_lag_records",
    ];
    for name in series {
        wait_until_async(&format!("prometheus to hold {name}"), || async move {
            let (status, body) = match tokio::net::TcpStream::connect(prom).await {
                Ok(_) => http_get(prom, &format!("/api/v1/query?query={name}")).await,
                Err(_) => (0, String::new()),
            };
            status == 200
                && body.contains("\"status\":\"success\"")
                && body.contains(&format!("\"__name__\":\"{name}\""))
        })
        .await;
    }
    let (_, body) = http_get(
        prom,
        "/api/v1/query?query=toolcalls_output_records_total%7Bphase%3D%22Succeeded%22%7D",
    )
    .await;
    assert!(
        body.contains("\"6\""),
        "6 succeeded records scraped: {body}"
    );
    // Everything was read: no input partition has messages left to deliver.
    wait_until_async("the consumer lag to reach 0", || async move {
        let (_, body) = http_get(
            prom,
            "/api/v1/query?query=max(toolcalls_consumer_lag_records)",
        )
        .await;
        body.contains("\"0\"]")
    })
    .await;
    let (_, body) = http_get(prom, "/api/v1/query?query=up").await;
    assert!(body.contains("\"1\""), "the target is up: {body}");
    stop_in_time(running).await;
}
