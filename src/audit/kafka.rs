//! Auditing the processor: its input topics (within offset ranges), the records and dead-letter
//! topics, and its changelog (the calls still pending).
//!
//! Every topic is read `read_committed`, from its beginning (the inputs from their range) to its
//! end: the partition end librdkafka reports, or the range's end. An input partition's range
//! ends by default at the processor group's committed offset — what the processor has taken
//! responsibility for — or at the end of the partition when the group has committed nothing
//! there. The pending calls are what a restore would rebuild: each changelog partition folded
//! at the group's committed offsets (`toolcalls_processor::changelog::Fold`), as the query API
//! would show them.

use super::input::{InputKey, Pos, Range};
use super::ledger::{Content, Ledger, RecordKey};
use super::progress::Progress;
use anyhow::{bail, Context};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use toolcalls_model::record::{Origin, TopicOffsets};
use toolcalls_model::Event;
use toolcalls_processor::changelog::{decode_pos, Fold, POS_HEADER};
use toolcalls_processor::output::dlq_headers;

/// What to read, and how.
pub struct Topics {
    pub brokers: String,
    pub group: String,
    pub announce: String,
    pub completion: String,
    pub records: String,
    pub dlq: String,
    pub changelog: String,
    /// librdkafka properties for every client.
    pub kafka: Vec<(String, String)>,
    /// Offset ranges given on the command line, by (topic, partition); `None`: every partition.
    pub ranges: Vec<(String, Option<i32>, Range)>,
    /// Read the changelog for the calls still pending.
    pub pending: bool,
    /// How long a read may go without news from the broker.
    pub timeout: Duration,
}

/// Parses `--ranges`: `TOPIC[:PARTITION]=FROM..TO`, comma-separated; either end may be left out
/// (`FROM..`, `..TO`), `TO` is exclusive.
pub fn parse_ranges(spec: &str) -> Result<Vec<(String, Option<i32>, Range)>, String> {
    let mut out = Vec::new();
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let bad = || {
            format!("`{item}` is not TOPIC[:PARTITION]=FROM..TO (e.g. toolcalls.announce:0=100..200, toolcalls.completion=..5000)")
        };
        let (target, range) = item.split_once('=').ok_or_else(bad)?;
        let (topic, partition) = match target.rsplit_once(':') {
            Some((t, p)) => (t, Some(p.parse::<i32>().map_err(|_| bad())?)),
            None => (target, None),
        };
        let (from, to) = range.split_once("..").ok_or_else(bad)?;
        let end = |s: &str| -> Result<Option<i64>, String> {
            match s.trim() {
                "" => Ok(None),
                n => match n.parse::<i64>() {
                    Ok(offset) if offset >= 0 => Ok(Some(offset)),
                    Ok(_) => Err(format!("`{item}`: offsets are 0 or more")),
                    Err(_) => Err(bad()),
                },
            }
        };
        let range = Range {
            from: end(from)?.unwrap_or(i64::MIN),
            to: end(to)?,
        };
        if topic.is_empty() {
            return Err(bad());
        }
        out.push((topic.to_owned(), partition, range));
    }
    Ok(out)
}

impl Topics {
    fn config(&self, group: &str) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers)
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            .set("isolation.level", "read_committed")
            .set("auto.offset.reset", "earliest")
            // A reader that drains its queue at once: no second's pause when a broker answers a
            // fetch with a whole partition (Tansu does; docs/OPERATIONS.md, the processor's
            // `fetch.queue.backoff.ms`), and an end of partition noticed within 100 ms.
            .set("fetch.queue.backoff.ms", "20")
            .set("fetch.wait.max.ms", "100");
        for (k, v) in &self.kafka {
            c.set(k, v);
        }
        c
    }

    fn reader_group(&self) -> String {
        format!("toolcalls-audit-{}", std::process::id())
    }

    fn partitions(&self, consumer: &BaseConsumer, topic: &str) -> anyhow::Result<i32> {
        let md = consumer.fetch_metadata(Some(topic), self.timeout).map_err(|e| {
            anyhow::anyhow!(
                "cannot reach the Kafka brokers at {} to read the metadata of {topic} ({e}); check --brokers, that the brokers run, and --kafka for their TLS or SASL settings",
                self.brokers
            )
        })?;
        let Some(t) = md.topics().first() else {
            bail!("topic {topic} does not exist");
        };
        if t.error().is_some() || t.partitions().is_empty() {
            bail!("topic {topic} does not exist (check the topic names and --brokers)");
        }
        Ok(t.partitions().len() as i32)
    }
}

pub fn audit(t: &Topics, ledger: &mut Ledger, progress: &mut Progress) -> anyhow::Result<()> {
    // The input partitions and where the processor's group stands in them.
    let meta: BaseConsumer = t
        .config(&t.group)
        .create()
        .context("cannot create a Kafka client")?;
    let partitions = t.partitions(&meta, &t.announce)?;
    let completion_partitions = t.partitions(&meta, &t.completion)?;
    if partitions != completion_partitions {
        bail!(
            "{} has {partitions} partitions, {} has {completion_partitions}: not the processor's co-partitioned inputs",
            t.announce,
            t.completion
        );
    }
    let inputs = [t.announce.clone(), t.completion.clone()];
    for (topic, _, _) in &t.ranges {
        if !inputs.contains(topic) {
            bail!(
                "--ranges names {topic}, which is not an input topic ({} or {})",
                inputs[0],
                inputs[1]
            );
        }
    }
    let committed = committed_offsets(&meta, &inputs, partitions, t.timeout)?;
    drop(meta);
    let mut numbers = BTreeMap::new();
    for (i, topic) in inputs.iter().enumerate() {
        for p in 0..partitions {
            let given = t
                .ranges
                .iter()
                .rev()
                .find(|(name, part, _)| name == topic && part.is_none_or(|x| x == p));
            let range = match given {
                Some((_, _, r)) => *r,
                None => Range {
                    from: i64::MIN,
                    to: committed[i][p as usize],
                },
            };
            let n = ledger.add_input(InputKey::Topic(topic.clone(), p), range, (i as u16, 0));
            numbers.insert((i, p), (n, range));
        }
    }
    let mut outside = |_: &InputKey| None;

    // Records.
    progress.stage(format!("records {}", t.records), None);
    read(t, &t.records, &all(t, &t.records)?, progress, |m| {
        let at = || format!("{}/{}@{}", t.records, m.partition(), m.offset());
        // A tombstone (no payload) is compaction's business.
        if let Some(p) = m.payload() {
            ledger.add_record(p, RecordKey::Message(m.key()), &at, &mut outside);
        }
    })?;

    // Dead letters.
    progress.stage(format!("dead letters {}", t.dlq), None);
    read(t, &t.dlq, &all(t, &t.dlq)?, progress, |m| {
        let header = |name: &str| -> Option<String> {
            let h = m.headers()?;
            let v = h.iter().find(|h| h.key == name)?.value?;
            Some(String::from_utf8_lossy(v).into_owned())
        };
        let pos = (|| -> Option<Pos> {
            let topic = header(dlq_headers::SOURCE_TOPIC)?;
            let partition = header(dlq_headers::SOURCE_PARTITION)?.parse().ok()?;
            let offset = header(dlq_headers::SOURCE_OFFSET)?.parse().ok()?;
            Some((ledger.input(&InputKey::Topic(topic, partition))?, offset))
        })();
        let reason = header(dlq_headers::REASON).unwrap_or_default();
        ledger.add_dead_letter(pos, &reason);
    })?;

    // Calls still pending: each changelog partition, folded at the committed offsets.
    if t.pending {
        let c: BaseConsumer = t
            .config(&t.reader_group())
            .create()
            .context("cannot create a Kafka client")?;
        let n = t.partitions(&c, &t.changelog).context(
            "cannot read the changelog (--pending none audits without the calls still pending)",
        )?;
        if n < partitions {
            bail!("the changelog {} has {n} partitions, fewer than the {partitions} of the inputs: not the processor's changelog", t.changelog);
        }
        drop(c);
        progress.stage(format!("changelog {}", t.changelog), None);
        let mut folds: Vec<Fold> = (0..partitions as usize)
            .map(|p| Fold::new([committed[0][p].unwrap_or(0), committed[1][p].unwrap_or(0)]))
            .collect();
        let parts: Vec<(i32, Offset, Option<i64>)> = (0..partitions)
            .map(|p| (p, Offset::Beginning, None))
            .collect();
        let mut refused = None;
        read(t, &t.changelog, &parts, progress, |m| {
            let (Some(key), Some(fold)) = (m.key(), folds.get_mut(m.partition() as usize)) else {
                return;
            };
            let pos = m
                .headers()
                .and_then(|h| h.iter().find(|h| h.key == POS_HEADER).and_then(|h| h.value))
                .and_then(decode_pos);
            match (std::str::from_utf8(key), pos) {
                (Ok(key), Some(pos)) => fold.add(key, pos, m.payload()),
                _ => {
                    refused.get_or_insert_with(|| {
                        format!(
                            "{}/{}@{} is not a changelog entry of the processor",
                            t.changelog,
                            m.partition(),
                            m.offset()
                        )
                    });
                }
            }
        })?;
        if let Some(why) = refused {
            bail!(
                "{why}; is {} the processor's changelog? (--pending none skips it)",
                t.changelog
            );
        }
        let config = toolcalls_core::Config {
            input_topics: 2,
            ..Default::default()
        };
        for (p, fold) in folds.into_iter().enumerate() {
            let (correlator, _, _) = fold
                .into_correlator(config.clone())
                .map_err(|e| anyhow::anyhow!("changelog partition {p}: {e}"))?;
            for mut record in correlator.pending_views() {
                record.provenance.name(|input, offsets| {
                    Origin::Topic(TopicOffsets {
                        topic: inputs
                            .get(usize::from(input))
                            .map_or("", String::as_str)
                            .into(),
                        partition: p as i32,
                        offsets,
                    })
                });
                let at = || format!("{}/{p} (pending {})", t.changelog, record.id());
                ledger.add_pending(&record, &at, &mut outside);
            }
            for pos in correlator.held_positions() {
                let input = inputs
                    .get(usize::from(pos.topic))
                    .and_then(|topic| ledger.input(&InputKey::Topic(topic.clone(), p as i32)));
                ledger.add_held(input.map(|n| (n, pos.offset)));
            }
        }
    }

    // The inputs, streamed past the claims.
    for (i, topic) in inputs.iter().enumerate() {
        let parts: Vec<(i32, Offset, Option<i64>)> = (0..partitions)
            .map(|p| {
                let (_, range) = numbers[&(i, p)];
                let from = if range.from == i64::MIN {
                    Offset::Beginning
                } else {
                    Offset::Offset(range.from)
                };
                (p, from, range.to)
            })
            .collect();
        let total = parts
            .iter()
            .map(|(_, from, to)| match (from, to) {
                (Offset::Offset(f), Some(to)) => Some(to.saturating_sub(*f).max(0) as u64),
                (Offset::Beginning, Some(to)) => Some((*to).max(0) as u64),
                _ => None,
            })
            .sum::<Option<u64>>();
        progress.stage(format!("input {topic}"), total);
        read(t, topic, &parts, progress, |m| {
            let (n, _) = numbers[&(i, m.partition())];
            let pos = (n, m.offset());
            match m.payload().map(Event::decode) {
                Some(Ok(event)) => ledger.input_event(pos, Content::Event(&event)),
                Some(Err(e)) => ledger.input_event(pos, Content::Invalid(e.reason())),
                None => ledger.input_event(pos, Content::Invalid("empty")),
            }
        })?;
        for p in 0..partitions {
            ledger.input_done(numbers[&(i, p)].0);
        }
    }
    progress.clear();
    Ok(())
}

/// Every partition of `topic`, from its beginning to its end.
fn all(t: &Topics, topic: &str) -> anyhow::Result<Vec<(i32, Offset, Option<i64>)>> {
    let c: BaseConsumer = t
        .config(&t.reader_group())
        .create()
        .context("cannot create a Kafka client")?;
    let n = t.partitions(&c, topic)?;
    Ok((0..n).map(|p| (p, Offset::Beginning, None)).collect())
}

/// The offsets the group committed on partitions `0..partitions` of the two input topics.
fn committed_offsets(
    consumer: &BaseConsumer,
    topics: &[String; 2],
    partitions: i32,
    timeout: Duration,
) -> anyhow::Result<[Vec<Option<i64>>; 2]> {
    let mut tpl = TopicPartitionList::new();
    for t in topics {
        for p in 0..partitions {
            tpl.add_partition(t, p);
        }
    }
    let committed = consumer
        .committed_offsets(tpl, timeout)
        .context("cannot fetch the processor group's committed offsets")?;
    let mut out = [
        vec![None; partitions as usize],
        vec![None; partitions as usize],
    ];
    for (i, t) in topics.iter().enumerate() {
        for p in 0..partitions {
            if let Some(e) = committed.find_partition(t, p) {
                if let Offset::Offset(o) = e.offset() {
                    out[i][p as usize] = Some(o);
                }
            }
        }
    }
    Ok(out)
}

/// Reads partitions `parts` of `topic` — each from its start offset to its end offset
/// (exclusive) or to the partition's end — handing every message to `f`.
fn read(
    t: &Topics,
    topic: &str,
    parts: &[(i32, Offset, Option<i64>)],
    progress: &mut Progress,
    mut f: impl FnMut(&BorrowedMessage<'_>),
) -> anyhow::Result<()> {
    let consumer: BaseConsumer = t
        .config(&t.reader_group())
        .create()
        .context("cannot create a Kafka client")?;
    let mut ends: BTreeMap<i32, Option<i64>> = BTreeMap::new();
    let mut tpl = TopicPartitionList::new();
    for &(p, from, to) in parts {
        let empty = match (from, to) {
            (_, Some(to)) if to <= 0 => true,
            (Offset::Offset(f), Some(to)) => to <= f,
            _ => false,
        };
        if empty {
            continue;
        }
        tpl.add_partition_offset(topic, p, from)
            .with_context(|| format!("cannot read {topic}/{p}"))?;
        ends.insert(p, to);
    }
    if ends.is_empty() {
        return Ok(());
    }
    consumer
        .fetch_metadata(Some(topic), t.timeout)
        .with_context(|| format!("cannot read the metadata of {topic}"))?;
    consumer
        .assign(&tpl)
        .with_context(|| format!("cannot read {topic}"))?;
    let mut news = Instant::now();
    while !ends.is_empty() {
        match consumer.poll(Duration::from_millis(100)) {
            None => {
                if news.elapsed() > t.timeout {
                    bail!(
                        "no answer from the broker for {:?} while reading {topic} (partitions {:?} unfinished)",
                        t.timeout,
                        ends.keys().collect::<Vec<_>>()
                    );
                }
                continue;
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                ends.remove(&p);
            }
            Some(Err(e)) => bail!("cannot read {topic}: {e}"),
            Some(Ok(m)) => {
                let p = m.partition();
                let Some(&end) = ends.get(&p) else { continue };
                if end.is_some_and(|e| m.offset() >= e) {
                    ends.remove(&p);
                    continue;
                }
                f(&m);
                progress.tick();
                if end.is_some_and(|e| m.offset() + 1 >= e) {
                    ends.remove(&p);
                }
            }
        }
        news = Instant::now();
    }
    Ok(())
}
