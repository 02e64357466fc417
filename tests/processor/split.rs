//! Two instances split the partitions; one leaves; no record key is lost or duplicated.

use crate::harness::*;
use std::time::Duration;

fn assigned(metrics: &str) -> i64 {
    metrics
        .lines()
        .find(|l| l.starts_with("toolcalls_group_partitions_assigned "))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
}

fn aborted(metrics: &str) -> i64 {
    metrics
        .lines()
        .find(|l| l.starts_with("toolcalls_output_transactions_total{result=\"aborted\"}"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_split_and_hand_over() {
    let s = settings("split");
    create_topics(&s, 4).await;
    let (announces, completions) = synth("split", 12, 6);
    let want = expected_phases(&s.core, announces.iter().chain(&completions).cloned());
    let third = completions.len() / 3;

    let a = toolcalls_processor::start(s.clone(), prometheus::Registry::new())
        .await
        .expect("start a");
    let (a_addr, b_addr);
    a_addr = a.http_addr;
    wait_until_async("a owns all partitions", || async {
        assigned(&http_get(a_addr, "/metrics").await.1) == 4
    })
    .await;
    produce_events(&s, &announces);
    produce_events(&s, &completions[..third]);

    let mut sb = s.clone();
    sb.instance_id = "i1".into();
    let b = toolcalls_processor::start(sb, prometheus::Registry::new())
        .await
        .expect("start b");
    b_addr = b.http_addr;
    wait_until_async("a and b split the partitions", || async {
        let (ma, mb) = (
            assigned(&http_get(a_addr, "/metrics").await.1),
            assigned(&http_get(b_addr, "/metrics").await.1),
        );
        ma > 0 && mb > 0 && ma + mb == 4
    })
    .await;
    wait_until_async("b ready", || async {
        http_get(b_addr, "/readyz").await.0 == 200
    })
    .await;
    produce_events(&s, &completions[third..2 * third]);

    let aborted_a = aborted(&http_get(a_addr, "/metrics").await.1);
    tokio::time::timeout(Duration::from_secs(60), a.stop())
        .await
        .expect("a stops in time")
        .expect("a stops cleanly");
    wait_until_async("b owns all partitions", || async {
        assigned(&http_get(b_addr, "/metrics").await.1) == 4
    })
    .await;
    produce_events(&s, &completions[2 * third..]);

    let topic = s.topics.records.clone();
    let want_keys = want.clone();
    tokio::task::spawn_blocking(move || {
        read_until(&topic, |r| {
            let keys: std::collections::BTreeSet<String> = r.iter().map(Msg::key_str).collect();
            want_keys.keys().all(|k| keys.contains(k))
        })
    })
    .await
    .unwrap();
    let aborted_b = aborted(&http_get(b_addr, "/metrics").await.1);
    tokio::time::timeout(Duration::from_secs(60), b.stop())
        .await
        .expect("b stops in time")
        .expect("b stops cleanly");
    let topic = s.topics.records.clone();
    let records = tokio::task::spawn_blocking(move || read_to_end(&topic))
        .await
        .unwrap();
    // Graceful hand-overs commit before giving partitions up: no batch is aborted, so even on a
    // broker that shows aborted data every key must appear exactly once.
    check_downstream(&records, &want, aborted_a + aborted_b == 0);
}
