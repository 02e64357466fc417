//! Producing records, changelog entries and dead letters.

use crate::client::SharedProducer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::BaseRecord;
use std::time::Duration;
use toolcalls_core::Position;

/// Header of changelog entries: the input position that last changed the entry, `topic:offset`.
pub const POS_HEADER: &str = "toolcalls.pos";

/// Dead-letter headers.
pub mod dlq_headers {
    /// Bounded reason label (the same as the `reason` label of `toolcalls_dlq_messages_total`).
    pub const REASON: &str = "toolcalls.reason";
    /// Human-readable description of what is wrong and what to send instead.
    pub const ERROR: &str = "toolcalls.error";
    pub const SOURCE_TOPIC: &str = "toolcalls.source.topic";
    pub const SOURCE_PARTITION: &str = "toolcalls.source.partition";
    pub const SOURCE_OFFSET: &str = "toolcalls.source.offset";
    /// Kafka timestamp of the source message, milliseconds since the epoch.
    pub const SOURCE_TIMESTAMP: &str = "toolcalls.source.timestamp";
}

pub fn encode_pos(pos: Position) -> String {
    format!("{}:{}", pos.topic, pos.offset)
}

/// [`encode_pos`] into a stack buffer (no allocation per changelog entry).
pub(crate) fn write_pos(pos: Position, buf: &mut [u8; 32]) -> &[u8] {
    use std::io::Write;
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    // `u16:i64` takes at most 26 bytes.
    let _ = write!(cursor, "{}:{}", pos.topic, pos.offset);
    let len = cursor.position() as usize;
    &buf[..len]
}

pub fn decode_pos(s: &[u8]) -> Option<Position> {
    let s = std::str::from_utf8(s).ok()?;
    let (t, o) = s.split_once(':')?;
    Some(Position {
        topic: t.parse().ok()?,
        offset: o.parse().ok()?,
    })
}

/// One message to produce.
pub(crate) struct Out<'a> {
    pub topic: &'a str,
    pub partition: Option<i32>,
    pub key: Option<&'a [u8]>,
    pub payload: Option<&'a [u8]>,
    pub headers: Option<OwnedHeaders>,
}

/// Hands a message to librdkafka, waiting while its queue is full. The delivery result is
/// checked at the checkpoint (a transaction fails on its own; at-least-once counts failures).
pub(crate) async fn send(producer: &SharedProducer, out: Out<'_>) -> Result<(), KafkaError> {
    let mut headers = out.headers;
    loop {
        let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(out.topic);
        if let Some(p) = out.partition {
            record = record.partition(p);
        }
        if let Some(k) = out.key {
            record = record.key(k);
        }
        if let Some(v) = out.payload {
            record = record.payload(v);
        }
        if let Some(h) = headers.take() {
            record = record.headers(h);
        }
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), record)) => {
                headers = record.headers;
                // librdkafka's queue drains on its own threads; give it a moment.
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            Err((e, _)) => return Err(e),
        }
    }
}

pub(crate) fn header_pairs(pairs: &[(&str, &[u8])]) -> OwnedHeaders {
    let mut h = OwnedHeaders::new_with_capacity(pairs.len());
    for (key, value) in pairs {
        h = h.insert(Header {
            key,
            value: Some(*value),
        });
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip() {
        let p = Position {
            topic: 1,
            offset: 1234567890123,
        };
        assert_eq!(decode_pos(encode_pos(p).as_bytes()), Some(p));
        for p in [
            p,
            Position::new(u16::MAX, i64::MIN),
            Position::new(0, 0),
            Position::new(1, i64::MAX),
        ] {
            let mut buf = [0u8; 32];
            assert_eq!(write_pos(p, &mut buf), encode_pos(p).as_bytes());
        }
        assert_eq!(decode_pos(b"x:1"), None);
        assert_eq!(decode_pos(b"1"), None);
    }
}
