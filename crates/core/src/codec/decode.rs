//! Reading an entry: [`decode`].

use super::format::{
    cause_of_byte, WaitingExtras, ANSWERED, ARGS, CHECKSUM, CLOCK_0, CLOCK_1, DENIED, DONE,
    DONE_CANCELLED, DONE_DURATION, DONE_ERROR, DONE_RESULT, DONE_STARTED, DROPPED, EXTRAS,
    FORGOT_UPTO, HAS_ID, IDEM, IDLE, REPEATS, STREAM_TIME, TAG_CALL, TAG_CLOSED, TAG_HELD,
    TAG_META, TAG_SCOPE, TAG_WAITING, THREAD, TOOL, TURN, VERSION, VERSION_WITHOUT_POSITIONS, WALL,
};
use super::primitives::{CodecError, Reader};
use crate::correlator::RESTORED_SEQ_LIMIT;
use crate::state::PackedPos;
use crate::state::{
    Call, Closed, ClosedIds, DeadlineCause, Digest, Done, Entry, Extras, Idempotent, Live, Meta,
    ScopeKey, WaitingResult,
};
use crate::Position;
use serde::Deserialize;
use std::sync::Arc;
use toolcalls_model::{CallId, Json, RecordId, SessionId, Source, ThreadId, Timestamp};

impl<'a> Reader<'a> {
    fn time(&mut self, field: &'static str) -> Result<Timestamp, CodecError> {
        self.i64(field).map(Timestamp)
    }

    fn delta(&mut self, field: &'static str, base: Timestamp) -> Result<Timestamp, CodecError> {
        self.i64(field).map(|d| Timestamp(base.0.wrapping_add(d)))
    }

    fn scope(&mut self, flags: u32) -> Result<ScopeKey, CodecError> {
        Ok(ScopeKey {
            source: Source::from(self.str("scope.source")?),
            session: SessionId::from(self.str("scope.session")?),
            thread: match flags & THREAD {
                0 => None,
                _ => Some(ThreadId::from(self.str("scope.thread")?)),
            },
        })
    }

    /// An input position: the input, then the offset.
    fn position(&mut self, field: &'static str) -> Result<Position, CodecError> {
        let topic = u16::try_from(self.u64(field)?)
            .map_err(|_| self.error(field, "input number too large"))?;
        Ok(Position::new(topic, self.i64(field)?))
    }

    /// A call's first position: 0, or the input + 1 and the offset.
    fn packed_pos(&mut self) -> Result<PackedPos, CodecError> {
        let field = "pos";
        let topic = match self.u64(field)? {
            0 => return Ok(PackedPos::NONE),
            t => u16::try_from(t - 1).map_err(|_| self.error(field, "input number too large"))?,
        };
        let pos = Position::new(topic, self.i64(field)?);
        PackedPos::new(pos).ok_or_else(|| self.error(field, "position out of the packed range"))
    }

    fn record_id(&mut self) -> Result<RecordId, CodecError> {
        let b = self.raw("record_id", 16)?;
        let bytes: [u8; 16] = b.try_into().expect("16 bytes");
        Ok(RecordId(uuid::Uuid::from_bytes(bytes)))
    }

    fn boxed_str(&mut self, field: &'static str) -> Result<Box<str>, CodecError> {
        self.str(field).map(Box::from)
    }

    fn shared_str(&mut self, field: &'static str) -> Result<Arc<str>, CodecError> {
        self.str(field).map(Arc::from)
    }

    fn json(&mut self, field: &'static str) -> Result<Json, CodecError> {
        let text = self.str(field)?;
        Json::parse(text).map_err(|_| self.error(field, "text is not a JSON value"))
    }

    fn digest(&mut self) -> Result<Digest, CodecError> {
        let b = self.raw("checksum", 32)?;
        Ok(Digest(b.try_into().expect("32 bytes")))
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

    fn cause(&mut self) -> Result<DeadlineCause, CodecError> {
        let b = self.u8("cause")?;
        cause_of_byte(b).ok_or_else(|| self.error("cause", "unknown deadline cause"))
    }
}

/// Reads a binary changelog value (one that starts with [`VERSION`]).
pub(crate) fn decode(value: &[u8]) -> Result<Entry, CodecError> {
    let mut r = Reader::new(value);
    match r.u8("version")? {
        VERSION => {}
        VERSION_WITHOUT_POSITIONS => {
            return Err(r.error(
                "version",
                "an entry of the previous format (0xB1), written before pending entries kept the input positions of their events",
            ))
        }
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
            let flags = r.flags(THREAD | HAS_ID | TURN | ARGS | CHECKSUM | DENIED | EXTRAS)?;
            let scope = r.scope(flags)?;
            let tool = r.boxed_str("tool")?;
            let key = r.boxed_str("key")?;
            let record_id = r.record_id()?;
            let turn = (flags & TURN != 0)
                .then(|| r.shared_str("turn"))
                .transpose()?;
            let args = (flags & ARGS != 0).then(|| r.json("args")).transpose()?;
            let checksum = (flags & CHECKSUM != 0).then(|| r.digest()).transpose()?;
            let created_at = r.time("created_at")?;
            let updated_at = r.delta("updated_at", created_at)?;
            let deadline = r.delta("deadline", created_at)?;
            let cause = r.cause()?;
            let events = r.u32("events")?;
            let duplicates = r.u32("duplicates")?;
            let attempts = r.u32("attempts")?;
            let pos = r.packed_pos()?;
            let extras = (flags & EXTRAS != 0)
                .then(|| r.json_text::<Extras>("extras").map(Box::new))
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
                cause,
                denied: flags & DENIED != 0,
                events,
                duplicates,
                attempts,
                pos,
                extras,
            };
            Entry::Call {
                scope,
                tool,
                call: Box::new(Live::Call(call)),
            }
        }
        TAG_WAITING => {
            let flags = r.flags(THREAD | HAS_ID | TURN | TOOL | ARGS | CHECKSUM | DONE | EXTRAS)?;
            let scope = r.scope(flags)?;
            let key = r.boxed_str("key")?;
            let record_id = r.record_id()?;
            let turn = (flags & TURN != 0)
                .then(|| r.shared_str("turn"))
                .transpose()?;
            let tool = (flags & TOOL != 0)
                .then(|| r.boxed_str("tool"))
                .transpose()?;
            let args = (flags & ARGS != 0).then(|| r.json("args")).transpose()?;
            let checksum = (flags & CHECKSUM != 0).then(|| r.digest()).transpose()?;
            let done = if flags & DONE != 0 {
                let done_flags = r.flags(
                    DONE_RESULT | DONE_ERROR | DONE_CANCELLED | DONE_STARTED | DONE_DURATION,
                )?;
                let at = r.time("done.at")?;
                let result = (done_flags & DONE_RESULT != 0)
                    .then(|| r.json("done.result"))
                    .transpose()?;
                let started_at = (done_flags & DONE_STARTED != 0)
                    .then(|| r.time("done.started_at"))
                    .transpose()?;
                let duration_ms = (done_flags & DONE_DURATION != 0)
                    .then(|| r.u64("done.duration_ms"))
                    .transpose()?;
                let pos = r.position("done.pos")?;
                Some(Done {
                    at,
                    result,
                    is_error: done_flags & DONE_ERROR != 0,
                    cancelled: done_flags & DONE_CANCELLED != 0,
                    started_at,
                    duration_ms,
                    pos,
                })
            } else {
                None
            };
            let first_at = r.time("first_at")?;
            let updated_at = r.delta("updated_at", first_at)?;
            let deadline = r.delta("deadline", first_at)?;
            let events = r.u32("events")?;
            let duplicates = r.u32("duplicates")?;
            let n = r.u64("positions")?;
            // Each position takes at least two bytes: a count beyond the value is corrupt.
            if n > value.len() as u64 / 2 {
                return Err(r.error("positions", "more positions than the value holds"));
            }
            let mut positions = Vec::with_capacity(n as usize);
            for _ in 0..n {
                positions.push(r.position("positions")?);
            }
            let extras = (flags & EXTRAS != 0)
                .then(|| r.json_text::<WaitingExtras>("extras"))
                .transpose()?;
            let (facts, attributes) =
                extras.map_or((Vec::new(), None), |x| (x.facts, x.attributes));
            Entry::Waiting {
                scope,
                waiting: Box::new(WaitingResult {
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
                    positions,
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
            let flags = r.flags(THREAD | IDEM | REPEATS | HAS_ID | TOOL | ANSWERED)?;
            let scope = r.scope(flags)?;
            let expires = r.time("expires")?;
            let tool = if flags & TOOL != 0 {
                match u16::try_from(r.u64("tool")?) {
                    Ok(key) if key != 0 => key,
                    _ => return Err(r.error("tool", "not a tool key")),
                }
            } else {
                0
            };
            let n = r.u64("ids")?;
            // Each id takes at least its length byte: a count beyond the value is corrupt.
            if n > value.len() as u64 {
                return Err(r.error("ids", "more ids than the value holds"));
            }
            let mut ids = ClosedIds::with_capacity(n as usize);
            for _ in 0..n {
                ids.push(CallId(r.str("ids")?.to_owned()));
            }
            let repeats = if flags & REPEATS != 0 {
                let n = r.u64("repeats")?;
                if n > value.len() as u64 / 8 {
                    return Err(r.error("repeats", "more repeat keys than the value holds"));
                }
                (0..n)
                    .map(|_| {
                        let b = r.raw("repeats", 8)?;
                        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes read")))
                    })
                    .collect::<Result<_, _>>()?
            } else {
                Box::default()
            };
            let idem = if flags & IDEM != 0 {
                let key = r.str("idempotency_key")?.to_owned();
                let record = r.json_text("record")?;
                let answered = if flags & ANSWERED != 0 {
                    u32::try_from(r.u64("answered")?)
                        .map_err(|_| r.error("answered", "not an attempt"))?
                } else {
                    Idempotent::EVERY_ATTEMPT
                };
                Some(Box::new(Idempotent {
                    key,
                    record,
                    answered,
                }))
            } else {
                None
            };
            Entry::Closed {
                scope,
                closed: Box::new(Closed {
                    scope: 0,
                    expires,
                    ids,
                    announced_with_id: flags & HAS_ID != 0,
                    tool,
                    repeats,
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
            if next_seq > RESTORED_SEQ_LIMIT {
                return Err(r.error("next_seq", "beyond the entry numbers this program writes"));
            }
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
        TAG_SCOPE => {
            let flags = r.flags(THREAD | IDLE | CLOCK_0 | CLOCK_1 | FORGOT_UPTO | DROPPED)?;
            let scope = r.scope(flags)?;
            let mut clocks = [None; 2];
            for (clock, bit) in clocks.iter_mut().zip([CLOCK_0, CLOCK_1]) {
                if flags & bit != 0 {
                    *clock = Some(r.time("clock")?);
                }
            }
            let forgot_upto = (flags & FORGOT_UPTO != 0)
                .then(|| r.time("forgot_upto"))
                .transpose()?;
            let dropped = flags & DROPPED != 0;
            if dropped && forgot_upto.is_none() {
                return Err(r.error("forgot_upto", "a dropped scope's note without its time"));
            }
            Entry::Scope {
                scope,
                clocks,
                idle: flags & IDLE != 0,
                forgot_upto,
                dropped,
            }
        }
        TAG_HELD => {
            let flags = r.flags(WALL)?;
            let pos = r.position("pos")?;
            let wall = (flags & WALL != 0).then(|| r.time("wall")).transpose()?;
            let event = toolcalls_model::Event::decode(r.bytes("event")?)
                .map_err(|_| r.error("event", "not a v1 event"))?;
            Entry::Held {
                event: Box::new(event),
                pos,
                wall,
            }
        }
        _ => return Err(r.error("tag", "unknown entry kind")),
    };
    r.end()?;
    Ok(entry)
}
