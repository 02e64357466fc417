//! What parsing is told ([`Options`]) and what it gives back ([`Parsed`], [`LineError`]).

use std::fmt;

use toolcalls_model::{Event, Timestamp};

/// How to parse.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Remove native call ids from every event (`callId` = none), to measure how well the
    /// processor's fallbacks (checksum, tool FIFO, oldest) do for frameworks without ids. Tool names,
    /// arguments and checksums stay.
    pub drop_ids: bool,
    /// Use this `source` instead of the framework name ([`Format::source`](crate::Format::source)).
    pub source: Option<String>,
    /// Use this session for every event, instead of the one the file names (or, when it names
    /// none, the file name without its extensions).
    pub session: Option<String>,
    /// The time of the first line for formats that carry no time at all (`codex exec --json`,
    /// `claude -p` stream-json, API bodies): line *i* (0-based) gets `base_time + i` ms. Lines
    /// after a line that did carry a time get that time plus the number of lines since it, in ms.
    /// Default: the Unix epoch. Never the wall clock, so parsing is deterministic.
    pub base_time: Option<Timestamp>,
}

/// What a file turned into.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    /// The events, in input order.
    pub events: Vec<Event>,
    /// Lines (or parts of a document) that could not be read; parsing went on after each.
    pub errors: Vec<LineError>,
    /// Rows read that describe no tool call and no turn boundary (assistant text, token counts,
    /// snapshots, progress rows whose data was attached to their call, …).
    pub skipped: usize,
}

/// A line or part of a document that could not be turned into events.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct LineError {
    /// The file name as given to [`parse`](crate::parse).
    pub file: String,
    /// 1-based line number; for single-document formats the line the document starts on.
    pub line: usize,
    /// Where inside a document (a JSON path such as `messages[3].toolCalls[0]`), when the format is
    /// one document rather than one object per line.
    pub at: Option<String>,
    /// What was wrong, and what to do about it.
    pub message: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)?;
        if let Some(at) = &self.at {
            write!(f, " ({at})")?;
        }
        write!(f, ": {}", self.message)
    }
}
