//! Log setup: text or JSON lines through tracing, filtered by `RUST_LOG` (default `info`).

use crate::config::LogFormat;
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber; a second call is a no-op.
pub fn init(format: LogFormat) {
    // rdkafka's consumer drop repeats the close the consumer thread already did and logs its
    // refusal as an error; nothing else is logged there.
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,rdkafka::consumer::base_consumer=off"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
