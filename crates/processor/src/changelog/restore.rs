//! Rebuilding a partition's correlator from its changelog partition.
//!
//! The changelog is read from the beginning to its end (read_committed; the end is the partition
//! EOF librdkafka reports at the last stable offset). Every entry carries the input position that
//! last changed it (header `toolcalls.pos`); an entry whose position is at or past the committed
//! offset of its input topic was written by a batch whose offsets never committed, so it is skipped
//! — on a broker that hides aborted transactions this never happens, on one that does not (Tansu)
//! it is what keeps the state consistent with the offsets we resume from. The latest remaining
//! value of each key (tombstones remove the key) goes to [`Correlator::restore`] ([`Fold`]).
//!
//! On such a broker a skipped value stays in the log, and once later offsets commit, the next
//! restore would take it. So new entries are numbered past every key read, skipped ones included
//! ([`Correlator::reserve_seqs`]; the correlator writes no tombstone for an entry that opened and
//! closed between two checkpoints, which is right only while no skipped value stands under its
//! key), and every key whose latest value was skipped is written again, as the restored state
//! holds it, at the first checkpoint ([`Correlator::restate`]).
//!
//! Runs on a blocking thread: librdkafka calls block.

use super::position::{decode_pos, POS_HEADER};
use crate::client::{log_to_tracing, restore_config};
use crate::config::Settings;
use crate::error::Error;
use crate::input::group::GroupConsumer;
use crate::telemetry::coordinator::KeysRestated;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{Headers, Message};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};
use toolcalls_core::{Correlator, Position, RestoreError};

/// Context of the restore reader: the partition EOF it waits for is not an error worth a log line.
struct RestoreCtx;

impl rdkafka::client::ClientContext for RestoreCtx {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        log_to_tracing(level, fac, message);
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
    /// Keys whose latest value in the log was skipped, written again at the first checkpoint.
    pub restated: usize,
    pub elapsed: Duration,
}

/// What a restore keeps of the changelog messages it reads, in log order: the latest committed
/// value of each key, the keys whose latest message was skipped, the highest entry number seen.
pub struct Fold {
    /// Per input topic, the committed offset: a message changed at or past it is skipped.
    limit: [i64; 2],
    latest: HashMap<String, Vec<u8>>,
    stale: HashSet<String>,
    max_seq: Option<u64>,
}

impl Fold {
    pub fn new(limit: [i64; 2]) -> Self {
        Fold {
            limit,
            latest: HashMap::new(),
            stale: HashSet::new(),
            max_seq: None,
        }
    }

    /// One changelog message: `key`, the input position that wrote it, its value (`None`: a
    /// tombstone).
    pub fn add(&mut self, key: &str, pos: Position, value: Option<&[u8]>) {
        self.max_seq = self.max_seq.max(Correlator::changelog_key_seq(key));
        if pos.offset >= self.limit[usize::from(pos.topic.min(1))] {
            self.stale.insert(key.to_owned());
            return;
        }
        if !self.stale.is_empty() {
            self.stale.remove(key);
        }
        match value {
            Some(v) => {
                self.latest.insert(key.to_owned(), v.to_vec());
            }
            None => {
                self.latest.remove(key);
            }
        }
    }

    /// The restored correlator, with how many entries it was rebuilt from and how many keys it
    /// will write again.
    pub fn into_correlator(
        self,
        config: toolcalls_core::Config,
    ) -> Result<(Correlator, usize, usize), RestoreError> {
        let entries = self.latest.len();
        let mut correlator = Correlator::restore(config, self.latest)?;
        if let Some(seq) = self.max_seq {
            correlator.reserve_seqs(seq.saturating_add(1));
        }
        for key in &self.stale {
            correlator.restate(key);
        }
        Ok((correlator, entries, self.stale.len()))
    }
}

/// The committed offsets of both input topics' partition `partition`.
fn committed_offsets(
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
    Ok(out)
}

/// Rebuilds partition `partition`'s correlator from its changelog partition, and says where its
/// input resumes (blocking).
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
    // and is retried 500 ms later: with the metadata fetched first, a restore of an empty
    // partition takes ~15 ms instead of ~510 ms (benches/processor/README.md, finding A).
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
    let mut fold = Fold::new(limit);
    let mut records_read = 0u64;
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
                fold.add(key, pos, m.payload());
            }
        }
    }
    drop(reader);
    let (correlator, entries, restated) = fold
        .into_correlator(toolcalls_core::Config {
            // Both input topics feed each correlator: stream time is their watermark.
            input_topics: 2,
            ..settings.core.clone()
        })
        .map_err(|e| Error::Restore {
            partition,
            why: e.to_string(),
        })?;
    if restated > 0 {
        KeysRestated {
            partition,
            keys: restated,
        }
        .emit();
    }
    Ok(Restored {
        correlator,
        seek,
        next: limit,
        records_read,
        entries,
        restated,
        elapsed: start.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use toolcalls_core::{ChangelogOp, Config, Effects};
    use toolcalls_model::Event;

    fn announce(id: &str, second: u32) -> Event {
        let json = format!(
            r#"{{"v":1,"kind":"announce","source":"claude-code","session":"s","callId":"{id}","time":"2026-05-10T10:00:{second:02}.000Z","tool":"Read","args":{{}}}}"#
        );
        Event::decode(json.as_bytes()).unwrap()
    }

    fn config() -> Config {
        Config {
            input_topics: 2,
            ..Config::default()
        }
    }

    /// A restore of `log` (in log order) at committed offsets `limit`.
    fn restore(log: &[ChangelogOp], limit: [i64; 2]) -> (Correlator, usize) {
        let mut fold = Fold::new(limit);
        for op in log {
            fold.add(&op.key, op.pos, op.value.as_deref());
        }
        let (correlator, _, restated) = fold.into_correlator(config()).unwrap();
        (correlator, restated)
    }

    #[test]
    fn a_value_that_never_committed_is_buried_at_the_first_checkpoint() {
        let mut c = Correlator::new(config());
        let mut out = Effects::default();
        // A committed batch (announce offsets below 1): call a is pending.
        c.apply(announce("a", 0), Position::new(0, 0), &mut out);
        let mut log = c.take_changelog();
        // An aborted batch whose messages stay readable (Tansu): call b pending too.
        c.apply(announce("b", 1), Position::new(0, 1), &mut out);
        log.extend(c.take_changelog());

        // The restore at the committed offsets leaves b out, and its first checkpoint (no input
        // yet) writes b's key (gone: a tombstone), the session's clock (as a left it) and the
        // partition-wide entry again.
        let (mut restored, restated) = restore(&log, [1, 0]);
        assert_eq!(restored.pending_len(), 1);
        assert_eq!(restated, 3);
        let first = restored.take_changelog();
        assert_eq!(first.len(), 3, "{first:?}");
        assert!(first.iter().all(|op| op.pos == Position::RESTATED));
        assert_eq!(first.iter().filter(|op| op.value.is_none()).count(), 1);
        log.extend(first);

        // Once later input commits, a restore takes every message of the log, the aborted one
        // too, but b's value is buried under its tombstone.
        let (again, restated) = restore(&log, [5, 0]);
        assert_eq!(again.pending_len(), 1, "the aborted call came back");
        assert_eq!(restated, 0);
        // New entries are numbered past every key the log holds.
        let max_key = log
            .iter()
            .filter_map(|op| Correlator::changelog_key_seq(&op.key))
            .max()
            .unwrap();
        let mut again = again;
        again.apply(announce("c", 2), Position::new(0, 5), &mut out);
        let keys: Vec<u64> = again
            .take_changelog()
            .iter()
            .filter_map(|op| Correlator::changelog_key_seq(&op.key))
            .collect();
        assert!(keys.iter().all(|k| *k > max_key), "{keys:?} vs {max_key}");
    }
}
