//! Log setup: text or JSON lines through tracing, filtered by `RUST_LOG` (default `info`).
//!
//! Text lines are coloured only when stderr is a terminal (and `NO_COLOR` is not set): a log
//! redirected to a file or collected by a container runtime gets no escape codes.

use crate::config::LogFormat;
use std::io::IsTerminal;
use tracing_subscriber::filter::{filter_fn, EnvFilter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

/// Where rdkafka logs that dropping a consumer could not close it. The consumer thread closes the
/// group consumer on the way out, and rdkafka's drop then closes it again and logs the refusal
/// (`Failed to close consumer queue on drop: … BrokerDestroy`) as an error; it is the only error
/// logged there, so it is dropped whatever `RUST_LOG` says.
const CONSUMER_DROP_TARGET: &str = "rdkafka::consumer::base_consumer";

/// Whether an event is the refusal above.
fn is_drop_refusal(meta: &tracing::Metadata<'_>) -> bool {
    *meta.level() == tracing::Level::ERROR && meta.target() == CONSUMER_DROP_TARGET
}

/// Whether text logs are coloured: stderr is a terminal and `NO_COLOR` is not set.
pub fn colours() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Installs the global subscriber, at `info` unless `RUST_LOG` says otherwise; a second call is
/// a no-op.
pub fn init(format: LogFormat) {
    init_at(format, "info");
}

/// [`init`] with another level (or filter directive) when `RUST_LOG` is not set.
pub fn init_at(format: LogFormat, default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        // A stderr that went away (a log collector's pipe closed) loses the lines, not the
        // process.
        .log_internal_errors(false);
    let fmt = match format {
        LogFormat::Text => fmt.with_ansi(colours()).boxed(),
        LogFormat::Json => fmt.json().flatten_event(true).boxed(),
    };
    let _ = tracing_subscriber::registry()
        .with(
            fmt.with_filter(filter)
                .with_filter(filter_fn(|meta| !is_drop_refusal(meta))),
        )
        .try_init();
}
