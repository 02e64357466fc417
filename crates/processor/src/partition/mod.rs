//! The partition stage: one tokio task per assigned partition, the only owner of its
//! [`Correlator`](toolcalls_core::Correlator) — no locks on the hot path.
//!
//! A task receives batches of both input topics' partition `p` from the consumer thread, merges
//! them back into timestamp order ([`crate::input::align`]) and takes each message through its
//! steps ([`task`]): admission ([`admit`]: offset dedupe, known poison), decoding and checks
//! ([`validate`]), the correlator, telemetry, and the outputs ([`outbox`]): records, and dead
//! letters for what was refused. At a checkpoint it writes the changed state entries to changelog
//! partition `p` and reports the next offsets to commit ([`control`]). It goes on applying input
//! while the coordinator commits, but holds back what it produces ([`held`]) until the
//! coordinator has committed the batch and begun the next transaction (or stops when the batch is
//! abandoned) — so nothing it produces lands in a transaction with the wrong offsets.

mod admit;
mod clock;
mod control;
mod env;
mod held;
mod outbox;
mod stamps;
mod task;
mod validate;

pub(crate) use admit::PoisonRegistry;
pub(crate) use control::{Checkpointed, PartitionMsg, Query};
pub(crate) use env::TaskEnv;
pub(crate) use task::PartitionTask;
pub(crate) use validate::Limits;
