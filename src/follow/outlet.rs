//! Where `ingest --follow` delivers, and how it knows an event is safe: the Kafka input topics,
//! where an event counts once the brokers acknowledged it, or JSON lines (`--out`), once written
//! and flushed — to a file, once on disk (the checkpoint that counts them is, so they must be
//! first: else a power loss would leave the checkpoint counting events the file lost).

use anyhow::Context;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use toolcalls_model::Event;
use toolcalls_producer::{Publisher, Refused};

pub enum Outlet {
    Kafka(Publisher),
    /// Standard output.
    Lines(Box<dyn Write>),
    /// A regular file, and the path it was opened at: moved away or removed (a log rotation),
    /// the path is opened again before the next events are written, so that they go where they
    /// are looked for. `bool`: the path was looked at since the last confirmation.
    File(BufWriter<File>, PathBuf, bool),
}

impl Outlet {
    /// `--out PATH`, appended to. A regular file that ends in part of a line (a run killed while
    /// writing it; its event was not checkpointed, so it is sent again) is first cut back to its
    /// last whole line, said: the next event would otherwise be glued to the fragment. A pipe, a
    /// FIFO or `/dev/null` cannot be synced to disk: it is flushed, as standard output is.
    pub fn file(path: &Path) -> anyhow::Result<Outlet> {
        let open = |read: bool| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .read(read)
                .open(path)
                .with_context(|| format!("cannot open {}; check the --out path", path.display()))
        };
        refuse_a_transcript(path)?;
        // A FIFO is opened for writing only, so that the open waits for its reader (opened for
        // reading too, it would hold its own reader and fill up).
        let regular = std::fs::metadata(path).map_or(true, |m| m.is_file());
        let file = open(regular)?;
        if !file.metadata().is_ok_and(|m| m.is_file()) {
            return Ok(Outlet::Lines(Box::new(BufWriter::new(file))));
        }
        let cut = cut_to_last_line(&file)
            .with_context(|| format!("cannot read the end of {}", path.display()))?;
        if cut > 0 {
            tracing::warn!(
                out = %path.display(),
                bytes = cut,
                "--out ended in part of a line (left by a run stopped while writing it); cut back to its last whole line, and its event is sent again"
            );
        }
        Ok(Outlet::File(BufWriter::new(file), path.to_owned(), true))
    }

    /// The device and inode of the file written to, when it is one.
    pub fn file_identity(&self) -> Option<(u64, u64)> {
        match self {
            Outlet::File(w, ..) => w.get_ref().metadata().ok().map(|m| (m.dev(), m.ino())),
            _ => None,
        }
    }

    /// Hands one event over (`payload` is its encoding); not yet safe.
    pub fn send(&mut self, event: &Event, payload: &[u8]) -> anyhow::Result<()> {
        match self {
            Outlet::Kafka(p) => Ok(p.send(event, payload)?),
            Outlet::Lines(w) => write_line(w, payload),
            Outlet::File(w, path, looked) => {
                if !*looked {
                    follow_the_path(w, path)?;
                    *looked = true;
                }
                write_line(w, payload)
            }
        }
    }

    /// Waits until everything sent is acknowledged (or flushed); fails when anything was not,
    /// within the delivery timeout. Returns the events the brokers refused as too large: left
    /// out, for the caller to say.
    pub fn confirm(&mut self) -> anyhow::Result<Vec<Refused>> {
        match self {
            Outlet::Kafka(p) => {
                p.finish()?;
                return Ok(p.take_refused());
            }
            Outlet::Lines(w) => w.flush().context("cannot write the events")?,
            Outlet::File(w, _, looked) => {
                w.flush()
                    .and_then(|()| w.get_ref().sync_data())
                    .context("cannot write the events to disk")?;
                *looked = false;
            }
        }
        Ok(Vec::new())
    }
}

/// Opens `path` again when the file `w` writes to (all written to it flushed) is no longer
/// there — moved away, or removed: what was written is in the file as it was moved, what comes
/// next goes to `path`. A path that cannot be looked up for another reason is written on.
fn follow_the_path(w: &mut BufWriter<File>, path: &Path) -> anyhow::Result<()> {
    let ours = w.get_ref().metadata().map(|m| (m.dev(), m.ino()));
    match std::fs::metadata(path).map(|m| (m.dev(), m.ino())) {
        Ok(there) if ours.as_ref().is_ok_and(|ours| *ours == there) => return Ok(()),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Ok(()),
        _ => {}
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {} again; check the --out path", path.display()))?;
    tracing::info!(out = %path.display(), "the --out file was moved away or removed: the events written so far are in it, the next ones go to a file at its path");
    *w = BufWriter::new(file);
    Ok(())
}

/// Refuses an `--out` that holds an agent's transcript (its start tells a native format; the
/// follower's own events tell none): events appended to it would corrupt the transcript, and
/// the follower, which never follows its own output, would not deliver the transcript either.
fn refuse_a_transcript(path: &Path) -> anyhow::Result<()> {
    use std::io::Read;
    let Ok(file) = File::open(path) else {
        return Ok(());
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    let mut head = Vec::new();
    file.take(1 << 16)
        .read_to_end(&mut head)
        .with_context(|| format!("cannot read {}; check the --out path", path.display()))?;
    if let Some(format) = toolcalls_adapters::Format::detect(&path.to_string_lossy(), &head) {
        anyhow::bail!(
            "--out {} holds a {} transcript, not events: the events would be written into it; give --out a file of its own",
            path.display(),
            format.name()
        );
    }
    Ok(())
}

/// Cuts `file` after its last newline (to nothing when it has none), synced; the bytes cut.
fn cut_to_last_line(file: &File) -> std::io::Result<u64> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata()?.len();
    let mut end = len;
    let mut chunk = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let piece = &mut chunk[..(end - start) as usize];
        file.read_exact_at(piece, start)?;
        if let Some(i) = piece.iter().rposition(|&b| b == b'\n') {
            end = start + i as u64 + 1;
            break;
        }
        end = start;
    }
    if end < len {
        file.set_len(end)?;
        file.sync_data()?;
    }
    Ok(len - end)
}

fn write_line(w: &mut impl Write, payload: &[u8]) -> anyhow::Result<()> {
    w.write_all(payload)
        .and_then(|()| w.write_all(b"\n"))
        .context("cannot write an event")
}
