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

use std::fmt;

/// First byte of every binary changelog value. JSON values (an older encoding) start with `{`.
pub(crate) const VERSION: u8 = 0xB1;

/// Why a changelog value could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecError {
    /// The field being read.
    pub field: &'static str,
    /// Byte offset in the value.
    pub at: usize,
    pub problem: &'static str,
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at byte {} (field `{}`)",
            self.problem, self.at, self.field
        )
    }
}

impl std::error::Error for CodecError {}

/// Appends fields to a value.
#[derive(Debug, Default)]
pub(crate) struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    pub fn with_capacity(n: usize) -> Self {
        Writer {
            buf: Vec::with_capacity(n),
        }
    }

    pub fn finish(self) -> Vec<u8> {
        self.buf
    }

    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }

    pub fn u64(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }

    pub fn i64(&mut self, v: i64) {
        self.u64(((v << 1) ^ (v >> 63)) as u64);
    }

    pub fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.buf.extend_from_slice(b);
    }

    pub fn str(&mut self, s: &str) {
        self.bytes(s.as_bytes());
    }

    pub fn raw(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
}

/// Reads fields of a value in the order they were written.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, at: 0 }
    }

    pub fn error(&self, field: &'static str, problem: &'static str) -> CodecError {
        CodecError {
            field,
            at: self.at,
            problem,
        }
    }

    /// Fails unless every byte was read.
    pub fn end(&self) -> Result<(), CodecError> {
        if self.at == self.buf.len() {
            Ok(())
        } else {
            Err(self.error("end", "bytes after the last field"))
        }
    }

    pub fn u8(&mut self, field: &'static str) -> Result<u8, CodecError> {
        let b = *self
            .buf
            .get(self.at)
            .ok_or_else(|| self.error(field, "value ends early"))?;
        self.at += 1;
        Ok(b)
    }

    pub fn u64(&mut self, field: &'static str) -> Result<u64, CodecError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8(field)?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(self.error(field, "varint overflows 64 bits"));
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.error(field, "varint longer than 10 bytes"))
    }

    pub fn u32(&mut self, field: &'static str) -> Result<u32, CodecError> {
        u32::try_from(self.u64(field)?).map_err(|_| self.error(field, "number too large"))
    }

    pub fn i64(&mut self, field: &'static str) -> Result<i64, CodecError> {
        let v = self.u64(field)?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    pub fn bytes(&mut self, field: &'static str) -> Result<&'a [u8], CodecError> {
        let len = self.u64(field)?;
        let len = usize::try_from(len).map_err(|_| self.error(field, "length too large"))?;
        self.raw(field, len)
    }

    pub fn raw(&mut self, field: &'static str, len: usize) -> Result<&'a [u8], CodecError> {
        let end = self
            .at
            .checked_add(len)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| self.error(field, "value ends early"))?;
        let b = &self.buf[self.at..end];
        self.at = end;
        Ok(b)
    }

    pub fn str(&mut self, field: &'static str) -> Result<&'a str, CodecError> {
        let at = self.at;
        let b = self.bytes(field)?;
        std::str::from_utf8(b).map_err(|_| CodecError {
            field,
            at,
            problem: "text is not UTF-8",
        })
    }
}

// -------------------------------------------------------------------------------------------------
// Entries
//
// value  = VERSION tag body
// tag    = 1 call | 2 loose | 3 closed | 4 meta
// scope  = source session [thread]            (thread behind the entry's flag bit 0)
// call   = flags scope tool key record_id [turn] [args] [checksum] created Δupdated Δdeadline
//          why events duplicates attempts [more: JSON]
// loose  = flags scope key record_id [turn] [tool] [args] [checksum] [done] first Δupdated
//          Δdeadline events duplicates [rest: JSON of facts and attributes]
// done   = flags at [result] [started_at] [duration_ms]
// closed = flags scope expires n×id [idempotency_key record: JSON]
// meta   = flags [stream_time] next_seq n×([time])
//
// Times are milliseconds (zigzag varints); Δ fields are differences to the first time of the
// entry. Rare parts (a call's `More`, a waiting result's facts, a remembered record) are their
// JSON text: they are seldom present, and their types are the model's.

use crate::state::{
    Call, Closed, Deadline, Done, Entry, EntryRef, Fact, Idempotent, Live, Loose, Meta, More,
    ScopeKey, Sum,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use toolcalls_model::{CallId, Json, RecordId, SessionId, Source, ThreadId, Timestamp};

const TAG_CALL: u8 = 1;
const TAG_LOOSE: u8 = 2;
const TAG_CLOSED: u8 = 3;
const TAG_META: u8 = 4;

/// Flag bits, shared by the entry kinds where they mean the same.
const THREAD: u32 = 1;
const HAS_ID: u32 = 1 << 1;
const TURN: u32 = 1 << 2;
const ARGS: u32 = 1 << 3;
const CHECKSUM: u32 = 1 << 4;
const DENIED: u32 = 1 << 5;
const MORE: u32 = 1 << 6;
const TOOL: u32 = 1 << 7;
const DONE: u32 = 1 << 8;
const IDEM: u32 = 1 << 9;
const STREAM_TIME: u32 = 1 << 10;

const DONE_RESULT: u32 = 1;
const DONE_ERROR: u32 = 1 << 1;
const DONE_CANCELLED: u32 = 1 << 2;
const DONE_STARTED: u32 = 1 << 3;
const DONE_DURATION: u32 = 1 << 4;

/// The rare parts of a waiting result.
#[derive(Serialize, Deserialize)]
struct LooseRest {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    facts: Vec<Fact>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    attributes: Option<Map<String, Value>>,
}

fn flag(on: bool, bit: u32) -> u32 {
    if on {
        bit
    } else {
        0
    }
}

impl Writer {
    fn time(&mut self, t: Timestamp) {
        self.i64(t.0);
    }

    fn delta(&mut self, t: Timestamp, base: Timestamp) {
        self.i64(t.0.wrapping_sub(base.0));
    }

    fn scope(&mut self, s: &ScopeKey) {
        self.str(s.source.as_str());
        self.str(s.session.as_str());
        if let Some(t) = &s.thread {
            self.str(t.as_str());
        }
    }

    fn record_id(&mut self, id: &RecordId) {
        self.raw(id.0.as_bytes());
    }

    fn json_text<T: Serialize + ?Sized>(&mut self, v: &T) {
        let text = serde_json::to_vec(v).expect("state entries serialize");
        self.bytes(&text);
    }
}

impl<'a> Reader<'a> {
    fn time(&mut self, field: &'static str) -> Result<Timestamp, CodecError> {
        self.i64(field).map(Timestamp)
    }

    fn delta(&mut self, field: &'static str, base: Timestamp) -> Result<Timestamp, CodecError> {
        self.i64(field).map(|d| Timestamp(base.0.wrapping_add(d)))
    }

    fn scope(&mut self, flags: u32) -> Result<ScopeKey, CodecError> {
        Ok(ScopeKey {
            source: Source(self.str("scope.source")?.to_owned()),
            session: SessionId(self.str("scope.session")?.to_owned()),
            thread: match flags & THREAD {
                0 => None,
                _ => Some(ThreadId(self.str("scope.thread")?.to_owned())),
            },
        })
    }

    fn record_id(&mut self) -> Result<RecordId, CodecError> {
        let b = self.raw("record_id", 16)?;
        let bytes: [u8; 16] = b.try_into().expect("16 bytes");
        Ok(RecordId(uuid::Uuid::from_bytes(bytes)))
    }

    fn boxed_str(&mut self, field: &'static str) -> Result<Box<str>, CodecError> {
        self.str(field).map(Box::from)
    }

    fn json(&mut self, field: &'static str) -> Result<Json, CodecError> {
        let text = self.str(field)?;
        Json::parse(text).map_err(|_| self.error(field, "text is not a JSON value"))
    }

    fn sum(&mut self) -> Result<Sum, CodecError> {
        let b = self.raw("checksum", 32)?;
        Ok(Sum(b.try_into().expect("32 bytes")))
    }

    fn json_text<T: for<'de> Deserialize<'de>>(
        &mut self,
        field: &'static str,
    ) -> Result<T, CodecError> {
        let b = self.bytes(field)?;
        serde_json::from_slice(b).map_err(|_| self.error(field, "not the JSON of this part"))
    }

    /// A flags field; bits outside `known` mean the value is not ours.
    fn flags(&mut self, known: u32) -> Result<u32, CodecError> {
        let f = self.u32("flags")?;
        if f & !known != 0 {
            return Err(self.error("flags", "unknown flag bits"));
        }
        Ok(f)
    }

    fn deadline(&mut self) -> Result<Deadline, CodecError> {
        Ok(match self.u8("why")? {
            0 => Deadline::Timeout,
            1 => Deadline::TurnEnded,
            2 => Deadline::TurnAborted,
            3 => Deadline::Denied,
            _ => return Err(self.error("why", "unknown deadline kind")),
        })
    }
}

fn why_byte(why: Deadline) -> u8 {
    match why {
        Deadline::Timeout => 0,
        Deadline::TurnEnded => 1,
        Deadline::TurnAborted => 2,
        Deadline::Denied => 3,
    }
}

/// The binary value of a changelog entry.
pub(crate) fn encode(entry: &EntryRef<'_>) -> Vec<u8> {
    let mut w = Writer::with_capacity(160);
    w.u8(VERSION);
    match entry {
        EntryRef::Call { scope, tool, call } => {
            w.u8(TAG_CALL);
            let flags = flag(scope.thread.is_some(), THREAD)
                | flag(call.has_id, HAS_ID)
                | flag(call.turn.is_some(), TURN)
                | flag(call.args.is_some(), ARGS)
                | flag(call.checksum.is_some(), CHECKSUM)
                | flag(call.denied, DENIED)
                | flag(call.more.is_some(), MORE);
            w.u64(u64::from(flags));
            w.scope(scope);
            w.str(tool);
            w.str(&call.key);
            w.record_id(&call.record_id);
            if let Some(t) = &call.turn {
                w.str(t);
            }
            if let Some(a) = &call.args {
                w.str(a.as_str());
            }
            if let Some(c) = &call.checksum {
                w.raw(&c.0);
            }
            w.time(call.created_at);
            w.delta(call.updated_at, call.created_at);
            w.delta(call.deadline, call.created_at);
            w.u8(why_byte(call.why));
            w.u64(u64::from(call.events));
            w.u64(u64::from(call.duplicates));
            w.u64(u64::from(call.attempts));
            if let Some(m) = &call.more {
                w.json_text(&**m);
            }
        }
        EntryRef::Loose { scope, loose } => {
            w.u8(TAG_LOOSE);
            let rest = !loose.facts.is_empty() || loose.attributes.is_some();
            let flags = flag(scope.thread.is_some(), THREAD)
                | flag(loose.has_id, HAS_ID)
                | flag(loose.turn.is_some(), TURN)
                | flag(loose.tool.is_some(), TOOL)
                | flag(loose.args.is_some(), ARGS)
                | flag(loose.checksum.is_some(), CHECKSUM)
                | flag(loose.done.is_some(), DONE)
                | flag(rest, MORE);
            w.u64(u64::from(flags));
            w.scope(scope);
            w.str(&loose.key);
            w.record_id(&loose.record_id);
            if let Some(t) = &loose.turn {
                w.str(t);
            }
            if let Some(t) = &loose.tool {
                w.str(t);
            }
            if let Some(a) = &loose.args {
                w.str(a.as_str());
            }
            if let Some(c) = &loose.checksum {
                w.raw(&c.0);
            }
            if let Some(d) = &loose.done {
                let flags = flag(d.result.is_some(), DONE_RESULT)
                    | flag(d.is_error, DONE_ERROR)
                    | flag(d.cancelled, DONE_CANCELLED)
                    | flag(d.started_at.is_some(), DONE_STARTED)
                    | flag(d.duration_ms.is_some(), DONE_DURATION);
                w.u64(u64::from(flags));
                w.time(d.at);
                if let Some(r) = &d.result {
                    w.str(r.as_str());
                }
                if let Some(s) = d.started_at {
                    w.time(s);
                }
                if let Some(ms) = d.duration_ms {
                    w.u64(ms);
                }
            }
            w.time(loose.first_at);
            w.delta(loose.updated_at, loose.first_at);
            w.delta(loose.deadline, loose.first_at);
            w.u64(u64::from(loose.events));
            w.u64(u64::from(loose.duplicates));
            if rest {
                w.json_text(&LooseRest {
                    facts: loose.facts.clone(),
                    attributes: loose.attributes.clone(),
                });
            }
        }
        EntryRef::Closed { scope, closed } => {
            w.u8(TAG_CLOSED);
            let flags = flag(scope.thread.is_some(), THREAD) | flag(closed.idem.is_some(), IDEM);
            w.u64(u64::from(flags));
            w.scope(scope);
            w.time(closed.expires);
            w.u64(closed.ids.len() as u64);
            for id in &closed.ids {
                w.str(id.as_str());
            }
            if let Some(idem) = &closed.idem {
                w.str(&idem.key);
                w.json_text(&idem.record);
            }
        }
        EntryRef::Meta(meta) => {
            w.u8(TAG_META);
            w.u64(u64::from(flag(meta.stream_time.is_some(), STREAM_TIME)));
            if let Some(t) = meta.stream_time {
                w.time(t);
            }
            w.u64(meta.next_seq);
            w.u64(meta.topic_time.len() as u64);
            for t in &meta.topic_time {
                match t {
                    Some(t) => {
                        w.u8(1);
                        w.time(*t);
                    }
                    None => w.u8(0),
                }
            }
        }
    }
    w.finish()
}

/// Reads a binary changelog value (one that starts with [`VERSION`]).
pub(crate) fn decode(value: &[u8]) -> Result<Entry, CodecError> {
    let mut r = Reader::new(value);
    match r.u8("version")? {
        VERSION => {}
        b'{' => {
            return Err(r.error(
                "version",
                "a JSON entry, as toolcalls wrote before its binary changelog",
            ))
        }
        _ => return Err(r.error("version", "unknown encoding version")),
    }
    let entry = match r.u8("tag")? {
        TAG_CALL => {
            let flags = r.flags(THREAD | HAS_ID | TURN | ARGS | CHECKSUM | DENIED | MORE)?;
            let scope = r.scope(flags)?;
            let tool = r.boxed_str("tool")?;
            let key = r.boxed_str("key")?;
            let record_id = r.record_id()?;
            let turn = (flags & TURN != 0)
                .then(|| r.boxed_str("turn"))
                .transpose()?;
            let args = (flags & ARGS != 0).then(|| r.json("args")).transpose()?;
            let checksum = (flags & CHECKSUM != 0).then(|| r.sum()).transpose()?;
            let created_at = r.time("created_at")?;
            let updated_at = r.delta("updated_at", created_at)?;
            let deadline = r.delta("deadline", created_at)?;
            let why = r.deadline()?;
            let events = r.u32("events")?;
            let duplicates = r.u32("duplicates")?;
            let attempts = r.u32("attempts")?;
            let more = (flags & MORE != 0)
                .then(|| r.json_text::<More>("more").map(Box::new))
                .transpose()?;
            let call = Call {
                scope: 0,
                tool: 0,
                key,
                has_id: flags & HAS_ID != 0,
                record_id,
                turn,
                args,
                checksum,
                created_at,
                updated_at,
                deadline,
                why,
                denied: flags & DENIED != 0,
                events,
                duplicates,
                attempts,
                more,
            };
            Entry::Call {
                scope,
                tool,
                call: Box::new(Live::Call(call)),
            }
        }
        TAG_LOOSE => {
            let flags = r.flags(THREAD | HAS_ID | TURN | TOOL | ARGS | CHECKSUM | DONE | MORE)?;
            let scope = r.scope(flags)?;
            let key = r.boxed_str("key")?;
            let record_id = r.record_id()?;
            let turn = (flags & TURN != 0)
                .then(|| r.boxed_str("turn"))
                .transpose()?;
            let tool = (flags & TOOL != 0)
                .then(|| r.boxed_str("tool"))
                .transpose()?;
            let args = (flags & ARGS != 0).then(|| r.json("args")).transpose()?;
            let checksum = (flags & CHECKSUM != 0).then(|| r.sum()).transpose()?;
            let done = if flags & DONE != 0 {
                let f = r.flags(
                    DONE_RESULT | DONE_ERROR | DONE_CANCELLED | DONE_STARTED | DONE_DURATION,
                )?;
                let at = r.time("done.at")?;
                let result = (f & DONE_RESULT != 0)
                    .then(|| r.json("done.result"))
                    .transpose()?;
                let started_at = (f & DONE_STARTED != 0)
                    .then(|| r.time("done.started_at"))
                    .transpose()?;
                let duration_ms = (f & DONE_DURATION != 0)
                    .then(|| r.u64("done.duration_ms"))
                    .transpose()?;
                Some(Done {
                    at,
                    result,
                    is_error: f & DONE_ERROR != 0,
                    cancelled: f & DONE_CANCELLED != 0,
                    started_at,
                    duration_ms,
                })
            } else {
                None
            };
            let first_at = r.time("first_at")?;
            let updated_at = r.delta("updated_at", first_at)?;
            let deadline = r.delta("deadline", first_at)?;
            let events = r.u32("events")?;
            let duplicates = r.u32("duplicates")?;
            let rest = (flags & MORE != 0)
                .then(|| r.json_text::<LooseRest>("rest"))
                .transpose()?;
            let (facts, attributes) = rest.map_or((Vec::new(), None), |r| (r.facts, r.attributes));
            Entry::Loose {
                scope,
                loose: Box::new(Loose {
                    scope: 0,
                    key,
                    has_id: flags & HAS_ID != 0,
                    record_id,
                    turn,
                    tool,
                    args,
                    checksum,
                    done,
                    facts,
                    first_at,
                    updated_at,
                    events,
                    duplicates,
                    deadline,
                    attributes,
                }),
            }
        }
        TAG_CLOSED => {
            let flags = r.flags(THREAD | IDEM)?;
            let scope = r.scope(flags)?;
            let expires = r.time("expires")?;
            let n = r.u64("ids")?;
            // Each id takes at least its length byte: a count beyond the value is corrupt.
            if n > value.len() as u64 {
                return Err(r.error("ids", "more ids than the value holds"));
            }
            let mut ids = Vec::with_capacity(n as usize);
            for _ in 0..n {
                ids.push(CallId(r.str("ids")?.to_owned()));
            }
            let idem = if flags & IDEM != 0 {
                let key = r.str("idempotency_key")?.to_owned();
                let record = r.json_text("record")?;
                Some(Box::new(Idempotent { key, record }))
            } else {
                None
            };
            Entry::Closed {
                scope,
                closed: Box::new(Closed {
                    scope: 0,
                    expires,
                    ids,
                    idem,
                }),
            }
        }
        TAG_META => {
            let flags = r.flags(STREAM_TIME)?;
            let stream_time = (flags & STREAM_TIME != 0)
                .then(|| r.time("stream_time"))
                .transpose()?;
            let next_seq = r.u64("next_seq")?;
            let n = r.u64("topic_time")?;
            if n > value.len() as u64 {
                return Err(r.error("topic_time", "more times than the value holds"));
            }
            let mut topic_time = Vec::with_capacity(n as usize);
            for _ in 0..n {
                topic_time.push(match r.u8("topic_time")? {
                    0 => None,
                    1 => Some(r.time("topic_time")?),
                    _ => return Err(r.error("topic_time", "not a presence byte")),
                });
            }
            Entry::Meta(Meta {
                stream_time,
                topic_time,
                next_seq,
            })
        }
        _ => return Err(r.error("tag", "unknown entry kind")),
    };
    r.end()?;
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip() {
        let unsigned = [
            0,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ];
        let signed = [0, -1, 1, i64::MIN, i64::MAX, 1_763_800_000_000, -63];
        let mut w = Writer::default();
        for v in unsigned {
            w.u64(v);
        }
        for v in signed {
            w.i64(v);
        }
        let buf = w.finish();
        let mut r = Reader::new(&buf);
        for v in unsigned {
            assert_eq!(r.u64("u").unwrap(), v);
        }
        for v in signed {
            assert_eq!(r.i64("i").unwrap(), v);
        }
        r.end().unwrap();
    }

    #[test]
    fn small_numbers_take_one_byte() {
        let mut w = Writer::default();
        w.u64(127);
        w.i64(-64);
        w.i64(63);
        assert_eq!(w.finish().len(), 3);
    }

    #[test]
    fn strings_round_trip() {
        let mut w = Writer::default();
        w.str("");
        w.str("toolu_01ü");
        w.bytes(&[0, 255]);
        let buf = w.finish();
        let mut r = Reader::new(&buf);
        assert_eq!(r.str("a").unwrap(), "");
        assert_eq!(r.str("b").unwrap(), "toolu_01ü");
        assert_eq!(r.bytes("c").unwrap(), &[0, 255]);
        r.end().unwrap();
    }

    #[test]
    fn malformed_values_name_the_field() {
        // Ends inside a varint.
        let e = Reader::new(&[0x80]).u64("seq").unwrap_err();
        assert_eq!((e.field, e.problem), ("seq", "value ends early"));
        // Eleven continuation bytes.
        let e = Reader::new(&[0xff; 11]).u64("seq").unwrap_err();
        assert_eq!(e.problem, "varint overflows 64 bits");
        // u64::MAX is the largest accepted.
        let mut max = vec![0xff; 9];
        max.push(0x01);
        assert_eq!(Reader::new(&max).u64("x").unwrap(), u64::MAX);
        max[9] = 0x02;
        assert!(Reader::new(&max).u64("x").is_err());
        // A length past the end.
        let e = Reader::new(&[5, b'a']).str("tool").unwrap_err();
        assert_eq!((e.field, e.at), ("tool", 1));
        // A huge length does not overflow.
        let mut huge = Writer::default();
        huge.u64(u64::MAX);
        assert!(Reader::new(&huge.finish()).bytes("args").is_err());
        // Not UTF-8.
        let e = Reader::new(&[2, 0xc3, 0x28]).str("tool").unwrap_err();
        assert_eq!(e.problem, "text is not UTF-8");
        // Trailing bytes.
        let mut r = Reader::new(&[1, 2]);
        r.u8("a").unwrap();
        assert_eq!(r.end().unwrap_err().problem, "bytes after the last field");
        // u32 range.
        let mut w = Writer::default();
        w.u64(u64::from(u32::MAX) + 1);
        assert_eq!(
            Reader::new(&w.finish()).u32("events").unwrap_err().problem,
            "number too large"
        );
    }

    // ---------------------------------------------------------------------------------------------
    // Entries

    use crate::state::ExecEnd;
    use serde_json::json;
    use toolcalls_model::{
        checksum_of, ApprovalDecision, ApprovalState, HookDecisionEntry, HookVerdict, SideEffects,
    };

    fn scope(thread: bool) -> ScopeKey {
        ScopeKey {
            source: Source::from("claude-code"),
            session: SessionId::from("sess-ü"),
            thread: thread.then(|| ThreadId::from("t1")),
        }
    }

    fn t(ms: i64) -> Timestamp {
        Timestamp(ms)
    }

    fn bare_call() -> Call {
        Call {
            scope: 0,
            tool: 0,
            key: "@0:17".into(),
            has_id: false,
            record_id: RecordId(uuid::Uuid::from_u128(7)),
            turn: None,
            args: None,
            checksum: None,
            created_at: t(1_763_800_000_000),
            updated_at: t(1_763_800_000_000),
            deadline: t(1_763_800_600_000),
            why: Deadline::Timeout,
            denied: false,
            events: 1,
            duplicates: 0,
            attempts: 1,
            more: None,
        }
    }

    fn full_call() -> Call {
        let args = Json::parse(r#"{"path": "a.rs", "n": 12345678901234567890}"#).unwrap();
        let more = More {
            aliases: vec![CallId::from("retry-1")],
            side_effects: Some(SideEffects {
                level: None,
                idempotent: Some(true),
                idempotency_key: Some("k-1".into()),
            }),
            agent: Some("main".into()),
            execution: Some("sandbox".into()),
            hook_context: Some(json!({"cwd": "/w"}).as_object().unwrap().clone()),
            started_at: Some(t(5)),
            exec_end: Some(ExecEnd {
                at: t(9),
                is_error: true,
                duration_ms: Some(4),
            }),
            approval: Some(ApprovalState {
                required: true,
                status: ApprovalDecision::Approved,
                requested_at: Some(t(2)),
                approved_by: Some("ops".into()),
                approved_at: Some(t(3)),
                reason: None,
            }),
            hooks: vec![HookDecisionEntry {
                hook: "PreToolUse".into(),
                decision: HookVerdict::Allow,
                policy_id: None,
                policy_version: None,
                reason: Some("fine".into()),
                at: t(1),
            }],
            attributes: Some(json!({"x": [1, 2]}).as_object().unwrap().clone()),
        };
        Call {
            key: "toolu_01ABC".into(),
            has_id: true,
            turn: Some("turn-3".into()),
            checksum: Some(Sum::of(&checksum_of("Read", Some(&args.to_value())))),
            args: Some(args),
            updated_at: t(1_763_799_999_000),
            deadline: t(i64::MAX),
            why: Deadline::TurnAborted,
            denied: true,
            events: 4,
            duplicates: 2,
            attempts: 3,
            more: Some(Box::new(more)),
            ..bare_call()
        }
    }

    fn loose(done: bool, rest: bool) -> Loose {
        Loose {
            scope: 0,
            key: "call_9".into(),
            has_id: true,
            record_id: RecordId(uuid::Uuid::from_u128(u128::MAX)),
            turn: Some("turn".into()),
            tool: Some("shell".into()),
            args: Some(Json::parse("[]").unwrap()),
            checksum: Some(Sum([3; 32])),
            done: done.then(|| Done {
                at: t(-5),
                result: Some(Json::parse(r#""ok\n""#).unwrap()),
                is_error: true,
                cancelled: true,
                started_at: Some(t(-9)),
                duration_ms: Some(u64::MAX),
            }),
            facts: if rest {
                vec![
                    Fact::ExecStart { at: t(1) },
                    Fact::Approval {
                        at: t(2),
                        decision: ApprovalDecision::Denied,
                        by: None,
                        reason: Some("no".into()),
                    },
                ]
            } else {
                Vec::new()
            },
            first_at: t(0),
            updated_at: t(10),
            events: 2,
            duplicates: 1,
            deadline: t(60_000),
            attributes: rest.then(|| json!({"a": 1}).as_object().unwrap().clone()),
        }
    }

    fn call_round_trip(s: &ScopeKey, call: &Call) -> Vec<u8> {
        let bytes = encode(&EntryRef::Call {
            scope: s,
            tool: "Read",
            call,
        });
        match decode(&bytes).unwrap() {
            Entry::Call {
                scope,
                tool,
                call: back,
            } => {
                assert_eq!(&scope, s);
                assert_eq!(&*tool, "Read");
                assert_eq!(*back, Live::Call(call.clone()));
            }
            _ => panic!("not a call"),
        }
        bytes
    }

    #[test]
    fn calls_round_trip() {
        let bare = call_round_trip(&scope(false), &bare_call());
        let full = call_round_trip(&scope(true), &full_call());
        // A bare call is a few dozen bytes; its JSON was several hundred.
        assert!(bare.len() < 70, "{}", bare.len());
        assert!(full.len() > bare.len());
    }

    #[test]
    fn waiting_results_round_trip() {
        for (done, rest) in [(false, false), (true, false), (false, true), (true, true)] {
            let l = loose(done, rest);
            let bytes = encode(&EntryRef::Loose {
                scope: &scope(done),
                loose: &l,
            });
            match decode(&bytes).unwrap() {
                Entry::Loose { scope: s, loose } => {
                    assert_eq!(s, scope(done));
                    assert_eq!(*loose, l);
                }
                _ => panic!("not a waiting result"),
            }
        }
    }

    #[test]
    fn closed_calls_and_meta_round_trip() {
        let record = {
            // Any record will do: the one a closed idempotent call keeps is published JSON.
            let mut c = crate::Correlator::without_changelog(crate::Config::default());
            let mut out = crate::Effects::default();
            let e = toolcalls_model::Event::decode(
                br#"{"v":1,"kind":"announce","source":"s","session":"x","callId":"c","time":"2026-01-01T00:00:00Z","tool":"t"}"#,
            )
            .unwrap();
            c.apply(e, crate::Position::default(), &mut out);
            c.close_all(toolcalls_model::Phase::Interrupted, "end", &mut out);
            out.records.pop().unwrap()
        };
        for closed in [
            Closed {
                scope: 0,
                expires: t(77),
                ids: vec![],
                idem: None,
            },
            Closed {
                scope: 0,
                expires: t(-1),
                ids: vec![CallId::from("a"), CallId::from("b")],
                idem: Some(Box::new(Idempotent {
                    key: "k".into(),
                    record: record.clone(),
                })),
            },
        ] {
            let bytes = encode(&EntryRef::Closed {
                scope: &scope(true),
                closed: &closed,
            });
            match decode(&bytes).unwrap() {
                Entry::Closed {
                    scope: s,
                    closed: c,
                } => {
                    assert_eq!(s, scope(true));
                    assert_eq!(*c, closed);
                }
                _ => panic!("not a closed call"),
            }
        }
        for meta in [
            Meta {
                stream_time: None,
                topic_time: vec![],
                next_seq: 0,
            },
            Meta {
                stream_time: Some(t(3)),
                topic_time: vec![Some(t(4)), None],
                next_seq: u64::MAX,
            },
        ] {
            match decode(&encode(&EntryRef::Meta(&meta))).unwrap() {
                Entry::Meta(m) => assert_eq!(m, meta),
                _ => panic!("not meta"),
            }
        }
    }

    #[test]
    fn every_cut_and_every_bad_byte_is_an_error_not_a_panic() {
        let s = scope(true);
        let values = [
            encode(&EntryRef::Call {
                scope: &s,
                tool: "Read",
                call: &full_call(),
            }),
            encode(&EntryRef::Loose {
                scope: &s,
                loose: &loose(true, true),
            }),
        ];
        for v in &values {
            for cut in 0..v.len() {
                assert!(decode(&v[..cut]).is_err(), "cut at {cut} decoded");
            }
            let mut long = v.clone();
            long.push(0);
            assert_eq!(
                decode(&long).err().unwrap().problem,
                "bytes after the last field"
            );
            // Flipping any byte either fails cleanly or decodes to something; it never panics.
            for i in 0..v.len() {
                let mut bad = v.clone();
                bad[i] ^= 0x5a;
                let _ = decode(&bad);
            }
        }
    }

    #[test]
    fn foreign_values_say_what_they_are() {
        let e = decode(br#"{"call":{}}"#).err().unwrap();
        assert!(e.problem.contains("JSON entry"), "{e}");
        assert_eq!(
            decode(b"\x07").err().unwrap().problem,
            "unknown encoding version"
        );
        assert_eq!(
            decode(&[VERSION, 9]).err().unwrap().problem,
            "unknown entry kind"
        );
        let mut flags = vec![VERSION, TAG_META];
        flags.push(0x40);
        assert_eq!(decode(&flags).err().unwrap().problem, "unknown flag bits");
        // Arguments that are not JSON are refused, not kept.
        let mut call = bare_call();
        call.args = Some(Json::parse("1").unwrap());
        let mut v = encode(&EntryRef::Call {
            scope: &s_plain(),
            tool: "t",
            call: &call,
        });
        let at = v.iter().rposition(|&b| b == b'1').unwrap();
        v[at] = b'x';
        assert_eq!(decode(&v).err().unwrap().field, "args");
    }

    fn s_plain() -> ScopeKey {
        scope(false)
    }
}
