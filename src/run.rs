//! `toolcalls run`: the processor (a Kafka consumer group), until SIGTERM or SIGINT.
//!
//! Every flag has a `TOOLCALLS_*` environment variable and a key in the TOML file given with
//! `--config` (`toolcalls_settings`); `--kafka key=value` passes librdkafka properties (TLS, SASL,
//! tuning). See docs/OPERATIONS.md for every setting, metric and guarantee.

use anyhow::Context;
use std::process::ExitCode;
use toolcalls_settings::ConfigFile;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub run: toolcalls_processor::RunArgs,
}

pub fn main(args: Args, file: &ConfigFile) -> anyhow::Result<ExitCode> {
    let settings = args
        .run
        .into_settings(file)
        .context("reading the settings")?;
    toolcalls_processor::logging::init(settings.log_format);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("toolcalls")
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(toolcalls_processor::run(settings));
    // A blocking call still under way (a metadata request to brokers that do not answer, while
    // the processor was waiting for them) must not hold the exit up.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    result?;
    Ok(ExitCode::SUCCESS)
}
