//! The producer's transactions (exactly-once) or offset commits (at-least-once): the blocking
//! librdkafka calls of the batch cycle, run on `spawn_blocking`.

use crate::client::SharedProducer;
use crate::config::Guarantee;
use crate::error::Error;
use crate::failpoint::Failpoints;
use crate::input::group::GroupConsumer;
use crate::metrics::Metrics;
use crate::telemetry::coordinator::{AbortUnconfirmed, CommitResumed};
use rdkafka::consumer::{CommitMode, Consumer, ConsumerGroupMetadata};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::Producer;
use rdkafka::topic_partition_list::TopicPartitionList;
use std::sync::{Arc, Mutex};
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
    /// The transactional call of the last commit that timed out, when one did.
    pub unfinished: Arc<Mutex<Option<Unfinished>>>,
    /// At-least-once: an offset commit that outlived its wait, until it ends.
    pub offsets_in_flight: Arc<Mutex<Option<OffsetCommit>>>,
}

/// An offset commit under way on a thread of its own. librdkafka's synchronous commit has no
/// timeout: while the group coordinator does not answer it waits, for as long as the broker is
/// gone, so it runs beside the batch cycle, which waits for it no longer than a Kafka call.
pub(crate) type OffsetCommit = std::sync::mpsc::Receiver<rdkafka::error::KafkaResult<()>>;

/// A transactional call that timed out. librdkafka keeps it going and asks for the same call again
/// ("retry call to resume"); until it ends it refuses any other, an abort included ("Conflicting
/// commit_transaction API call is already in progress"), however long the broker has been back.
/// So an abort first makes the call again until it ends.
pub(crate) enum Unfinished {
    SendOffsets {
        offsets: TopicPartitionList,
        group: ConsumerGroupMetadata,
    },
    Commit,
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
        let unfinished = self.unfinished.clone();
        let in_flight = self.offsets_in_flight.clone();
        tokio::task::spawn_blocking(move || {
            commit_batch(
                &producer,
                &consumer,
                offsets,
                guarantee,
                outputs.then_some(&*failpoints),
                timeout,
                (&unfinished, &in_flight),
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
        let unfinished = self.unfinished.clone();
        tokio::task::spawn_blocking(move || {
            abort_batch(
                &producer,
                guarantee,
                timeout,
                give_up,
                &metrics,
                &unfinished,
            )
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

/// Abandons the open batch (blocking): forgets its delivery failures and, exactly-once, ends the
/// call left unfinished by a commit, aborts the transaction (retried until `give_up`) and begins
/// the next one.
fn abort_batch(
    producer: &SharedProducer,
    guarantee: Guarantee,
    timeout: Duration,
    give_up: Duration,
    metrics: &Metrics,
    unfinished: &Mutex<Option<Unfinished>>,
) -> Result<(), Error> {
    let _ = producer.context().take_failures();
    if guarantee == Guarantee::ExactlyOnce {
        if producer.context().is_fenced() {
            // Its calls can only fail now, and an abort may not be answered at all (it waited
            // out the transaction timeout): stop, saying why.
            let transactional_id = producer.context().transactional_id.clone();
            return Err(Error::Fenced {
                transactional_id: transactional_id.unwrap_or_default(),
            });
        }
        let deadline = Instant::now() + give_up;
        let pending = unfinished.lock().unwrap_or_else(|e| e.into_inner()).take();
        let ended = match pending {
            Some(call) => finish_call(producer, call, timeout, deadline, metrics),
            None => Ended::Open,
        };
        if ended == Ended::Open {
            abort_transaction(producer, timeout, deadline, metrics)?;
        }
        producer.begin_transaction().map_err(tx_error("begin"))?;
    }
    Ok(())
}

/// Commits `offsets` (at-least-once), waiting no longer than `timeout`: a commit that takes longer
/// goes on in the background and the batch is aborted (its outputs were delivered, so the commit
/// landing later is still right). While such a commit is under way no other is started.
fn commit_offsets(
    consumer: &Arc<GroupConsumer>,
    offsets: TopicPartitionList,
    timeout: Duration,
    in_flight: &Mutex<Option<OffsetCommit>>,
) -> Result<(), Error> {
    let timed_out = || {
        Error::kafka(
            "committing offsets",
            KafkaError::ConsumerCommit(RDKafkaErrorCode::OperationTimedOut),
        )
    };
    let mut slot = in_flight.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(earlier) = slot.take() {
        match earlier.recv_timeout(timeout) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                *slot = Some(earlier);
                return Err(timed_out());
            }
            // Ended: whatever it did, at-least-once only asks that offsets follow their outputs,
            // which this commit's do too.
            Ok(_) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {}
        }
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    let consumer = consumer.clone();
    std::thread::Builder::new()
        .name("offset-commit".into())
        .spawn(move || {
            let _ = tx.send(consumer.commit(&offsets, CommitMode::Sync));
        })
        .map_err(|e| Error::Stopped(format!("cannot start the offset commit thread: {e}")))?;
    match rx.recv_timeout(timeout) {
        Ok(result) => result.map_err(|e| Error::kafka("committing offsets", e)),
        Err(_) => {
            *slot = Some(rx);
            Err(timed_out())
        }
    }
}

/// Where a transaction stands once an unfinished call ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// Still open: it is to be aborted.
    Open,
    /// The commit went through after all.
    Committed,
}

/// Makes `call` again until it ends (blocking), retried like an abort. A commit that ends well
/// leaves the batch committed: the rewind that follows restores the state the changelog then
/// holds and resumes at the offsets committed with it, which is as consistent as an abort.
fn finish_call(
    producer: &SharedProducer,
    call: Unfinished,
    timeout: Duration,
    deadline: Instant,
    metrics: &Metrics,
) -> Ended {
    let mut attempt = 1;
    loop {
        let result = match &call {
            Unfinished::SendOffsets { offsets, group } => {
                producer.send_offsets_to_transaction(offsets, group, timeout)
            }
            Unfinished::Commit => producer.commit_transaction(timeout),
        };
        match result {
            Ok(()) if matches!(call, Unfinished::Commit) => {
                CommitResumed.emit(metrics);
                return Ended::Committed;
            }
            Ok(()) => return Ended::Open,
            Err(KafkaError::Transaction(e)) if e.is_retriable() && Instant::now() < deadline => {
                AbortUnconfirmed { attempt, error: &e }.emit(metrics);
                attempt += 1;
                std::thread::sleep(ABORT_RETRY_BACKOFF);
            }
            // Ended some other way (a send of offsets made for a group generation that has passed,
            // a fenced producer, …): the abort that follows decides, and says a fatal error as
            // such.
            Err(_) => return Ended::Open,
        }
    }
}

/// Aborts the open transaction (blocking). When the broker does not answer within `timeout`,
/// librdkafka reports a retriable error and asks for the call again: it is repeated until
/// `deadline` (the transaction timeout), so a broker that stalls for longer than
/// `kafka_timeout_ms` costs a wait, not the process.
fn abort_transaction(
    producer: &SharedProducer,
    timeout: Duration,
    deadline: Instant,
    metrics: &Metrics,
) -> Result<(), Error> {
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

/// Commits one batch (blocking). A transactional call that times out is kept in `unfinished`.
fn commit_batch(
    producer: &SharedProducer,
    consumer: &Arc<GroupConsumer>,
    offsets: TopicPartitionList,
    guarantee: Guarantee,
    failpoints: Option<&Failpoints>,
    timeout: Duration,
    (unfinished, in_flight): (&Mutex<Option<Unfinished>>, &Mutex<Option<OffsetCommit>>),
) -> Result<(), Error> {
    let keep = |call: Unfinished| {
        *unfinished.lock().unwrap_or_else(|e| e.into_inner()) = Some(call);
    };
    // Only a call that ran out of time is still under way ("retry call to resume"); any other
    // error ended it (a fenced producer's among them, which must reach the abort as it is).
    let timed_out = |e: &KafkaError| matches!(e, KafkaError::Transaction(e) if e.code() == RDKafkaErrorCode::OperationTimedOut);
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
                if let Err(e) = producer.send_offsets_to_transaction(&offsets, &cgm, timeout) {
                    if timed_out(&e) {
                        keep(Unfinished::SendOffsets {
                            offsets,
                            group: cgm,
                        });
                    }
                    return Err(tx_error("send_offsets")(e));
                }
            }
            stop("after_send_offsets");
            announce("during_commit");
            if let Err(e) = producer.commit_transaction(timeout) {
                if timed_out(&e) {
                    keep(Unfinished::Commit);
                }
                return Err(tx_error("commit")(e));
            }
            producer.begin_transaction().map_err(tx_error("begin"))?;
        }
        Guarantee::AtLeastOnce => {
            wait_delivered(&**producer, timeout).map_err(|e| Error::kafka("flush", e))?;
            if let Some((count, last)) = producer.context().take_failures() {
                return Err(Error::Produce { count, last });
            }
            stop("after_produce");
            if offsets.count() > 0 {
                commit_offsets(consumer, offsets, timeout, in_flight)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ProducerCtx;
    use rdkafka::mocking::MockCluster;
    use rdkafka::producer::{BaseRecord, ThreadedProducer};
    use rdkafka::ClientConfig;

    /// The processor's producer (its context, transactional id `id`) on a mock cluster.
    fn transactional_producer<C: rdkafka::ClientContext>(
        cluster: &MockCluster<'_, C>,
        id: &str,
        metrics: &Metrics,
    ) -> SharedProducer {
        let watch = Arc::new(toolcalls_producer::BrokerWatch::new(
            &cluster.bootstrap_servers(),
            |_| {},
        ));
        Arc::new(
            ClientConfig::new()
                .set("bootstrap.servers", cluster.bootstrap_servers())
                .set("transactional.id", id)
                .create_with_context::<_, ThreadedProducer<ProducerCtx>>(ProducerCtx::new(
                    metrics.clone(),
                    watch,
                    Some(id.into()),
                ))
                .expect("producer"),
        )
    }

    /// A commit that timed out is still under way inside librdkafka: an abort is refused however
    /// long the broker has been back, and the commit made again goes through.
    #[test]
    fn an_abort_after_a_commit_timed_out_makes_the_commit_again() {
        let cluster = MockCluster::new(1).expect("mock cluster");
        cluster.create_topic("out", 1, 1).expect("topic");
        let metrics = Metrics::new(&prometheus::Registry::new());
        let producer = transactional_producer(&cluster, "resume-test", &metrics);
        let timeout = Duration::from_millis(500);
        init(&producer, Duration::from_secs(10)).expect("init");
        producer
            .send(BaseRecord::to("out").key("k").payload("v"))
            .map_err(|(e, _)| e)
            .expect("send");
        wait_delivered(&*producer, Duration::from_secs(10)).expect("delivered");

        cluster
            .broker_round_trip_time(1, Duration::from_secs(2))
            .expect("slow broker");
        let Err(KafkaError::Transaction(e)) = producer.commit_transaction(timeout) else {
            panic!("the commit should time out against a broker that answers in 2 s");
        };
        assert!(e.is_retriable(), "{e}");
        assert_eq!(e.code(), RDKafkaErrorCode::OperationTimedOut, "{e}");
        cluster
            .broker_round_trip_time(1, Duration::ZERO)
            .expect("broker back");
        let deadline = Instant::now() + Duration::from_secs(20);
        let Err(KafkaError::Transaction(refused)) = producer.abort_transaction(timeout) else {
            panic!("librdkafka no longer refuses an abort while a commit is under way");
        };
        assert_eq!(refused.code(), RDKafkaErrorCode::Conflict, "{refused}");

        let ended = finish_call(&producer, Unfinished::Commit, timeout, deadline, &metrics);
        assert_eq!(
            ended,
            Ended::Committed,
            "the commit made again goes through"
        );
        producer
            .begin_transaction()
            .expect("the next transaction begins");
    }

    /// A producer fenced in the middle of a transaction is not made to abort it: the broker need
    /// not answer the abort of a producer it fenced (Tansu does not always), which would keep the
    /// processor waiting out the transaction timeout before it says why it stops. The broker is
    /// made slow, so that an abort tried anyway would time out and be retried.
    #[test]
    fn a_fenced_producer_stops_at_once_instead_of_aborting() {
        let cluster = MockCluster::new(1).expect("mock cluster");
        cluster.create_topic("out", 1, 1).expect("topic");
        let registry = prometheus::Registry::new();
        let metrics = Metrics::new(&registry);
        let old = transactional_producer(&cluster, "fenced-test", &metrics);
        init(&old, Duration::from_secs(10)).expect("init");
        old.send(BaseRecord::to("out").key("k").payload("v"))
            .map_err(|(e, _)| e)
            .expect("send");
        wait_delivered(&*old, Duration::from_secs(10)).expect("delivered");

        // librdkafka's mock cluster does not fence a producer whose id another one takes: the
        // delivery report that says so is made here, as a real broker's refusal of the produce
        // request would come.
        let fenced = KafkaError::MessageProduction(RDKafkaErrorCode::ProducerFenced);
        old.context().check_fenced(&fenced);
        assert!(old.context().is_fenced(), "not seen as fenced: {fenced}");
        cluster
            .broker_round_trip_time(1, Duration::from_secs(2))
            .expect("slow broker");

        let unfinished = Mutex::new(Some(Unfinished::Commit));
        let stopped = abort_batch(
            &old,
            Guarantee::ExactlyOnce,
            Duration::from_millis(500),
            Duration::from_secs(60),
            &metrics,
            &unfinished,
        )
        .expect_err("a fenced producer cannot go on");
        assert!(
            matches!(&stopped, Error::Fenced { transactional_id } if transactional_id == "fenced-test"),
            "{stopped}"
        );
        assert_eq!(stopped.disposition(), crate::error::Disposition::Fatal);
        assert_eq!(
            crate::metrics::sum(&registry, "toolcalls_output_abort_retries_total", &[]),
            0.0,
            "no abort was tried"
        );
        assert_eq!(
            crate::metrics::sum(
                &registry,
                "toolcalls_output_transactions_total",
                &[("result", "fenced")]
            ),
            1.0
        );
    }

    /// librdkafka's synchronous offset commit waits as long as the coordinator does not answer;
    /// the batch cycle waits for it no longer than a Kafka call, and starts no second one meanwhile.
    #[test]
    fn an_offset_commit_waits_no_longer_than_a_kafka_call() {
        use crate::input::group::ConsumerCtx;
        use rdkafka::Offset;
        let cluster = MockCluster::new(1).expect("mock cluster");
        cluster.create_topic("in", 1, 1).expect("topic");
        let metrics = Metrics::new(&prometheus::Registry::new());
        let watch = Arc::new(toolcalls_producer::BrokerWatch::new(
            &cluster.bootstrap_servers(),
            |_| {},
        ));
        let (events, _keep) = tokio::sync::mpsc::unbounded_channel();
        let consumer: Arc<GroupConsumer> = Arc::new(
            ClientConfig::new()
                .set("bootstrap.servers", cluster.bootstrap_servers())
                .set("group.id", "commit-test")
                .create_with_context(ConsumerCtx::new(
                    ["in".into(), "in".into()],
                    events,
                    metrics,
                    Duration::from_secs(1),
                    watch,
                ))
                .expect("consumer"),
        );
        let mut offsets = TopicPartitionList::new();
        offsets
            .add_partition_offset("in", 0, Offset::Offset(1))
            .expect("offset");
        let in_flight = Mutex::new(None);
        let timeout = Duration::from_millis(300);
        commit_offsets(
            &consumer,
            offsets.clone(),
            Duration::from_secs(10),
            &in_flight,
        )
        .expect("a commit to a broker that answers");

        cluster
            .broker_round_trip_time(1, Duration::from_secs(3))
            .expect("slow broker");
        let slow = commit_offsets(&consumer, offsets.clone(), timeout, &in_flight);
        let slow = slow.expect_err("a commit the broker answers in 3 s is given up");
        assert!(slow.to_string().contains("Timed out"), "{slow}");
        assert_eq!(slow.disposition(), crate::error::Disposition::Retry);
        assert!(
            in_flight.lock().unwrap().is_some(),
            "it goes on in the background"
        );
        let again = commit_offsets(&consumer, offsets.clone(), timeout, &in_flight);
        assert!(
            again.is_err(),
            "no second commit while the first is under way"
        );

        cluster
            .broker_round_trip_time(1, Duration::ZERO)
            .expect("broker back");
        commit_offsets(&consumer, offsets, Duration::from_secs(10), &in_flight)
            .expect("once the broker answers, the waiting commit ends and this one goes through");
        assert!(in_flight.lock().unwrap().is_none());
    }
}
