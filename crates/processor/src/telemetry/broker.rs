//! Telemetry of the brokers and the topics as the processor finds them: brokers out of reach or
//! refusing the credentials, topics missing or laid out wrong at start, a producer fenced.

use crate::error::Error;
use crate::metrics::Metrics;
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolcalls_producer::{BrokerWatch, Notice, REPEAT_EVERY};

/// The watch every Kafka client of the processor tells of its connectivity and authentication
/// errors: said as warnings, at once and then every [`REPEAT_EVERY`] while the brokers stay out
/// of reach, and as an info line when they answer again.
pub(crate) fn broker_watch(brokers: &str) -> Arc<BrokerWatch> {
    Arc::new(BrokerWatch::new(brokers, |notice| match notice {
        Notice::Trouble { .. } => tracing::warn!("{notice}; /readyz answers 503 meanwhile"),
        Notice::Recovered { .. } => tracing::info!("{notice}"),
    }))
}

/// The topics are not there yet (or not laid out as the processor needs): the processor waits
/// for them, not ready, and says why at once and then every [`REPEAT_EVERY`] (at once again when
/// the reason changes).
#[derive(Default)]
pub(crate) struct TopicsWaiting {
    said: Option<(String, Instant)>,
    since: Option<Instant>,
}

impl TopicsWaiting {
    pub fn emit(&mut self, error: &Error) {
        let now = Instant::now();
        let since = *self.since.get_or_insert(now);
        let text = error.to_string();
        let due = match &self.said {
            Some((said, at)) => *said != text || now.duration_since(*at) >= REPEAT_EVERY,
            None => true,
        };
        if due {
            tracing::error!(
                waiting_s = now.duration_since(since).as_secs(),
                "{text}; waiting for the topics (checked again every {}s, /readyz answers 503 meanwhile)",
                TOPICS_RECHECK.as_secs()
            );
            self.said = Some((text, now));
        }
    }
}

/// How often topics that are not there yet are looked for again.
pub(crate) const TOPICS_RECHECK: Duration = Duration::from_secs(2);

/// The topics are there and co-partitioned.
pub(crate) struct TopicsChecked<'a> {
    pub partitions: i32,
    pub group: &'a str,
    pub guarantee: crate::config::Guarantee,
}

impl TopicsChecked<'_> {
    pub fn emit(self) {
        tracing::info!(
            partitions = self.partitions,
            group = %self.group,
            guarantee = ?self.guarantee,
            "topics checked"
        );
    }
}

/// This instance's transactional producer was fenced: another producer initialized
/// transactions with the same transactional id — a restart of this instance (after a kill, its
/// predecessor's open transaction is aborted that way), or a second process given the same
/// `--instance-id`. Said once per producer; the open transaction cannot commit, and the
/// processor stops.
pub(crate) struct ProducerFenced<'a> {
    pub transactional_id: &'a str,
    pub detail: &'a str,
}

impl ProducerFenced<'_> {
    pub fn emit(self, metrics: &Metrics) {
        metrics.transactions.with_label_values(&["fenced"]).inc();
        tracing::error!(
            transactional_id = %self.transactional_id,
            detail = %self.detail,
            "this instance's transactions were fenced: another producer took over transactional id `{}` \
             (this instance restarted elsewhere, or another instance has the same --instance-id); \
             the open transaction is aborted and the processor stops without committing",
            self.transactional_id
        );
    }
}
