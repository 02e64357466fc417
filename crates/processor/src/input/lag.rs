//! How far behind the input is, from librdkafka's statistics: the lag gauges, and whether a topic
//! has more to deliver (which the timestamp alignment, [`super::align`], asks).

use crate::metrics::Metrics;
use crate::telemetry::input::LagObserved;
use rdkafka::statistics::{Partition, Statistics};

/// Stable messages of a partition not yet delivered to us; `None` while unknown (before the first
/// fetch).
///
/// The end is the last stable offset (the high watermark without read_committed); the position is
/// the offset after the last message delivered, or the fetch position while nothing was delivered
/// since the assignment. librdkafka's own `consumer_lag` counts from the committed offset, which
/// it does not know when offsets commit in a transaction.
fn undelivered(part: &Partition) -> Option<i64> {
    let end = if part.ls_offset >= 0 {
        part.ls_offset
    } else {
        part.hi_offset
    };
    let at = if part.app_offset >= 0 {
        part.app_offset
    } else {
        part.next_offset
    };
    (end >= 0 && at >= 0).then(|| (end - at).max(0))
}

/// Whether a partition's statistics show every stable message delivered. A transaction's commit
/// marker takes an offset that is never delivered, so one short of the end counts as caught up.
pub(crate) fn caught_up(part: &Partition) -> bool {
    undelivered(part).is_some_and(|n| n <= 1)
}

/// Sets the lag gauge of every input partition this consumer is assigned, and removes it for
/// the partitions it no longer is (another instance owns them now and reports their lag).
pub(crate) fn record_lag(metrics: &Metrics, inputs: &[String; 2], stats: &Statistics) {
    for name in inputs {
        let Some(topic) = stats.topics.get(name) else {
            continue;
        };
        for (p, part) in &topic.partitions {
            if *p < 0 {
                continue;
            }
            let messages = if part.desired {
                undelivered(part)
            } else {
                None
            };
            if !part.desired || messages.is_some() {
                LagObserved {
                    topic: name,
                    partition: *p,
                    messages,
                }
                .emit(metrics);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(ls: i64, hi: i64, app: i64, next: i64) -> Partition {
        Partition {
            ls_offset: ls,
            hi_offset: hi,
            app_offset: app,
            next_offset: next,
            ..Default::default()
        }
    }

    #[test]
    fn a_topic_is_caught_up_when_everything_stable_was_delivered() {
        const UNKNOWN: i64 = -1001;
        // Delivered up to the last stable offset, or one short of it (a commit marker).
        assert!(caught_up(&part(100, 120, 100, 120)));
        assert!(caught_up(&part(100, 120, 99, 120)));
        // More stable messages to deliver: behind.
        assert!(!caught_up(&part(100, 120, 50, 120)));
        // Nothing delivered since the assignment: the fetch position decides.
        assert!(caught_up(&part(100, 100, UNKNOWN, 100)));
        assert!(!caught_up(&part(100, 100, UNKNOWN, 0)));
        // Without a last stable offset the high watermark is the end.
        assert!(caught_up(&part(UNKNOWN, 40, 40, 40)));
        assert!(!caught_up(&part(UNKNOWN, 40, 10, 40)));
        // Not known yet (before the first fetch): behind.
        assert!(!caught_up(&part(UNKNOWN, UNKNOWN, UNKNOWN, 0)));
    }

    #[test]
    fn a_partition_no_longer_assigned_loses_its_lag_series() {
        use prometheus::core::Collector;
        let registry = prometheus::Registry::new();
        let metrics = Metrics::new(&registry);
        let inputs = ["a".to_owned(), "c".to_owned()];
        let stats = |desired_1: bool| {
            let mut topic = rdkafka::statistics::Topic::default();
            for (p, desired) in [(0, true), (1, desired_1), (-1, false)] {
                let mut part = part(100, 120, 40, 41);
                part.desired = desired;
                topic.partitions.insert(p, part);
            }
            let mut stats = Statistics::default();
            stats.topics.insert("a".into(), topic);
            stats
        };
        let series = || {
            let mut out: Vec<(String, i64)> = metrics
                .consumer_lag_records
                .collect()
                .iter()
                .flat_map(|f| f.get_metric())
                .map(|m| {
                    let p = m
                        .get_label()
                        .iter()
                        .find(|l| l.name() == "partition")
                        .unwrap();
                    (p.value().to_owned(), m.get_gauge().get_value() as i64)
                })
                .collect();
            out.sort();
            out
        };
        record_lag(&metrics, &inputs, &stats(true));
        assert_eq!(series(), [("0".to_owned(), 60), ("1".to_owned(), 60)]);
        record_lag(&metrics, &inputs, &stats(false));
        assert_eq!(series(), [("0".to_owned(), 60)], "partition 1 moved away");
    }
}
