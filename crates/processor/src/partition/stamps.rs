//! Whether each input topic partition delivers its messages in timestamp order.
//!
//! The timestamp merge of the two input topics ([`crate::input::align`]) takes a topic partition
//! to deliver its messages in the order they were stamped, which holds for one producer per
//! partition. Several producers writing the same partitions (followers on several machines, a
//! receiver beside them), or producers whose clocks differ, interleave by arrival instead: a
//! newer message of one can come before an older announce of another, and that announce's result
//! is then applied before it — calls without ids may then pair otherwise than they happened. The
//! reorder window (`--max-disorder`) puts such input back in event-time order, as far as it is
//! wide. So a message stamped further behind a message delivered before it on its topic
//! partition than the window reaches is counted (`toolcalls_input_out_of_order_total`) and said,
//! with how far behind it was: the operator learns that the deployment needs the window, and how
//! wide.

/// The newest timestamp each input topic of a partition has delivered, in offset order.
#[derive(Debug)]
pub(super) struct StampOrder {
    newest: [Option<i64>; 2],
    /// How far behind a message may be stamped without being counted: the reorder window.
    tolerance_ms: i64,
}

impl StampOrder {
    pub fn new(max_disorder_ms: u64) -> Self {
        StampOrder {
            newest: [None; 2],
            tolerance_ms: i64::try_from(max_disorder_ms).unwrap_or(i64::MAX),
        }
    }

    /// Notes the next message of input `topic` (0 announce, 1 completion), stamped `timestamp_ms`:
    /// how many milliseconds it was stamped before the newest message its topic partition
    /// delivered before it, when that is more than the window reaches.
    pub fn behind(&mut self, topic: usize, timestamp_ms: Option<i64>) -> Option<i64> {
        let stamp = timestamp_ms?;
        let newest = &mut self.newest[topic.min(1)];
        let behind = newest.map_or(0, |n| n.saturating_sub(stamp));
        *newest = Some(newest.map_or(stamp, |n| n.max(stamp)));
        (behind > self.tolerance_ms).then_some(behind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_stamped_behind_an_earlier_one_of_its_topic_is_out_of_order() {
        let mut s = StampOrder::new(0);
        assert_eq!(s.behind(0, Some(100)), None);
        assert_eq!(s.behind(0, Some(100)), None, "a tie is in order");
        assert_eq!(s.behind(0, Some(105)), None);
        assert_eq!(s.behind(1, Some(90)), None, "each topic has its own order");
        assert_eq!(s.behind(0, Some(101)), Some(4));
        assert_eq!(
            s.behind(0, Some(103)),
            Some(2),
            "behind the newest, not the last"
        );
        assert_eq!(s.behind(0, None), None, "no timestamp, nothing to say");
        assert_eq!(s.behind(1, Some(80)), Some(10));
    }

    #[test]
    fn the_reorder_window_covers_what_it_reaches() {
        let mut s = StampOrder::new(1_000);
        s.behind(0, Some(10_000));
        assert_eq!(s.behind(0, Some(9_000)), None);
        assert_eq!(s.behind(0, Some(8_999)), Some(1_001));
    }
}
