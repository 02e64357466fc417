//! Telemetry of the producer: outputs librdkafka refused or failed to deliver.

use crate::metrics::Metrics;
use rdkafka::error::KafkaError;

/// librdkafka refused a message outright (a produce call failed): the batch will be aborted.
pub(crate) struct ProduceRefused<'a> {
    pub partition: i32,
    pub error: &'a KafkaError,
}

impl ProduceRefused<'_> {
    pub fn emit(self, metrics: &Metrics) {
        tracing::warn!(
            partition = self.partition,
            error = %self.error,
            "produce refused, the batch will be aborted"
        );
        metrics.produce_errors.inc();
    }
}

/// A delivery report came back with an error (purged messages of an aborted transaction are not
/// reported: they are no failure of their own).
pub(crate) struct DeliveryFailed;

impl DeliveryFailed {
    pub fn emit(self, metrics: &Metrics) {
        metrics.produce_errors.inc();
    }
}
