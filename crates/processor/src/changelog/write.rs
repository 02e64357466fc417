//! Writing a partition's changed state entries to its changelog partition, at a checkpoint.

use super::position::{write_pos, POS_HEADER};
use crate::output::{header_pairs, Out, Sink};
use toolcalls_core::ChangelogOp;

/// Sends `ops` (from `Correlator::take_changelog`) to changelog partition `partition` of `topic`:
/// key = the entry's key, value = the entry (none: a tombstone), header [`POS_HEADER`] = the input
/// position that last changed it.
pub(crate) async fn write(sink: &mut Sink, topic: &str, partition: i32, ops: Vec<ChangelogOp>) {
    for op in ops {
        let mut buf = [0u8; 32];
        let pos = write_pos(op.pos, &mut buf);
        let headers = header_pairs(&[(POS_HEADER, pos)]);
        sink.send(Out {
            topic,
            partition: Some(partition),
            key: Some(op.key.as_bytes()),
            payload: op.value.as_deref(),
            headers: Some(headers),
        })
        .await;
    }
}
