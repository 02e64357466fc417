//! What the adapters of API request and response logs (Anthropic, OpenAI Chat Completions, Gemini)
//! share: reading a file of bodies, where each body was read, and the history of a conversation
//! that every request repeats.

use std::collections::HashMap;

use serde_json::Value;
use toolcalls_model::Timestamp;

use crate::common::{is_pretty_document, lines, sse, trim_ascii_start, Ctx, Envelope, Sse};

/// Calls `f(ctx, line, index, value)` for each JSON value of a file of API bodies: a whole document
/// (each element of an array), or one JSON value per line with SSE `data:` prefixes allowed.
pub(crate) fn each_value(
    ctx: &mut Ctx,
    input: &[u8],
    mut f: impl FnMut(&mut Ctx, usize, usize, &Value),
) {
    if trim_ascii_start(input).starts_with(b"[") || is_pretty_document(input) {
        if let Some(doc) = ctx.json_document(input) {
            match doc {
                Value::Array(items) => {
                    for (i, item) in items.iter().enumerate() {
                        f(ctx, 1, i, item);
                    }
                }
                other => f(ctx, 1, 0, &other),
            }
        }
        return;
    }
    for (line, bytes) in lines(input) {
        let data = match sse(bytes) {
            Sse::Data(d) => d,
            Sse::Skip => continue,
        };
        if let Some(v) = ctx.json_line(line, data) {
            f(ctx, line, line - 1, &v);
        }
    }
}

/// Where a value of an API log was read: the line it starts on, its event time and the session it
/// names, if any. Every event the value holds gets them.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    pub line: usize,
    pub time: Timestamp,
    pub session: Option<String>,
}

impl Origin {
    /// The envelope of an event read here, naming `call_id`.
    pub fn envelope(&self, call_id: Option<String>) -> Envelope {
        Envelope {
            session: self.session.clone(),
            call_id,
            time: self.time,
            ..Envelope::default()
        }
    }
}

/// How far into one conversation the events have been emitted.
///
/// API requests resend the whole conversation every time, so calls and results are counted by
/// position in it and only those past the counts already seen are new.
#[derive(Default)]
pub(crate) struct History {
    /// The conversation's first message, which tells one conversation from another.
    first: Option<Value>,
    /// Calls emitted so far.
    pub calls: usize,
    /// Results emitted so far.
    results: usize,
}

impl History {
    /// The calls and results of a request that were not emitted before, in conversation order.
    ///
    /// `found` holds all of them (`is_call` tells a call from a result); `first` is the
    /// conversation's first message. A conversation that starts differently from the one before
    /// is another one, counted from zero; a response seen before any request does not know how
    /// its conversation starts yet.
    pub fn unseen<T>(
        &mut self,
        first: Option<&Value>,
        found: Vec<T>,
        is_call: impl Fn(&T) -> bool,
    ) -> Vec<T> {
        match &self.first {
            Some(known) if Some(known) != first => {
                *self = History {
                    first: first.cloned(),
                    ..History::default()
                };
            }
            Some(_) => {}
            None => self.first = first.cloned(),
        }
        let (mut calls, mut results) = (0usize, 0usize);
        let mut unseen = Vec::new();
        for item in found {
            let new = if is_call(&item) {
                calls += 1;
                calls > self.calls
            } else {
                results += 1;
                results > self.results
            };
            if new {
                unseen.push(item);
            }
        }
        self.calls = self.calls.max(calls);
        self.results = self.results.max(results);
        unseen
    }
}

/// The conversations of one file, by session.
#[derive(Default)]
pub(crate) struct Conversations(HashMap<String, History>);

impl Conversations {
    /// The history of the conversation of events naming `session` (or none).
    pub fn of(&mut self, ctx: &Ctx, session: &Option<String>) -> &mut History {
        self.0.entry(ctx.session_or_default(session)).or_default()
    }
}
