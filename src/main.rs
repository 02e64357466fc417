//! `toolcalls`: turns AI-agent tool-call traffic into a ledger of ToolCall records.

mod checksum;
mod ingest;
mod local;
mod run;
mod settings;
mod topics;

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
    Run(run::Args),
    /// Correlate v1 events (or a native format) from files or stdin into ToolCall records, no
    /// broker: the embedded mode.
    Local(local::Args),
    /// Turn native agent files (Claude Code, Codex, Gemini, OpenAI, …) into v1 events.
    Ingest(ingest::Args),
    /// Create or check the processor's topics.
    Topics(topics::Args),
    /// Print the ADK checksum, sha256 of the canonical {tool, args}, of one call.
    Checksum(checksum::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(args) => run::main(args),
        Command::Local(args) => local::main(args),
        Command::Ingest(args) => ingest::main(args),
        Command::Topics(args) => topics::main(args),
        Command::Checksum(args) => checksum::main(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
