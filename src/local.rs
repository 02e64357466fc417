//! `toolcalls local`: the embedded mode — files in, records out, no broker.
//!
//! Reads v1 events as JSON lines (or a native format through the adapters), runs one correlator
//! over them in input order, writes ToolCall records as JSON lines and a summary on stderr. A bad
//! line is reported with its file, line number and reason and processing goes on (`--strict`
//! stops instead). At the end of the input, calls still pending are closed as `--at-end` says.

mod dead_letters;
mod input;
mod output;
mod parallel;
mod placement;
mod progress;
mod serial;
mod summary;
mod worker;

use anyhow::{bail, Context};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use input::Reader;
use progress::Progress;
use std::io::{BufWriter, IsTerminal, Write};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use summary::print_summary;
use toolcalls_core::FinishMode;
use toolcalls_processor::core_settings::CoreArgs;
use toolcalls_processor::redact_settings::RedactArgs;
use toolcalls_settings::ConfigFile;
use worker::{InputNames, Setup};

/// The output's buffer: smaller than what a chunk of input makes, so that a chunk's records go to
/// the file at once (in one vectored write of the runs `--threads N` merges back into line
/// order), not copied through the buffer; large enough to gather the records of the small chunks
/// a slow pipe gives.
const SINK_BUFFER: usize = 64 << 10;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Input files (JSON lines); none or `-` reads standard input
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    #[command(flatten)]
    opts: Opts,
    #[command(flatten, next_help_heading = "Correlation rules")]
    core: CoreArgs,
    #[command(flatten, next_help_heading = "Redaction")]
    redact: RedactArgs,
}

/// `[local]` in the config file.
#[derive(Debug, clap::Args)]
#[group(id = "local")]
struct Opts {
    /// `v1` events, or a native format read through its adapter (see docs/ADAPTERS.md); `auto`
    /// detects it per file when that is unambiguous
    #[arg(
        long,
        short = 'f',
        env = "TOOLCALLS_FORMAT",
        value_name = "FORMAT",
        default_value = "v1"
    )]
    format: String,
    /// With --format: remove native call ids, to see how the fallbacks pair calls without them
    #[arg(long, env = "TOOLCALLS_DROP_IDS")]
    drop_ids: bool,
    /// Write records here instead of standard output (`-`); never one of the input files:
    /// refused
    #[arg(long, short = 'o', env = "TOOLCALLS_OUT", value_name = "FILE")]
    out: Option<PathBuf>,
    /// Also write every input the run could not use — a line that is no event, an event the
    /// correlator refuses, a line a native format's adapter cannot read — to this file, one
    /// JSON object a line with its input, line (or event number), reason and error, as the
    /// processor's dead-letter topic keeps them; `toolcalls audit --dead-letters` reads it
    #[arg(long, env = "TOOLCALLS_DEAD_LETTERS", value_name = "FILE")]
    dead_letters: Option<PathBuf>,
    /// Stop at the first bad line, the first event the correlator refuses, or a file that gives
    /// no event in the --format named while its start tells another (exit code 2), instead of
    /// reporting it and going on
    #[arg(long, env = "TOOLCALLS_STRICT")]
    strict: bool,
    /// How calls still pending at the end of the input are closed
    #[arg(long, env = "TOOLCALLS_AT_END", value_name = "MODE", value_parser = finish_modes(), default_value = finish_mode(FinishMode::default()).0)]
    at_end: FinishMode,
    /// Print no summary on stderr
    #[arg(long, short = 'q', env = "TOOLCALLS_QUIET")]
    quiet: bool,
    /// Correlators to run, one per thread [default: every core]. The input is split by
    /// (source, session) over them, a new session going to the one with the fewest sessions seen
    /// lately, so a session's records are those one correlator gives; the state caps
    /// (--max-pending…) apply to each. Records come out in the order of the lines
    /// that closed them, as with one thread, except that what the end of the input closes comes
    /// thread by thread. At most 1024
    #[arg(long, short = 'j', env = "TOOLCALLS_THREADS", value_name = "N")]
    threads: Option<NonZeroUsize>,
}

/// The most correlators `--threads` starts: beyond the cores they only split the input finer.
const MAX_THREADS: usize = 1024;

/// A `--dead-letters` path that is standard output, an input or the records' file is refused.
fn refuse_for_dead_letters(
    path: &std::path::Path,
    out: Option<&std::path::Path>,
    inputs: &[PathBuf],
) -> anyhow::Result<()> {
    if path.as_os_str() == "-" {
        bail!("--dead-letters takes a file, not `-`: standard output has the records");
    }
    crate::output_path::refuse_an_input("--dead-letters", path, inputs)?;
    if let Some(out) = out.filter(|o| o.as_os_str() != "-") {
        let same = out == path
            || std::fs::canonicalize(out)
                .ok()
                .is_some_and(|o| std::fs::canonicalize(path).is_ok_and(|p| p == o));
        if same {
            bail!(
                "--dead-letters {} is also the records' file (--out): give each a file of its own",
                path.display()
            );
        }
    }
    Ok(())
}

/// The name and meaning of each of core's finish modes, as `--at-end` takes them.
fn finish_mode(mode: FinishMode) -> (&'static str, &'static str) {
    match mode {
        FinishMode::Deadlines => (
            "deadlines",
            "let every timeout and grace run out: TimedOut / Interrupted / Denied, waiting results Orphaned",
        ),
        FinishMode::Interrupt => ("interrupt", "all Interrupted, waiting results Orphaned"),
        FinishMode::Keep => ("keep", "publish nothing for them, list them in the summary"),
    }
}

fn finish_modes() -> impl TypedValueParser<Value = FinishMode> {
    const MODES: [FinishMode; 3] = [
        FinishMode::Deadlines,
        FinishMode::Interrupt,
        FinishMode::Keep,
    ];
    let values = MODES.map(|m| {
        let (name, help) = finish_mode(m);
        PossibleValue::new(name).help(help)
    });
    PossibleValuesParser::new(values).map(|name| {
        MODES
            .into_iter()
            .find(|m| finish_mode(*m).0 == name)
            .expect("one of the possible values")
    })
}

pub fn main(args: Args, file: &ConfigFile) -> anyhow::Result<ExitCode> {
    let config = args.core.resolve().map_err(anyhow::Error::msg)?;
    let redaction = args.redact.clone().with_file(file).resolve();
    let redaction = redaction.map_err(anyhow::Error::msg)?;
    let Opts {
        format,
        drop_ids,
        out,
        dead_letters,
        strict,
        at_end,
        quiet,
        threads,
    } = args.opts;
    let format = crate::input_format::parse_with_v1(&format)?;
    if drop_ids && format.is_none() {
        bail!("--drop-ids needs --format: v1 events are used as they are");
    }
    if let Some(n) = threads.filter(|n| n.get() > MAX_THREADS) {
        bail!("--threads {n} is more than the {MAX_THREADS} local mode runs; give fewer (the default is one a core)");
    }
    let threads = threads
        .or_else(|| std::thread::available_parallelism().ok())
        .map_or(1, |n| n.get().min(MAX_THREADS));

    if let Some(path) = &out {
        crate::output_path::refuse_an_input("--out", path, &args.files)?;
    }
    if let Some(path) = &dead_letters {
        refuse_for_dead_letters(path, out.as_deref(), &args.files)?;
    }
    let inputs: Vec<Option<PathBuf>> = if args.files.is_empty() {
        vec![None]
    } else {
        crate::each_file_once::each_file_once("local", args.files)
            .into_iter()
            .map(|p| (p.as_os_str() != "-").then_some(p))
            .collect()
    };
    // Every input is there and readable before the records' file is made: a mistyped path must
    // not empty the records an earlier run wrote there. (A pipe is not opened twice: its writer
    // would see its reader go.)
    for path in inputs.iter().flatten() {
        let cannot = || format!("cannot open {}", path.display());
        let meta = std::fs::metadata(path).with_context(cannot)?;
        if meta.is_dir() {
            bail!(
                "cannot read {}: it is a directory; give the files in it",
                path.display()
            );
        }
        if meta.is_file() {
            std::fs::File::open(path).with_context(cannot)?;
        }
    }
    // What each input number of the records' provenance stands for.
    let names: Vec<Arc<str>> = inputs
        .iter()
        .map(|i| {
            i.as_ref()
                .map_or_else(|| "<stdin>".into(), |p| p.display().to_string().into())
        })
        .collect();
    // The records name a file by its path as text: two paths that read alike (they differ only
    // in bytes that are not UTF-8) could not be told apart in them, nor audited.
    let mut named = std::collections::HashSet::new();
    for (input, name) in inputs.iter().zip(&names) {
        if input.is_some() && !named.insert(name) {
            bail!("two inputs read as {name} (their paths differ only in bytes that are not UTF-8), and the records name a file by its path: rename one");
        }
    }
    let mut sink: Box<dyn Write> = match out.as_deref().filter(|p| p.as_os_str() != "-") {
        Some(path) => Box::new(BufWriter::with_capacity(
            SINK_BUFFER,
            std::fs::File::create(path).with_context(|| {
                format!("cannot create {}; check the --out path", path.display())
            })?,
        )),
        // No --out, or `-`.
        None => Box::new(BufWriter::with_capacity(
            SINK_BUFFER,
            std::io::stdout().lock(),
        )),
    };
    let native = format.is_some();
    let dead_letters = dead_letters
        .map(|path| dead_letters::DeadLetters::create(&path, names.clone(), native))
        .transpose()?;
    let reader = Reader::new(inputs, names.clone(), format, drop_ids, strict);
    let setup = Setup {
        config,
        redaction,
        names: InputNames { names, native },
        strict,
        at_end,
    };
    let mut progress = Progress::new(!quiet && std::io::stderr().is_terminal());
    let mut sinks = output::Sinks {
        records: &mut *sink,
        dead_letters,
    };
    let ran = if threads == 1 {
        serial::run(reader, &setup, &mut sinks, &mut progress)
    } else {
        parallel::run(reader, &setup, threads, &mut sinks, &mut progress)
    };
    // What was written before a --strict stop or an error is kept, as the records are.
    let dead_letters = sinks
        .dead_letters
        .take()
        .map(dead_letters::DeadLetters::finish);
    let (summary, pending) = ran?;
    dead_letters.transpose()?;
    sink.flush().context("cannot write the records")?;
    progress.done();
    if !quiet {
        print_summary(&summary, at_end == FinishMode::Keep, &pending);
    }
    Ok(ExitCode::SUCCESS)
}
