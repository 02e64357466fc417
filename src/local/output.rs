//! What a thread produces for one chunk of input — encoded records and messages, each tagged
//! with the input line that made it — and how the chunk's outputs are written: records merged
//! back into input order on the output, messages on stderr, up to the first `--strict` stop.

use crate::say::say;
use anyhow::{anyhow, Context};
use std::io::Write;
use toolcalls_model::redact::Redaction;

/// A message for stderr about the input line `tag` of a chunk (a bad line, a refused event).
pub(super) struct Note {
    pub tag: u32,
    pub text: String,
    /// Under `--strict`: the error the run ends with, after `text`.
    pub fatal: Option<String>,
}

/// One thread's output for one chunk of input.
#[derive(Default)]
pub(super) struct Out {
    /// Records as JSON lines.
    pub bytes: Vec<u8>,
    /// Per record in `bytes`: the tag of the input line that closed it, and where it ends.
    pub records: Vec<(u32, usize)>,
    pub notes: Vec<Note>,
    /// Events applied.
    pub events: u64,
}

impl Out {
    /// Marks the bytes written since the last record as a record of line `tag`.
    pub fn end_record(&mut self, tag: u32) {
        self.records.push((tag, self.bytes.len()));
    }

    /// Empties it for the next chunk, keeping its buffers.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.records.clear();
        self.notes.clear();
        self.events = 0;
    }

    pub fn fatal(&self) -> bool {
        self.notes.iter().any(|n| n.fatal.is_some())
    }
}

/// Writes one chunk's outputs: the records of all `outs` in the order of their tags (each tag's
/// records come from one thread, in the order it made them), the messages (`notes` from
/// decoding and the threads') in that order on stderr. At the first fatal message it writes the
/// records of the lines before it and returns its error, as the run stopped there.
///
/// The messages go through the redaction's patterns: a bad line's message quotes the line.
pub(super) fn write_chunk(
    sink: &mut dyn Write,
    mut notes: Vec<Note>,
    outs: &mut [Out],
    redaction: &Redaction,
) -> anyhow::Result<()> {
    for out in outs.iter_mut() {
        notes.append(&mut out.notes);
    }
    notes.sort_by_key(|n| n.tag); // stable: each thread's notes keep their order
    let stop = notes.iter().position(|n| n.fatal.is_some());
    let cut = stop.map_or(u32::MAX, |i| notes[i].tag);
    write_records(sink, outs, cut)?;
    for note in &notes[..stop.map_or(notes.len(), |i| i + 1)] {
        say!("{}", redaction.in_text(&note.text));
        if let Some(fatal) = &note.fatal {
            return Err(anyhow!("{}", redaction.in_text(fatal)));
        }
    }
    Ok(())
}

/// Writes the records of `outs` with a tag below `cut`, merged by tag: each step writes the
/// longest run of one thread's records that comes before every other thread's next one.
fn write_records(sink: &mut dyn Write, outs: &[Out], cut: u32) -> anyhow::Result<()> {
    let mut next = vec![0usize; outs.len()];
    loop {
        let mut first: Option<(usize, u32)> = None;
        let mut second = cut;
        for (w, out) in outs.iter().enumerate() {
            let Some(&(tag, _)) = out.records.get(next[w]) else {
                continue;
            };
            if tag >= cut {
                continue;
            }
            match first {
                Some((_, t)) if t <= tag => second = second.min(tag),
                Some((_, t)) => {
                    second = second.min(t);
                    first = Some((w, tag));
                }
                None => first = Some((w, tag)),
            }
        }
        let Some((w, _)) = first else {
            return Ok(());
        };
        let records = &outs[w].records;
        let from = next[w].checked_sub(1).map_or(0, |i| records[i].1);
        let mut to = next[w] + 1;
        while to < records.len() && records[to].0 < second {
            to += 1;
        }
        next[w] = to;
        sink.write_all(&outs[w].bytes[from..records[to - 1].1])
            .context("cannot write the records")?;
    }
}
