//! The coordinator: owns the producer and its transactions, the partition tasks, restores and the
//! batch cycle.
//!
//! A batch is everything the partition tasks produced since the last checkpoint. At a checkpoint
//! (every `commit_interval_ms`, and before partitions are revoked) every task writes its changed
//! state to the changelog and reports its next offsets; the coordinator then sends the offsets to
//! the transaction and commits it (exactly-once), or flushes and commits the offsets
//! (at-least-once), and tells the tasks it is done (`resume`). The tasks do not wait for that: they
//! go on applying input, and hold back what they produce until `resume` says the next transaction
//! has begun — outputs never land in a transaction with offsets they do not derive from, and the
//! cores are not left idle while the broker commits. If anything fails the transaction is
//! aborted, every task is stopped and every partition is restored from the changelog and rewound
//! to its committed offsets — the in-memory state is never trusted past a failed commit.

use toolcalls_producer::wait_delivered;
use crate::client::{
    consumer_config, producer_config, ProducerCtx, SharedProducer,
};
use crate::config::{Guarantee, Settings};
use crate::consumer::{
    run_consumer_loop, ConsumerCmd, ConsumerCtx, GroupConsumer, GroupEvent, Inflight, LoopConfig,
    PartitionSink,
};
use crate::error::{Disposition, Error};
use crate::failpoint::Failpoints;
use crate::http::{router, HttpState};
use crate::metrics::Metrics;
use crate::partition::{BatchPool, Checkpointed, InBatch, PartitionMsg, PartitionTask, TaskEnv};
use crate::restore::{restore_partition, Restored};
use crate::topics::{check_topics, MAX_OUTPUT_MESSAGE_BYTES};
use dashmap::DashMap;
use prometheus::Registry;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::{Producer, ThreadedProducer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc as std_mpsc, Arc};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// A started processor.
pub struct Running {
    /// Where the HTTP server listens (useful with port 0).
    pub http_addr: SocketAddr,
    /// The registry the metrics live in.
    pub registry: Registry,
    shutdown: Option<oneshot::Sender<()>>,
    join: JoinHandle<Result<(), Error>>,
}

impl Running {
    /// Asks for a graceful shutdown: finish and commit the batch, leave the group.
    pub fn shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// Waits until the processor stopped.
    pub async fn wait(self) -> Result<(), Error> {
        match self.join.await {
            Ok(r) => r,
            Err(e) => Err(Error::Stopped(format!("the coordinator task failed: {e}"))),
        }
    }

    /// Shuts down and waits.
    pub async fn stop(mut self) -> Result<(), Error> {
        self.shutdown();
        self.wait().await
    }
}

/// Runs the processor until SIGTERM or SIGINT, then shuts down gracefully.
pub async fn run(settings: Settings) -> anyhow::Result<()> {
    use anyhow::Context;
    let mut running = start(settings, Registry::new())
        .await
        .context("starting the processor")?;
    tracing::info!(http = %running.http_addr, "processor started");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let signals = tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("sigterm received, shutting down"),
            _ = tokio::signal::ctrl_c() => tracing::info!("sigint received, shutting down"),
            _ = stop_rx => return false,
        }
        true
    });
    let shutdown = running.shutdown.take();
    let join = running.join;
    tokio::pin!(join);
    let result = tokio::select! {
        r = &mut join => r,
        signalled = signals => {
            if matches!(signalled, Ok(true)) {
                if let Some(tx) = shutdown { let _ = tx.send(()); }
            }
            join.await
        }
    };
    drop(stop_tx);
    let result = result.context("the coordinator task failed")?;
    result.context("the processor stopped with an error")?;
    tracing::info!("processor stopped");
    Ok(())
}

/// Starts the processor: checks the topics, initializes transactions, serves HTTP, joins the group.
pub async fn start(settings: Settings, registry: Registry) -> Result<Running, Error> {
    settings.validate()?;
    let settings = Arc::new(settings);
    let s = settings.clone();
    let partitions = tokio::task::spawn_blocking(move || check_topics(&s))
        .await
        .map_err(|e| Error::Stopped(e.to_string()))??;
    tracing::info!(partitions, group = %settings.group, guarantee = ?settings.guarantee, "topics checked");

    let metrics = Metrics::new(&registry);
    let failpoints = Arc::new(Failpoints::parse(settings.failpoint.as_deref()));

    let mut pc = producer_config(&settings);
    pc.set("message.max.bytes", MAX_OUTPUT_MESSAGE_BYTES.to_string());
    let producer: SharedProducer = Arc::new(
        pc.create_with_context::<_, ThreadedProducer<ProducerCtx>>(ProducerCtx::new(
            metrics.clone(),
        ))
        .map_err(|e| Error::kafka("creating the producer", e))?,
    );
    if settings.guarantee == Guarantee::ExactlyOnce {
        let p = producer.clone();
        let timeout = Duration::from_millis(settings.kafka_timeout_ms);
        tokio::task::spawn_blocking(move || {
            p.init_transactions(timeout)
                .map_err(|e| Error::Transaction {
                    op: "init",
                    source: e,
                })?;
            p.begin_transaction().map_err(|e| Error::Transaction {
                op: "begin",
                source: e,
            })
        })
        .await
        .map_err(|e| Error::Stopped(e.to_string()))??;
        tracing::info!(transactional_id = %settings.transactional_id(), "transactions initialized");
    }

    let http = Arc::new(HttpState {
        registry: registry.clone(),
        partitions: DashMap::new(),
        ready: false.into(),
        alive: true.into(),
    });
    let listener = tokio::net::TcpListener::bind(settings.http_addr)
        .await
        .map_err(Error::Http)?;
    let http_addr = listener.local_addr().map_err(Error::Http)?;
    let (http_stop_tx, http_stop_rx) = oneshot::channel::<()>();
    let app = router(http.clone());
    tokio::spawn(async move {
        let serve = axum::serve(listener, app).with_graceful_shutdown(async {
            let _ = http_stop_rx.await;
        });
        if let Err(e) = serve.await {
            tracing::error!(error = %e, "http server failed");
        }
    });

    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let topics = [
        settings.topics.announce.clone(),
        settings.topics.completion.clone(),
    ];
    let ack_timeout = Duration::from_millis(settings.kafka_timeout_ms.saturating_mul(2));
    let ctx = ConsumerCtx::new(topics.clone(), events_tx, metrics.clone(), ack_timeout);
    let wake = ctx.wake.clone();
    let mut consumer: GroupConsumer = consumer_config(&settings)
        .create_with_context(ctx)
        .map_err(|e| Error::kafka("creating the consumer", e))?;
    // Rebalances and messages on the group queue wake the consumer thread from its idle wait.
    consumer.set_nonempty_callback(move || wake.notify());
    let consumer = Arc::new(consumer);
    consumer
        .subscribe(&[settings.topics.announce.as_str()])
        .map_err(|e| Error::kafka("subscribing", e))?;
    let (cmd_tx, cmd_rx) = std_mpsc::channel();
    let batches = Arc::new(BatchPool::default());
    let loop_cfg = LoopConfig {
        batches: batches.clone(),
        max_inflight_messages: settings.max_inflight_messages,
        max_inflight_bytes: settings.max_inflight_bytes,
        seek_timeout: Duration::from_millis(settings.kafka_timeout_ms),
        close_timeout: Duration::from_millis(settings.kafka_timeout_ms.saturating_mul(3)),
    };
    let c = consumer.clone();
    std::thread::Builder::new()
        .name("toolcalls-consumer".into())
        .spawn(move || run_consumer_loop(c, cmd_rx, loop_cfg))
        .map_err(|e| Error::Stopped(format!("cannot start the consumer thread: {e}")))?;

    let env = Arc::new(TaskEnv {
        producer: producer.clone(),
        input_topics: topics,
        records_topic: settings.topics.records.clone(),
        dlq_topic: settings.topics.dlq.clone(),
        changelog_topic: settings.changelog_topic(),
        max_message_bytes: settings.max_message_bytes,
        max_future_skew_ms: settings.max_future_skew_ms,
        input_idle: Duration::from_millis(settings.input_idle_ms),
        align_wait: Duration::from_millis(settings.align_wait_ms),
        // Outputs held back while a batch commits have a bound of their own, as large as the
        // input's: they stop the tasks from taking input until the commit is through.
        max_held_bytes: settings.max_inflight_bytes,
        held_bytes: Arc::new(AtomicUsize::new(0)),
        poisoned: std::sync::Mutex::new(HashMap::new()),
        metrics: metrics.clone(),
        failpoints: failpoints.clone(),
        batches,
    });
    let (restored_tx, restored_rx) = mpsc::unbounded_channel();
    let coordinator = Coordinator {
        settings,
        metrics,
        producer,
        consumer,
        commands: cmd_tx,
        http: http.clone(),
        env,
        failpoints,
        parts: HashMap::new(),
        restored_tx,
        next_gen: 0,
        joined: false,
    };
    let (shutdown_tx, shutdown_rx) = oneshot::channel();
    let join = tokio::spawn(async move {
        let result = coordinator.run(events_rx, restored_rx, shutdown_rx).await;
        http.alive.store(false, Ordering::Release);
        http.ready.store(false, Ordering::Release);
        let _ = http_stop_tx.send(());
        if let Err(e) = &result {
            tracing::error!(error = %e, "processor stopped with an error");
        }
        result
    });
    Ok(Running {
        http_addr,
        registry,
        shutdown: Some(shutdown_tx),
        join,
    })
}

enum Part {
    Restoring {
        gen: u64,
    },
    Active {
        tx: mpsc::UnboundedSender<PartitionMsg>,
        task: JoinHandle<()>,
    },
}

struct RestoreDone {
    partition: i32,
    gen: u64,
    result: Result<Restored, Error>,
}

struct Coordinator {
    settings: Arc<Settings>,
    metrics: Metrics,
    producer: SharedProducer,
    consumer: Arc<GroupConsumer>,
    commands: std_mpsc::Sender<ConsumerCmd>,
    http: Arc<HttpState>,
    env: Arc<TaskEnv>,
    failpoints: Arc<Failpoints>,
    parts: HashMap<i32, Part>,
    restored_tx: mpsc::UnboundedSender<RestoreDone>,
    next_gen: u64,
    /// The consumer received its first assignment (possibly empty).
    joined: bool,
}

impl Coordinator {
    /// Sends a command to the consumer thread and wakes it from its idle wait.
    fn command(&self, cmd: ConsumerCmd) {
        let _ = self.commands.send(cmd);
        self.consumer.context().wake.notify();
    }

    async fn run(
        mut self,
        mut events: mpsc::UnboundedReceiver<GroupEvent>,
        mut restored: mpsc::UnboundedReceiver<RestoreDone>,
        mut shutdown: oneshot::Receiver<()>,
    ) -> Result<(), Error> {
        let mut commit_tick =
            tokio::time::interval(Duration::from_millis(self.settings.commit_interval_ms));
        commit_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut punctuation =
            tokio::time::interval(Duration::from_millis(self.settings.punctuation_interval_ms));
        punctuation.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut shutting_down = false;
        let result = loop {
            tokio::select! {
                _ = &mut shutdown, if !shutting_down => {
                    shutting_down = true;
                    tracing::info!("shutting down: committing and leaving the group");
                    self.command(ConsumerCmd::Shutdown);
                }
                event = events.recv() => match event {
                    None | Some(GroupEvent::Closed) => break Ok(()),
                    Some(GroupEvent::Assigned(partitions)) => {
                        self.joined = true;
                        for p in partitions {
                            self.start_restore(p);
                        }
                    }
                    Some(GroupEvent::Revoked { partitions, ack }) => {
                        let r = self.checkpoint(&partitions).await;
                        self.stop_partitions(&partitions).await;
                        let _ = ack.send(());
                        if let Err(e) = r { break Err(e); }
                    }
                    Some(GroupEvent::Lost { partitions, ack }) => {
                        self.stop_partitions(&partitions).await;
                        let r = self.abort_and_rewind("partitions lost").await;
                        let _ = ack.send(());
                        if let Err(e) = r { break Err(e); }
                    }
                    Some(GroupEvent::Fatal(why)) => break Err(Error::Stopped(why)),
                },
                Some(done) = restored.recv() => {
                    if let Err(e) = self.on_restored(done) { break Err(e); }
                }
                _ = commit_tick.tick() => {
                    if let Err(e) = self.checkpoint(&[]).await { break Err(e); }
                }
                _ = punctuation.tick() => {
                    for part in self.parts.values() {
                        if let Part::Active { tx, .. } = part {
                            let _ = tx.send(PartitionMsg::Tick);
                        }
                    }
                }
            }
            self.update_readiness();
        };
        // Leaving: stop whatever is left without committing more (revocation committed it).
        let left: Vec<i32> = self.parts.keys().copied().collect();
        self.stop_partitions(&left).await;
        drop(self.commands);
        let producer = self.producer.clone();
        let timeout = Duration::from_millis(self.settings.kafka_timeout_ms);
        let _ = tokio::task::spawn_blocking(move || wait_delivered(&*producer, timeout)).await;
        result
    }

    fn update_readiness(&self) {
        let restoring = self
            .parts
            .values()
            .any(|p| matches!(p, Part::Restoring { .. }));
        let active = self
            .parts
            .values()
            .filter(|p| matches!(p, Part::Active { .. }))
            .count();
        self.metrics
            .partitions_assigned
            .set(self.parts.len() as i64);
        let ready = self.joined && !restoring;
        self.http.ready.store(ready, Ordering::Release);
        self.metrics.ready.set(i64::from(ready));
        let _ = active;
    }

    fn start_restore(&mut self, partition: i32) {
        self.next_gen += 1;
        let gen = self.next_gen;
        self.parts.insert(partition, Part::Restoring { gen });
        let settings = self.settings.clone();
        let consumer = self.consumer.clone();
        let done = self.restored_tx.clone();
        tracing::info!(partition, "restoring partition state from the changelog");
        tokio::task::spawn_blocking(move || {
            let result = restore_partition(&settings, &consumer, partition);
            let _ = done.send(RestoreDone {
                partition,
                gen,
                result,
            });
        });
    }

    fn on_restored(&mut self, done: RestoreDone) -> Result<(), Error> {
        let RestoreDone {
            partition,
            gen,
            result,
        } = done;
        match self.parts.get(&partition) {
            Some(Part::Restoring { gen: g }) if *g == gen => {}
            _ => return Ok(()), // revoked or restarted meanwhile
        }
        let restored = match result {
            Ok(r) => r,
            Err(e) if e.disposition() == Disposition::Retry => {
                tracing::warn!(partition, error = %e, "restore failed, retrying");
                self.start_restore(partition);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        self.metrics
            .restore_duration
            .observe(restored.elapsed.as_secs_f64());
        self.metrics.restore_records.inc_by(restored.records_read);
        tracing::info!(
            partition,
            records = restored.records_read,
            entries = restored.entries,
            restated = restored.restated,
            pending = restored.correlator.pending_len(),
            elapsed_ms = restored.elapsed.as_millis() as u64,
            "partition restored"
        );
        // Control (checkpoints, ticks, queries) and input batches travel on separate channels so
        // that a checkpoint is served ahead of the queued input.
        let (tx, rx) = mpsc::unbounded_channel();
        let (data_tx, data_rx) = mpsc::unbounded_channel::<InBatch>();
        let inflight = Arc::new(Inflight::new(self.consumer.context().wake.clone()));
        let task = PartitionTask::new(
            partition,
            restored.correlator,
            restored.next,
            self.env.clone(),
            inflight.clone(),
        );
        let handle = tokio::spawn(task.run(rx, data_rx));
        self.http.partitions.insert(partition, tx.clone());
        let sink = PartitionSink {
            tx: data_tx,
            inflight,
        };
        self.parts
            .insert(partition, Part::Active { tx, task: handle });
        self.command(ConsumerCmd::Activate {
            partition,
            offsets: restored.seek,
            sink,
        });
        Ok(())
    }

    /// Stops partition tasks and forgets the partitions (their state is dropped).
    async fn stop_partitions(&mut self, partitions: &[i32]) {
        for p in partitions {
            self.http.partitions.remove(p);
            if let Some(Part::Active { tx, task }) = self.parts.remove(p) {
                drop(tx);
                task.abort();
                let _ = task.await;
            }
        }
    }

    /// Commits the current batch. `stopping` partitions are not released afterwards (they are
    /// being revoked). Transient failures abort and rewind; fatal ones are returned.
    async fn checkpoint(&mut self, stopping: &[i32]) -> Result<(), Error> {
        let mut waiting = Vec::new();
        let mut resumes = Vec::new();
        let mut dead = false;
        for (p, part) in &self.parts {
            if let Part::Active { tx, .. } = part {
                let (reply_tx, reply_rx) = oneshot::channel();
                let (resume_tx, resume_rx) = oneshot::channel();
                if tx
                    .send(PartitionMsg::Checkpoint {
                        reply: reply_tx,
                        resume: resume_rx,
                    })
                    .is_ok()
                {
                    waiting.push(reply_rx);
                    resumes.push((*p, resume_tx));
                } else {
                    dead = true;
                }
            }
        }
        if waiting.is_empty() && !dead {
            return Ok(());
        }
        let mut reports: Vec<Checkpointed> = Vec::with_capacity(waiting.len());
        for rx in waiting {
            match rx.await {
                Ok(r) => reports.push(r),
                Err(_) => dead = true,
            }
        }
        let error = reports
            .iter()
            .find_map(|r| r.error.as_ref().map(|e| e.to_string()));
        if dead || error.is_some() {
            drop(resumes);
            let why = error.unwrap_or_else(|| "a partition task died".into());
            return self.abort_and_rewind(&why).await;
        }
        let produced: usize = reports.iter().map(|r| r.produced).sum();
        let outputs: usize = reports.iter().map(|r| r.outputs).sum();
        let mut offsets = TopicPartitionList::new();
        for r in &reports {
            for (t, next) in r.offsets.iter().enumerate() {
                if let Some(next) = next {
                    let _ = offsets.add_partition_offset(
                        &self.env.input_topics[t],
                        r.partition,
                        Offset::Offset(*next),
                    );
                }
            }
        }
        if produced > 0 || offsets.count() > 0 {
            let start = Instant::now();
            let producer = self.producer.clone();
            let consumer = self.consumer.clone();
            let failpoints = self.failpoints.clone();
            let guarantee = self.settings.guarantee;
            let timeout = Duration::from_millis(self.settings.kafka_timeout_ms);
            let result = tokio::task::spawn_blocking(move || {
                commit_batch(
                    &producer,
                    &consumer,
                    &offsets,
                    guarantee,
                    (outputs > 0).then_some(&*failpoints),
                    timeout,
                )
            })
            .await
            .map_err(|e| Error::Stopped(format!("the commit thread failed: {e}")))
            .and_then(|r| r);
            match result {
                Ok(()) => {
                    self.metrics
                        .transactions
                        .with_label_values(&["committed"])
                        .inc();
                    self.metrics
                        .commit_duration
                        .observe(start.elapsed().as_secs_f64());
                    tracing::trace!(produced, "batch committed");
                }
                Err(e) if e.disposition() == Disposition::Fatal => {
                    tracing::error!(error = %e, "commit failed fatally, stopping without committing");
                    return Err(e);
                }
                Err(e) => {
                    drop(resumes);
                    return self.abort_and_rewind(&e.to_string()).await;
                }
            }
        }
        for (p, resume) in resumes {
            if !stopping.contains(&p) {
                let _ = resume.send(());
            }
        }
        Ok(())
    }

    /// Aborts the open transaction, stops every partition task and restores every partition from
    /// the changelog; the consumer rewinds them to their committed offsets when they are active again.
    async fn abort_and_rewind(&mut self, why: &str) -> Result<(), Error> {
        tracing::warn!(
            reason = why,
            "aborting the batch and rewinding to the committed offsets"
        );
        self.metrics
            .transactions
            .with_label_values(&["aborted"])
            .inc();
        let partitions: Vec<i32> = self.parts.keys().copied().collect();
        for p in &partitions {
            self.command(ConsumerCmd::Deactivate { partition: *p });
        }
        self.stop_partitions(&partitions).await;
        let producer = self.producer.clone();
        let guarantee = self.settings.guarantee;
        let timeout = Duration::from_millis(self.settings.kafka_timeout_ms);
        let give_up = Duration::from_millis(self.settings.transaction_timeout_ms);
        let retries = self.metrics.abort_retries.clone();
        tokio::task::spawn_blocking(move || -> Result<(), Error> {
            let _ = producer.context().take_failures();
            if guarantee == Guarantee::ExactlyOnce {
                abort_transaction(&producer, timeout, give_up, &retries)?;
                producer
                    .begin_transaction()
                    .map_err(|e| Error::Transaction {
                        op: "begin",
                        source: e,
                    })?;
            }
            Ok(())
        })
        .await
        .map_err(|e| Error::Stopped(format!("the abort thread failed: {e}")))??;
        for p in partitions {
            self.start_restore(p);
        }
        Ok(())
    }
}

/// Aborts the open transaction (blocking). When the broker does not answer within `timeout`,
/// librdkafka reports a retriable error and asks for the call again: it is repeated until
/// `give_up` (the transaction timeout, after which the broker aborts the transaction itself), so
/// a broker that stalls for longer than `kafka_timeout_ms` costs a wait, not the process.
fn abort_transaction(
    producer: &SharedProducer,
    timeout: Duration,
    give_up: Duration,
    retries: &prometheus::IntCounter,
) -> Result<(), Error> {
    let deadline = Instant::now() + give_up;
    let mut attempt = 1;
    loop {
        match producer.abort_transaction(timeout) {
            Ok(()) => return Ok(()),
            Err(KafkaError::Transaction(e)) if e.is_retriable() && Instant::now() < deadline => {
                tracing::warn!(
                    error = %e,
                    attempt,
                    "the broker did not confirm the abort in time; retrying until it answers"
                );
                attempt += 1;
                retries.inc();
                // A retriable error that came back at once must not turn into a busy loop.
                std::thread::sleep(ABORT_RETRY_BACKOFF);
            }
            Err(source) => {
                return Err(Error::Transaction {
                    op: "abort",
                    source,
                })
            }
        }
    }
}

/// Pause between two attempts to abort a transaction.
const ABORT_RETRY_BACKOFF: Duration = Duration::from_millis(100);

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
            let tx = |op: &'static str| move |e| Error::Transaction { op, source: e };
            wait_delivered(&**producer, timeout).map_err(tx("flush"))?;
            stop("after_produce");
            if offsets.count() > 0 {
                let cgm = consumer
                    .group_metadata()
                    .ok_or_else(|| Error::Stopped("the consumer has no group metadata".into()))?;
                producer
                    .send_offsets_to_transaction(offsets, &cgm, timeout)
                    .map_err(tx("send_offsets"))?;
            }
            stop("after_send_offsets");
            announce("during_commit");
            producer.commit_transaction(timeout).map_err(tx("commit"))?;
            producer.begin_transaction().map_err(tx("begin"))?;
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
