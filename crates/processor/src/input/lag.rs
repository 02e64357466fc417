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

/// Sets the lag gauge of every input partition the statistics know.
pub(crate) fn record_lag(metrics: &Metrics, inputs: &[String; 2], stats: &Statistics) {
    for name in inputs {
        let Some(topic) = stats.topics.get(name) else {
            continue;
        };
        for (p, part) in &topic.partitions {
            let Some(lag) = undelivered(part).filter(|_| *p >= 0) else {
                continue;
            };
            LagObserved {
                topic: name,
                partition: *p,
                messages: lag,
            }
            .emit(metrics);
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
}
