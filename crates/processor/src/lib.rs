//! The toolcalls processor runtime.
//!
//! `toolcalls run` is a Kafka consumer group that reads the announce and completion topics, feeds
//! each input partition's events to its own [`toolcalls_core::Correlator`], and publishes ToolCall
//! records, dead letters and a compacted changelog of the correlation state.
//!
//! # Shape
//!
//! The runtime is a pipeline of stages; a message passes them in this order.
//!
//! 1. **Input** (`input/`). One OS thread (`input/consumer.rs`) polls the group consumer and
//!    copies each partition's messages into input batches (`input/batch.rs`), reading a partition
//!    only while its task keeps up (`input/flow.rs`). The group forms on the announce topic;
//!    completion partition `p` follows announce partition `p` (`input/group.rs`, which also turns
//!    rebalances into events for the coordinator and statistics into lag, `input/lag.rs`). In the
//!    task, `input/align.rs` merges the two topics' batches back into timestamp order.
//! 2. **Partition** (`partition/`). One tokio task per assigned partition owns its correlator —
//!    no locks on the hot path (`partition/task.rs`). Each message is admitted (`admit.rs`:
//!    offset dedupe, known poison), decoded and checked (`validate.rs`), applied, counted, and
//!    its records published — or held back while the last batch commits (`outbox.rs`,
//!    `held.rs`).
//! 3. **Output** (`output.rs`). Records and dead letters encoded and handed to librdkafka.
//! 4. **Changelog** (`changelog/`). At each checkpoint every task writes the state its
//!    correlator changed (`changelog/write.rs`); on assignment and after an abort the state is
//!    rebuilt from it (`changelog/restore.rs`).
//! 5. **Coordinator** (`coordinator/`). Owns the batch cycle: every `commit_interval_ms` it asks
//!    every task for a checkpoint (`checkpoint.rs`) and commits the batch — outputs, changelog
//!    and input offsets in one transaction (`transaction.rs`); the tasks go on meanwhile. It
//!    restores partitions on assignment, starts and stops their tasks (`partitions.rs`), and
//!    aborts and rewinds on failure.
//!
//! Around them: `startup.rs` wires the stages together ([`start`], [`run`]); `client.rs` holds
//! the librdkafka configurations and the producer's context; `telemetry/` the log line and metric
//! moves of every observable event, one file per stage, over the metrics of `metrics.rs`;
//! `http.rs` serves metrics, health, readiness and the query API; `spans/` exports records as
//! OpenTelemetry spans; `topics.rs` creates and checks
//! the topics; `failpoint.rs` is the crash-test hook.
//!
//! # Guarantees
//!
//! Exactly-once by default: records, changelog entries, dead letters and input offsets of a batch
//! commit in one transaction; read_committed readers of the outputs see each batch once or not at
//! all. On assignment a partition stays paused until its state is restored from the changelog,
//! ignoring entries written past the committed offsets. Brokers that do not hide aborted
//! transactions (Tansu) weaken what downstream sees: see `docs/OPERATIONS.md`.
//!
//! Blocking librdkafka calls run on the consumer thread or on `spawn_blocking`, never on the async
//! workers.

pub mod changelog;
mod client;
pub mod config;
mod coordinator;
pub mod core_settings;
pub mod error;
mod failpoint;
mod http;
mod input;
pub mod listener;
pub mod logging;
pub mod metrics;
pub mod output;
mod ownership;
mod partition;
pub mod redact_settings;
mod secret;
pub mod spans;
mod startup;
mod telemetry;
pub mod topics;
mod waits;

pub use client::wait_for_brokers;
pub use config::{Guarantee, LogFormat, RunArgs, Secret, Settings};
pub use error::{Disposition, Error};
pub use startup::{run, start, Running};
pub use topics::{create_topics, TopicOutcome, TopicPlan};
