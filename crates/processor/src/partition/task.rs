//! The partition task's loop, and the steps each message takes.

use super::admit::{panic_message, Admission, Admit};
use super::clock::Clock;
use super::control::{Checkpointed, PartitionMsg, Query};
use super::env::TaskEnv;
use super::outbox::{Outbox, Sent};
use super::stamps::StampOrder;
use super::validate::{validate, Invalid};
use crate::input::align::{Aligner, Next};
use crate::input::batch::{InBatch, InMsg};
use crate::input::flow::Inflight;
use crate::telemetry::partition::PartitionTelemetry;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};
use toolcalls_core::{Correlator, Effects, Outcome, Position};
use toolcalls_model::{EventKind, Timestamp};

/// Messages applied in one chunk: between two chunks the task looks at its control channel, so
/// a checkpoint or a query waits for at most one chunk of input.
const CHUNK_MESSAGES: usize = 128;

/// Processing a message panicked; the task must stop.
#[derive(Debug)]
pub(super) struct Poisoned;

/// The only owner of one input partition's correlator.
pub(crate) struct PartitionTask {
    partition: i32,
    correlator: Correlator,
    /// Records the correlator closed, reused from one step to the next.
    effects: Effects,
    /// Spans of the records published since the last checkpoint (span export on).
    spans: Vec<opentelemetry_sdk::trace::SpanData>,
    env: Arc<TaskEnv>,
    inflight: Arc<Inflight>,
    admission: Admission,
    clock: Clock,
    outbox: Outbox,
    telemetry: PartitionTelemetry,
    /// Whether each input topic delivers in timestamp order, as the merge takes it to.
    stamps: StampOrder,
}

impl PartitionTask {
    /// A task for `partition`'s restored `correlator`, expecting input offsets `next`.
    pub fn new(
        partition: i32,
        correlator: Correlator,
        next: [i64; 2],
        env: Arc<TaskEnv>,
        inflight: Arc<Inflight>,
    ) -> Self {
        PartitionTask {
            partition,
            correlator,
            effects: Effects::default(),
            spans: Vec::new(),
            admission: Admission::new(next, env.poisoned.of(partition)),
            clock: Clock::new(env.input_idle),
            outbox: Outbox::new(partition, env.clone()),
            telemetry: PartitionTelemetry::new(&env.metrics, &env.topics.inputs, partition),
            stamps: StampOrder::new(env.max_disorder_ms),
            env,
            inflight,
        }
    }

    /// Runs until the control channel closes or a checkpoint is abandoned.
    ///
    /// Control messages (checkpoints, punctuation, queries) come on `control` and are served
    /// before input batches (`input`), and between chunks of input: a checkpoint must not wait
    /// behind thousands of queued messages, or the commit interval stretches with the backlog.
    /// What a checkpoint reports is exactly what was applied before it, so the order between the
    /// two channels does not change the results.
    ///
    /// After a checkpoint the task goes on applying input while the coordinator commits; what it
    /// produces meanwhile is held back (at most `max_held_bytes`) and handed to the producer once
    /// `resume` says the next transaction has begun, so every output lands in the transaction of
    /// the offsets it derives from.
    pub async fn run(
        mut self,
        mut control: mpsc::UnboundedReceiver<PartitionMsg>,
        mut input: mpsc::UnboundedReceiver<InBatch>,
    ) {
        self.telemetry.state_sampled(&self.correlator, true);
        let mut input_open = true;
        let mut resume: Option<oneshot::Receiver<()>> = None;
        // Input not yet applied, both topics, handed out in timestamp order.
        let mut buffered = Aligner::new(self.env.align_wait);
        loop {
            // Input waits while the outputs held back reach their bound (a task holds only while
            // a checkpoint commits, so this ends with the commit).
            let held_full = self.outbox.held_full();
            let next = buffered.next(Instant::now(), self.inflight.caught_up());
            let ready = !held_full && matches!(next, Next::Apply(_));
            let wake = match next {
                Next::WaitUntil(t) if !held_full => Some(t),
                _ => None,
            };
            tokio::select! {
                biased;
                r = async {
                    match resume.as_mut() {
                        Some(r) => r.await,
                        None => std::future::pending().await,
                    }
                }, if resume.is_some() => {
                    resume = None;
                    if r.is_err() {
                        // The coordinator abandoned the batch: this state is ahead of what is
                        // committed, so it must not go on; a restore rebuilds it.
                        break;
                    }
                    self.outbox.release().await;
                }
                msg = control.recv() => {
                    let Some(msg) = msg else { break };
                    match msg {
                        PartitionMsg::Checkpoint { reply, resume: next } => {
                            // The coordinator checkpoints one batch at a time; should a second
                            // checkpoint come before the first resumed, it waits for that.
                            if let Some(r) = resume.take() {
                                if r.await.is_err() {
                                    break;
                                }
                                self.outbox.release().await;
                            }
                            let report = self.checkpoint().await;
                            if reply.send(report).is_err() {
                                break;
                            }
                            self.outbox.hold();
                            resume = Some(next);
                        }
                        PartitionMsg::Tick => self.tick().await,
                        PartitionMsg::Query(q) => self.answer(q),
                    }
                }
                // Take in what arrived before applying: the other topic may hold older messages.
                batch = input.recv(), if input_open => match batch {
                    Some(batch) => {
                        self.env.failpoints.stop("after_consume");
                        buffered.push(batch, Instant::now());
                    }
                    None => input_open = false,
                },
                _ = std::future::ready(()), if ready => {
                    if self.apply_chunk(&mut buffered).await.is_err() {
                        // The correlator's state is suspect after a panic: stop; the
                        // coordinator aborts the batch and rebuilds the partition.
                        break;
                    }
                    self.give_back_spent(&mut buffered);
                    // Let the coordinator and the other tasks of this worker run between chunks.
                    tokio::task::yield_now().await;
                }
                _ = async {
                    match wake {
                        Some(t) => tokio::time::sleep_until(t.into()).await,
                        None => std::future::pending().await,
                    }
                }, if wake.is_some() => {}
            }
        }
        self.telemetry.stopped();
    }

    /// Writes the changed state to the changelog and reports what the batch holds.
    async fn checkpoint(&mut self) -> Checkpointed {
        self.outbox
            .changelog(self.correlator.take_changelog())
            .await;
        let Sent {
            produced,
            outputs,
            error,
        } = self.outbox.take_sent();
        Checkpointed {
            partition: self.partition,
            offsets: self.admission.offsets_to_commit(),
            produced,
            outputs,
            error,
            spans: std::mem::take(&mut self.spans),
        }
    }

    /// Punctuation: moves stream time on where input no longer does, and fires the deadlines it
    /// passes.
    async fn tick(&mut self) {
        self.clock.read();
        self.telemetry.input_taken(self.clock.now_ms(), None);
        if let Some(t) = self.clock.punctuate(&self.correlator) {
            self.correlator.advance(t, &mut self.effects);
        }
        // Sessions quiet by the wall clock too go idle (docs/ARCHITECTURE.md, Correlation → Time).
        let wall = toolcalls_model::Timestamp::from_millis(self.clock.now_ms());
        self.correlator.tick(wall, &mut self.effects);
        self.account_released().await;
        if !self.effects.records.is_empty() {
            self.publish_records().await;
        }
        self.telemetry.state_sampled(&self.correlator, true);
    }

    fn answer(&self, q: Query) {
        match q {
            Query::Get(id, tx) => {
                let mut record = self.correlator.get(&id);
                if let Some(r) = record.as_mut() {
                    self.env.topics.name_provenance(self.partition, r);
                    self.env.redaction.apply(r);
                }
                let _ = tx.send(record);
            }
            Query::Session(session, tx) => {
                let mut records = self.correlator.pending_in_session(&session);
                for r in &mut records {
                    self.env.topics.name_provenance(self.partition, r);
                    self.env.redaction.apply(r);
                }
                let _ = tx.send(records);
            }
        }
    }

    /// Applies up to [`CHUNK_MESSAGES`] messages of `buffered`, in the order it hands them out;
    /// `Err` when one of them panicked.
    async fn apply_chunk(&mut self, buffered: &mut Aligner) -> Result<(), Poisoned> {
        let start = Instant::now();
        self.clock.read();
        let caught_up = self.inflight.caught_up();
        let mut applied = false;
        let mut taken = Taken::default();
        let mut result = Ok(());
        while taken.messages < CHUNK_MESSAGES {
            let Next::Apply(at) = buffered.next(start, caught_up) else {
                break;
            };
            let m = buffered.get(at);
            self.clock.topic_seen(m.topic, start);
            taken.count(m.topic_index(), buffered.size(at));
            let step = self.handle(m).await;
            buffered.pop(at);
            match step {
                Ok(a) => applied |= a,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        if applied {
            self.clock.events_applied();
        }
        self.inflight
            .taken(taken.messages, taken.bytes, taken.per_topic);
        self.telemetry.chunk_applied(start.elapsed());
        result
    }

    /// Hands input batches whose messages are all applied back to the consumer thread.
    fn give_back_spent(&mut self, buffered: &mut Aligner) {
        let mut spent = false;
        while let Some(batch) = buffered.take_spent() {
            self.env.batches.give(batch);
            spent = true;
        }
        if spent {
            if let Some(ts) = self.admission.last_timestamp_ms() {
                self.telemetry.lag_sampled(self.clock.now_ms(), ts);
            }
            self.telemetry.state_sampled(&self.correlator, false);
        }
    }

    /// One message: admit it, decode and apply it, count what happened, dead-letter what was
    /// refused, publish the records it closed. True when it was applied to the correlator, `Err`
    /// when decoding or applying it panicked.
    async fn handle(&mut self, m: InMsg<'_>) -> Result<bool, Poisoned> {
        match self.admission.admit(&m) {
            Admit::New => {}
            Admit::Seen => {
                self.telemetry.already_applied(m.topic_index(), m.offset);
                return Ok(false);
            }
            Admit::Poison(detail) => {
                self.telemetry.message_invalid(m.topic_index());
                self.dead_letter(&m, "panic", &detail).await;
                return Ok(false);
            }
        }
        if let Some(behind) = self.stamps.behind(m.topic_index(), m.timestamp_ms) {
            let window = self.env.max_disorder_ms;
            let topic = m.topic_index();
            self.telemetry.out_of_order(topic, m.offset, behind, window);
        }
        self.telemetry
            .input_taken(self.clock.now_ms(), m.timestamp_ms);
        let (kind, time, outcome) = match self.decode_and_apply(&m) {
            Ok(Ok(applied)) => applied,
            Ok(Err(Invalid { reason, detail })) => {
                self.telemetry.message_invalid(m.topic_index());
                self.dead_letter(&m, reason, &detail).await;
                return Ok(false);
            }
            Err(panic) => {
                let why = panic_message(&*panic);
                self.telemetry.poison_found(m.topic, m.offset, &why);
                self.env.poisoned.record(&m, why);
                return Err(Poisoned);
            }
        };
        self.telemetry
            .event_applied(m.topic_index(), kind, time, &outcome);
        if let Outcome::Rejected(reason) = outcome {
            let detail = format!(
                "the correlator refused the event ({reason}): {}",
                toolcalls_core::refusal_explained(reason)
            );
            self.dead_letter(&m, reason, &detail).await;
        }
        self.account_released().await;
        self.publish_records().await;
        Ok(true)
    }

    /// Counts the events the reorder window applied in this step, and dead-letters those the
    /// correlator refused. Their messages are gone by now: the dead letter carries the event as
    /// the window kept it (its v1 encoding) and the message's original position.
    async fn account_released(&mut self) {
        let released = std::mem::take(&mut self.effects.released);
        for r in &released {
            self.telemetry.event_released(&r.outcome);
            if let (Outcome::Rejected(reason), Some(event)) = (r.outcome, &r.rejected) {
                let payload = event.encode();
                let m = InMsg {
                    topic: r.pos.topic,
                    partition: self.partition,
                    offset: r.pos.offset,
                    key: Some(event.session.as_str().as_bytes()),
                    payload: Some(&payload),
                    timestamp_ms: Some(event.time.millis()),
                };
                let detail = format!(
                    "the correlator refused the event ({reason}): {} (applied from the reorder window; the payload is the event as held, re-encoded)",
                    toolcalls_core::refusal_explained(reason)
                );
                self.dead_letter(&m, reason, &detail).await;
            }
        }
        // Keep the buffer's allocation for the next step.
        self.effects.released = released;
        self.effects.released.clear();
    }

    /// Decodes and validates `m` and applies it to the correlator. A panic in either must not
    /// take the partition down for good: it is caught here, the task stops (its correlator is
    /// not used again), and the rewind that follows dead-letters this message instead of
    /// applying it again.
    fn decode_and_apply(
        &mut self,
        m: &InMsg<'_>,
    ) -> std::thread::Result<Result<(EventKind, Timestamp, Outcome), Invalid>> {
        let pos = Position::new(m.topic, m.offset);
        std::panic::catch_unwind(AssertUnwindSafe(|| {
            let event = validate(m, &self.env.limits, self.clock.now_ms())?;
            self.env.failpoints.panic("panic_in_apply");
            let (kind, time) = (event.kind(), event.time);
            Ok((
                kind,
                time,
                self.correlator.apply(event, pos, &mut self.effects),
            ))
        }))
    }

    async fn dead_letter(&mut self, m: &InMsg<'_>, reason: &'static str, detail: &str) {
        self.telemetry.dead_lettered(m.topic, m.offset, reason);
        self.outbox.dead_letter(m, reason, detail).await;
    }

    /// Publishes the records the correlator closed.
    async fn publish_records(&mut self) {
        for record in &mut self.effects.records {
            self.env.topics.name_provenance(self.partition, record);
            self.env.redaction.apply(record);
            if let Some(spans) = &self.env.spans {
                self.spans.push(spans.span(record));
            }
            self.telemetry.record_published(record, self.clock.now_ms());
            self.outbox.record(record).await;
        }
        self.effects.clear();
    }
}

/// Input taken from the aligner in one chunk, as the in-flight counters count it.
#[derive(Default)]
struct Taken {
    messages: usize,
    bytes: usize,
    per_topic: [usize; 2],
}

impl Taken {
    fn count(&mut self, topic: usize, bytes: usize) {
        self.messages += 1;
        self.bytes += bytes;
        self.per_topic[topic] += 1;
    }
}
