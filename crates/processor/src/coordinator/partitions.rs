//! The partitions this instance owns, each restoring or active: restores are started and
//! finished here, tasks spawned, routed by the consumer thread, and stopped.

use super::checkpoint::Asked;
use crate::changelog::restore::{restore_partition, Restored};
use crate::config::Settings;
use crate::error::{Disposition, Error};
use crate::http::HttpState;
use crate::input::batch::InBatch;
use crate::input::consumer::ConsumerCmd;
use crate::input::flow::{Inflight, PartitionSink};
use crate::input::group::GroupConsumer;
use crate::metrics::Metrics;
use crate::partition::{PartitionMsg, PartitionTask, TaskEnv};
use crate::telemetry::coordinator::{Readiness, RestoreFinished, RestoreRetried, RestoreStarted};
use rdkafka::consumer::Consumer;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{mpsc as std_mpsc, Arc};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

enum Part {
    /// Its state is being rebuilt; `gen` tells this restore from a later one of the partition.
    Restoring { gen: u64 },
    Active {
        tx: mpsc::UnboundedSender<PartitionMsg>,
        task: JoinHandle<()>,
    },
}

/// A restore finished (on its blocking thread).
pub(crate) struct RestoreDone {
    partition: i32,
    gen: u64,
    result: Result<Restored, Error>,
}

pub(crate) struct Partitions {
    pub settings: Arc<Settings>,
    pub metrics: Metrics,
    pub consumer: Arc<GroupConsumer>,
    pub commands: std_mpsc::Sender<ConsumerCmd>,
    pub http: Arc<HttpState>,
    pub env: Arc<TaskEnv>,
    pub restored: mpsc::UnboundedSender<RestoreDone>,
    parts: HashMap<i32, Part>,
    next_gen: u64,
}

impl Partitions {
    pub fn new(
        settings: Arc<Settings>,
        metrics: Metrics,
        consumer: Arc<GroupConsumer>,
        commands: std_mpsc::Sender<ConsumerCmd>,
        http: Arc<HttpState>,
        env: Arc<TaskEnv>,
        restored: mpsc::UnboundedSender<RestoreDone>,
    ) -> Self {
        Partitions {
            settings,
            metrics,
            consumer,
            commands,
            http,
            env,
            restored,
            parts: HashMap::new(),
            next_gen: 0,
        }
    }

    /// Sends a command to the consumer thread and wakes it from its idle wait.
    pub fn command(&self, cmd: ConsumerCmd) {
        let _ = self.commands.send(cmd);
        self.consumer.context().wake.notify();
    }

    /// Every partition owned.
    pub fn all(&self) -> Vec<i32> {
        self.parts.keys().copied().collect()
    }

    /// Rebuilds `partition`'s state from the changelog, on a blocking thread; the result comes
    /// back as a [`RestoreDone`] for [`Partitions::restored`].
    pub fn start_restore(&mut self, partition: i32) {
        self.next_gen += 1;
        let gen = self.next_gen;
        self.parts.insert(partition, Part::Restoring { gen });
        self.http.restoring.insert(partition);
        let settings = self.settings.clone();
        let consumer = self.consumer.clone();
        let done = self.restored.clone();
        RestoreStarted { partition }.emit();
        tokio::task::spawn_blocking(move || {
            let result = restore_partition(&settings, &consumer, partition);
            let _ = done.send(RestoreDone {
                partition,
                gen,
                result,
            });
        });
    }

    /// A restore finished: the partition's task starts and the consumer thread seeks, routes and
    /// resumes its input. A restore that failed is tried again when the error is transient.
    pub fn restored(&mut self, done: RestoreDone) -> Result<(), Error> {
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
            Err(error) if error.disposition() == Disposition::Retry => {
                RestoreRetried {
                    partition,
                    error: &error,
                }
                .emit();
                self.start_restore(partition);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        RestoreFinished {
            partition,
            records_read: restored.records_read,
            entries: restored.entries,
            restated: restored.restated,
            pending: restored.correlator.pending_len(),
            elapsed: restored.elapsed,
        }
        .emit(&self.metrics);
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
        self.http.restoring.remove(&partition);
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
    pub async fn stop(&mut self, partitions: &[i32]) {
        for p in partitions {
            self.http.partitions.remove(p);
            self.http.restoring.remove(p);
            if let Some(Part::Active { tx, task }) = self.parts.remove(p) {
                drop(tx);
                task.abort();
                let _ = task.await;
            }
        }
    }

    /// Tells the consumer thread to stop routing and pause `partitions` (before a rewind).
    pub fn deactivate(&self, partitions: &[i32]) {
        for p in partitions {
            self.command(ConsumerCmd::Deactivate { partition: *p });
        }
    }

    /// Punctuation for every active task.
    pub fn tick(&self) {
        for part in self.parts.values() {
            if let Part::Active { tx, .. } = part {
                let _ = tx.send(PartitionMsg::Tick);
            }
        }
    }

    /// Asks every active task to checkpoint.
    pub(super) fn ask_checkpoint(&self) -> Asked {
        let mut asked = Asked::default();
        for (p, part) in &self.parts {
            if let Part::Active { tx, .. } = part {
                asked.ask(*p, tx);
            }
        }
        asked
    }

    /// Whether the consumer is in the group, for the query API.
    pub fn set_joined(&self, joined: bool) {
        self.http.joined.store(joined, Ordering::Release);
    }

    /// Readiness: the consumer has `joined` the group and no partition is restoring.
    pub fn update_readiness(&self, joined: bool) {
        let restoring = self
            .parts
            .values()
            .any(|p| matches!(p, Part::Restoring { .. }));
        let ready = joined && !restoring;
        self.http.ready.store(ready, Ordering::Release);
        Readiness {
            assigned: self.parts.len(),
            ready,
        }
        .emit(&self.metrics);
    }
}
