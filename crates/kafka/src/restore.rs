//! Rebuilding a partition's correlator from its changelog partition.
//!
//! The changelog is read from the beginning to its end (read_committed; the end is the partition
//! EOF librdkafka reports at the last stable offset). Every entry carries the input position that
//! last changed it (header `toolcalls.pos`); an entry whose position is at or past the committed
//! offset of its input topic was written by a batch whose offsets never committed, so it is skipped
//! — on a broker that hides aborted transactions this never happens, on one that does not (Tansu)
//! it is what keeps the state consistent with the offsets we resume from. The latest remaining
//! value of each key (tombstones remove the key) goes to [`Correlator::restore`], and new entries
//! are numbered past every key read, skipped ones included ([`Correlator::reserve_seqs`]): the
//! correlator writes no tombstone for an entry that opened and closed between two checkpoints,
//! which is right only while no skipped value stands under that entry's key.
//!
//! Runs on a blocking thread: librdkafka calls block.

use crate::client::restore_config;
use crate::config::Settings;
use crate::consumer::GroupConsumer;
use crate::error::Error;
use crate::output::{decode_pos, POS_HEADER};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use toolcalls_core::Correlator;

/// Context of the restore reader: the partition EOF it waits for is not an error worth a log line.
struct RestoreCtx;

impl rdkafka::client::ClientContext for RestoreCtx {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        crate::client::log_to_tracing(level, fac, message);
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if !matches!(error, KafkaError::PartitionEOF(_))
            && error.rdkafka_error_code() != Some(rdkafka::types::RDKafkaErrorCode::PartitionEOF)
        {
            tracing::warn!(error = %error, reason, "restore reader error");
        }
    }
}

impl rdkafka::consumer::ConsumerContext for RestoreCtx {}

/// A restored partition, ready to resume.
pub(crate) struct Restored {
    pub correlator: Correlator,
    /// Where each input topic resumes (the committed offset, or the reset policy).
    pub seek: [Offset; 2],
    /// Next offset per input topic as far as the state knows (the committed offset, or 0).
    pub next: [i64; 2],
    pub records_read: u64,
    pub entries: usize,
    pub elapsed: Duration,
}

/// The committed offsets of both input topics' partition `p`.
pub(crate) fn committed_offsets(
    consumer: &GroupConsumer,
    topics: &[String; 2],
    partition: i32,
    timeout: Duration,
) -> Result<[Option<i64>; 2], Error> {
    let mut tpl = TopicPartitionList::new();
    for t in topics {
        tpl.add_partition(t, partition);
    }
    let committed = consumer
        .committed_offsets(tpl, timeout)
        .map_err(|e| Error::kafka("fetching committed offsets", e))?;
    let mut out = [None, None];
    for (i, t) in topics.iter().enumerate() {
        if let Some(e) = committed.find_partition(t, partition) {
            if let Offset::Offset(o) = e.offset() {
                out[i] = Some(o);
            }
        }
    }
    // `committed` must be dropped before the consumer may be (see ARCHITECTURE.md §8).
    drop(committed);
    Ok(out)
}

pub(crate) fn restore_partition(
    settings: &Settings,
    consumer: &GroupConsumer,
    partition: i32,
) -> Result<Restored, Error> {
    let start = Instant::now();
    let topics = [
        settings.topics.announce.clone(),
        settings.topics.completion.clone(),
    ];
    let timeout = Duration::from_millis(settings.kafka_timeout_ms);
    let committed = committed_offsets(consumer, &topics, partition, timeout)?;
    let reset_latest = settings.kafka.iter().any(|(k, v)| {
        k == "auto.offset.reset" && matches!(v.as_str(), "latest" | "largest" | "end")
    });
    let seek = committed.map(|c| match c {
        Some(o) => Offset::Offset(o),
        None if reset_latest => Offset::End,
        None => Offset::Beginning,
    });
    // No committed offset: no state written for that topic can be trusted.
    let limit = committed.map(|c| c.unwrap_or(0));

    let changelog = settings.changelog_topic();
    let reader: BaseConsumer<RestoreCtx> = restore_config(settings)
        .create_with_context(RestoreCtx)
        .map_err(|e| Error::kafka("creating the restore consumer", e))?;
    // Without the topic's metadata in hand, librdkafka's first offset lookup after `assign` fails
    // and is retried 500 ms later: fetching it first takes a restore of an empty partition from
    // ~510 ms to ~15 ms (measured, benches/processor/README.md finding A).
    reader
        .fetch_metadata(Some(&changelog), timeout)
        .map_err(|e| Error::kafka("changelog metadata", e))?;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&changelog, partition, Offset::Beginning)
        .map_err(|e| Error::kafka("restore assignment", e))?;
    reader
        .assign(&tpl)
        .map_err(|e| Error::kafka("restore assignment", e))?;

    let deadline = start + Duration::from_millis(settings.restore_timeout_ms);
    let mut latest: HashMap<String, Vec<u8>> = HashMap::new();
    let mut records_read = 0u64;
    // The highest entry number of any key read, also of entries left out: new entries must not
    // take such a key (see `Correlator::reserve_seqs`).
    let mut max_seq = None::<u64>;
    loop {
        if Instant::now() > deadline {
            return Err(Error::RestoreTimeout {
                partition,
                timeout_ms: settings.restore_timeout_ms,
            });
        }
        match reader.poll(Duration::from_millis(100)) {
            None => continue,
            Some(Err(KafkaError::PartitionEOF(p))) if p == partition => break,
            Some(Err(KafkaError::PartitionEOF(_))) => continue,
            Some(Err(e)) => return Err(Error::kafka("reading the changelog", e)),
            Some(Ok(m)) => {
                records_read += 1;
                let Some(key) = m.key() else { continue };
                let key = std::str::from_utf8(key).map_err(|_| Error::Restore {
                    partition,
                    why: format!("changelog key at offset {} is not UTF-8; is `{changelog}` this processor's changelog?", m.offset()),
                })?;
                let pos = m
                    .headers()
                    .and_then(|h| h.iter().find(|h| h.key == POS_HEADER).and_then(|h| h.value).and_then(decode_pos))
                    .ok_or_else(|| Error::Restore {
                        partition,
                        why: format!("changelog entry at offset {} has no `{POS_HEADER}` header; is `{changelog}` this processor's changelog?", m.offset()),
                    })?;
                max_seq = max_seq.max(Correlator::changelog_key_seq(key));
                let t = usize::from(pos.topic.min(1));
                if pos.offset >= limit[t] {
                    continue;
                }
                match m.payload() {
                    Some(v) => {
                        latest.insert(key.to_owned(), v.to_vec());
                    }
                    None => {
                        latest.remove(key);
                    }
                }
            }
        }
    }
    drop(reader);
    let entries = latest.len();
    let mut correlator = Correlator::restore(
        toolcalls_core::Config {
            // Both input topics feed each correlator: stream time is their watermark.
            input_topics: 2,
            ..settings.core.clone()
        },
        latest,
    )
    .map_err(|e| Error::Restore {
        partition,
        why: e.to_string(),
    })?;
    if let Some(seq) = max_seq {
        correlator.reserve_seqs(seq.saturating_add(1));
    }
    Ok(Restored {
        correlator,
        seek,
        next: limit,
        records_read,
        entries,
        elapsed: start.elapsed(),
    })
}
