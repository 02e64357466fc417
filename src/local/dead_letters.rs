//! `--dead-letters FILE`: what `toolcalls local` could not use, one JSON object a line, as the
//! processor's dead-letter topic keeps it — a line that is no v1 event, an event the correlator
//! refused, a line a native format's adapter could not read. Each names its input as the
//! records' provenance does (the path given, and the line, or the 1-based event number of a
//! native format), with the reason label of the dead-letter topic and what is wrong, so that
//! `toolcalls audit --dead-letters` can account for every input of the run.

use anyhow::Context;
use serde::Serialize;
use std::borrow::Cow;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toolcalls_model::redact::Redaction;

/// One input `toolcalls local` could not use.
pub(super) struct DeadLetter {
    /// The input's number (a position's topic).
    pub input: u16,
    /// Its position's offset: the line of a v1 input, the 0-based index of a native format's
    /// event; `None` for a line an adapter could not read (it made no event to number).
    pub offset: Option<i64>,
    pub reason: Cow<'static, str>,
    pub error: String,
}

/// One line of the file.
#[derive(Serialize)]
struct Line<'a> {
    input: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    event: Option<i64>,
    reason: &'a str,
    error: &'a str,
}

/// The dead-letter file being written.
pub(super) struct DeadLetters {
    sink: BufWriter<std::fs::File>,
    path: PathBuf,
    names: Vec<Arc<str>>,
    native: bool,
}

impl DeadLetters {
    /// Creates (or empties) the file at `path`. `names` names the inputs; `native` numbers their
    /// events from 1 instead of naming lines.
    pub fn create(path: &Path, names: Vec<Arc<str>>, native: bool) -> anyhow::Result<Self> {
        let file = std::fs::File::create(path).with_context(|| {
            format!(
                "cannot create {}; check the --dead-letters path",
                path.display()
            )
        })?;
        Ok(DeadLetters {
            sink: BufWriter::new(file),
            path: path.to_owned(),
            names,
            native,
        })
    }

    /// Writes `d`, its error through the redaction's patterns (a bad line's error may quote it).
    pub fn write(&mut self, d: &DeadLetter, redaction: &Redaction) -> anyhow::Result<()> {
        let error = redaction.in_text(&d.error);
        let (line, event) = match (self.native, d.offset) {
            (true, Some(i)) => (None, Some(i + 1)),
            (false, Some(line)) => (Some(line), None),
            (_, None) => (None, None),
        };
        let line = Line {
            input: self.names.get(usize::from(d.input)).map_or("?", |n| n),
            line,
            event,
            reason: &d.reason,
            error: &error,
        };
        serde_json::to_writer(&mut self.sink, &line)
            .map_err(std::io::Error::from)
            .and_then(|()| self.sink.write_all(b"\n"))
            .with_context(|| format!("cannot write the dead letters to {}", self.path.display()))
    }

    pub fn finish(mut self) -> anyhow::Result<()> {
        self.sink
            .flush()
            .with_context(|| format!("cannot write the dead letters to {}", self.path.display()))
    }
}
