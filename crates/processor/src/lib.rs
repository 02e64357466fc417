//! The toolcalls processor runtime.
//!
//! `toolcalls run` is a Kafka consumer group that reads the announce and completion topics, feeds
//! each input partition's events to its own [`toolcalls_core::Correlator`], and publishes ToolCall
//! records, dead letters and a compacted changelog of the correlation state.
//!
//! # Shape
//!
//! - **Consumer thread** ([`consumer`](crate::consumer)): one OS thread polls the group consumer,
//!   turns rebalance callbacks into messages for the coordinator (a revocation waits for its
//!   acknowledgement), routes messages to partition tasks and holds back a partition whose task is behind.
//!   The group forms on the announce topic; completion partition `p` follows announce partition `p`.
//! - **Partition tasks**: one tokio task per assigned partition owns its correlator — no locks on
//!   the hot path. Decode, validate, correlate, produce.
//! - **Coordinator**: owns the transactional producer and the batch cycle: checkpoint every
//!   `commit_interval_ms` (every task writes its state to the changelog and reports its offsets,
//!   which go into the transaction; the tasks go on meanwhile, holding back what they produce until
//!   the next transaction has begun), restores on assignment, abort-and-rewind on failure.
//! - **HTTP**: metrics from an explicit registry, health, readiness, and the query API.
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

mod align;
mod client;
pub mod config;
mod consumer;
pub mod core_settings;
pub mod error;
mod failpoint;
mod http;
pub mod logging;
pub mod metrics;
pub mod output;
mod partition;
mod restore;
mod runtime;
pub mod topics;

pub use config::{Guarantee, LogFormat, RunArgs, Settings};
pub use error::{Disposition, Error};
pub use runtime::{run, start, Running};
pub use topics::{create_topics, TopicOutcome, TopicPlan};
