//! Start-up: the stages wired together. [`start`] checks the topics, creates the producer and
//! initializes its transactions, serves HTTP, starts the consumer thread and spawns the
//! coordinator; [`run`] is `start` until SIGTERM or SIGINT.

use crate::client::{consumer_config, producer_config, ProducerCtx, SharedProducer};
use crate::config::{Guarantee, Settings};
use crate::coordinator::{transaction, Coordinator, Partitions, Transactions};
use crate::error::Error;
use crate::failpoint::Failpoints;
use crate::http::{api_router, ops_router, HttpState};
use crate::input::batch::BatchPool;
use crate::input::consumer::{run_consumer_loop, ConsumerCmd, LoopConfig};
use crate::input::group::{ConsumerCtx, GroupConsumer, GroupEvent};
use crate::metrics::Metrics;
use crate::output::Topics;
use crate::partition::{Limits, PoisonRegistry, TaskEnv};
use crate::topics::{check_topics, MAX_OUTPUT_MESSAGE_BYTES};
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
    let producer = start_producer(&settings, &metrics).await?;
    let (http, http_addr, api_addr, http_stop) = serve_http(&settings, &registry).await?;

    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let batches = Arc::new(BatchPool::default());
    let (consumer, commands) = start_consumer(&settings, &metrics, events_tx, batches.clone())?;

    let env = Arc::new(TaskEnv {
        producer: producer.clone(),
        topics: Topics {
            inputs: [
                settings.topics.announce.clone(),
                settings.topics.completion.clone(),
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
        // Outputs held back while a batch commits have a bound of their own, as large as the
        // input's: they stop the tasks from taking input until the commit is through.
        max_held_bytes: settings.max_inflight_bytes,
        held_bytes: Arc::new(AtomicUsize::new(0)),
        poisoned: PoisonRegistry::default(),
        metrics: metrics.clone(),
        failpoints: failpoints.clone(),
        batches,
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
    };
    let (shutdown_tx, shutdown_rx) = oneshot::channel();
    let join = tokio::spawn(async move {
        let result = coordinator.run(events_rx, restored_rx, shutdown_rx).await;
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

/// The producer of records, dead letters and changelog, its transactions initialized
/// (exactly-once).
async fn start_producer(
    settings: &Arc<Settings>,
    metrics: &Metrics,
) -> Result<SharedProducer, Error> {
    let mut pc = producer_config(settings);
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
        tokio::task::spawn_blocking(move || transaction::init(&p, timeout))
            .await
            .map_err(|e| Error::Stopped(e.to_string()))??;
        tracing::info!(transactional_id = %settings.transactional_id(), "transactions initialized");
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
        ready: false.into(),
        alive: true.into(),
    });
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(());
    let http_addr = serve(
        settings.http_addr,
        ops_router(http.clone()),
        stop_rx.clone(),
    )
    .await?;
    let api_addr = match settings.api_addr {
        Some(addr) => {
            let token = settings.api_token.as_ref().map(|t| t.0.clone());
            Some(serve(addr, api_router(http.clone(), token), stop_rx).await?)
        }
        None => None,
    };
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = stopped.await;
        drop(stop_tx);
    });
    Ok((http, http_addr, api_addr, stop))
}

/// Serves `app` on `addr` until `stop` closes; the address it got.
async fn serve(
    addr: SocketAddr,
    app: axum::Router,
    mut stop: tokio::sync::watch::Receiver<()>,
) -> Result<SocketAddr, Error> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(Error::Http)?;
    let bound = listener.local_addr().map_err(Error::Http)?;
    tokio::spawn(async move {
        let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = stop.changed().await;
        });
        if let Err(e) = serve.await {
            tracing::error!(error = %e, addr = %bound, "http server failed");
        }
    });
    Ok(bound)
}

/// The group consumer, subscribed, and its thread started: group events come on `events`, the
/// thread takes commands from the returned sender.
fn start_consumer(
    settings: &Settings,
    metrics: &Metrics,
    events: mpsc::UnboundedSender<GroupEvent>,
    batches: Arc<BatchPool>,
) -> Result<(Arc<GroupConsumer>, std_mpsc::Sender<ConsumerCmd>), Error> {
    let topics = [
        settings.topics.announce.clone(),
        settings.topics.completion.clone(),
    ];
    let ack_timeout = Duration::from_millis(settings.kafka_timeout_ms.saturating_mul(2));
    let ctx = ConsumerCtx::new(topics, events, metrics.clone(), ack_timeout);
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
