//! Named telemetry: each thing an operator can observe — a message dead-lettered, a batch
//! committed, a restore finished, partitions assigned — is one type or one method here that
//! writes its log line and moves its metrics, so the stages read as the steps they take and an
//! operator finds in one place what a metric counts. The metrics themselves (names, labels, help)
//! are declared in [`crate::metrics`]; log lines that count nothing (a seek that failed, the
//! consumer leaving the group) stay beside their code.
//!
//! Two shapes, after Vector's internal events:
//!
//! - an event struct, `Event { … }.emit(&metrics)`, for what happens now and then (per batch, per
//!   rebalance, per restore): its labels are looked up when it happens;
//! - a handle resolved once, for the hot path: [`partition::PartitionTelemetry`] holds the metric
//!   children one partition task moves — every label set it can touch, resolved when the task
//!   starts — so a message costs a few atomic increments and no label lookup.
//!
//! One file per stage: [`input`] (the consumer thread and the group), [`partition`] (the
//! partition tasks), [`output`] (the producer), [`coordinator`] (batches, restores, readiness),
//! and [`broker`] for what the brokers and topics are found to be (out of reach, missing,
//! fencing the producer).

pub(crate) mod broker;
pub(crate) mod coordinator;
pub(crate) mod input;
pub(crate) mod output;
pub(crate) mod partition;
pub(crate) mod processed;
