//! Runtime errors, each with a [`Disposition`]: what the runtime does about it.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use toolcalls_producer::Trouble;

/// What to do about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// Transient: abort the batch, rewind to the committed offsets and go on.
    Retry,
    /// A poison message: send it to the dead-letter topic and move past it.
    DeadLetter,
    /// Configuration, authorization, a fenced producer, a broken changelog: stop without committing.
    Fatal,
}

/// Errors of the processor runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("input topics are not co-partitioned: {0}")]
    NotCoPartitioned(String),
    #[error("topic `{topic}` does not exist; create it with `toolcalls topics create` (or your own tooling) before starting the processor")]
    MissingTopic { topic: String },
    // librdkafka's error is in the message, not a source: its own source repeats it, and a
    // chain printed with its sources said it three times.
    #[error("kafka {op} failed: {error}")]
    Kafka { op: &'static str, error: KafkaError },
    #[error("transaction failed during {op}: {error}")]
    Transaction { op: &'static str, error: KafkaError },
    #[error("gave up after {}s: {} at {brokers}: {reason}; {}", .waited.as_secs(), .trouble.what(), .trouble.advice())]
    Unreachable {
        trouble: Trouble,
        brokers: String,
        reason: String,
        waited: std::time::Duration,
    },
    #[error("{count} produce request(s) failed before the checkpoint (last: {last})")]
    Produce { count: u64, last: String },
    #[error("changelog of partition {partition} cannot be restored: {why}")]
    Restore { partition: i32, why: String },
    #[error("restoring partition {partition} did not reach the end of the changelog within {timeout_ms} ms; raise --restore-timeout-ms or check the broker")]
    RestoreTimeout { partition: i32, timeout_ms: u64 },
    #[error("http server: {0}")]
    Http(#[source] std::io::Error),
    #[error("the runtime stopped: {0}")]
    Stopped(String),
    #[error("this instance's transactions were fenced: another producer took over transactional id `{transactional_id}` (this instance restarted elsewhere, or another instance has the same --instance-id); stopped without committing")]
    Fenced { transactional_id: String },
}

impl Error {
    pub fn kafka(op: &'static str, error: KafkaError) -> Self {
        Error::Kafka { op, error }
    }

    /// What the runtime does about this error.
    pub fn disposition(&self) -> Disposition {
        match self {
            Error::Kafka { error, .. } => kafka_disposition(error),
            Error::Transaction { error, .. } => transaction_disposition(error),
            Error::Produce { .. } | Error::RestoreTimeout { .. } | Error::Unreachable { .. } => {
                Disposition::Retry
            }
            Error::Config(_)
            | Error::NotCoPartitioned(_)
            | Error::MissingTopic { .. }
            | Error::Restore { .. }
            | Error::Http(_)
            | Error::Stopped(_)
            | Error::Fenced { .. } => Disposition::Fatal,
        }
    }
}

/// Authorization and configuration errors are fatal; everything else is worth a retry.
fn kafka_disposition(e: &KafkaError) -> Disposition {
    match e.rdkafka_error_code() {
        Some(
            RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::GroupAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed
            | RDKafkaErrorCode::TransactionalIdAuthorizationFailed
            | RDKafkaErrorCode::SaslAuthenticationFailed
            | RDKafkaErrorCode::Authentication
            | RDKafkaErrorCode::InvalidArgument
            | RDKafkaErrorCode::Fatal
            | RDKafkaErrorCode::ProducerFenced
            | RDKafkaErrorCode::InvalidProducerEpoch
            | RDKafkaErrorCode::Fenced,
        ) => Disposition::Fatal,
        _ if matches!(
            e,
            KafkaError::ClientConfig(..) | KafkaError::ClientCreation(..)
        ) =>
        {
            Disposition::Fatal
        }
        _ => Disposition::Retry,
    }
}

/// librdkafka classifies transactional errors itself: fatal (fenced, …) stops the processor,
/// abortable and retriable ones abort the batch and rewind.
fn transaction_disposition(e: &KafkaError) -> Disposition {
    match e {
        KafkaError::Transaction(rd) if rd.is_fatal() => Disposition::Fatal,
        KafkaError::Transaction(_) => Disposition::Retry,
        other => kafka_disposition(other),
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_and_fencing_are_fatal_the_rest_retries() {
        let auth = Error::kafka(
            "produce",
            KafkaError::MessageProduction(RDKafkaErrorCode::TopicAuthorizationFailed),
        );
        assert_eq!(auth.disposition(), Disposition::Fatal);
        let fenced = Error::kafka(
            "produce",
            KafkaError::MessageProduction(RDKafkaErrorCode::ProducerFenced),
        );
        assert_eq!(fenced.disposition(), Disposition::Fatal);
        let timeout = Error::kafka(
            "produce",
            KafkaError::MessageProduction(RDKafkaErrorCode::MessageTimedOut),
        );
        assert_eq!(timeout.disposition(), Disposition::Retry);
        assert_eq!(
            Error::Produce {
                count: 1,
                last: "x".into()
            }
            .disposition(),
            Disposition::Retry
        );
        assert_eq!(Error::Config("x".into()).disposition(), Disposition::Fatal);
        let fenced = Error::Fenced {
            transactional_id: "g-i0".into(),
        };
        assert_eq!(fenced.disposition(), Disposition::Fatal);
        assert!(fenced.to_string().contains("fenced") && fenced.to_string().contains("`g-i0`"));
    }
}
