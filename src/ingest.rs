//! `toolcalls ingest`: native agent files → v1 events, to Kafka or to JSON lines.
//!
//! Each file goes through its adapter (`toolcalls-adapters`; the format is named with `--format`
//! or detected when unambiguous). Without `--out` the events are published to the input topics,
//! keyed by session (see `toolcalls_producer`); with `--out FILE` (`-` for standard output)
//! they are written as JSON lines, one v1 event per line, in file order. A malformed line is
//! reported on stderr with its file and line and the rest of the file is still read (`--strict`
//! stops instead). A summary per file goes to stderr at the end.
//!
//! Publishing first checks that the brokers answer and both input topics exist (a topic that
//! does not is refused at once, never created), and gives up on brokers that do not answer, and
//! on events not delivered, after `--delivery-timeout`; meanwhile it says on stderr which brokers
//! it cannot reach and why, at once and every 10 s, even with `-q`.

use crate::say::say;
use anyhow::{bail, Context};
use clap::builder::NonEmptyStringValueParser;
use std::collections::{BTreeMap, HashMap};
use std::io::{BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};
use toolcalls_adapters::{partition_key, Format, Options, Parsed};
use toolcalls_model::redact::Redaction;
use toolcalls_model::{Event, EventKind, Timestamp};
use toolcalls_processor::redact_settings::RedactArgs;
use toolcalls_settings::{ConfigFile, Dur};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Native files to read (`-` reads standard input)
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    opts: Opts,
    #[command(flatten, next_help_heading = "Kafka (without --out)")]
    publish: crate::publish_args::Publish,
    #[command(flatten, next_help_heading = "Following (--follow)")]
    follow: crate::follow::Opts,
    #[command(flatten, next_help_heading = "Redaction")]
    redact: RedactArgs,
}

/// `[ingest]` in the config file.
#[derive(Debug, clap::Args)]
#[group(id = "ingest")]
struct Opts {
    /// The files' format: claude-code, claude-code-stream, claude-code-hooks, anthropic,
    /// openai-chat, openai-responses, codex, codex-exec, gemini-cli, gemini, mcp, otel, adk; `auto`
    /// detects it per file when only one fits (see docs/ADAPTERS.md)
    #[arg(
        long,
        short = 'f',
        env = "TOOLCALLS_FORMAT",
        value_name = "FORMAT",
        default_value = "auto"
    )]
    format: String,
    /// Write the events as JSON lines to this file (`-` for standard output) instead of
    /// publishing them (never one of the input files: refused)
    #[arg(long, short = 'o', env = "TOOLCALLS_INGEST_OUT", value_name = "FILE")]
    out: Option<PathBuf>,
    /// Remove native call ids, to simulate a framework without them (tools, arguments and
    /// checksums stay)
    #[arg(long, env = "TOOLCALLS_DROP_IDS")]
    drop_ids: bool,
    /// Use this source for every event instead of the framework name
    #[arg(long, env = "TOOLCALLS_INGEST_SOURCE", value_name = "SOURCE", value_parser = NonEmptyStringValueParser::new())]
    source: Option<String>,
    /// Use this session for every event instead of the one each file names (or its file name)
    #[arg(long, env = "TOOLCALLS_INGEST_SESSION", value_name = "SESSION", value_parser = NonEmptyStringValueParser::new())]
    session: Option<String>,
    /// Time of the first line for formats that carry no time (RFC 3339); later lines add 1 ms
    /// each (default: the Unix epoch)
    #[arg(long, env = "TOOLCALLS_INGEST_BASE_TIME", value_name = "TIME", value_parser = parse_time)]
    base_time: Option<Timestamp>,
    /// Stop at the first malformed line, or at a file that gives no event in the --format named
    /// while its start tells another (exit code 2), instead of reporting it and going on
    #[arg(long, env = "TOOLCALLS_STRICT")]
    strict: bool,
    /// Print no summary, progress or delivery count on stderr; problems (malformed lines,
    /// brokers out of reach, errors) are still reported
    #[arg(long, short = 'q', env = "TOOLCALLS_QUIET")]
    quiet: bool,
    /// Give up on an event not delivered within this long, and on brokers that do not answer
    /// (exit code 2, saying what to check); while they do not, say so every 10 s
    #[arg(
        long,
        env = "TOOLCALLS_DELIVERY_TIMEOUT",
        value_name = "DURATION",
        default_value_t = Dur(Duration::from_secs(30)),
        help_heading = "Kafka (without --out)"
    )]
    delivery_timeout: Dur,
}

fn parse_time(s: &str) -> Result<Timestamp, String> {
    Timestamp::parse_rfc3339(s).map_err(|e| e.to_string())
}

/// Where ingested events go.
pub trait Sink {
    /// Hands over one event. `key` is the Kafka key (the session), `payload` the encoded event.
    fn send(&mut self, key: &[u8], event: &Event, payload: &[u8]) -> anyhow::Result<()>;
    /// Flushes everything sent; called once at the end. `file_of` names the file a session's
    /// events were read from (the first, when several hold it), for what is said of them.
    fn finish(&mut self, file_of: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<()>;
}

/// One JSON event per line.
pub struct JsonLines<W: Write> {
    out: W,
}

impl<W: Write> JsonLines<W> {
    pub fn new(out: W) -> Self {
        JsonLines { out }
    }
}

impl<W: Write> Sink for JsonLines<W> {
    fn send(&mut self, _key: &[u8], _event: &Event, payload: &[u8]) -> anyhow::Result<()> {
        self.out
            .write_all(payload)
            .context("cannot write an event")?;
        self.out.write_all(b"\n").context("cannot write an event")?;
        Ok(())
    }

    fn finish(&mut self, _file_of: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<()> {
        self.out.flush().context("cannot write the events")
    }
}

/// What one file gave.
#[derive(Debug, Default)]
pub struct FileSummary {
    pub name: String,
    pub format: Option<Format>,
    pub events: BTreeMap<EventKind, u64>,
    pub bad_lines: u64,
    pub skipped: u64,
    pub sessions: u64,
    /// Events read but too large for a Kafka message: reported and left out.
    pub too_large: u64,
    /// Events the redaction rules changed before they were sent.
    pub redacted: u64,
}

/// Publishes to the input topics, keyed by session.
pub struct KafkaSink {
    publisher: toolcalls_producer::Publisher,
    quiet: bool,
    strict: bool,
}

impl Sink for KafkaSink {
    fn send(&mut self, _key: &[u8], event: &Event, payload: &[u8]) -> anyhow::Result<()> {
        Ok(self.publisher.send(event, payload)?)
    }

    /// Waits for every acknowledgement. The events the brokers refused as too large are said,
    /// with the file of their session, and left out, as those the producer refuses are (they are
    /// known only now, after every file was sent).
    fn finish(&mut self, file_of: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<()> {
        let delivered = self.publisher.finish()?;
        let refused = self.publisher.take_refused();
        for r in &refused {
            let file = r
                .event()
                .and_then(|e| file_of(e.session.as_str()))
                .unwrap_or_else(|| "toolcalls ingest".to_owned());
            say!("{}", crate::left_out::said_of_refused(&file, r));
        }
        if self.strict && !refused.is_empty() {
            bail!(
                "{} events refused by the brokers as too large; stopping because of --strict",
                refused.len()
            );
        }
        if !self.quiet {
            say!("toolcalls ingest: {delivered} events delivered to Kafka");
            if !refused.is_empty() {
                say!(
                    "toolcalls ingest: {} events refused by the brokers as too large, left out",
                    refused.len()
                );
            }
        }
        Ok(())
    }
}

pub fn main(args: Args, file: &ConfigFile) -> anyhow::Result<ExitCode> {
    // A bad rule, a format that is none or an output over an input stops the start before any
    // broker is asked.
    let redaction = args.redact.clone().with_file(file).resolve();
    let redaction = redaction.map_err(anyhow::Error::msg)?;
    crate::input_format::parse_native(&args.opts.format)?;
    if let Some(out) = &args.opts.out {
        crate::output_path::refuse_an_input("--out", out, &args.files)?;
    }
    if args.follow.follow {
        return follow(args, file, redaction);
    }
    let f = &args.follow;
    if !args.opts.quiet && (f.checkpoint_dir.is_some() || f.once || f.metrics_addr.is_some()) {
        // Perhaps from a config file the follower shares: said, not refused.
        say!("toolcalls ingest: --checkpoint-dir, --once and --metrics-addr apply with --follow only; this run keeps no checkpoints and sends every file whole (add --follow to send only what is new)");
    }
    // So is a file that cannot be read (one followed may come later).
    for path in args.files.iter().filter(|p| p.as_os_str() != "-") {
        readable(path)?;
    }
    let Some(out) = &args.opts.out else {
        let publisher = publisher(&args, file)?;
        let mut sink = KafkaSink {
            publisher,
            quiet: args.opts.quiet,
            strict: args.opts.strict,
        };
        let summaries = run(&args, &redaction, &mut sink)?;
        if !args.opts.quiet {
            print_summary(&summaries);
        }
        return Ok(ExitCode::SUCCESS);
    };
    let writer: Box<dyn Write> = if out.as_os_str() == "-" {
        Box::new(BufWriter::new(std::io::stdout().lock()))
    } else {
        Box::new(BufWriter::new(std::fs::File::create(out).with_context(
            || format!("cannot create {}; check the --out path", out.display()),
        )?))
    };
    let mut sink = JsonLines::new(writer);
    let summaries = run(&args, &redaction, &mut sink)?;
    if !args.opts.quiet {
        print_summary(&summaries);
    }
    Ok(ExitCode::SUCCESS)
}

/// The producer of the input topics, once the brokers answer and both topics exist.
fn publisher(args: &Args, file: &ConfigFile) -> anyhow::Result<toolcalls_producer::Publisher> {
    let brokers = &args.publish.brokers;
    // Brokers out of reach are said at once and every 10 s, quiet or not.
    let following = args.follow.follow;
    let watch = toolcalls_producer::BrokerWatch::new(brokers, move |notice| {
        if following {
            tracing::warn!("{notice}");
        } else {
            say!("toolcalls ingest: {notice}");
        }
    });
    let publisher = toolcalls_producer::Publisher::with_watch(
        args.publish.settings(file, args.opts.delivery_timeout.0),
        std::sync::Arc::new(watch),
    )?;
    publisher.check_topics()?;
    Ok(publisher)
}

/// `--follow`: tails the files until stopped (`crate::follow`), logging why it stops.
fn follow(args: Args, file: &ConfigFile, redaction: Redaction) -> anyhow::Result<ExitCode> {
    // Before the brokers are first asked: what the follower says goes to its log from the start.
    toolcalls_processor::logging::init_at(
        args.follow.log_format,
        if args.opts.quiet { "warn" } else { "info" },
    );
    // Why it stops goes to its log too, where a collector of its log finds it (and to stderr
    // as every command's error does).
    following(args, file, redaction).inspect_err(|e| tracing::error!("stopped: {e:#}"))
}

fn following(args: Args, file: &ConfigFile, redaction: Redaction) -> anyhow::Result<ExitCode> {
    let o = &args.opts;
    if args.follow.poll_interval.0.is_zero() {
        bail!("--poll-interval must be greater than 0 (it is how long the follower rests between looks)");
    }
    let outlet = match &o.out {
        None => crate::follow::Outlet::Kafka(publisher(&args, file)?),
        Some(out) if out.as_os_str() == "-" => {
            crate::follow::Outlet::Lines(Box::new(std::io::stdout()))
        }
        Some(out) => crate::follow::Outlet::file(out)?,
    };
    let settings = crate::follow::Settings {
        paths: args.files.clone(),
        format: crate::input_format::parse_native(&o.format)?,
        options: Options {
            drop_ids: o.drop_ids,
            source: o.source.clone(),
            session: o.session.clone(),
            base_time: o.base_time,
        },
        redaction,
        strict: o.strict,
        checkpoint_dir: args.follow.checkpoint_dir.clone(),
        poll_interval: args.follow.poll_interval.0,
        once: args.follow.once,
        metrics_addr: args.follow.metrics_addr,
    };
    crate::follow::run(settings, outlet)?;
    Ok(ExitCode::SUCCESS)
}

/// Reads every file of `args` into `sink`, each event redacted by `redaction` first; returns what
/// each file gave.
pub fn run(
    args: &Args,
    redaction: &Redaction,
    sink: &mut dyn Sink,
) -> anyhow::Result<Vec<FileSummary>> {
    let o = &args.opts;
    let forced = crate::input_format::parse_native(&o.format)?;
    let opts = Options {
        drop_ids: o.drop_ids,
        source: o.source.clone(),
        session: o.session.clone(),
        base_time: o.base_time,
    };
    let mut progress = Progress::new(!o.quiet && std::io::stderr().is_terminal());
    let mut summaries = Vec::with_capacity(args.files.len());
    let mut total = 0u64;
    // The first file each session was read from: the brokers' refusals come after every file
    // was sent, and name the event only.
    let mut file_of_session: HashMap<String, String> = HashMap::new();
    for path in &args.files {
        let (name, bytes) = read(path)?;
        let (format, parsed) = crate::input_format::read(forced, &name, &bytes, &opts, o.strict)?;
        let Parsed {
            mut events,
            errors,
            skipped,
        } = parsed;
        let mut summary = FileSummary {
            name: name.clone(),
            format,
            skipped: skipped as u64,
            ..FileSummary::default()
        };
        for e in &errors {
            summary.bad_lines += 1;
            // The message may quote the line, secrets included.
            let e = redaction.in_text(&e.to_string()).into_owned();
            say!("{e}");
            if o.strict {
                bail!("{e}; stopping because of --strict");
            }
        }
        let mut sessions = std::collections::BTreeSet::new();
        for event in &mut events {
            summary.redacted += u64::from(redaction.apply_event(event));
        }
        for event in &events {
            *summary.events.entry(event.kind()).or_default() += 1;
            sessions.insert(event.session.as_str());
            if let Err(e) = sink.send(partition_key(event), event, &event.encode()) {
                if !crate::left_out::is_too_large(&e) {
                    return Err(e);
                }
                summary.too_large += 1;
                let said = crate::left_out::said(&name, event, &e);
                say!("{said}");
                if o.strict {
                    bail!("{said}; stopping because of --strict");
                }
            }
            total += 1;
            progress.tick(total, &name);
        }
        summary.sessions = sessions.len() as u64;
        for session in sessions {
            if !file_of_session.contains_key(session) {
                file_of_session.insert(session.to_owned(), name.clone());
            }
        }
        summaries.push(summary);
    }
    sink.finish(&|session| file_of_session.get(session).cloned())?;
    progress.done();
    Ok(summaries)
}

/// Whether the file at `path` can be read: it opens, and it is not a directory.
fn readable(path: &Path) -> anyhow::Result<()> {
    let file = std::fs::File::open(path);
    let dir = file
        .as_ref()
        .ok()
        .and_then(|f| f.metadata().ok())
        .is_some_and(|m| m.is_dir());
    file.with_context(|| format!("cannot read {}", path.display()))?;
    if dir {
        bail!(
            "cannot read {}: it is a directory; name the files in it",
            path.display()
        );
    }
    Ok(())
}

/// The file's display name and bytes; `-` is standard input.
fn read(path: &Path) -> anyhow::Result<(String, Vec<u8>)> {
    let mut bytes = Vec::new();
    if path.as_os_str() == "-" {
        std::io::stdin()
            .lock()
            .read_to_end(&mut bytes)
            .context("cannot read standard input")?;
        return Ok(("<stdin>".to_owned(), bytes));
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    Ok((path.display().to_string(), bytes))
}

fn print_summary(files: &[FileSummary]) {
    let events: u64 = files.iter().flat_map(|f| f.events.values()).sum();
    let bad: u64 = files.iter().map(|f| f.bad_lines).sum();
    say!(
        "toolcalls ingest: {} files, {events} events, {bad} bad lines",
        files.len()
    );
    for f in files {
        let kinds: Vec<String> = f.events.iter().map(|(k, n)| format!("{k} {n}")).collect();
        say!(
            "  {} [{}]: {}; {} sessions, {} bad lines, {} rows skipped",
            f.name,
            f.format.map_or("empty", Format::name),
            if kinds.is_empty() {
                "no events".to_owned()
            } else {
                kinds.join(", ")
            },
            f.sessions,
            f.bad_lines,
            f.skipped
        );
        if f.too_large > 0 {
            say!(
                "  {}: {} events too large for a Kafka message, left out",
                f.name,
                f.too_large
            );
        }
        if f.redacted > 0 {
            say!(
                "  {}: {} events redacted before they were sent",
                f.name,
                f.redacted
            );
        }
    }
}

/// A progress line on a terminal for long inputs, at most twice a second.
struct Progress {
    on: bool,
    last: Instant,
    shown: bool,
}

impl Progress {
    fn new(on: bool) -> Self {
        Progress {
            on,
            last: Instant::now(),
            shown: false,
        }
    }

    fn tick(&mut self, events: u64, file: &str) {
        if !self.on || events & 4095 != 0 {
            return;
        }
        let now = Instant::now();
        if now.duration_since(self.last) < Duration::from_millis(500) {
            return;
        }
        self.last = now;
        self.shown = true;
        // Ignored when stderr is gone, like every line `say!` writes.
        let _ = write!(std::io::stderr(), "\r{events} events ({file})");
    }

    /// Clears the progress line, for the summary to take its place.
    fn done(&self) {
        if self.shown {
            let _ = write!(std::io::stderr(), "\r\x1b[2K");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Collects what a Kafka producer would get.
    #[derive(Default)]
    struct Collect {
        sent: Vec<(Vec<u8>, Event)>,
        finished: bool,
    }

    impl Sink for Collect {
        fn send(&mut self, key: &[u8], event: &Event, payload: &[u8]) -> anyhow::Result<()> {
            assert_eq!(
                &Event::decode(payload).unwrap(),
                event,
                "the payload is the event"
            );
            self.sent.push((key.to_vec(), event.clone()));
            Ok(())
        }

        fn finish(&mut self, _file_of: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<()> {
            self.finished = true;
            Ok(())
        }
    }

    fn args(files: &[&Path], extra: &[&str]) -> Args {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: Args,
        }
        let mut argv = vec!["ingest".to_owned(), "--quiet".to_owned()];
        argv.extend(extra.iter().map(|s| (*s).to_owned()));
        argv.extend(files.iter().map(|p| p.display().to_string()));
        Cli::parse_from(argv).args
    }

    fn sample(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/adapters/tests/data")
            .join(name)
    }

    #[test]
    fn detects_formats_and_keys_events_by_session() {
        let files = [sample("mcp-proxy.jsonl"), sample("claude-hooks.jsonl")];
        let a = args(&[&files[0], &files[1]], &[]);
        let mut sink = Collect::default();
        let summaries = run(&a, &Redaction::default(), &mut sink).unwrap();
        assert!(sink.finished);
        assert_eq!(summaries[0].format, Some(Format::Mcp));
        assert_eq!(
            summaries[0].bad_lines, 1,
            "the sample's request without a tool name"
        );
        assert_eq!(summaries[1].format, Some(Format::ClaudeCodeHooks));
        assert_eq!(summaries[0].sessions, 2);
        for (key, event) in &sink.sent {
            assert_eq!(key.as_slice(), event.session.as_str().as_bytes());
        }
        let announces: u64 = summaries
            .iter()
            .map(|s| s.events.get(&EventKind::Announce).copied().unwrap_or(0))
            .sum();
        assert_eq!(announces, 5 + 7);
    }

    #[test]
    fn drop_ids_and_overrides_reach_every_event() {
        let f = sample("claude-stream-json.jsonl");
        let a = args(
            &[&f],
            &[
                "--format",
                "claude-code-stream",
                "--drop-ids",
                "--session",
                "s-9",
                "--base-time",
                "2026-01-01T00:00:00Z",
            ],
        );
        let mut sink = Collect::default();
        run(&a, &Redaction::default(), &mut sink).unwrap();
        assert!(!sink.sent.is_empty());
        for (key, e) in &sink.sent {
            assert_eq!((key.as_slice(), e.call_id.as_ref()), (&b"s-9"[..], None));
        }
        assert_eq!(
            sink.sent[0].1.time.to_rfc3339(),
            "2026-01-01T00:00:00.002Z",
            "line 3, no time in the format"
        );
    }

    #[test]
    fn strict_stops_at_the_first_bad_line_and_unknown_formats_are_refused() {
        let f = sample("otel-genai-spans.jsonl");
        let e = run(
            &args(&[&f], &["--strict"]),
            &Redaction::default(),
            &mut Collect::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("otel-genai-spans.jsonl:2") && e.contains("--strict"),
            "{e}"
        );
        let e = run(
            &args(&[&f], &["--format", "claude"]),
            &Redaction::default(),
            &mut Collect::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown format `claude`"), "{e}");
    }

    #[test]
    fn an_empty_file_among_others_is_read_as_no_events() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("new-session.jsonl");
        std::fs::write(&empty, "\u{feff}\n \n").unwrap();
        let hooks = sample("claude-hooks.jsonl");
        let mut sink = Collect::default();
        let summaries = run(
            &args(&[&empty, &hooks], &[]),
            &Redaction::default(),
            &mut sink,
        )
        .unwrap();
        assert_eq!(summaries[0].format, None);
        assert!(summaries[0].events.is_empty());
        assert_eq!(summaries[1].format, Some(Format::ClaudeCodeHooks));
        assert!(!sink.sent.is_empty());
    }

    #[test]
    fn a_file_in_utf16_is_refused_with_its_encoding_named() {
        let dir = tempfile::tempdir().unwrap();
        let utf16 = dir.path().join("hooks.jsonl");
        let text = std::fs::read_to_string(sample("claude-hooks.jsonl")).unwrap();
        let bytes: Vec<u8> = format!("\u{feff}{text}")
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        std::fs::write(&utf16, bytes).unwrap();
        let mut sink = Collect::default();
        let e = run(&args(&[&utf16], &[]), &Redaction::default(), &mut sink)
            .unwrap_err()
            .to_string();
        assert!(e.contains("hooks.jsonl is UTF-16LE text"), "{e}");
        assert!(sink.sent.is_empty());
    }
}
