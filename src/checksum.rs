//! `toolcalls checksum`: the ADK checksum of a call, for producers checking their own.

use anyhow::Context;
use std::io::Write;
use std::process::ExitCode;
use toolcalls_model::checksum;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Tool name
    tool: String,
    /// Arguments as JSON, as a v1 event's `args` holds them (a JSON string is hashed as a string);
    /// with --encoded, the JSON text of OpenAI's `arguments` instead; omit for ADK's `undefined`
    /// arguments (an announce without `args` gets no checksum from the correlator: unknown
    /// arguments, docs/ARCHITECTURE.md)
    args: Option<String>,
    /// ARGS is the text of encoded arguments (OpenAI `function.arguments`, Codex
    /// `function_call`, OTel `gen_ai.tool.call.arguments`): hash the value it holds, as the
    /// openai, codex and otel adapters do
    #[arg(long, requires = "args")]
    encoded: bool,
    /// Also print the canonical text that is hashed
    #[arg(long)]
    canonical: bool,
}

pub fn main(args: Args) -> anyhow::Result<ExitCode> {
    let (canonical, sum) = match (&args.args, args.encoded) {
        (Some(text), true) => (
            checksum::encoded_checksum_input(&args.tool, text),
            checksum::checksum_of_encoded(&args.tool, text),
        ),
        (text, _) => {
            let json = text
                .as_deref()
                .map(toolcalls_model::Json::parse)
                .transpose()
                .context("ARGS is not JSON; quote it for the shell, e.g. '{\"path\":\"/a\"}'")?;
            (
                checksum::json_checksum_input(&args.tool, json.as_ref()),
                checksum::checksum_of_json(&args.tool, json.as_ref()),
            )
        }
    };
    let mut out = std::io::stdout().lock();
    if args.canonical {
        writeln!(out, "{canonical}").context("cannot write the checksum")?;
    }
    writeln!(out, "{sum}").context("cannot write the checksum")?;
    out.flush().context("cannot write the checksum")?;
    Ok(ExitCode::SUCCESS)
}
