//! `toolcalls audit`: proves the ledger complete, or names what is not.
//!
//! Reconciles inputs against outputs. Every input position must be exactly one of:
//!
//! 1. merged into one record — its latest revision lists the position in its `provenance`;
//! 2. dead-lettered (the dead letter's `toolcalls.source.*` headers name it; for `toolcalls
//!    local`, a line of its `--dead-letters` file), or, for a `toolcalls local` run without
//!    that file, a line it could not read (it reports those on stderr);
//! 3. still pending: in a call or result the processor's changelog holds;
//! 4. a repeat of an event merged into a record (same call id in its scope; without an id, same
//!    kind, tool, checksum, event time and, for a result, the same result): counted, as the
//!    correlator counts it; or late for its record: an event of a kind the record merged none
//!    of, which came after the call was closed without one (a result after a timeout — not
//!    when the record has a result); or a turn event, which closes calls but is merged into
//!    none.
//!
//! Every record's id must derive from one of the events it lists, as the correlator derives it.
//!
//! Anything else is a discrepancy, listed with its position and the record(s) concerned: an input
//! accounted for nowhere, a position two records list, a position both in a record and
//! dead-lettered or pending, a record id published twice at one revision with different content,
//! a position only an older revision lists, a record naming a position that holds no input. The
//! exit code is 1 when there is one, 2 for a usage or read error, 0 otherwise.
//!
//! With input FILEs it audits a `toolcalls local` run (`files.rs`); without, the processor's
//! topics (`kafka.rs`). Both stream: the claims of the outputs are gathered first, then each
//! input is read once (`ledger.rs`). docs/OPERATIONS.md, "Auditing the ledger", has the how-to.

mod attempts;
mod discrepancy;
mod files;
mod identity;
mod input;
mod kafka;
mod ledger;
mod progress;
mod record_head;

use anyhow::{bail, Context};
use clap::ValueEnum;
use ledger::{Counts, Ledger};
use progress::Progress;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use toolcalls_processor::config::{self, Topics};
use toolcalls_settings::{ConfigFile, Dur, KeyValueParser};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Input files of a `toolcalls local` run, as given to it (with --records); without FILEs
    /// the processor's topics are audited
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
    #[command(flatten)]
    opts: Opts,
    #[command(flatten, next_help_heading = "The processor's topics (without FILEs)")]
    kafka: KafkaOpts,
}

/// `[audit]` in the config file.
#[derive(Debug, clap::Args)]
#[group(id = "audit")]
struct Opts {
    /// The records file the `toolcalls local` run wrote (`-`: standard input)
    #[arg(
        long = "records",
        short = 'r',
        env = "TOOLCALLS_AUDIT_RECORDS",
        value_name = "FILE"
    )]
    records_file: Option<PathBuf>,
    /// The dead-letter file the `toolcalls local` run wrote (`--dead-letters`): its refused
    /// events and bad lines are then accounted for by it, and a bad line it lacks is a
    /// discrepancy
    #[arg(
        long = "dead-letters",
        env = "TOOLCALLS_AUDIT_DEAD_LETTERS",
        value_name = "FILE"
    )]
    dead_letters_file: Option<PathBuf>,
    /// The input files' format, as given to `toolcalls local --format`: `v1`, `auto` or a
    /// native format (see docs/ADAPTERS.md)
    #[arg(
        long,
        short = 'f',
        env = "TOOLCALLS_FORMAT",
        value_name = "FORMAT",
        default_value = "v1"
    )]
    format: String,
    /// As given to `toolcalls local --drop-ids`
    #[arg(long, env = "TOOLCALLS_DROP_IDS")]
    drop_ids: bool,
    /// Input offsets to audit, `TOPIC[:PARTITION]=FROM..TO` (TO exclusive, either end may be
    /// left out), comma-separated; a partition not named is audited from its beginning to the
    /// processor group's committed offset (to its end where the group committed none)
    #[arg(long, env = "TOOLCALLS_AUDIT_RANGES", value_name = "RANGES", default_value = "", hide_default_value = true, value_parser = check_ranges)]
    ranges: String,
    /// Where calls still pending are read: `changelog` (each partition's state as a restore
    /// would rebuild it) or `none` (pending inputs are then reported missing)
    #[arg(long, env = "TOOLCALLS_AUDIT_PENDING", value_enum, default_value_t = Pending::Changelog)]
    pending: Pending,
    /// How long reading a topic may go without an answer from the broker
    #[arg(long, env = "TOOLCALLS_AUDIT_TIMEOUT", value_name = "DURATION", default_value_t = Dur::from_millis(30_000))]
    timeout: Dur,
    /// List at most this many discrepancies (0: every one); all are counted
    #[arg(
        long,
        env = "TOOLCALLS_AUDIT_MAX_REPORT",
        value_name = "N",
        default_value_t = 1000
    )]
    max_report: usize,
    /// No progress line and no summary: only the discrepancies
    #[arg(long, short = 'q', env = "TOOLCALLS_QUIET")]
    quiet: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Pending {
    Changelog,
    None,
}

fn check_ranges(s: &str) -> Result<String, String> {
    kafka::parse_ranges(s).map(|_| s.to_owned())
}

/// The processor's cluster and topics, with the processor's keys in the config file.
#[derive(Debug, clap::Args)]
struct KafkaOpts {
    /// Kafka bootstrap servers
    #[arg(long, env = "TOOLCALLS_BROKERS", value_name = "HOSTS", default_value = config::DEFAULT_BROKERS)]
    brokers: String,
    /// The processor's consumer group: its committed offsets end the audited input ranges and
    /// fold the changelog; it names the changelog topic
    #[arg(long, env = "TOOLCALLS_GROUP", default_value = "toolcalls")]
    group: String,
    /// librdkafka property for every client, repeatable: `--kafka security.protocol=SSL`; the
    /// variable takes a comma-separated list; the flags (or else the variable) go after the
    /// file's `[kafka]` table
    #[arg(long = "kafka", env = "TOOLCALLS_KAFKA", value_name = "KEY=VALUE", value_parser = KeyValueParser, value_delimiter = ',', hide_env_values = true)]
    kafka: Vec<(String, String)>,
    #[command(flatten)]
    topics: Topics,
}

pub fn main(args: Args, file: &ConfigFile) -> anyhow::Result<ExitCode> {
    let Opts {
        records_file: records,
        dead_letters_file,
        format,
        drop_ids,
        ranges,
        pending,
        timeout,
        max_report,
        quiet,
    } = args.opts;
    let mut progress = Progress::new(!quiet && std::io::stderr().is_terminal());
    let started = Instant::now();
    let (mut ledger, what) = if args.files.is_empty() {
        if records.is_some() {
            bail!("--records is a `toolcalls local` run's records file: give its input FILEs too (without FILEs the processor's topics are audited)");
        }
        if dead_letters_file.is_some() {
            bail!("--dead-letters is a `toolcalls local` run's dead-letter file: give its input FILEs too (without FILEs the processor's dead-letter topic is read)");
        }
        let KafkaOpts {
            brokers,
            group,
            kafka,
            topics,
        } = args.kafka;
        let changelog = if topics.changelog.is_empty() {
            format!("{group}-changelog")
        } else {
            topics.changelog.clone()
        };
        let t = kafka::Topics {
            brokers,
            group,
            announce: topics.announce,
            completion: topics.completion,
            records: topics.records,
            dlq: topics.dlq,
            changelog,
            kafka: file.pairs("kafka").into_iter().chain(kafka).collect(),
            ranges: kafka::parse_ranges(&ranges).map_err(anyhow::Error::msg)?,
            pending: pending == Pending::Changelog,
            timeout: timeout.0,
        };
        toolcalls_producer::check_kafka_properties(&t.kafka).map_err(anyhow::Error::msg)?;
        let mut ledger = Ledger::new(false);
        kafka::audit(&t, &mut ledger, &mut progress)?;
        let what = format!(
            "{} and {} → {}, dead letters {}, pending {}",
            t.announce,
            t.completion,
            t.records,
            t.dlq,
            if t.pending { &t.changelog } else { "not read" }
        );
        (ledger, what)
    } else {
        let Some(records) = records else {
            bail!("give the records file of the `toolcalls local` run with --records FILE");
        };
        if !ranges.is_empty() {
            bail!("--ranges selects offsets of the processor's input topics; it does not apply to FILEs");
        }
        let format = crate::input_format::parse_with_v1(&format)?;
        if drop_ids && format.is_none() {
            bail!("--drop-ids needs --format: v1 events are used as they are");
        }
        let inputs = crate::each_file_once::each_file_once("audit", args.files);
        let f = files::Files {
            inputs: &inputs,
            records: &records,
            dead_letters: dead_letters_file.as_deref(),
            format,
            drop_ids,
        };
        let mut ledger = Ledger::new(dead_letters_file.is_none());
        files::audit(&f, &mut ledger, &mut progress)?;
        let what = format!("{} input file(s) → {}", inputs.len(), records.display());
        (ledger, what)
    };
    ledger.finish();
    progress.clear();

    let mut out = std::io::stdout().lock();
    let found = ledger.discrepancies.len();
    let shown = if max_report == 0 {
        found
    } else {
        found.min(max_report)
    };
    for d in &ledger.discrepancies[..shown] {
        writeln!(out, "{d}").context("cannot write the report")?;
    }
    if shown < found {
        writeln!(
            out,
            "… and {} more discrepancies (--max-report 0 lists them all)",
            found - shown
        )
        .context("cannot write the report")?;
    }
    if !quiet {
        summary(&mut out, &what, &ledger.counts, found, started)
            .context("cannot write the report")?;
    }
    out.flush().context("cannot write the report")?;
    Ok(if found == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn summary(
    out: &mut impl Write,
    what: &str,
    c: &Counts,
    found: usize,
    started: Instant,
) -> std::io::Result<()> {
    writeln!(
        out,
        "toolcalls audit: {what} ({:.1} s)",
        started.elapsed().as_secs_f64()
    )?;
    writeln!(
        out,
        "  outputs:  {} records ({} ids, {} later revisions, {} identical copies), {} dead letters, {} pending calls",
        c.records, c.record_ids, c.revisions, c.identical_copies, c.dead_letters, c.pending_calls
    )?;
    if c.held_events > 0 {
        writeln!(
            out,
            "  held:     {} events in the reorder window (--max-disorder), counted as pending",
            c.held_events
        )?;
    }
    writeln!(
        out,
        "  inputs:   {} events: {} in records, {} dead-lettered, {} pending, {} repeats of a record's event, {} late for their record, {} turn events, {} bad lines",
        c.inputs, c.in_records, c.dead_lettered, c.pending, c.repeats, c.late, c.turn_events, c.bad_lines
    )?;
    if c.outside > 0 {
        writeln!(
            out,
            "  outside:  {} positions named by the outputs lie outside the audited inputs (other files or partitions, or past the ranges)",
            c.outside
        )?;
    }
    if found == 0 {
        writeln!(out, "  ok: every input is accounted for")
    } else {
        writeln!(out, "  {found} discrepancies")
    }
}
