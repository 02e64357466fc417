//! `toolcalls`: turns AI-agent tool-call traffic into a ledger of ToolCall records.

mod checksum;
mod local;
mod settings;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "toolcalls", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Correlate v1 events from files or stdin into ToolCall records, no broker (the embedded mode).
    Local(local::Args),
    /// Print the ADK checksum, sha256 of the canonical {tool, args}, of one call.
    Checksum(checksum::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Local(args) => local::main(args),
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
