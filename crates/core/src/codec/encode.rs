//! Writing an entry: [`encode`].

use super::format::{
    cause_byte, WaitingExtras, ANSWERED, ARGS, CHECKSUM, CLOCK_0, CLOCK_1, DENIED, DONE,
    DONE_CANCELLED, DONE_DURATION, DONE_ERROR, DONE_RESULT, DONE_STARTED, DROPPED, EXTRAS,
    FORGOT_UPTO, HAS_ID, IDEM, IDLE, REPEATS, STREAM_TIME, TAG_CALL, TAG_CLOSED, TAG_HELD,
    TAG_META, TAG_SCOPE, TAG_WAITING, THREAD, TOOL, TURN, VERSION, WALL,
};
use super::primitives::Writer;
use crate::state::{EntryRef, ScopeKey};
use crate::Position;
use serde::Serialize;
use toolcalls_model::{RecordId, Timestamp};

/// `bit` if `on`.
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

    /// An input position: the input, then the offset.
    fn position(&mut self, p: Position) {
        self.u64(u64::from(p.topic));
        self.i64(p.offset);
    }

    fn record_id(&mut self, id: &RecordId) {
        self.raw(id.0.as_bytes());
    }

    fn json_text<T: Serialize + ?Sized>(&mut self, v: &T) {
        let text = serde_json::to_vec(v).expect("state entries serialize");
        self.bytes(&text);
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
                | flag(call.extras.is_some(), EXTRAS);
            w.u64(u64::from(flags));
            w.scope(scope);
            w.str(tool);
            w.str(&call.record_key());
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
            w.u8(cause_byte(call.cause));
            w.u64(u64::from(call.events));
            w.u64(u64::from(call.duplicates));
            w.u64(u64::from(call.attempts));
            // The first position, if any: 0, or the input + 1 and the offset.
            match call.pos.get() {
                Some(p) => {
                    w.u64(u64::from(p.topic) + 1);
                    w.i64(p.offset);
                }
                None => w.u64(0),
            }
            if let Some(x) = &call.extras {
                w.json_text(&**x);
            }
        }
        EntryRef::Waiting { scope, waiting } => {
            w.u8(TAG_WAITING);
            let extras = !waiting.facts.is_empty() || waiting.attributes.is_some();
            let flags = flag(scope.thread.is_some(), THREAD)
                | flag(waiting.has_id, HAS_ID)
                | flag(waiting.turn.is_some(), TURN)
                | flag(waiting.tool.is_some(), TOOL)
                | flag(waiting.args.is_some(), ARGS)
                | flag(waiting.checksum.is_some(), CHECKSUM)
                | flag(waiting.done.is_some(), DONE)
                | flag(extras, EXTRAS);
            w.u64(u64::from(flags));
            w.scope(scope);
            w.str(&waiting.key);
            w.record_id(&waiting.record_id);
            if let Some(t) = &waiting.turn {
                w.str(t);
            }
            if let Some(t) = &waiting.tool {
                w.str(t);
            }
            if let Some(a) = &waiting.args {
                w.str(a.as_str());
            }
            if let Some(c) = &waiting.checksum {
                w.raw(&c.0);
            }
            if let Some(d) = &waiting.done {
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
                w.position(d.pos);
            }
            w.time(waiting.first_at);
            w.delta(waiting.updated_at, waiting.first_at);
            w.delta(waiting.deadline, waiting.first_at);
            w.u64(u64::from(waiting.events));
            w.u64(u64::from(waiting.duplicates));
            w.u64(waiting.positions.len() as u64);
            for p in &waiting.positions {
                w.position(*p);
            }
            if extras {
                w.json_text(&WaitingExtras {
                    facts: waiting.facts.clone(),
                    attributes: waiting.attributes.clone(),
                });
            }
        }
        EntryRef::Closed { scope, closed } => {
            w.u8(TAG_CLOSED);
            let flags = flag(scope.thread.is_some(), THREAD)
                | flag(closed.idem.is_some(), IDEM)
                | flag(!closed.repeats.is_empty(), REPEATS)
                | flag(closed.announced_with_id, HAS_ID)
                | flag(closed.tool != 0, TOOL)
                | flag(closed.idem.is_some(), ANSWERED);
            w.u64(u64::from(flags));
            w.scope(scope);
            w.time(closed.expires);
            if closed.tool != 0 {
                w.u64(u64::from(closed.tool));
            }
            w.u64(closed.ids.len() as u64);
            for id in &closed.ids {
                w.str(id.as_str());
            }
            if !closed.repeats.is_empty() {
                w.u64(closed.repeats.len() as u64);
                for key in &closed.repeats {
                    w.raw(&key.to_le_bytes());
                }
            }
            if let Some(idem) = &closed.idem {
                w.str(&idem.key);
                w.json_text(&idem.record);
                w.u64(u64::from(idem.answered));
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
        EntryRef::Scope {
            scope,
            clocks,
            idle,
            forgot_upto,
            dropped,
        } => {
            w.u8(TAG_SCOPE);
            w.u64(u64::from(
                flag(scope.thread.is_some(), THREAD)
                    | flag(*idle, IDLE)
                    | flag(clocks[0].is_some(), CLOCK_0)
                    | flag(clocks[1].is_some(), CLOCK_1)
                    | flag(forgot_upto.is_some(), FORGOT_UPTO)
                    | flag(*dropped, DROPPED),
            ));
            w.scope(scope);
            for t in clocks.iter().chain([forgot_upto]).flatten() {
                w.time(*t);
            }
        }
        EntryRef::Held { event, pos, wall } => {
            w.u8(TAG_HELD);
            w.u64(u64::from(flag(wall.is_some(), WALL)));
            w.position(*pos);
            if let Some(t) = wall {
                w.time(*t);
            }
            w.bytes(&event.encode());
        }
    }
    w.finish()
}
