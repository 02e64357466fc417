//! Which partition holds a session, and which instance of the group owns it — so that a client
//! can be sent to the instance that answers for the session (as Kafka Streams' interactive
//! queries do).
//!
//! The partition is the one Kafka's default partitioner gives the session key (murmur2, what
//! `toolcalls ingest` and the Java client use); producers that partition otherwise get answers
//! for the wrong partition. The owner is read from the group's description (DescribeGroups):
//! the member whose assignment holds the partition on the announce topic, named by its client
//! id, `toolcalls-<instance id>-consumer`.

use crate::input::group::GroupConsumer;
use rdkafka::consumer::Consumer;
use serde::Serialize;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// What the query API needs to place a session.
pub(crate) struct Ownership {
    pub instance_id: String,
    group: String,
    announce_topic: String,
    /// Partitions of the input topics; 0 until the topics were checked.
    partitions: AtomicI32,
    consumer: OnceLock<Arc<GroupConsumer>>,
}

/// A member of the group, as the group's description shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Member {
    /// The owner's `--instance-id`, when its client id is a processor's.
    pub instance_id: Option<String>,
    pub client_id: String,
    /// The address the broker saw the member connect from.
    pub host: String,
}

impl Ownership {
    pub fn new(instance_id: String, group: String, announce_topic: String) -> Self {
        Ownership {
            instance_id,
            group,
            announce_topic,
            partitions: AtomicI32::new(0),
            consumer: OnceLock::new(),
        }
    }

    pub fn set_partitions(&self, partitions: i32) {
        self.partitions.store(partitions, Ordering::Release);
    }

    pub fn set_consumer(&self, consumer: Arc<GroupConsumer>) {
        let _ = self.consumer.set(consumer);
    }

    /// The brokers answered and the topics are there.
    pub fn topics_checked(&self) -> bool {
        self.partitions.load(Ordering::Acquire) > 0
    }

    /// The partition of `session` and the partition count, once the topics are known.
    pub fn partition_of(&self, session: &str) -> Option<(i32, i32)> {
        let n = self.partitions.load(Ordering::Acquire);
        (n > 0).then(|| (toolcalls_producer::partition_of(session.as_bytes(), n), n))
    }

    /// The member that owns `partition`, from the group's description (a blocking broker call,
    /// run off the async workers). `Ok(None)`: no member holds it (the group is rebalancing).
    pub async fn owner(&self, partition: i32, timeout: Duration) -> Result<Option<Member>, String> {
        let Some(consumer) = self.consumer.get().cloned() else {
            return Err("the consumer has not started yet".into());
        };
        let group = self.group.clone();
        let topic = self.announce_topic.clone();
        tokio::task::spawn_blocking(move || {
            let list = consumer
                .fetch_group_list(Some(&group), timeout)
                .map_err(|e| format!("describing group {group}: {e}"))?;
            let Some(info) = list.groups().iter().find(|g| g.name() == group) else {
                return Ok(None);
            };
            let members = info.members();
            if !members.is_empty() && members.iter().all(|m| m.assignment().is_none_or(<[u8]>::is_empty)) {
                return Err(format!(
                    "the broker describes group {group} with {} members but not their assignments (Apache Kafka reports them; some Kafka-compatible brokers, such as Tansu, do not)",
                    members.len()
                ));
            }
            Ok(members
                .iter()
                .find(|m| {
                    m.assignment()
                        .and_then(decode_assignment)
                        .is_some_and(|a| a.iter().any(|(t, p)| *t == topic && p.contains(&partition)))
                })
                .map(|m| Member {
                    instance_id: instance_of(m.client_id()),
                    client_id: m.client_id().to_owned(),
                    host: m.client_host().trim_start_matches('/').to_owned(),
                }))
        })
        .await
        .map_err(|e| format!("the group lookup failed: {e}"))?
    }
}

/// The instance id in a processor consumer's client id, `toolcalls-<instance id>-consumer`.
fn instance_of(client_id: &str) -> Option<String> {
    client_id
        .strip_prefix("toolcalls-")?
        .strip_suffix("-consumer")
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// The topics and partitions of a consumer protocol assignment (versions 0–3 start alike:
/// version, then `[topic: string, partitions: [int32]]`).
fn decode_assignment(bytes: &[u8]) -> Option<Vec<(String, Vec<i32>)>> {
    let mut r = Reader(bytes);
    r.i16()?;
    let topics = r.i32()?;
    let mut out = Vec::new();
    for _ in 0..topics.max(0) {
        let len = usize::try_from(r.i16()?).ok()?;
        let name = String::from_utf8(r.take(len)?.to_vec()).ok()?;
        let count = r.i32()?;
        let mut partitions = Vec::new();
        for _ in 0..count.max(0) {
            partitions.push(r.i32()?);
        }
        out.push((name, partitions));
    }
    Some(out)
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> Option<i32> {
        self.take(4)
            .map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_consumer_protocol_assignment() {
        let mut b = vec![0, 1]; // version 1
        b.extend(2i32.to_be_bytes());
        for (topic, parts) in [
            ("t.announce", &[0i32, 2][..]),
            ("t.completion", &[0, 2][..]),
        ] {
            b.extend((topic.len() as i16).to_be_bytes());
            b.extend(topic.as_bytes());
            b.extend((parts.len() as i32).to_be_bytes());
            for p in parts {
                b.extend(p.to_be_bytes());
            }
        }
        b.extend((-1i32).to_be_bytes()); // no user data
        let a = decode_assignment(&b).unwrap();
        assert_eq!(a[0], ("t.announce".to_owned(), vec![0, 2]));
        assert_eq!(a.len(), 2);
        for cut in 0..b.len() - 4 {
            assert_eq!(decode_assignment(&b[..cut]), None, "truncated at {cut}");
        }
    }

    #[test]
    fn instance_ids_come_from_processor_client_ids() {
        assert_eq!(
            instance_of("toolcalls-pod-0-consumer").as_deref(),
            Some("pod-0")
        );
        assert_eq!(instance_of("rdkafka"), None);
        assert_eq!(instance_of("toolcalls--consumer"), None);
    }
}
