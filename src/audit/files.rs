//! Auditing a run of `toolcalls local`: its input files and the records file it wrote.
//!
//! The inputs are read as `toolcalls local` reads them: v1 events line by line (blank lines
//! skipped, lines counted from one), or a native format through its adapter (events numbered
//! from one). Records name them by the path `toolcalls local` was given; a record naming the same
//! file by another path (relative, absolute) is matched by its canonical path. A line that is not
//! a valid event is counted as a bad line: `toolcalls local` reports it on stderr and has no
//! dead-letter file.

use super::ledger::{Content, InputKey, Ledger, Range};
use super::progress::Progress;
use anyhow::Context;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use toolcalls_adapters::Format;
use toolcalls_model::{bom, Event};

/// What to read.
pub struct Files<'a> {
    pub inputs: &'a [PathBuf],
    /// The records file; `-` is standard input.
    pub records: &'a Path,
    /// `None`: v1 events; `Some(None)`: a native format detected per file; `Some(Some(f))`: `f`.
    pub format: Option<Option<Format>>,
    pub drop_ids: bool,
}

/// An input key of the same kind as `like`, for `name`.
fn key_like(like: &InputKey, name: String) -> InputKey {
    match like {
        InputKey::Events(_) => InputKey::Events(name),
        _ => InputKey::Lines(name),
    }
}

fn canonical(name: &str) -> Option<String> {
    std::fs::canonicalize(name)
        .ok()
        .map(|p| p.display().to_string())
}

pub fn audit(
    files: &Files<'_>,
    ledger: &mut Ledger,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    // The inputs, by the path given and by their canonical path.
    // `toolcalls local` numbers its inputs in the order given: a line is its offset, event `i`
    // (from 1) offset `i - 1`.
    let mut numbers = Vec::new();
    for (index, path) in files.inputs.iter().enumerate() {
        let name = path.display().to_string();
        let (key, shift) = match files.format {
            None => (InputKey::Lines(name.clone()), 0),
            Some(_) => (InputKey::Events(name.clone()), -1),
        };
        let core = (u16::try_from(index).unwrap_or(u16::MAX), shift);
        let n = ledger.add_input(key.clone(), Range::ALL, core);
        if let Some(c) = canonical(&name) {
            ledger.alias(key_like(&key, c), n);
        }
        numbers.push(n);
    }

    // The records. A record naming a file by a path the ledger does not know is matched by its
    // canonical path; the resolver cannot ask the ledger (it is busy adding the record), so it
    // has its own copy of the names.
    let names: HashMap<InputKey, u32> = files
        .inputs
        .iter()
        .zip(&numbers)
        .filter_map(|(p, &n)| Some((canonical(&p.display().to_string())?, n)))
        .map(|(c, n)| match files.format {
            None => (InputKey::Lines(c), n),
            Some(_) => (InputKey::Events(c), n),
        })
        .collect();
    let mut seen: HashMap<InputKey, Option<u32>> = HashMap::new();
    let mut resolve = |key: &InputKey| -> Option<u32> {
        if let Some(n) = seen.get(key) {
            return *n;
        }
        let n = match key {
            InputKey::Lines(f) | InputKey::Events(f) => canonical(f)
                .and_then(|c| names.get(&key_like(key, c)))
                .copied(),
            InputKey::Topic(..) => None,
        };
        seen.insert(key.clone(), n);
        n
    };

    let label = files.records.display().to_string();
    progress.stage(format!("records {label}"), None);
    let reader: Box<dyn Read> = if files.records.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(
            std::fs::File::open(files.records)
                .with_context(|| format!("cannot open the records file {label}"))?,
        )
    };
    let mut reader = BufReader::with_capacity(1 << 16, reader);
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        line.clear();
        if reader
            .read_until(b'\n', &mut line)
            .with_context(|| format!("cannot read {label}"))?
            == 0
        {
            break;
        }
        number += 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        ledger.add_record(&line, &|| format!("{label}:{number}"), &mut resolve);
        progress.tick();
    }

    // The inputs, streamed past the claims.
    for (path, &n) in files.inputs.iter().zip(&numbers) {
        let name = path.display().to_string();
        progress.stage(format!("input {name}"), None);
        match files.format {
            None => read_v1(path, &name, n, ledger, progress)?,
            Some(format) => read_native(path, &name, format, files.drop_ids, n, ledger, progress)?,
        }
        ledger.input_done(n);
    }
    progress.clear();
    Ok(())
}

/// A file of v1 events, line by line as `toolcalls local` reads it.
fn read_v1(
    path: &Path,
    name: &str,
    n: u32,
    ledger: &mut Ledger,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot open {name}"))?;
    let mut reader = BufReader::with_capacity(1 << 16, file);
    let mut buf = Vec::new();
    let mut line = 0i64;
    loop {
        buf.clear();
        if reader
            .read_until(b'\n', &mut buf)
            .with_context(|| format!("cannot read {name}"))?
            == 0
        {
            break;
        }
        line += 1;
        if line == 1 {
            crate::encoding::refuse_foreign(name, &buf)?;
        }
        // A byte order mark is skipped at the start of a file, as `toolcalls local` skips it.
        let text = if line == 1 { bom::strip(&buf) } else { &buf };
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match Event::decode(text) {
            Ok(event) => ledger.input_event((n, line), Content::Event(&event)),
            Err(e) => ledger.input_event((n, line), Content::Invalid(e.reason())),
        }
        progress.tick();
    }
    Ok(())
}

/// A native file through its adapter, as `toolcalls local --format` reads it: event `i` (from 0)
/// is position `i + 1`.
fn read_native(
    path: &Path,
    name: &str,
    format: Option<Format>,
    drop_ids: bool,
    n: u32,
    ledger: &mut Ledger,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {name}"))?;
    let Some(format) = crate::input_format::of(format, name, &bytes)? else {
        return Ok(());
    };
    let opts = toolcalls_adapters::Options {
        drop_ids,
        ..Default::default()
    };
    let parsed = toolcalls_adapters::parse(format, name, &bytes, &opts);
    for (i, event) in parsed.events.iter().enumerate() {
        ledger.input_event((n, i as i64 + 1), Content::Event(event));
        progress.tick();
    }
    Ok(())
}
