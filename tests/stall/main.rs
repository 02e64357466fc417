//! The processor rides out a broker that stops answering for longer than `kafka_timeout_ms` and
//! the group session timeout, exactly-once and at-least-once. The open batch is aborted (the
//! abort of the transaction itself is retried until the broker answers), the partitions are lost
//! and come back, their state is restored from the changelog, and the calls pending across the
//! stall complete.
//!
//! A test binary of its own: it stops its broker (SIGSTOP), which would stall every test sharing it.

#[path = "../processor/harness.rs"]
#[allow(dead_code)]
mod harness;

use harness::*;
use std::time::Duration;
use toolcalls_processor::Guarantee;

fn transactions(registry: &prometheus::Registry, result: &str) -> f64 {
    toolcalls_processor::metrics::sum(
        registry,
        "toolcalls_output_transactions_total",
        &[("result", result)],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_calls_survive_a_broker_stall_longer_than_the_kafka_timeout() {
    // One after the other: both stop the same broker.
    ride_out_a_stall(Guarantee::ExactlyOnce).await;
    ride_out_a_stall(Guarantee::AtLeastOnce).await;
}

async fn ride_out_a_stall(guarantee: Guarantee) {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let mut s = settings("stall");
    s.guarantee = guarantee;
    // Every Kafka operation gives up after 2 s: the stall below outlasts it several times over.
    s.kafka_timeout_ms = 2_000;
    s.commit_interval_ms = 50;
    create_topics(&s, 2).await;
    let (announces, completions) = synth("stall", 3, 4);
    let want = expected_phases(&s.core, announces.iter().chain(&completions).cloned());

    let registry = prometheus::Registry::new();
    let running = toolcalls_processor::start(s.clone(), registry.clone())
        .await
        .expect("start");
    produce_events(&s, &announces);
    let addr = running.api_addr.expect("the query API is on");
    let sessions: Vec<String> = announces
        .iter()
        .map(|e| e.session.as_str().to_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    wait_until_async("every announce pending", || {
        let sessions = sessions.clone();
        async move {
            let mut pending = 0;
            for session in &sessions {
                let (_, body) = http_get(addr, &format!("/v1/sessions/{session}/pending")).await;
                pending += serde_json::from_str::<serde_json::Value>(&body)
                    .ok()
                    .and_then(|v| v["pending"].as_array().map(|a| a.len()))
                    .unwrap_or(0);
            }
            pending == 12
        }
    })
    .await;

    broker().pause();
    // The coordinator waits on the broker: not ready once the wait outlasts the Kafka timeout.
    let ops = running.http_addr;
    wait_until_async("not ready while the broker does not answer", || {
        let registry = registry.clone();
        async move {
            let ready = toolcalls_processor::metrics::sum(&registry, "toolcalls_ready", &[]);
            http_get(ops, "/readyz").await.0 == 503 && ready == 0.0
        }
    })
    .await;
    // With the broker stopped, a commit times out or the group session does, and the processor
    // aborts its batch: the abort cannot be confirmed either.
    wait_until_async("the processor to abort its batch", || {
        let registry = registry.clone();
        async move { transactions(&registry, "aborted") >= 1.0 }
    })
    .await;
    if guarantee == Guarantee::ExactlyOnce {
        // The broker stays stopped until an attempt to abort has timed out and was tried again
        // (it used to stop the processor).
        wait_until_async("an abort to time out and be tried again", || {
            let registry = registry.clone();
            async move {
                toolcalls_processor::metrics::sum(
                    &registry,
                    "toolcalls_output_abort_retries_total",
                    &[],
                ) >= 1.0
            }
        })
        .await;
    }
    broker().resume();

    produce_events(&s, &completions);
    let records = read_until_keys(&s.topics.records, &want).await;
    // Tansu shows aborted batches to read_committed readers: copies must be byte-identical.
    check_downstream(&records, &want, false);
    assert!(
        transactions(&registry, "committed") >= 1.0,
        "the processor committed nothing after the stall"
    );
    tokio::time::timeout(Duration::from_secs(60), running.stop())
        .await
        .expect("shutdown in time")
        .unwrap_or_else(|e| {
            panic!("{guarantee:?}: the processor did not run on through the stall: {e}")
        });
}
