//! Start-up: the stages wired together. [`start`] serves HTTP, then on a task of its own waits
//! for the brokers and the topics (saying what is missing, not ready meanwhile), creates the
//! producer and initializes its transactions, starts the consumer thread and runs the
//! coordinator; [`run`] is `start` until SIGTERM or SIGINT.

use crate::client::{consumer_config, producer_config, BrokerProbe, ProducerCtx, SharedProducer};
use crate::config::MAX_OUTPUT_MESSAGE_BYTES;
use crate::config::{Guarantee, Settings};
use crate::coordinator::{transaction, Coordinator, Partitions, Transactions};
use crate::error::{Disposition, Error};
use crate::failpoint::Failpoints;
use crate::http::{api_router, ops_router, HttpState};
use crate::input::batch::BatchPool;
use crate::input::consumer::{run_consumer_loop, ConsumerCmd, LoopConfig};
use crate::input::group::{ConsumerCtx, GroupConsumer, GroupEvent};
use crate::listener::Bounds;
use crate::metrics::Metrics;
use crate::output::Topics;
use crate::ownership::Ownership;
use crate::partition::{Limits, PoisonRegistry, TaskEnv};
use crate::spans::{self, SpanMaker, SpanMetrics, SpanQueue};
use crate::telemetry::broker::{broker_watch, TopicsChecked, TopicsWaiting, TOPICS_RECHECK};
use crate::topics::check_topics;
use dashmap::DashMap;
use prometheus::Registry;
use rdkafka::consumer::Consumer;
use rdkafka::producer::ThreadedProducer;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc as std_mpsc, Arc};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use toolcalls_producer::BrokerWatch;

/// A started processor.
pub struct Running {
    /// Where the operations listener (metrics, health) listens (useful with port 0).
    pub http_addr: SocketAddr,
    /// Where the query API listens, when it is on.
    pub api_addr: Option<SocketAddr>,
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
    match running.api_addr {
        Some(api) => tracing::info!(http = %running.http_addr, api = %api, "processor started"),
        None => tracing::info!(http = %running.http_addr, "processor started"),
    }
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

/// Starts the processor: serves HTTP (metrics and health at once, readiness false), then — on a
/// task of its own, so that a broker that cannot be reached or topics that are missing cost a
/// wait, said in the log, rather than the process — waits for the brokers and the topics,
/// initializes transactions, joins the group and runs the batch cycle. Errors of that task end
/// [`Running::wait`].
pub async fn start(settings: Settings, registry: Registry) -> Result<Running, Error> {
    settings.validate()?;
    let settings = Arc::new(settings);
    let metrics = Metrics::new(&registry);
    let watch = broker_watch(&settings.brokers);
    let spans = start_span_export(&settings, &registry)?;
    let (http, http_addr, api_addr, http_stop) = serve_http(&settings, &registry).await?;
    let (shutdown_tx, shutdown_rx) = oneshot::channel();
    tokio::spawn(crate::coordinator::stall::watch(
        http.clone(),
        metrics.clone(),
    ));
    let join = tokio::spawn(async move {
        let (queue, exporter) = spans.unzip();
        let flush_within = settings.spans.otlp_timeout.0 + Duration::from_secs(1);
        let result = boot_and_run(settings, metrics, watch, http.clone(), queue, shutdown_rx).await;
        // Every queue is dropped with the coordinator: the exporter sends what is left and ends.
        if let Some(exporter) = exporter {
            if tokio::time::timeout(flush_within, exporter).await.is_err() {
                tracing::warn!("spans still queued at shutdown were not all exported in time");
            }
        }
        http.alive.store(false, Ordering::Release);
        http.ready.store(false, Ordering::Release);
        let _ = http_stop.send(());
        if let Err(e) = &result {
            tracing::error!(error = %e, "processor stopped with an error");
        }
        result
    });
    Ok(Running {
        http_addr,
        api_addr,
        registry,
        shutdown: Some(shutdown_tx),
        join,
    })
}

/// Waits for the brokers and the topics, starts the stages and runs the coordinator until it
/// stops; a shutdown while waiting ends it at once.
async fn boot_and_run(
    settings: Arc<Settings>,
    metrics: Metrics,
    watch: Arc<BrokerWatch>,
    http: Arc<HttpState>,
    spans: Option<SpanQueue>,
    mut shutdown: oneshot::Receiver<()>,
) -> Result<(), Error> {
    let partitions = tokio::select! {
        r = wait_for_topics(&settings, &watch) => r?,
        _ = &mut shutdown => {
            watch.mute();
            tracing::info!("shut down before the topics could be checked");
            return Ok(());
        }
    };
    http.ownership.set_partitions(partitions);
    TopicsChecked {
        partitions,
        group: &settings.group,
        guarantee: settings.guarantee,
    }
    .emit();

    let failpoints = Arc::new(Failpoints::parse(settings.failpoint.as_deref()));
    let producer = tokio::select! {
        r = start_producer(&settings, &metrics, &watch) => r?,
        _ = &mut shutdown => {
            watch.mute();
            tracing::info!("shut down before transactions were initialized");
            return Ok(());
        }
    };

    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let batches = Arc::new(BatchPool::default());
    let (consumer, commands) =
        start_consumer(&settings, &metrics, &watch, events_tx, batches.clone())?;
    http.ownership.set_consumer(consumer.clone());

    let env = Arc::new(TaskEnv {
        producer: producer.clone(),
        topics: Topics {
            inputs: [
                settings.topics.announce.as_str().into(),
                settings.topics.completion.as_str().into(),
            ],
            records: settings.topics.records.clone(),
            dlq: settings.topics.dlq.clone(),
            changelog: settings.changelog_topic(),
        },
        limits: Limits {
            max_message_bytes: settings.max_message_bytes,
            max_future_skew_ms: settings.max_future_skew_ms,
        },
        input_idle: Duration::from_millis(settings.input_idle_ms),
        align_wait: Duration::from_millis(settings.align_wait_ms),
        max_disorder_ms: settings.core.max_disorder_ms,
        // Outputs held back while a batch commits have a bound of their own, as large as the
        // input's: they stop the tasks from taking input until the commit is through.
        max_held_bytes: settings.max_inflight_bytes,
        held_bytes: Arc::new(AtomicUsize::new(0)),
        poisoned: PoisonRegistry::default(),
        metrics: metrics.clone(),
        failpoints: failpoints.clone(),
        batches,
        redaction: settings.redact.resolve().map_err(Error::Config)?,
        spans: spans.is_some().then(SpanMaker::default),
    });
    let (restored_tx, restored_rx) = mpsc::unbounded_channel();
    let coordinator = Coordinator {
        transactions: Transactions {
            producer,
            consumer: consumer.clone(),
            guarantee: settings.guarantee,
            timeout: Duration::from_millis(settings.kafka_timeout_ms),
            give_up: Duration::from_millis(settings.transaction_timeout_ms),
            failpoints,
            metrics: metrics.clone(),
            unfinished: Default::default(),
            offsets_in_flight: Default::default(),
        },
        partitions: Partitions::new(
            settings.clone(),
            metrics.clone(),
            consumer,
            commands,
            http.clone(),
            env,
            restored_tx,
        ),
        settings,
        metrics,
        joined: false,
        spans,
    };
    coordinator.run(events_rx, restored_rx, shutdown).await
}

/// Starts the span exporter when `--otlp-endpoint` is set.
fn start_span_export(
    settings: &Settings,
    registry: &Registry,
) -> Result<Option<(SpanQueue, tokio::task::JoinHandle<()>)>, Error> {
    let Some(url) = settings.spans.traces_url().map_err(Error::Config)? else {
        return Ok(None);
    };
    let metrics = SpanMetrics::new(registry);
    let started = spans::start(&settings.spans, url.clone(), &settings.instance_id, metrics)
        .map_err(Error::Config)?;
    tracing::info!(endpoint = %url, "exporting records as OpenTelemetry spans");
    Ok(Some(started))
}

/// Waits until the brokers answer and the topics are there and co-partitioned, saying meanwhile
/// what is missing (the brokers' trouble through the watch, the topics' as errors), each at once
/// and then every 10 s. Returns the input partition count; errors only on what waiting cannot
/// mend (the configuration).
async fn wait_for_topics(settings: &Arc<Settings>, watch: &Arc<BrokerWatch>) -> Result<i32, Error> {
    // Each look is bounded, so that a broker that goes away between two steps costs seconds.
    let mut quick = (**settings).clone();
    quick.kafka_timeout_ms = quick.kafka_timeout_ms.min(5_000);
    let quick = Arc::new(quick);
    let mut waiting = TopicsWaiting::default();
    let probe = Arc::new(BrokerProbe::new(settings, watch)?);
    loop {
        // Bounded, so that a shutdown does not leave a thread waiting long.
        let p = probe.clone();
        let deadline = std::time::Instant::now() + TOPICS_RECHECK;
        let reached = tokio::task::spawn_blocking(move || p.wait(Some(deadline)))
            .await
            .map_err(|e| Error::Stopped(e.to_string()))?;
        match reached {
            Ok(()) => {}
            // Said by the watch; go on waiting.
            Err(Error::Unreachable { .. }) => continue,
            Err(e) => return Err(e),
        }
        let s = quick.clone();
        let checked = tokio::task::spawn_blocking(move || check_topics(&s))
            .await
            .map_err(|e| Error::Stopped(e.to_string()))?;
        match checked {
            Ok(partitions) => return Ok(partitions),
            Err(e @ (Error::MissingTopic { .. } | Error::NotCoPartitioned(_))) => waiting.emit(&e),
            Err(e @ Error::Kafka { .. }) if e.disposition() == Disposition::Retry => {
                waiting.emit(&e)
            }
            Err(e) => return Err(e),
        }
        tokio::time::sleep(TOPICS_RECHECK).await;
    }
}

/// The producer of records, dead letters and changelog, its transactions initialized
/// (exactly-once).
async fn start_producer(
    settings: &Arc<Settings>,
    metrics: &Metrics,
    watch: &Arc<BrokerWatch>,
) -> Result<SharedProducer, Error> {
    let mut pc = producer_config(settings);
    pc.set("message.max.bytes", MAX_OUTPUT_MESSAGE_BYTES.to_string());
    let exactly_once = settings.guarantee == Guarantee::ExactlyOnce;
    let producer: SharedProducer = Arc::new(
        pc.create_with_context::<_, ThreadedProducer<ProducerCtx>>(ProducerCtx::new(
            metrics.clone(),
            watch.clone(),
            exactly_once.then(|| settings.transactional_id()),
        ))
        .map_err(|e| Error::kafka("creating the producer", e))?,
    );
    if exactly_once {
        let timeout = Duration::from_millis(settings.kafka_timeout_ms);
        loop {
            let p = producer.clone();
            let done = tokio::task::spawn_blocking(move || transaction::init(&p, timeout))
                .await
                .map_err(|e| Error::Stopped(e.to_string()))?;
            match done {
                Ok(()) => break,
                // The brokers went away since they answered: the watch says so; try again.
                Err(e) if e.disposition() == Disposition::Retry => {
                    tracing::warn!(error = %e, "initializing transactions failed, trying again");
                    tokio::time::sleep(TOPICS_RECHECK).await;
                }
                Err(e) => {
                    if let Error::Transaction { error, .. } = &e {
                        rdkafka::producer::Producer::context(&*producer).check_fenced(error);
                    }
                    return Err(e);
                }
            }
        }
        // A process killed with this transactional id left its transaction open: the broker
        // has just aborted it (fenced its producer), so its records never show.
        tracing::info!(
            transactional_id = %settings.transactional_id(),
            "transactions initialized; any transaction an earlier process with this id left open (killed, or fenced now) is aborted"
        );
    }
    Ok(producer)
}

/// Serves `/metrics`, health and readiness, and the query API where it is on, until the
/// returned sender fires.
async fn serve_http(
    settings: &Settings,
    registry: &Registry,
) -> Result<
    (
        Arc<HttpState>,
        SocketAddr,
        Option<SocketAddr>,
        oneshot::Sender<()>,
    ),
    Error,
> {
    let http = Arc::new(HttpState {
        registry: registry.clone(),
        partitions: DashMap::new(),
        restoring: dashmap::DashSet::new(),
        joined: false.into(),
        waits: Default::default(),
        stall_after: Duration::from_millis(settings.kafka_timeout_ms),
        ready: false.into(),
        alive: true.into(),
        ownership: Ownership::new(
            settings.instance_id.clone(),
            settings.group.clone(),
            settings.topics.announce.clone(),
        ),
    });
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let bounds = Bounds {
        max_connections: settings.http_max_connections,
        read_timeout: Duration::from_millis(settings.http_read_timeout_ms),
    };
    let http_addr = serve(
        settings.http_addr,
        ops_router(http.clone()),
        bounds,
        stop_rx.clone(),
    )
    .await?;
    let api_addr = match settings.api_addr {
        Some(addr) => {
            let token = settings.api_token.clone();
            Some(serve(addr, api_router(http.clone(), token), bounds, stop_rx).await?)
        }
        None => None,
    };
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = stopped.await;
        let _ = stop_tx.send(true);
    });
    Ok((http, http_addr, api_addr, stop))
}

/// Serves `app` on `addr`, within `bounds`, until `stop` turns true; the address it got.
async fn serve(
    addr: SocketAddr,
    app: axum::Router,
    bounds: Bounds,
    stop: tokio::sync::watch::Receiver<bool>,
) -> Result<SocketAddr, Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(Error::Http)?;
    let bound = listener.local_addr().map_err(Error::Http)?;
    tokio::spawn(crate::listener::serve(listener, app, bounds, stop));
    Ok(bound)
}

/// The group consumer, subscribed, and its thread started: group events come on `events`, the
/// thread takes commands from the returned sender.
fn start_consumer(
    settings: &Settings,
    metrics: &Metrics,
    watch: &Arc<BrokerWatch>,
    events: mpsc::UnboundedSender<GroupEvent>,
    batches: Arc<BatchPool>,
) -> Result<(Arc<GroupConsumer>, std_mpsc::Sender<ConsumerCmd>), Error> {
    let topics = [
        settings.topics.announce.clone(),
        settings.topics.completion.clone(),
    ];
    let ack_timeout = Duration::from_millis(settings.kafka_timeout_ms.saturating_mul(2));
    let ctx = ConsumerCtx::new(topics, events, metrics.clone(), ack_timeout, watch.clone());
    let wake = ctx.wake.clone();
    let mut consumer: GroupConsumer = consumer_config(settings)
        .create_with_context(ctx)
        .map_err(|e| Error::kafka("creating the consumer", e))?;
    // Rebalances and messages on the group queue wake the consumer thread from its idle wait.
    consumer.set_nonempty_callback(move || wake.notify());
    let consumer = Arc::new(consumer);
    consumer
        .subscribe(&[settings.topics.announce.as_str()])
        .map_err(|e| Error::kafka("subscribing", e))?;
    let (commands, cmd_rx) = std_mpsc::channel();
    let loop_cfg = LoopConfig {
        batches,
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
    Ok((consumer, commands))
}
