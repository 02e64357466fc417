//! The group consumer's context: librdkafka calls it on the consumer thread, inside `poll`, for
//! rebalances, statistics and errors.
//!
//! The group is formed on the **announce topic only**; completion partition `p` follows announce
//! partition `p` into the local assignment. librdkafka's assignors (range, roundrobin,
//! cooperative-sticky) assign each topic on its own, so subscribing to both topics would let the
//! two halves of one session land on different instances; following the leader topic keeps them
//! together under cooperative-sticky rebalancing.
//!
//! Rebalances are turned into [`GroupEvent`]s for the coordinator; a revocation waits (bounded)
//! for the coordinator's acknowledgement, which comes after the current batch is committed,
//! before the partitions are given up. Newly assigned partitions are paused at once and stay
//! paused until the coordinator has restored their state (see [`super::consumer`]).

use super::flow::{PartitionSink, Wake};
use super::lag::{caught_up, record_lag};
use crate::client::log_to_tracing;
use crate::metrics::Metrics;
use crate::telemetry::input::{
    wall_ms, LagSecondsObserved, PartitionsAssigned, PartitionsRevoked, RevocationUnacknowledged,
};
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::KafkaError;
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::TopicPartitionList;
use rdkafka::types::RDKafkaRespErr;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{mpsc as std_mpsc, Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use toolcalls_producer::BrokerWatch;

pub(crate) type GroupConsumer = BaseConsumer<ConsumerCtx>;

/// What the consumer thread tells the coordinator.
pub(crate) enum GroupEvent {
    /// Announce partitions (and their completion twins) were assigned; they are paused.
    Assigned(Vec<i32>),
    /// Partitions are being revoked; acknowledge once their batch is committed and their tasks stopped.
    Revoked {
        partitions: Vec<i32>,
        ack: std_mpsc::SyncSender<()>,
    },
    /// Partitions were lost (the group moved on without us); drop them without committing.
    Lost {
        partitions: Vec<i32>,
        ack: std_mpsc::SyncSender<()>,
    },
    /// A consumer error the runtime cannot continue after.
    Fatal(String),
    /// The consumer left the group and the thread ended.
    Closed,
}

/// The partitions whose messages are routed to a task (restored and active).
#[derive(Default)]
pub(crate) struct Routes {
    pub active: HashMap<i32, PartitionSink>,
}

pub(crate) struct ConsumerCtx {
    pub topics: [String; 2],
    pub events: UnboundedSender<GroupEvent>,
    pub metrics: Metrics,
    /// How long a revocation waits for the coordinator.
    pub ack_timeout: Duration,
    pub wake: Arc<Wake>,
    /// Told of connectivity errors, and of brokers that answer (from the statistics).
    pub watch: Arc<BrokerWatch>,
    routes: Mutex<Routes>,
}

impl ConsumerCtx {
    pub fn new(
        topics: [String; 2],
        events: UnboundedSender<GroupEvent>,
        metrics: Metrics,
        ack_timeout: Duration,
        watch: Arc<BrokerWatch>,
    ) -> Self {
        ConsumerCtx {
            topics,
            events,
            metrics,
            ack_timeout,
            watch,
            wake: Arc::new(Wake::default()),
            routes: Mutex::new(Routes::default()),
        }
    }

    /// Both input topics' partitions `partitions`.
    pub fn both(&self, partitions: &[i32]) -> TopicPartitionList {
        let mut tpl = TopicPartitionList::new();
        for topic in &self.topics {
            for p in partitions {
                tpl.add_partition(topic, *p);
            }
        }
        tpl
    }

    /// 0 for the announce topic, 1 for the completion topic.
    pub fn topic_index(&self, topic: &str) -> Option<u16> {
        self.topics
            .iter()
            .position(|t| t == topic)
            .map(|i| i as u16)
    }

    pub fn routes(&self) -> MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn on_assign(&self, consumer: &BaseConsumer<Self>, partitions: Vec<i32>, cooperative: bool) {
        let tpl = self.both(&partitions);
        let result = if cooperative {
            consumer.incremental_assign(&tpl)
        } else {
            consumer.assign(&tpl)
        };
        if let Err(e) = result {
            let _ = self.events.send(GroupEvent::Fatal(format!(
                "assigning partitions {partitions:?} failed: {e}"
            )));
            return;
        }
        if let Err(e) = consumer.pause(&tpl) {
            let _ = self.events.send(GroupEvent::Fatal(format!(
                "pausing new partitions {partitions:?} failed: {e}"
            )));
            return;
        }
        PartitionsAssigned {
            partitions: &partitions,
        }
        .emit(&self.metrics);
        let _ = self.events.send(GroupEvent::Assigned(partitions));
    }

    fn on_revoke(&self, consumer: &BaseConsumer<Self>, partitions: Vec<i32>, cooperative: bool) {
        let lost = consumer.assignment_lost();
        let (ack, done) = std_mpsc::sync_channel(1);
        PartitionsRevoked {
            partitions: &partitions,
            lost,
        }
        .emit(&self.metrics);
        let event = if lost {
            GroupEvent::Lost {
                partitions: partitions.clone(),
                ack,
            }
        } else {
            GroupEvent::Revoked {
                partitions: partitions.clone(),
                ack,
            }
        };
        if self.events.send(event).is_ok() && done.recv_timeout(self.ack_timeout).is_err() {
            RevocationUnacknowledged {
                partitions: &partitions,
                timeout: self.ack_timeout,
            }
            .emit();
        }
        {
            let mut routes = self.routes();
            for p in &partitions {
                routes.active.remove(p);
            }
        }
        let tpl = self.both(&partitions);
        let result = if cooperative {
            consumer.incremental_unassign(&tpl)
        } else {
            consumer.unassign()
        };
        if let Err(e) = result {
            tracing::warn!(error = %e, ?partitions, "unassigning partitions failed");
        }
    }
}

impl ClientContext for ConsumerCtx {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, message: &str) {
        log_to_tracing(level, fac, message);
    }

    fn stats(&self, statistics: Statistics) {
        // A broker connection that is up ends any trouble the watch knows of; while none is,
        // the watch says the trouble again when due.
        if statistics.brokers.values().any(|b| b.state == "UP") {
            self.watch.reachable();
        } else {
            self.watch.tick();
        }
        record_lag(&self.metrics, &self.topics, &statistics);
        let now_ms = wall_ms();
        let taken = std::time::Instant::now();
        let routes = self.routes();
        for (p, sink) in &routes.active {
            let mut waiting = sink.inflight.messages.load(Ordering::Acquire) > 0;
            for (t, topic) in self.topics.iter().enumerate() {
                let part = statistics
                    .topics
                    .get(topic)
                    .and_then(|s| s.partitions.get(p));
                let done = part.is_some_and(caught_up);
                sink.inflight.set_caught_up(t, done, taken);
                waiting |= !done;
            }
            LagSecondsObserved {
                partition: *p,
                waiting,
                now_ms,
            }
            .emit(&self.metrics);
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if self.watch.client_error(&error, reason) {
            return;
        }
        let fatal = error.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::Fatal);
        if fatal {
            tracing::error!(error = %error, reason, "fatal consumer error");
            let _ = self
                .events
                .send(GroupEvent::Fatal(format!("{error}: {reason}")));
        } else {
            tracing::warn!(error = %error, reason, "consumer error");
        }
    }
}

impl ConsumerContext for ConsumerCtx {
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        let partitions: Vec<i32> = tpl
            .elements()
            .iter()
            .filter(|e| e.topic() == self.topics[0])
            .map(|e| e.partition())
            .collect();
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                self.on_assign(consumer, partitions, cooperative)
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                self.on_revoke(consumer, partitions, cooperative)
            }
            other => {
                tracing::error!(error = ?other, "rebalance failed, dropping the assignment");
                let all: Vec<i32> = self.routes().active.keys().copied().collect();
                self.on_revoke(consumer, all, false);
            }
        }
    }
}
