//! The binary encoding of changelog values.
//!
//! A changelog value is read back only by a restore, so it is written for that reader: a version
//! byte, a tag byte, then the entry's fields in a fixed order — integers as LEB128 varints
//! (timestamps zigzag), strings and JSON text as a varint length and their bytes, optional fields
//! behind a presence bitmask. There are no field names and no escaping, so an entry is about a third
//! the size of its JSON and decodes several times faster (restore must outpace the changelog).
//!
//! Reading is strict: a value that ends early, runs long, has an unknown version or tag, or
//! carries bytes that are not UTF-8 or JSON text that is not valid JSON is an error naming the
//! field, never a default.
//!
//! The format, entry by entry:
//!
//! ```text
//! value   = VERSION tag body
//! tag     = 1 call | 2 waiting result | 3 closed | 4 meta
//! scope   = source session [thread]            (thread behind the entry's flag bit 0)
//! call    = flags scope tool key record_id [turn] [args] [checksum] created Δupdated Δdeadline
//!           cause events duplicates attempts [extras: JSON]
//! waiting = flags scope key record_id [turn] [tool] [args] [checksum] [done] first Δupdated
//!           Δdeadline events duplicates [extras: JSON of facts and attributes]
//! done    = flags at [result] [started_at] [duration_ms]
//! closed  = flags scope expires [tool_key] n×id [n×repeat_key] [idempotency_key record: JSON]
//! meta    = flags [stream_time] next_seq n×([time])
//! ```
//!
//! Times are milliseconds (zigzag varints); Δ fields are differences to the first time of the
//! entry. The rarely present parts (a call's [`Extras`](crate::state::Extras), a waiting result's
//! facts and attributes, a remembered record) are their JSON text: their types are the model's.
//!
//! `format.rs` holds the format's constants (version, tags, flag bits); `primitives.rs` writes and
//! reads varints, strings and bytes; `encode.rs` and `decode.rs` write and read entries.

mod decode;
mod encode;
mod format;
mod primitives;
#[cfg(test)]
mod tests;

pub(crate) use decode::decode;
pub(crate) use encode::encode;
pub use primitives::CodecError;
