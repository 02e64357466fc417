//! Auditing a run of `toolcalls local`: its input files and the records file it wrote.
//!
//! The inputs are read as `toolcalls local` reads them: v1 events line by line (blank lines
//! skipped, lines counted from one), or a native format through its adapter (events numbered
//! from one). Records name them by the path `toolcalls local` was given; a record naming the same
//! file by another path (relative, absolute) is matched by its canonical path. A line that is not
//! a valid event is counted as a bad line — `toolcalls local` reports it on stderr — unless the
//! run's `--dead-letters` file is given: then that file accounts for bad lines and refused events
//! as the processor's dead-letter topic does, and a bad line it does not name is a discrepancy.

use super::input::{InputKey, Range};
use super::ledger::{Content, Ledger, RecordKey};
use super::progress::Progress;
use anyhow::{bail, Context};
use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use toolcalls_adapters::Format;
use toolcalls_model::{bom, Event};

/// What to read.
pub struct Files<'a> {
    pub inputs: &'a [PathBuf],
    /// The records file; `-` is standard input.
    pub records: &'a Path,
    /// The run's `--dead-letters` file.
    pub dead_letters: Option<&'a Path>,
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
    if files.inputs.iter().filter(|p| is_stdin(p)).count() + usize::from(is_stdin(files.records))
        > 1
    {
        bail!("standard input (`-`) can be read once: give it as one input or as the records file, and the rest as files");
    }
    // A mistyped input is named as such, before the records are read against the inputs there
    // are (it would otherwise show as records naming files not audited).
    for path in files.inputs.iter().filter(|p| !is_stdin(p)) {
        let name = path.display();
        if path.is_dir() {
            bail!("cannot read {name}: it is a directory; give the files in it");
        }
        std::fs::File::open(path).with_context(|| format!("cannot open {name}"))?;
    }
    for (index, path) in files.inputs.iter().enumerate() {
        let name = name_of(path);
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
        .filter(|(p, _)| !is_stdin(p))
        .filter_map(|(p, &n)| Some((canonical(&p.display().to_string())?, n)))
        .map(|(c, n)| match files.format {
            None => (InputKey::Lines(c), n),
            Some(_) => (InputKey::Events(c), n),
        })
        .collect();
    let mut seen: HashMap<InputKey, Option<u32>> = HashMap::new();
    // What the records name that is no audited input: a few of the names, and a file that is
    // one but read the other way (by line as v1 events, or by event through a --format).
    let mut elsewhere: BTreeSet<String> = BTreeSet::new();
    let mut misread: Option<String> = None;
    let mut resolve = |key: &InputKey| -> Option<u32> {
        if let Some(n) = seen.get(key) {
            return *n;
        }
        let n = match key {
            InputKey::Lines(f) | InputKey::Events(f) => {
                let c = canonical(f);
                let n = c
                    .as_ref()
                    .and_then(|c| names.get(&key_like(key, c.clone())));
                let read_otherwise = match key {
                    InputKey::Lines(_) => InputKey::Events,
                    _ => InputKey::Lines,
                };
                let by_other_reading = files.inputs.iter().any(|p| name_of(p) == *f)
                    || c.is_some_and(|c| names.contains_key(&read_otherwise(c)));
                if n.is_none() && by_other_reading {
                    misread.get_or_insert_with(|| f.clone());
                } else if n.is_none() && elsewhere.len() < 3 {
                    elsewhere.insert(f.clone());
                }
                n.copied()
            }
            InputKey::Topic(..) => None,
        };
        seen.insert(key.clone(), n);
        n
    };

    let label = files.records.display().to_string();
    progress.stage(format!("records {label}"), None);
    let reader: Box<dyn Read> = if is_stdin(files.records) {
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
        // A records file saved again by an editor that marks UTF-8 starts with the mark.
        let record = if number == 1 {
            toolcalls_model::bom::strip(&line)
        } else {
            &line[..]
        };
        let at = || format!("{label}:{number}");
        ledger.add_record(record, RecordKey::Unkeyed, &at, &mut resolve);
        progress.tick();
    }
    if let Some(path) = files.dead_letters {
        let native = files.format.is_some();
        read_dead_letters(path, native, ledger, &mut resolve, progress)?;
    }
    if let Some(file) = misread {
        let (records_read, audit_reads) = match files.format {
            None => ("by event, as a --format reads it", "by line, as v1 events"),
            Some(_) => ("by line, as v1 events", "by event, through --format"),
        };
        bail!("the records name {file} {records_read}, but the audit reads it {audit_reads}: give the --format the `toolcalls local` run was given");
    }
    if ledger.claimed_positions() == 0 && !elsewhere.is_empty() {
        let named = elsewhere.into_iter().collect::<Vec<_>>().join(", ");
        bail!("the records name none of the audited files, only others ({named}): audit the files they were made from, by the names `toolcalls local` was given (a relative name is found from the directory the audit runs in: run it where `local` ran, or give `local` absolute paths)");
    }

    // The inputs, streamed past the claims.
    for (path, &n) in files.inputs.iter().zip(&numbers) {
        let name = name_of(path);
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

/// The `--dead-letters` file of the run: each line a dead letter of the input it names, by line
/// (v1) or by event number (`native`), or of no position (a line an adapter could not read).
fn read_dead_letters(
    path: &Path,
    native: bool,
    ledger: &mut Ledger,
    resolve: &mut dyn FnMut(&InputKey) -> Option<u32>,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    #[derive(serde::Deserialize)]
    struct DeadLetter {
        input: String,
        line: Option<i64>,
        event: Option<i64>,
        reason: String,
    }
    let label = path.display().to_string();
    progress.stage(format!("dead letters {label}"), None);
    let file = std::fs::File::open(path)
        .with_context(|| format!("cannot open the dead-letter file {label}"))?;
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("cannot read {label}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let d: DeadLetter = serde_json::from_str(&line).with_context(|| {
            format!(
                "{label}:{}: not a dead letter of `toolcalls local --dead-letters`",
                i + 1
            )
        })?;
        let at = match (d.line, d.event, native) {
            (Some(line), None, false) => Some((InputKey::Lines(d.input), line)),
            (None, Some(event), true) => Some((InputKey::Events(d.input), event)),
            (None, None, _) => None,
            (Some(_), _, true) => bail!("{label}:{}: the dead letters name lines, as a v1 run writes them, but the audit reads the inputs through --format: give the --format the `toolcalls local` run was given", i + 1),
            (_, Some(_), _) => bail!("{label}:{}: the dead letters name events, as a run with --format writes them, but the audit reads the inputs as v1 events: give the --format the `toolcalls local` run was given", i + 1),
        };
        match at {
            Some((key, offset)) => {
                // Standard input (`<stdin>`) is known by that name alone: no path resolves it.
                let n = ledger.input(&key).or_else(|| resolve(&key));
                let pos = n.map(|n| (n, offset));
                ledger.add_dead_letter(pos, &d.reason);
            }
            // A line an adapter could not read: its bad line is counted when the input is read.
            None => ledger.counts.dead_letters += 1,
        }
        progress.tick();
    }
    Ok(())
}

/// `-`: standard input.
fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// An input as records name it: its path as given, or `<stdin>` as `toolcalls local` names
/// standard input.
fn name_of(path: &Path) -> String {
    if is_stdin(path) {
        "<stdin>".to_owned()
    } else {
        path.display().to_string()
    }
}

/// The input at `path` (`-`: standard input), to read from the start.
fn open(path: &Path, name: &str) -> anyhow::Result<Box<dyn Read>> {
    if is_stdin(path) {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let file = std::fs::File::open(path).with_context(|| format!("cannot open {name}"))?;
    Ok(Box::new(file))
}

/// A file of v1 events, line by line as `toolcalls local` reads it.
fn read_v1(
    path: &Path,
    name: &str,
    n: u32,
    ledger: &mut Ledger,
    progress: &mut Progress,
) -> anyhow::Result<()> {
    let mut reader = BufReader::with_capacity(1 << 16, open(path, name)?);
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
    let mut bytes = Vec::new();
    open(path, name)?
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {name}"))?;
    let opts = toolcalls_adapters::Options {
        drop_ids,
        ..Default::default()
    };
    let (_, parsed) = crate::input_format::read(format, name, &bytes, &opts, false)?;
    // The lines its adapter cannot read, which `toolcalls local` reports as bad lines too.
    // As a v1 line that is no event, each is an input and a bad line.
    ledger.counts.inputs += parsed.errors.len() as u64;
    ledger.counts.bad_lines += parsed.errors.len() as u64;
    for (i, event) in parsed.events.iter().enumerate() {
        ledger.input_event((n, i as i64 + 1), Content::Event(event));
        progress.tick();
    }
    Ok(())
}
