//! `toolcalls receive`: an HTTP server that agents push to — Claude Code hook payloads, OTLP/HTTP
//! traces of OpenTelemetry GenAI spans, v1 events as JSON lines — publishing what they send onto
//! the processor's input topics, keyed by session as `toolcalls ingest` publishes.
//!
//! A request is answered 2xx only once the brokers acknowledged every event it gave; 400 (with
//! the reason) when any part of it cannot be read, and then nothing of it is published; 413 over
//! `--max-body-bytes` or for an event larger than a Kafka message may be (nothing published
//! either); 401 without the token when `--token` is set; 503 when the brokers did not
//! acknowledge within the delivery timeout (the client retries; the processor drops repeats).
//! docs/OPERATIONS.md, "Receiving over HTTP", is the user's account.
//!
//! - [`opts`]: the options; [`server`]: the listeners and the graceful stop;
//! - [`hooks`], [`traces`] (with [`otlp`], protobuf to OTLP JSON, and [`otlp_json`], JSON bodies
//!   pared to what the adapter reads), [`events`]: one route each;
//! - [`reading`]: large bodies read in turns; [`reply`]: the answers they share; [`deliver`]: the producer that waits for each request's
//!   acknowledgements; [`auth`]: the token; [`compression`]: gzip and deflate bodies;
//!   [`metrics`]: the counters.

mod auth;
mod compression;
mod deliver;
mod events;
#[cfg(test)]
mod fuzz;
mod hooks;
mod metrics;
mod opts;
mod otlp;
mod otlp_json;
mod reading;
mod reply;
mod server;
mod stamps;
mod state;
mod traces;

pub use opts::Args;

use anyhow::Context as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use toolcalls_settings::ConfigFile;

pub fn main(args: Args, file: &ConfigFile) -> anyhow::Result<ExitCode> {
    let o = &args.opts;
    o.check()?;
    let redaction = args.redact.clone().with_file(file).resolve();
    let redaction = redaction.map_err(anyhow::Error::msg)?;
    toolcalls_processor::logging::init(o.log_format);
    let listener = std::net::TcpListener::bind(o.listen).with_context(|| {
        format!(
            "cannot listen on {}; is another receiver running there? (--listen)",
            o.listen
        )
    })?;
    let metrics_listener = o
        .metrics_addr
        .map(|addr| {
            std::net::TcpListener::bind(addr)
                .with_context(|| format!("cannot listen on {addr} (--metrics-addr)"))
        })
        .transpose()?;
    let delivery_timeout = o.delivery_timeout.0;
    let deliverer = deliver::Deliverer::connect(args.publish.settings(file, delivery_timeout))?;
    let shared = Arc::new(state::Shared {
        deliverer,
        metrics: Arc::new(metrics::Metrics::new()),
        max_body_bytes: o.max_body_bytes,
        redaction,
        readers: Arc::new(tokio::sync::Semaphore::new(o.max_reads)),
        stamps: stamps::Stamps::default(),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    // Requests in flight wait at most the delivery timeout for their acknowledgements; a few
    // seconds more for a slow client to send the rest of its body.
    let grace = delivery_timeout + Duration::from_secs(5);
    let bounds = toolcalls_processor::listener::Bounds {
        max_connections: o.max_connections,
        read_timeout: o.read_timeout.0,
    };
    runtime.block_on(server::serve(
        shared,
        o.token.clone(),
        (listener, metrics_listener),
        bounds,
        grace,
    ))?;
    Ok(ExitCode::SUCCESS)
}
