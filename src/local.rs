//! `toolcalls local`: the embedded mode — files in, records out, no broker.
//!
//! Reads v1 events as JSON lines (or a native format through the adapters), runs one correlator
//! over them in input order, writes ToolCall records as JSON lines and a summary on stderr. A bad
//! line is reported with its file, line number and reason and processing goes on (`--strict`
//! stops instead). At the end of the input, calls still pending are closed as `--at-end` says.

use anyhow::{bail, Context};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use toolcalls_adapters::Format;
use toolcalls_core::{Correlator, Effects, FinishMode, Outcome, Position};
use toolcalls_model::record::{FileEvents, FileLines, Origin};
use toolcalls_model::redact::Redaction;
use toolcalls_model::{Event, Phase, Strategy, Timestamp, ToolCallRecord};
use toolcalls_processor::core_settings::CoreArgs;
use toolcalls_processor::redact_settings::RedactArgs;

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
    /// Write records here instead of standard output
    #[arg(long, short = 'o', env = "TOOLCALLS_OUT", value_name = "FILE")]
    out: Option<PathBuf>,
    /// Stop at the first bad line (exit code 2) instead of reporting it and going on
    #[arg(long, env = "TOOLCALLS_STRICT")]
    strict: bool,
    /// How calls still pending at the end of the input are closed
    #[arg(long, env = "TOOLCALLS_AT_END", value_name = "MODE", value_parser = finish_modes(), default_value = finish_mode(FinishMode::default()).0)]
    at_end: FinishMode,
    /// Print no summary on stderr
    #[arg(long, short = 'q', env = "TOOLCALLS_QUIET")]
    quiet: bool,
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

#[derive(Default)]
struct Summary {
    events: u64,
    bad_lines: u64,
    outcomes: BTreeMap<&'static str, u64>,
    rejected: BTreeMap<&'static str, u64>,
    phases: BTreeMap<Phase, u64>,
    strategies: BTreeMap<Strategy, u64>,
    duplicates: u64,
    still_pending: u64,
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let config = args.core.resolve().map_err(anyhow::Error::msg)?;
    let redaction = args.redact.resolve().map_err(anyhow::Error::msg)?;
    let Opts {
        format,
        drop_ids,
        out,
        strict,
        at_end,
        quiet,
    } = args.opts;
    let format = match format.as_str() {
        "v1" => None,
        "auto" => Some(None),
        name => Some(Some(name.parse::<Format>()?)),
    };
    if drop_ids && format.is_none() {
        bail!("--drop-ids needs --format: v1 events are used as they are");
    }

    let mut sink: Box<dyn Write> = match &out {
        Some(path) => Box::new(BufWriter::new(std::fs::File::create(path).with_context(
            || format!("cannot create {}; check the --out path", path.display()),
        )?)),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    };
    let inputs: Vec<Option<&Path>> = if args.files.is_empty() {
        vec![None]
    } else {
        args.files
            .iter()
            .map(|p| (p.as_os_str() != "-").then_some(p.as_path()))
            .collect()
    };

    // What each input number of the records' provenance stands for.
    let names: Vec<String> = inputs
        .iter()
        .map(|i| i.map_or_else(|| "<stdin>".to_owned(), |p| p.display().to_string()))
        .collect();
    let namer = InputNames {
        names: &names,
        native: format.is_some(),
    };
    let mut correlator = Correlator::without_changelog(config);
    let mut effects = Effects::default();
    let mut summary = Summary::default();
    let mut progress = Progress::new(!quiet && std::io::stderr().is_terminal());

    for (index, input) in inputs.iter().enumerate() {
        let name = input.map_or_else(|| "<stdin>".to_owned(), |p| p.display().to_string());
        let topic = u16::try_from(index).context("at most 65536 input files")?;
        let mut emit = |line: usize, event: Event, summary: &mut Summary| -> anyhow::Result<()> {
            summary.events += 1;
            let outcome = correlator.apply(event, Position::new(topic, line as i64), &mut effects);
            if outcome != Outcome::Held {
                account(&names[usize::from(topic)], line, outcome, summary, strict)?;
            }
            account_released(&mut effects, summary, &names, strict)?;
            write_records(&mut sink, &mut effects, summary, &namer, &redaction)?;
            progress.tick(summary.events);
            Ok(())
        };
        match format {
            None => {
                let reader: Box<dyn Read> = match input {
                    Some(p) => Box::new(
                        std::fs::File::open(p)
                            .with_context(|| format!("cannot open {}", p.display()))?,
                    ),
                    None => Box::new(std::io::stdin().lock()),
                };
                let mut reader = BufReader::with_capacity(1 << 16, reader);
                let mut buf = Vec::new();
                let mut line = 0usize;
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
                    if buf.iter().all(u8::is_ascii_whitespace) {
                        continue; // blank lines separate nothing in JSON lines
                    }
                    match Event::decode(&buf) {
                        Ok(event) => emit(line, event, &mut summary)?,
                        Err(e) => {
                            summary.bad_lines += 1;
                            eprintln!("{name}:{line}: {e} [{}]", e.reason());
                            if strict {
                                bail!("{name}:{line}: bad input; stopping because of --strict");
                            }
                        }
                    }
                }
            }
            Some(format) => {
                let mut bytes = Vec::new();
                match input {
                    Some(p) => {
                        bytes = std::fs::read(p)
                            .with_context(|| format!("cannot read {}", p.display()))?
                    }
                    None => {
                        std::io::stdin()
                            .lock()
                            .read_to_end(&mut bytes)
                            .context("cannot read standard input")?;
                    }
                }
                let format = match format {
                    Some(f) => f,
                    None => Format::detect(&name, &bytes[..bytes.len().min(1 << 16)]).with_context(|| {
                        format!("cannot tell the format of {name}; name it with --format (see docs/ADAPTERS.md)")
                    })?,
                };
                let opts = toolcalls_adapters::Options {
                    drop_ids,
                    ..Default::default()
                };
                let parsed = toolcalls_adapters::parse(format, &name, &bytes, &opts);
                for e in &parsed.errors {
                    summary.bad_lines += 1;
                    eprintln!("{e}");
                    if strict {
                        bail!("{e}; stopping because of --strict");
                    }
                }
                for (i, event) in parsed.events.into_iter().enumerate() {
                    emit(i, event, &mut summary)?;
                }
            }
        }
    }

    // The input has ended: nothing held can be overtaken any more.
    correlator.release_all(&mut effects);
    account_released(&mut effects, &mut summary, &names, strict)?;
    match at_end {
        FinishMode::Deadlines => correlator.advance(Timestamp::from_millis(i64::MAX), &mut effects),
        FinishMode::Interrupt => {
            correlator.close_all(Phase::Interrupted, "input ended", &mut effects)
        }
        FinishMode::Keep => summary.still_pending = correlator.pending_len() as u64,
    }
    write_records(&mut sink, &mut effects, &mut summary, &namer, &redaction)?;
    sink.flush().context("cannot write the records")?;
    progress.done();
    if !quiet {
        print_summary(
            &summary,
            at_end == FinishMode::Keep,
            correlator.pending_views(),
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The inputs as the records' provenance names them: a v1 event by its file and line (the
/// position's offset), an event an adapter made by its file and 1-based number (the offset is
/// its 0-based index).
struct InputNames<'a> {
    names: &'a [String],
    native: bool,
}

impl InputNames<'_> {
    fn name(&self, record: &mut ToolCallRecord) {
        record.provenance.name(|input, offsets| {
            let file = self
                .names
                .get(usize::from(input))
                .cloned()
                .unwrap_or_default();
            if self.native {
                let events = offsets.into_iter().map(|i| i + 1).collect();
                Origin::Events(FileEvents { file, events })
            } else {
                Origin::Lines(FileLines {
                    file,
                    lines: offsets,
                })
            }
        });
    }
}

/// Counts what became of the event at `name`:`line`; a refusal is reported (and ends the run
/// under `--strict`).
fn account(
    name: &str,
    line: usize,
    outcome: Outcome,
    summary: &mut Summary,
    strict: bool,
) -> anyhow::Result<()> {
    *summary.outcomes.entry(outcome.label()).or_default() += 1;
    if let Outcome::Rejected(reason) = outcome {
        *summary.rejected.entry(reason).or_default() += 1;
        eprintln!("{name}:{line}: event refused by the correlator: {reason}");
        if strict {
            bail!("{name}:{line}: event refused ({reason}); stopping because of --strict");
        }
    }
    Ok(())
}

/// Accounts for the events the reorder window applied in this step.
fn account_released(
    effects: &mut Effects,
    summary: &mut Summary,
    names: &[String],
    strict: bool,
) -> anyhow::Result<()> {
    for r in effects.released.drain(..) {
        let name = names
            .get(usize::from(r.pos.topic))
            .map_or("?", String::as_str);
        account(name, r.pos.offset as usize, r.outcome, summary, strict)?;
    }
    Ok(())
}

fn write_records(
    sink: &mut dyn Write,
    effects: &mut Effects,
    summary: &mut Summary,
    names: &InputNames<'_>,
    redaction: &Redaction,
) -> anyhow::Result<()> {
    for mut record in effects.records.drain(..) {
        names.name(&mut record);
        redaction.apply(&mut record);
        *summary.phases.entry(record.status.phase).or_default() += 1;
        *summary
            .strategies
            .entry(record.correlation.strategy)
            .or_default() += 1;
        summary.duplicates += u64::from(record.correlation.duplicates);
        serde_json::to_writer(&mut *sink, &record).context("cannot write a record")?;
        sink.write_all(b"\n").context("cannot write a record")?;
    }
    Ok(())
}

fn print_summary(s: &Summary, keep: bool, pending: impl Iterator<Item = ToolCallRecord>) {
    let records: u64 = s.phases.values().sum();
    eprintln!(
        "toolcalls local: {} events, {} bad lines, {} records",
        s.events, s.bad_lines, records
    );
    let join = |items: Vec<String>| {
        if items.is_empty() {
            "-".to_owned()
        } else {
            items.join(", ")
        }
    };
    eprintln!(
        "  by phase:    {}",
        join(s.phases.iter().map(|(k, v)| format!("{k} {v}")).collect())
    );
    eprintln!(
        "  by strategy: {}",
        join(
            s.strategies
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect()
        )
    );
    eprintln!(
        "  events:      {}",
        join(s.outcomes.iter().map(|(k, v)| format!("{k} {v}")).collect())
    );
    if s.duplicates > 0 {
        eprintln!("  duplicates merged: {}", s.duplicates);
    }
    if !s.rejected.is_empty() {
        eprintln!(
            "  refused:     {}",
            join(s.rejected.iter().map(|(k, v)| format!("{k} {v}")).collect())
        );
    }
    if keep {
        eprintln!("  still pending (--at-end keep): {}", s.still_pending);
        for r in pending.take(20) {
            let tool = r.spec.tool_ref.as_ref().map_or("?", |t| t.name.as_str());
            eprintln!(
                "    {} {} {} session={}",
                r.status.phase, tool, r.metadata.name, r.metadata.session
            );
        }
    }
}

/// A progress line on a terminal for long inputs, at most twice a second.
struct Progress {
    on: bool,
    started: Instant,
    last: Instant,
    shown: bool,
}

impl Progress {
    fn new(on: bool) -> Self {
        let now = Instant::now();
        Progress {
            on,
            started: now,
            last: now,
            shown: false,
        }
    }

    fn tick(&mut self, events: u64) {
        if !self.on || events % 4096 != 0 {
            return;
        }
        let now = Instant::now();
        if now.duration_since(self.last) < Duration::from_millis(500) {
            return;
        }
        self.last = now;
        self.shown = true;
        let secs = now.duration_since(self.started).as_secs_f64().max(1e-9);
        eprint!("\r{events} events, {:.0} events/s", events as f64 / secs);
    }

    fn done(&self) {
        if self.shown {
            eprintln!();
        }
    }
}
