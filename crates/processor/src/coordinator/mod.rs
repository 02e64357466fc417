//! The coordinator: owns the producer's transactions, the partitions and the batch cycle.
//!
//! A batch is everything the partition tasks produced since the last checkpoint. At a checkpoint
//! (every `commit_interval_ms`, and before partitions are revoked) every task writes its changed
//! state to the changelog and reports its next offsets ([`checkpoint`]); the coordinator then
//! sends the offsets to the transaction and commits it (exactly-once), or flushes and commits the
//! offsets (at-least-once) ([`transaction`]), and tells the tasks it is done (`resume`). The tasks
//! do not wait for that: they go on applying input, and hold back what they produce until
//! `resume` says the next transaction has begun — outputs never land in a transaction with
//! offsets they do not derive from, and the cores are not left idle while the broker commits. If
//! anything fails the transaction is aborted, every task is stopped and every partition is
//! restored from the changelog and rewound to its committed offsets ([`partitions`]) — the
//! in-memory state is never trusted past a failed commit.

mod checkpoint;
mod partitions;
pub(crate) mod stall;
pub(crate) mod transaction;

use crate::config::Settings;
use crate::error::{Disposition, Error};
use crate::input::consumer::ConsumerCmd;
use crate::input::group::GroupEvent;
use crate::metrics::Metrics;
use crate::telemetry::coordinator::{BatchAborted, BatchCommitted, CommitFailedFatally};
pub(crate) use partitions::{Partitions, RestoreDone};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
pub(crate) use transaction::Transactions;

pub(crate) struct Coordinator {
    pub settings: Arc<Settings>,
    pub metrics: Metrics,
    pub partitions: Partitions,
    pub transactions: Transactions,
    /// The consumer received an assignment (possibly empty) and has not lost it since.
    pub joined: bool,
    /// Where the spans of committed records go (`--otlp-endpoint`).
    pub spans: Option<crate::spans::SpanQueue>,
}

impl Coordinator {
    /// Runs the batch cycle until the consumer left the group (after `shutdown`, or on its own),
    /// or a fatal error.
    pub async fn run(
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
                    self.partitions.command(ConsumerCmd::Shutdown);
                }
                event = events.recv() => match event {
                    None | Some(GroupEvent::Closed) => break Ok(()),
                    Some(GroupEvent::Assigned(partitions)) => {
                        self.joined = true;
                        self.partitions.set_joined(true);
                        for p in partitions {
                            self.partitions.start_restore(p);
                        }
                    }
                    Some(GroupEvent::Revoked { partitions, ack }) => {
                        let r = self.checkpoint(&partitions).await;
                        self.partitions.stop(&partitions).await;
                        let _ = ack.send(());
                        if let Err(e) = r { break Err(e); }
                    }
                    Some(GroupEvent::Lost { partitions, ack }) => {
                        // Out of the group (its session expired) until it is assigned again:
                        // not ready, and the query API does not answer for partitions it had.
                        self.joined = false;
                        self.partitions.set_joined(false);
                        self.partitions.stop(&partitions).await;
                        let r = self.abort_and_rewind("partitions lost").await;
                        let _ = ack.send(());
                        if let Err(e) = r { break Err(e); }
                    }
                    Some(GroupEvent::Fatal(why)) => break Err(Error::Stopped(why)),
                },
                Some(done) = restored.recv() => {
                    if let Err(e) = self.partitions.restored(done) { break Err(e); }
                }
                _ = commit_tick.tick() => {
                    if let Err(e) = self.checkpoint(&[]).await { break Err(e); }
                }
                _ = punctuation.tick() => {
                    self.partitions.tick();
                    // A lasting broker trouble is said again when due, even while the consumer
                    // thread, whose statistics do that too, waits on a rebalance.
                    self.transactions.watch().tick();
                }
            }
            // Not ready either while the brokers are out of reach (the watch says why).
            let reachable = self.transactions.watch().is_reachable();
            self.partitions.update_readiness(self.joined && reachable);
        };
        // Leaving: stop whatever is left without committing more (revocation committed it), let
        // the consumer thread go (its command channel closes), and flush what is in flight.
        let left = self.partitions.all();
        self.partitions.stop(&left).await;
        let Coordinator {
            partitions,
            transactions,
            ..
        } = self;
        drop(partitions);
        transactions.flush().await;
        result
    }

    /// Commits the current batch. `stopping` partitions are not resumed afterwards (they are
    /// being revoked). Transient failures abort and rewind; fatal ones are returned.
    async fn checkpoint(&mut self, stopping: &[i32]) -> Result<(), Error> {
        let _waiting = stall::Waiting::begin(&self.partitions.http);
        let asked = self.partitions.ask_checkpoint();
        if asked.is_empty() {
            return Ok(());
        }
        let mut batch = match asked.collect().await {
            Ok(batch) => batch,
            Err(why) => return self.abort_and_rewind(&why).await,
        };
        let produced = batch.produced();
        let offsets = batch.offsets(&self.partitions.env.topics.inputs);
        if produced > 0 || offsets.count() > 0 {
            let start = Instant::now();
            let outputs = batch.outputs() > 0;
            match self.transactions.commit(offsets, outputs).await {
                Ok(()) => {
                    BatchCommitted {
                        produced,
                        elapsed: start.elapsed(),
                    }
                    .emit(&self.metrics);
                    // The brokers answered: any trouble with them is over.
                    self.transactions.watch().reachable();
                }
                Err(error) if error.disposition() == Disposition::Fatal => {
                    CommitFailedFatally { error: &error }.emit();
                    return Err(error);
                }
                Err(e) => {
                    drop(batch);
                    return self.abort_and_rewind(&e.to_string()).await;
                }
            }
        }
        // Only now are the records visible downstream: their spans may go.
        if let Some(spans) = &self.spans {
            spans.offer(batch.take_spans());
        }
        batch.resume(stopping);
        Ok(())
    }

    /// Aborts the open transaction, stops every partition task and restores every partition from
    /// the changelog; the consumer rewinds them to their committed offsets when they are active
    /// again.
    async fn abort_and_rewind(&mut self, why: &str) -> Result<(), Error> {
        let _waiting = stall::Waiting::begin(&self.partitions.http);
        BatchAborted { reason: why }.emit(&self.metrics);
        let partitions = self.partitions.all();
        self.partitions.deactivate(&partitions);
        self.partitions.stop(&partitions).await;
        self.transactions.abort().await?;
        for p in partitions {
            self.partitions.start_restore(p);
        }
        Ok(())
    }
}
