//! `toolcalls checksum`: the ADK checksum of a call, for producers checking their own.

use anyhow::Context;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Tool name
    tool: String,
    /// Arguments as JSON (an object, or a JSON string holding JSON as OpenAI sends it); omit for none
    args: Option<String>,
    /// Also print the canonical text that is hashed
    #[arg(long)]
    canonical: bool,
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let value: Option<serde_json::Value> = args
        .args
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
        .context("ARGS is not JSON; quote it for the shell, e.g. '{\"path\":\"/a\"}'")?;
    if args.canonical {
        println!(
            "{}",
            toolcalls_model::checksum::checksum_input(&args.tool, value.as_ref())
        );
    }
    println!(
        "{}",
        toolcalls_model::checksum_of(&args.tool, value.as_ref())
    );
    Ok(ExitCode::SUCCESS)
}
