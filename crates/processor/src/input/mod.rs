//! The input stage: from the broker to the partition tasks.
//!
//! - [`consumer`]: the consumer thread — polls the group consumer and copies each partition's
//!   messages into [`batch::InBatch`]es, reading a partition only while its task keeps up;
//! - [`group`]: the consumer's context — rebalances become [`group::GroupEvent`]s for the
//!   coordinator, statistics become lag gauges ([`lag`]);
//! - [`flow`]: what a task has in flight, and the channel its batches take;
//! - [`align`]: in the task, the two topics' batches merged back into timestamp order.

pub(crate) mod align;
pub(crate) mod batch;
pub(crate) mod consumer;
pub(crate) mod flow;
pub(crate) mod group;
mod lag;
