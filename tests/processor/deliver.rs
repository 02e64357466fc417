//! `wait_delivered`, the flush of every commit: it returns only once the broker has every message.

use crate::harness::*;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_delivered_returns_once_the_broker_has_every_message() {
    let s = settings("deliver");
    create_topics(&s, 2).await;
    let topic = s.topics.records.clone();
    let sent = tokio::task::spawn_blocking(move || {
        // The processor's producer settings that matter here: batching, and no report for a
        // delivered message (so no event would ever wake a flush that waits for one).
        let producer: ThreadedProducer<_> = ClientConfig::new()
            .set("bootstrap.servers", &broker().addr)
            .set("linger.ms", "5")
            .set("enable.idempotence", "true")
            .set("compression.type", "lz4")
            .set("delivery.report.only.error", "true")
            .create()
            .expect("producer");
        let n = 5_000;
        for i in 0..n {
            let key = format!("k{}", i % 97);
            let payload = format!("{{\"n\":{i}}}");
            producer
                .send(BaseRecord::to(&topic).key(&key).payload(&payload))
                .map_err(|(e, _)| e)
                .expect("enqueue");
        }
        toolcalls_producer::wait_delivered(&producer, Duration::from_secs(30)).expect("delivered");
        assert_eq!(
            producer.in_flight_count(),
            0,
            "returned with messages in flight"
        );
        (topic, n)
    })
    .await
    .unwrap();
    let (topic, n) = sent;
    let read = tokio::task::spawn_blocking(move || read_to_end(&topic))
        .await
        .unwrap();
    assert_eq!(read.len(), n);
}
