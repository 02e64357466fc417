//! The format's constants: the version byte, the entry tags, the flag bits, the deadline causes,
//! and the JSON part of a waiting result. The grammar they make up: the codec's module docs.

use crate::state::{DeadlineCause, Fact};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// First byte of every binary changelog value. A value that starts with `{` is JSON, which this
/// program does not read ([`decode`](fn@super::decode) says so).
pub(super) const VERSION: u8 = 0xB2;
/// The version before pending entries kept the input positions of their events (records'
/// `provenance`): refused by name, its entries lack fields this version needs.
pub(super) const VERSION_WITHOUT_POSITIONS: u8 = 0xB1;

/// Entry tags.
pub(super) const TAG_CALL: u8 = 1;
pub(super) const TAG_WAITING: u8 = 2;
pub(super) const TAG_CLOSED: u8 = 3;
pub(super) const TAG_META: u8 = 4;
pub(super) const TAG_SCOPE: u8 = 5;
pub(super) const TAG_HELD: u8 = 6;

/// Flag bits, shared by the entry kinds where they mean the same.
pub(super) const THREAD: u32 = 1;
pub(super) const HAS_ID: u32 = 1 << 1;
pub(super) const TURN: u32 = 1 << 2;
pub(super) const ARGS: u32 = 1 << 3;
pub(super) const CHECKSUM: u32 = 1 << 4;
pub(super) const DENIED: u32 = 1 << 5;
/// A call's [`Extras`](crate::state::Extras) or a waiting result's [`WaitingExtras`] follow, as
/// JSON text.
pub(super) const EXTRAS: u32 = 1 << 6;
pub(super) const TOOL: u32 = 1 << 7;
pub(super) const DONE: u32 = 1 << 8;
pub(super) const IDEM: u32 = 1 << 9;
pub(super) const STREAM_TIME: u32 = 1 << 10;
/// A closed call's repeat keys follow (a count and 8 bytes each).
pub(super) const REPEATS: u32 = 1 << 11;
/// A scope is idle (its deadlines follow stream time).
pub(super) const IDLE: u32 = 1 << 12;
/// A scope's clock on the first (second) input topic follows.
pub(super) const CLOCK_0: u32 = 1 << 13;
pub(super) const CLOCK_1: u32 = 1 << 14;
/// A held event's wall time of arrival follows.
pub(super) const WALL: u32 = 1 << 15;
/// A remembered idempotent call's answered attempt follows its record (written without it, an
/// entry reads as one whose every attempt was answered).
pub(super) const ANSWERED: u32 = 1 << 16;
/// The time up to which a scope forgot its calls follows its clocks.
pub(super) const FORGOT_UPTO: u32 = 1 << 17;
/// The scope was dropped: the entry is its note (`correlator/forgotten.rs`), no live scope.
pub(super) const DROPPED: u32 = 1 << 18;

/// Flag bits of a waiting result's `done`.
pub(super) const DONE_RESULT: u32 = 1;
pub(super) const DONE_ERROR: u32 = 1 << 1;
pub(super) const DONE_CANCELLED: u32 = 1 << 2;
pub(super) const DONE_STARTED: u32 = 1 << 3;
pub(super) const DONE_DURATION: u32 = 1 << 4;

/// The rarely present parts of a waiting result, written as one JSON text.
#[derive(Serialize, Deserialize)]
pub(super) struct WaitingExtras {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) facts: Vec<Fact>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) attributes: Option<Map<String, Value>>,
}

/// A deadline cause as one byte.
pub(super) fn cause_byte(cause: DeadlineCause) -> u8 {
    match cause {
        DeadlineCause::Timeout => 0,
        DeadlineCause::TurnEnded => 1,
        DeadlineCause::TurnAborted => 2,
        DeadlineCause::Denied => 3,
    }
}

/// The deadline cause of a byte [`cause_byte`] wrote.
pub(super) fn cause_of_byte(b: u8) -> Option<DeadlineCause> {
    Some(match b {
        0 => DeadlineCause::Timeout,
        1 => DeadlineCause::TurnEnded,
        2 => DeadlineCause::TurnAborted,
        3 => DeadlineCause::Denied,
        _ => return None,
    })
}
