//! `toolcalls`: turns AI-agent tool-call traffic into a ledger of ToolCall records.

mod audit;
mod checksum;
mod each_file_once;
mod encoding;
mod follow;
/// The fuzz harness the workspace's fuzz tests share, for the in-process ones here.
#[cfg(test)]
#[path = "../crates/model/tests/support/fuzz.rs"]
mod fuzz_support;
mod ingest;
mod input_format;
mod left_out;
mod local;
mod output_path;
mod publish_args;
mod receive;
mod run;
mod say;
mod topics;

use crate::say::say;
use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// mimalloc rather than the system allocator: the processor allocates and frees small objects
/// on several threads at once, where glibc's arenas cost about a fifth of its CPU
/// (benches/processor/README.md). Built with `override` (librdkafka's allocations go to it too)
/// and without transparent huge pages (see the workspace Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(name = "toolcalls", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the processor: a Kafka consumer group that turns announce and completion topics into
    /// ToolCall records, exactly once (see docs/OPERATIONS.md).
    // Boxed: the processor's options are several times the size of any other command's.
    Run(Box<run::Args>),
    /// Correlate v1 events (or a native format) from files or stdin into ToolCall records, no
    /// broker: the embedded mode.
    Local(local::Args),
    /// Turn native agent files (Claude Code, Codex, Gemini, OpenAI, …) into v1 events.
    Ingest(ingest::Args),
    /// Receive Claude Code hook payloads, OTLP traces and v1 events over HTTP and publish them
    /// (see docs/OPERATIONS.md, "Receiving over HTTP").
    Receive(receive::Args),
    /// Create or check the processor's topics.
    Topics(topics::Args),
    /// Print the ADK checksum, sha256 of the canonical {tool, args}, of one call.
    Checksum(checksum::Args),
    /// Reconcile inputs against outputs: every input event in exactly one record,
    /// dead-lettered, still pending, or a repeat of a record's event; lists every discrepancy
    /// and exits 1 on any (see docs/OPERATIONS.md, "Auditing the ledger").
    Audit(audit::Args),
}

fn main() -> ExitCode {
    // Flags, then environment variables, then the `--config` file, then defaults.
    let (cli, file) = toolcalls_settings::parse::<Cli>();
    let result = match cli.command {
        Command::Run(args) => run::main(*args, &file),
        Command::Local(args) => local::main(args, &file),
        Command::Ingest(args) => ingest::main(args, &file),
        Command::Receive(args) => receive::main(args, &file),
        Command::Topics(args) => topics::main(args, &file),
        Command::Checksum(args) => checksum::main(args),
        Command::Audit(args) => audit::main(args, &file),
    };
    match result {
        Ok(code) => code,
        Err(e) if reader_went_away(&e) => ExitCode::from(READER_WENT_AWAY),
        Err(e) => {
            say!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// The exit code when the reader of the output closed it (`toolcalls local … | head`): 128 +
/// SIGPIPE, what a shell reports for a program the signal killed. Rust ignores SIGPIPE, so the
/// write fails instead; stopping quietly with that code, as `cat` or `git log` would end, keeps
/// `set -o pipefail` able to tell that the output was cut short without a message for a reader
/// that left on purpose.
const READER_WENT_AWAY: u8 = 141;

/// Whether `e` is a write to a pipe or socket whose reader has gone (EPIPE).
fn reader_went_away(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every option of every command but `checksum` is a setting: a `TOOLCALLS_*` variable of its
    /// own and a config-file key shown in its help.
    #[test]
    fn every_option_is_a_setting() {
        toolcalls_settings::command::<Cli>().debug_assert();
        fn leaves(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
            let path = format!("{path} {}", cmd.get_name());
            if cmd.has_subcommands() {
                cmd.get_subcommands().for_each(|s| leaves(s, &path, out));
            } else {
                out.push((path, cmd.clone()));
            }
        }
        let mut commands = Vec::new();
        leaves(&toolcalls_settings::command::<Cli>(), "", &mut commands);
        assert_eq!(
            commands.len(),
            8,
            "run, local, ingest, receive, topics create/check, checksum, audit"
        );
        for (name, cmd) in commands.iter().filter(|(n, _)| !n.ends_with("checksum")) {
            let mut vars = std::collections::BTreeSet::new();
            for arg in cmd
                .get_arguments()
                .filter(|a| !a.is_positional() && !a.is_hide_set())
            {
                let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
                let var = arg.get_env().and_then(|v| v.to_str()).unwrap_or_default();
                assert!(
                    var.starts_with("TOOLCALLS_"),
                    "{name} --{:?}: {var}",
                    arg.get_long()
                );
                assert!(vars.insert(var.to_owned()), "{name}: {var} twice");
                if arg.get_id() != toolcalls_settings::CONFIG {
                    assert!(
                        help.contains("[config: "),
                        "{name} {:?}: {help}",
                        arg.get_long()
                    );
                }
            }
            assert!(vars.contains("TOOLCALLS_CONFIG"), "{name} has --config");
        }
    }

    #[test]
    fn one_config_file_serves_every_command() {
        let dir = std::env::temp_dir().join(format!("toolcalls-main-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("all.toml");
        std::fs::write(
            &path,
            concat!(
                "group = \"ledger\"\npartitions = 3\n",
                "[topics]\nannounce = \"a\"\ncompletion = \"c\"\n",
                "[kafka]\n\"client.id\" = \"file\"\n\"linger.ms\" = 5\n",
                "[core]\ncall_timeout = \"1s\"\n",
                "[local]\nat_end = \"keep\"\n",
                "[ingest]\ndrop_ids = true\n",
            ),
        )
        .unwrap();
        let c = path.to_str().unwrap();
        let (cli, file) = toolcalls_settings::try_parse_from::<Cli, _, _>([
            "toolcalls",
            "run",
            "-c",
            c,
            "--kafka",
            "client.id=flag",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("parsed another command")
        };
        let s = args.run.into_settings(&file).unwrap();
        assert_eq!(
            (
                s.group.as_str(),
                s.topics.announce.as_str(),
                s.core.call_timeout_ms
            ),
            ("ledger", "a", 1000)
        );
        assert_eq!(
            s.kafka,
            [
                ("client.id", "file"),
                ("linger.ms", "5"),
                ("client.id", "flag")
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned())),
            "the file's [kafka] first, then the flags"
        );
        for argv in [&["local"][..], &["ingest", "x.json"], &["topics", "check"]] {
            let argv = [&["toolcalls"][..], argv, &["-c", c]].concat();
            assert!(
                toolcalls_settings::try_parse_from::<Cli, _, _>(&argv).is_ok(),
                "{argv:?}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
