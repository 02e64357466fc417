//! Reading the input: files (or standard input) cut into chunks of whole lines, or, for a
//! native format, the events its adapter reads from each file in chunks; and the decoding of a
//! chunk into events, each with the tag, line and position it came from.

use super::dead_letters::DeadLetter;
use super::output::Note;
use anyhow::Context;
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use toolcalls_adapters::Format;
use toolcalls_core::Position;
use toolcalls_model::{bom, Event};

/// Bytes read at a time; a chunk of v1 lines is about this long (longer when a line is).
const CHUNK_BYTES: usize = 256 << 10;
/// Events an adapter read, per chunk.
const CHUNK_EVENTS: usize = 1024;
/// Read buffers kept for reuse, at most: more than the chunks in flight at once.
const KEPT_BUFFERS: usize = 64;
/// A buffer a long line grew beyond this is given back to the allocator, not kept.
const KEPT_BUFFER_BYTES: usize = 4 * CHUNK_BYTES;

/// A piece of the input, in input order.
pub(super) enum Chunk {
    Lines(LineChunk),
    /// Events an adapter read from input `topic`, the first of them its event `first`
    /// (0-based), after the errors it reported for the input (on the first chunk of an input).
    Events {
        topic: u16,
        first: usize,
        events: Vec<Event>,
        errors: Vec<String>,
    },
}

/// Whole v1 lines of input `topic`, the first of them line `first_line` (1-based).
pub(super) struct LineChunk {
    pub topic: u16,
    pub first_line: usize,
    /// How many lines [`LineChunk::bytes`] holds.
    pub lines: usize,
    /// The lines are `buf[..len]`; the rest is what an earlier chunk left there.
    buf: Vec<u8>,
    len: usize,
    /// Where `buf` goes back when the chunk is done with.
    buffers: Arc<Buffers>,
}

impl LineChunk {
    /// The lines' text.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for LineChunk {
    fn drop(&mut self) {
        self.buffers.give_back(std::mem::take(&mut self.buf));
    }
}

/// Read buffers, handed back by the chunks that were read into them once every thread is done
/// with them, and read into again. A buffer stays initialised over its whole length, so reading
/// into it again costs no zeroing and no page faults: for a fresh buffer of every chunk those
/// were about 2 % of a run's instructions.
#[derive(Default)]
pub(super) struct Buffers(Mutex<Vec<Vec<u8>>>);

impl Buffers {
    fn take(&self) -> Vec<u8> {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.pop().unwrap_or_default()
    }

    fn give_back(&self, buf: Vec<u8>) {
        if buf.is_empty() || buf.len() > KEPT_BUFFER_BYTES {
            return;
        }
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.len() < KEPT_BUFFERS {
            kept.push(buf);
        }
    }
}

impl Chunk {
    /// How many items it holds, at most (blank lines are none).
    pub fn items(&self) -> usize {
        match self {
            Chunk::Lines(chunk) => chunk.lines,
            Chunk::Events { events, errors, .. } => events.len() + errors.len(),
        }
    }
}

/// One item of a chunk: an event with where it came from, or a line that is not one. Handed
/// over at once, so the event is not boxed (that would cost an allocation per event).
#[allow(clippy::large_enum_variant)]
pub(super) enum Item {
    Event(Located),
    Bad(Note),
}

/// An event with where it came from.
pub(super) struct Located {
    /// Orders the items of a chunk (and what they cause).
    pub tag: u32,
    pub pos: Position,
    pub event: Event,
}

/// The input files in order, read chunk by chunk.
pub(super) struct Reader {
    inputs: Vec<Option<PathBuf>>,
    names: Vec<Arc<str>>,
    /// `None`: v1 lines; `Some(None)`: a native format detected per file.
    format: Option<Option<Format>>,
    drop_ids: bool,
    /// A native file that gives no event in the format named, where its start tells another,
    /// stops the run (`--strict`).
    strict: bool,
    next: usize,
    open: Option<Open>,
    buffers: Arc<Buffers>,
}

enum Open {
    Lines {
        topic: u16,
        reader: Box<dyn Read + Send>,
        /// The start of a line the last read cut.
        carry: Vec<u8>,
        /// Lines before `carry`.
        lines: usize,
    },
    Events {
        topic: u16,
        events: std::vec::IntoIter<Event>,
        errors: Vec<String>,
        next: usize,
    },
}

impl Reader {
    /// `inputs`: files, `None` for standard input; `names` as messages name them.
    pub fn new(
        inputs: Vec<Option<PathBuf>>,
        names: Vec<Arc<str>>,
        format: Option<Option<Format>>,
        drop_ids: bool,
        strict: bool,
    ) -> Self {
        Reader {
            inputs,
            names,
            format,
            drop_ids,
            strict,
            next: 0,
            open: None,
            buffers: Arc::default(),
        }
    }

    /// The next chunk, `None` at the end of the last input.
    pub fn next_chunk(&mut self) -> anyhow::Result<Option<Chunk>> {
        loop {
            let chunk = match &mut self.open {
                Some(Open::Lines {
                    topic,
                    reader,
                    carry,
                    lines,
                }) => {
                    let name = &self.names[usize::from(*topic)];
                    next_lines(*topic, reader, carry, lines, name, &self.buffers)?
                }
                Some(Open::Events {
                    topic,
                    events,
                    errors,
                    next,
                }) => {
                    let errors = std::mem::take(errors);
                    let chunk: Vec<Event> = events.take(CHUNK_EVENTS).collect();
                    let first = *next;
                    *next += chunk.len();
                    (!chunk.is_empty() || !errors.is_empty()).then_some(Chunk::Events {
                        topic: *topic,
                        first,
                        events: chunk,
                        errors,
                    })
                }
                None => None,
            };
            if chunk.is_some() {
                return Ok(chunk);
            }
            if self.next == self.inputs.len() {
                self.open = None;
                return Ok(None);
            }
            self.open = Some(self.open_next()?);
        }
    }

    fn open_next(&mut self) -> anyhow::Result<Open> {
        let index = self.next;
        self.next += 1;
        let topic = u16::try_from(index).context("at most 65536 input files")?;
        let (input, name) = (&self.inputs[index], &self.names[index]);
        let Some(format) = self.format else {
            if let Some(p) = input {
                if let Some(said) = forgot_format(p, name) {
                    crate::say::say!("{said}");
                }
            }
            let reader: Box<dyn Read + Send> = match input {
                Some(p) => Box::new(
                    std::fs::File::open(p)
                        .with_context(|| format!("cannot open {}", p.display()))?,
                ),
                None => Box::new(std::io::stdin()),
            };
            return Ok(Open::Lines {
                topic,
                reader,
                carry: Vec::new(),
                lines: 0,
            });
        };
        let mut bytes = Vec::new();
        match input {
            Some(p) => {
                bytes = std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?
            }
            None => {
                std::io::stdin()
                    .lock()
                    .read_to_end(&mut bytes)
                    .context("cannot read standard input")?;
            }
        }
        let opts = toolcalls_adapters::Options {
            drop_ids: self.drop_ids,
            ..Default::default()
        };
        let (_, parsed) = crate::input_format::read(format, name, &bytes, &opts, self.strict)?;
        Ok(Open::Events {
            topic,
            events: parsed.events.into_iter(),
            errors: parsed.errors.iter().map(ToString::to_string).collect(),
            next: 0,
        })
    }
}

/// Reads on until whole lines are in hand: at least `CHUNK_BYTES`, or what has come when the
/// input has no more for now (a pipe), so that a slow producer's events are not held back. The
/// chunk starts with `carry`, the start of a line the last read cut, and leaves the start of a
/// line it cuts there.
fn next_lines(
    topic: u16,
    reader: &mut Box<dyn Read + Send>,
    carry: &mut Vec<u8>,
    lines: &mut usize,
    name: &str,
    buffers: &Arc<Buffers>,
) -> anyhow::Result<Option<Chunk>> {
    let mut buf = buffers.take();
    let mut len = carry.len();
    initialised_to(&mut buf, len);
    buf[..len].copy_from_slice(carry);
    carry.clear();
    loop {
        let want = CHUNK_BYTES.max(len / 2);
        initialised_to(&mut buf, len + want);
        let n = loop {
            match reader.read(&mut buf[len..len + want]) {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).with_context(|| format!("cannot read {name}")),
            }
        };
        len += n;
        if *lines == 0 {
            // Four bytes tell the mark of another encoding; the end of the input tells none.
            crate::encoding::refuse_foreign(name, &buf[..len])?;
        }
        if n == 0 {
            // The end of the input: a last line needs no newline.
            if len == 0 {
                buffers.give_back(buf);
                return Ok(None);
            }
            return Ok(Some(cut(topic, buf, len, lines, buffers)));
        }
        if len >= CHUNK_BYTES || n < want {
            if let Some(end) = memchr::memrchr(b'\n', &buf[..len]) {
                carry.extend_from_slice(&buf[end + 1..len]);
                return Ok(Some(cut(topic, buf, end + 1, lines, buffers)));
            }
        }
    }
}

/// Grows `buf` to `need` bytes if it is shorter: only memory it never had is zeroed.
fn initialised_to(buf: &mut Vec<u8>, need: usize) {
    if buf.len() < need {
        buf.resize(need, 0);
    }
}

/// A chunk of the whole lines in `buf[..len]`, counted on from `lines`. The first chunk of an
/// input holds its start, where a byte order mark is skipped (`toolcalls_model::bom`).
fn cut(
    topic: u16,
    mut buf: Vec<u8>,
    mut len: usize,
    lines: &mut usize,
    buffers: &Arc<Buffers>,
) -> Chunk {
    if *lines == 0 && bom::starts(&buf[..len]) {
        let mark = bom::UTF8_BOM.len();
        buf.copy_within(mark..len, 0);
        len -= mark;
    }
    let bytes = &buf[..len];
    let first_line = *lines + 1;
    let count = newlines(bytes) + usize::from(bytes.last().is_some_and(|&b| b != b'\n'));
    *lines += count;
    Chunk::Lines(LineChunk {
        topic,
        first_line,
        lines: count,
        buf,
        len,
        buffers: Arc::clone(buffers),
    })
}

/// The newlines in `bytes`, counted 255 bytes at a time in a byte (which vectorizes well).
fn newlines(bytes: &[u8]) -> usize {
    bytes
        .chunks(255)
        .map(|c| usize::from(c.iter().fold(0u8, |n, &b| n + u8::from(b == b'\n'))))
        .sum()
}

/// The lines of `bytes`, each with its newline (the last one may have none), found with
/// `memchr`: a byte-at-a-time search for the newline cost as much as reading the input.
pub(super) fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let end = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
        let (line, tail) = rest.split_at(end);
        rest = tail;
        Some(line)
    })
}

/// Whether a line is blank: blank lines separate nothing in JSON lines.
pub(super) fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// Line `i` (not blank) of a chunk of v1 lines of input `topic` (named `name`) whose first line
/// is `first_line`, decoded: its event, or the message that says why it is none (fatal under
/// `strict`).
pub(super) fn line_item(
    line_text: &[u8],
    topic: u16,
    first_line: usize,
    i: usize,
    name: &str,
    strict: bool,
) -> Item {
    let (tag, line) = (i as u32, first_line + i);
    match Event::decode(line_text) {
        Ok(event) => Item::Event(Located {
            tag,
            pos: Position::new(topic, line as i64),
            event,
        }),
        Err(e) => Item::Bad(Note {
            tag,
            text: format!("{name}:{line}: {e} [{}]", e.reason()),
            fatal: strict
                .then(|| format!("{name}:{line}: bad input; stopping because of --strict")),
            dead: DeadLetter {
                input: topic,
                offset: Some(line as i64),
                reason: e.reason().into(),
                error: e.to_string(),
            },
        }),
    }
}

/// Decodes `chunk` and hands its items to `each` in input order, until `each` says stop.
/// `names` names the inputs in messages; `strict` makes a bad line's message fatal.
pub(super) fn each_item<E>(
    chunk: Chunk,
    names: &[Arc<str>],
    strict: bool,
    mut each: impl FnMut(Item) -> Result<(), E>,
) -> Result<(), E> {
    match chunk {
        Chunk::Lines(chunk) => {
            let name = &names[usize::from(chunk.topic)];
            for (i, buf) in lines(chunk.bytes()).enumerate() {
                if is_blank(buf) {
                    continue;
                }
                each(line_item(
                    buf,
                    chunk.topic,
                    chunk.first_line,
                    i,
                    name,
                    strict,
                ))?;
            }
        }
        Chunk::Events {
            topic,
            first,
            events,
            errors,
        } => {
            for e in errors {
                let fatal = strict.then(|| format!("{e}; stopping because of --strict"));
                let dead = DeadLetter {
                    input: topic,
                    offset: None,
                    reason: "unreadable".into(),
                    error: e.clone(),
                };
                each(Item::Bad(Note {
                    tag: 0,
                    text: e,
                    fatal,
                    dead,
                }))?;
            }
            for (i, event) in events.into_iter().enumerate() {
                let line = first + i;
                each(Item::Event(Located {
                    tag: i as u32 + 1,
                    pos: Position::new(topic, line as i64),
                    event,
                }))?;
            }
        }
    }
    Ok(())
}

/// What to say of a file given as v1 events that reads as a native format (its first 64 KiB,
/// read apart: a pipe is not read twice, so only regular files are looked at).
fn forgot_format(path: &std::path::Path, name: &str) -> Option<String> {
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let mut start = Vec::with_capacity(64 << 10);
    let file = std::fs::File::open(path).ok()?;
    file.take(64 << 10).read_to_end(&mut start).ok()?;
    crate::input_format::native_given_as_v1(name, &start)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gives its bytes a few at a time, in pieces of changing size, as a pipe does.
    struct Trickle {
        bytes: Vec<u8>,
        at: usize,
        piece: usize,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.piece = self.piece * 7 % 100_003 + 1;
            let n = buf.len().min(self.piece).min(self.bytes.len() - self.at);
            buf[..n].copy_from_slice(&self.bytes[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// Chunks read into reused buffers hold exactly the input's lines, however the reads cut
    /// them: short lines, lines longer than a chunk, no newline at the end, and buffers that held
    /// longer chunks before.
    #[test]
    fn chunks_hold_the_input_lines_whatever_the_buffers_held_before() {
        let mut input = Vec::new();
        for i in 0..3000usize {
            let len = match i % 500 {
                7 => 3 * CHUNK_BYTES,
                8 => CHUNK_BYTES + 1,
                _ => i % 300,
            };
            input.extend(std::iter::repeat_n(b'a' + (i % 26) as u8, len));
            input.push(b'\n');
        }
        input.extend_from_slice(b"last line without a newline");
        let mut reader: Box<dyn Read + Send> = Box::new(Trickle {
            bytes: input.clone(),
            at: 0,
            piece: 1,
        });
        let (buffers, mut carry, mut counted) = (Arc::default(), Vec::new(), 0);
        let (mut read, mut lines_seen) = (Vec::new(), 0);
        while let Some(chunk) =
            next_lines(0, &mut reader, &mut carry, &mut counted, "test", &buffers).unwrap()
        {
            let Chunk::Lines(chunk) = chunk else {
                panic!("lines come as lines");
            };
            assert_eq!(chunk.first_line, lines_seen + 1);
            assert_eq!(chunk.lines, lines(chunk.bytes()).count());
            lines_seen += chunk.lines;
            read.extend_from_slice(chunk.bytes());
            // Dropped here: its buffer goes back and the next chunk is read into it.
        }
        assert!(read == input, "the chunks differ from the input");
        assert_eq!(lines_seen, 3001);
        assert!(!buffers.0.lock().unwrap().is_empty(), "buffers are kept");
    }

    #[test]
    fn lines_keep_their_newlines_and_a_last_line_needs_none() {
        let split = |b: &'static [u8]| lines(b).collect::<Vec<_>>();
        assert!(split(b"").is_empty());
        assert_eq!(split(b"\n"), [&b"\n"[..]]);
        assert_eq!(split(b"a\n\nb"), [&b"a\n"[..], b"\n", b"b"]);
        assert_eq!(split(b"a\nb\n"), [&b"a\n"[..], b"b\n"]);
    }
}
