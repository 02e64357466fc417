//! The producer's transactions (exactly-once) or offset commits (at-least-once): the blocking
//! librdkafka calls of the batch cycle, run on `spawn_blocking`.

use crate::client::SharedProducer;
use crate::config::Guarantee;
use crate::error::Error;
use crate::failpoint::Failpoints;
use crate::input::group::GroupConsumer;
use crate::metrics::Metrics;
use crate::telemetry::coordinator::AbortUnconfirmed;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::Producer;
use rdkafka::topic_partition_list::TopicPartitionList;
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolcalls_producer::wait_delivered;

/// Pause between two attempts to abort a transaction.
const ABORT_RETRY_BACKOFF: Duration = Duration::from_millis(100);

fn tx_error(op: &'static str) -> impl Fn(KafkaError) -> Error {
    move |error| Error::Transaction { op, error }
}

/// Initializes the producer's transactions and begins the first one (blocking).
pub(crate) fn init(producer: &SharedProducer, timeout: Duration) -> Result<(), Error> {
    producer
        .init_transactions(timeout)
        .map_err(tx_error("init"))?;
    producer.begin_transaction().map_err(tx_error("begin"))
}

/// What the coordinator commits with.
pub(crate) struct Transactions {
    pub producer: SharedProducer,
    pub consumer: Arc<GroupConsumer>,
    pub guarantee: Guarantee,
    /// librdkafka's timeout of one call.
    pub timeout: Duration,
    /// How long an abort is retried: the transaction timeout, after which the broker aborts the
    /// transaction itself.
    pub give_up: Duration,
    pub failpoints: Arc<Failpoints>,
    pub metrics: Metrics,
}

impl Transactions {
    /// Commits the batch: its outputs, and `offsets` as the next input offsets. `outputs`: the
    /// batch holds records or dead letters (not only changelog), which is when failpoints count.
    pub async fn commit(&self, offsets: TopicPartitionList, outputs: bool) -> Result<(), Error> {
        let producer = self.producer.clone();
        let consumer = self.consumer.clone();
        let failpoints = self.failpoints.clone();
        let guarantee = self.guarantee;
        let timeout = self.timeout;
        tokio::task::spawn_blocking(move || {
            commit_batch(
                &producer,
                &consumer,
                &offsets,
                guarantee,
                outputs.then_some(&*failpoints),
                timeout,
            )
        })
        .await
        .map_err(|e| Error::Stopped(format!("the commit thread failed: {e}")))
        .and_then(|r| r)
        .inspect_err(|e| self.note_fenced(e))
    }

    /// The broker watch the clients tell of their connectivity.
    pub fn watch(&self) -> &Arc<toolcalls_producer::BrokerWatch> {
        &self.producer.context().watch
    }

    /// Says (once) that the producer was fenced, when `error` shows it.
    fn note_fenced(&self, error: &Error) {
        if let Error::Transaction { error, .. } | Error::Kafka { error, .. } = error {
            self.producer.context().check_fenced(error);
        }
    }

    /// Abandons the open batch: forgets its delivery failures, aborts its transaction and begins
    /// the next one.
    pub async fn abort(&self) -> Result<(), Error> {
        let producer = self.producer.clone();
        let guarantee = self.guarantee;
        let timeout = self.timeout;
        let give_up = self.give_up;
        let metrics = self.metrics.clone();
        tokio::task::spawn_blocking(move || -> Result<(), Error> {
            let _ = producer.context().take_failures();
            if guarantee == Guarantee::ExactlyOnce {
                abort_transaction(&producer, timeout, give_up, &metrics)?;
                producer.begin_transaction().map_err(tx_error("begin"))?;
            }
            Ok(())
        })
        .await
        .map_err(|e| Error::Stopped(format!("the abort thread failed: {e}")))?
        .inspect_err(|e| self.note_fenced(e))
    }

    /// Waits (bounded) until what was produced is delivered: on the way out.
    pub async fn flush(&self) {
        let producer = self.producer.clone();
        let timeout = self.timeout;
        let _ = tokio::task::spawn_blocking(move || wait_delivered(&*producer, timeout)).await;
    }
}

/// Aborts the open transaction (blocking). When the broker does not answer within `timeout`,
/// librdkafka reports a retriable error and asks for the call again: it is repeated until
/// `give_up`, so a broker that stalls for longer than `kafka_timeout_ms` costs a wait, not the
/// process.
fn abort_transaction(
    producer: &SharedProducer,
    timeout: Duration,
    give_up: Duration,
    metrics: &Metrics,
) -> Result<(), Error> {
    let deadline = Instant::now() + give_up;
    let mut attempt = 1;
    loop {
        match producer.abort_transaction(timeout) {
            Ok(()) => return Ok(()),
            Err(KafkaError::Transaction(e)) if e.is_retriable() && Instant::now() < deadline => {
                AbortUnconfirmed { attempt, error: &e }.emit(metrics);
                attempt += 1;
                // A retriable error that came back at once must not turn into a busy loop.
                std::thread::sleep(ABORT_RETRY_BACKOFF);
            }
            Err(source) => return Err(tx_error("abort")(source)),
        }
    }
}

/// Commits one batch (blocking).
fn commit_batch(
    producer: &SharedProducer,
    consumer: &GroupConsumer,
    offsets: &TopicPartitionList,
    guarantee: Guarantee,
    failpoints: Option<&Failpoints>,
    timeout: Duration,
) -> Result<(), Error> {
    // Failpoints count only batches that publish records or dead letters, so a test can place a
    // kill in a batch whose outputs matter downstream.
    let stop = |name: &str| {
        if let Some(f) = failpoints {
            f.stop(name);
        }
    };
    let announce = |name: &str| {
        if let Some(f) = failpoints {
            f.announce(name);
        }
    };
    match guarantee {
        Guarantee::ExactlyOnce => {
            wait_delivered(&**producer, timeout).map_err(tx_error("flush"))?;
            stop("after_produce");
            if offsets.count() > 0 {
                let cgm = consumer
                    .group_metadata()
                    .ok_or_else(|| Error::Stopped("the consumer has no group metadata".into()))?;
                producer
                    .send_offsets_to_transaction(offsets, &cgm, timeout)
                    .map_err(tx_error("send_offsets"))?;
            }
            stop("after_send_offsets");
            announce("during_commit");
            producer
                .commit_transaction(timeout)
                .map_err(tx_error("commit"))?;
            producer.begin_transaction().map_err(tx_error("begin"))?;
        }
        Guarantee::AtLeastOnce => {
            wait_delivered(&**producer, timeout).map_err(|e| Error::kafka("flush", e))?;
            if let Some((count, last)) = producer.context().take_failures() {
                return Err(Error::Produce { count, last });
            }
            stop("after_produce");
            if offsets.count() > 0 {
                consumer
                    .commit(offsets, CommitMode::Sync)
                    .map_err(|e| Error::kafka("committing offsets", e))?;
            }
        }
    }
    Ok(())
}
