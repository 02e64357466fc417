//! The processor alone, the same as `toolcalls run`: a slim binary for images, and what the
//! integration tests start and SIGKILL.

use clap::Parser;

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
