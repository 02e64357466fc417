//! The header every changelog entry carries: the input position that last changed the entry.
//! A restore compares it with the committed offsets to leave out what never committed.

use toolcalls_core::Position;

/// Header of changelog entries: the input position that last changed the entry, `topic:offset`.
pub const POS_HEADER: &str = "toolcalls.pos";

/// `topic:offset` into a stack buffer (no allocation per changelog entry).
pub(crate) fn write_pos(pos: Position, buf: &mut [u8; 32]) -> &[u8] {
    use std::io::Write;
    let mut cursor = std::io::Cursor::new(&mut buf[..]);
    // `u16:i64` takes at most 26 bytes.
    let _ = write!(cursor, "{}:{}", pos.topic, pos.offset);
    let len = cursor.position() as usize;
    &buf[..len]
}

/// The position a [`POS_HEADER`] value holds.
pub fn decode_pos(s: &[u8]) -> Option<Position> {
    let s = std::str::from_utf8(s).ok()?;
    let (t, o) = s.split_once(':')?;
    Some(Position {
        topic: t.parse().ok()?,
        offset: o.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encode_pos(pos: Position) -> String {
        format!("{}:{}", pos.topic, pos.offset)
    }

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
