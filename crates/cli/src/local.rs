//! `toolcalls local`: the embedded mode.
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn main(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
