//! What a thread produces for one chunk of input — encoded records and messages, each tagged
//! with the input line that made it — and how the chunk's outputs are written: records merged
//! back into input order on the output, messages on stderr (and what they are about in the
//! `--dead-letters` file), up to the first `--strict` stop.

use super::dead_letters::{DeadLetter, DeadLetters};
use crate::say::say;
use anyhow::{anyhow, Context};
use std::io::{self, IoSlice, Write};
use toolcalls_model::redact::Redaction;

/// A message for stderr about the input line `tag` of a chunk (a bad line, a refused event).
pub(super) struct Note {
    pub tag: u32,
    pub text: String,
    /// Under `--strict`: the error the run ends with, after `text`.
    pub fatal: Option<String>,
    /// The input it is about, for the `--dead-letters` file.
    pub dead: DeadLetter,
}

/// Where a run's outputs go: the records, and what it could not use when `--dead-letters` asks.
pub(super) struct Sinks<'a> {
    pub records: &'a mut dyn Write,
    pub dead_letters: Option<DeadLetters>,
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
    sinks: &mut Sinks<'_>,
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
    write_records(sinks.records, outs, cut)?;
    for note in &notes[..stop.map_or(notes.len(), |i| i + 1)] {
        say!("{}", redaction.in_text(&note.text));
        if let Some(file) = sinks.dead_letters.as_mut() {
            file.write(&note.dead, redaction)?;
        }
        if let Some(fatal) = &note.fatal {
            return Err(anyhow!("{}", redaction.in_text(fatal)));
        }
    }
    Ok(())
}

/// Writes the records of `outs` with a tag below `cut`, merged by tag: each step takes the
/// longest run of one thread's records that comes before every other thread's next one. The runs
/// go to the sink in one vectored write, so a chunk's records are not copied through its buffer.
fn write_records(sink: &mut dyn Write, outs: &[Out], cut: u32) -> anyhow::Result<()> {
    let mut runs = Vec::new();
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
            return write_all_vectored(sink, &mut runs).context("cannot write the records");
        };
        let records = &outs[w].records;
        let from = next[w].checked_sub(1).map_or(0, |i| records[i].1);
        let mut to = next[w] + 1;
        while to < records.len() && records[to].0 < second {
            to += 1;
        }
        next[w] = to;
        runs.push(IoSlice::new(&outs[w].bytes[from..records[to - 1].1]));
    }
}

/// Writes all of `slices`, however many the sink takes at a time.
fn write_all_vectored(sink: &mut dyn Write, mut slices: &mut [IoSlice<'_>]) -> io::Result<()> {
    while !slices.is_empty() {
        match sink.write_vectored(slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => IoSlice::advance_slices(&mut slices, n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{write_records, Out};
    use std::io::{self, IoSlice, Write};

    /// A sink that takes at most three bytes a call, interrupting every other call.
    #[derive(Default)]
    struct Trickle {
        got: Vec<u8>,
        calls: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.calls += 1;
            if self.calls % 2 == 0 {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = buf.len().min(3);
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            let first = bufs.iter().find(|b| !b.is_empty()).map_or(&[][..], |b| b);
            self.write(first)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn out(records: &[(u32, &str)]) -> Out {
        let mut out = Out::default();
        for &(tag, text) in records {
            out.bytes.extend_from_slice(text.as_bytes());
            out.end_record(tag);
        }
        out
    }

    #[test]
    fn records_merge_into_line_order_through_a_sink_that_takes_a_little_at_a_time() {
        let outs = [
            out(&[(1, "a1\n"), (2, "a2\n"), (6, "a6\n")]),
            out(&[(3, "b3\n"), (4, "b4\n"), (7, "b7\n")]),
        ];
        let mut sink = Trickle::default();
        write_records(&mut sink, &outs, u32::MAX).unwrap();
        assert_eq!(
            String::from_utf8(sink.got).unwrap(),
            "a1\na2\nb3\nb4\na6\nb7\n"
        );
        // Records at and after the cut (a `--strict` stop) are not written.
        let mut sink = Trickle::default();
        write_records(&mut sink, &outs, 4).unwrap();
        assert_eq!(String::from_utf8(sink.got).unwrap(), "a1\na2\nb3\n");
    }
}
