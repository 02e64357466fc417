//! The processor alone, the same as `toolcalls run`: a slim binary for images, and what the
//! integration tests start and SIGKILL.

use clap::Parser;

/// The allocator of the `toolcalls` binary (crates/cli/src/main.rs), so that the tests run the
/// processor as it is deployed.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Correlates AI-agent tool-call events from Kafka into ToolCall records.
#[derive(Parser)]
#[command(name = "toolcalls-processor", version)]
struct Cli {
    #[command(flatten)]
    run: toolcalls_kafka::RunArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let settings = cli.run.into_settings()?;
    toolcalls_kafka::logging::init(settings.log_format);
    toolcalls_kafka::run(settings).await
}
