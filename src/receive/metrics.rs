//! The receiver's counters, and the listener that shows them (`--metrics-addr`: /metrics and
//! /healthz, no token, as the processor's operations listener).

use axum::extract::{MatchedPath, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use prometheus::{Encoder, IntCounterVec, Opts, Registry, TextEncoder};
use std::sync::Arc;

/// The route labels of the receiving listener.
const ROUTES: [&str; 3] = ["hooks/claude-code", "traces", "events"];

/// The answers deploy/alerts.yml watches: payloads refused (400, 408, 413, 415), clients without
/// the token (401), deliveries that failed (503).
const ALERTED_STATUSES: [&str; 6] = ["400", "401", "408", "413", "415", "503"];

pub struct Metrics {
    registry: Registry,
    requests: IntCounterVec,
    events: IntCounterVec,
    redacted: IntCounterVec,
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let requests = IntCounterVec::new(
            Opts::new(
                "toolcalls_receive_requests_total",
                "Requests answered, by route and HTTP status",
            ),
            &["route", "status"],
        )
        .expect("a valid metric");
        let events = IntCounterVec::new(
            Opts::new(
                "toolcalls_receive_events_total",
                "Events published and acknowledged by the brokers, by route",
            ),
            &["route"],
        )
        .expect("a valid metric");
        let redacted = IntCounterVec::new(
            Opts::new(
                "toolcalls_receive_events_redacted_total",
                "Events the redaction rules changed before they were published, by route",
            ),
            &["route"],
        )
        .expect("a valid metric");
        for m in [&requests, &events, &redacted] {
            registry
                .register(Box::new(m.clone()))
                .expect("registered once");
        }
        // The series the alerts watch exist from the start, at 0, so that `increase()` sees the
        // first refusal (a series born at 1 shows no increase).
        for route in ROUTES {
            for status in ALERTED_STATUSES {
                requests.with_label_values(&[route, status]);
            }
            events.with_label_values(&[route]);
            redacted.with_label_values(&[route]);
        }
        Metrics {
            registry,
            requests,
            events,
            redacted,
        }
    }

    pub fn events(&self, route: &str, n: usize) {
        self.events.with_label_values(&[route]).inc_by(n as u64);
    }

    pub fn redacted(&self, route: &str, n: usize) {
        self.redacted.with_label_values(&[route]).inc_by(n as u64);
    }

    fn request(&self, route: &str, status: StatusCode) {
        self.requests
            .with_label_values(&[route, status.as_str()])
            .inc();
    }

    fn render(&self) -> Response {
        let mut buf = Vec::new();
        match TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            Ok(()) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], buf).into_response(),
            Err(e) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("encoding metrics failed: {e}"),
            )
                .into_response(),
        }
    }
}

/// The route label of a path: `/v1/hooks/claude-code` → `hooks/claude-code`.
pub fn route_label(path: &str) -> &str {
    path.strip_prefix("/v1/").unwrap_or(path)
}

/// Counts every answer of the routes it wraps (401s and 413s included).
pub async fn count(
    State(metrics): State<Arc<Metrics>>,
    path: Option<MatchedPath>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let response = next.run(request).await;
    if let Some(path) = path {
        metrics.request(route_label(path.as_str()), response.status());
    }
    response
}

/// `/metrics` and `/healthz`.
pub fn router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(m): State<Arc<Metrics>>| async move { m.render() }),
        )
        .route("/healthz", get(|| async { "ok\n" }))
        .with_state(metrics)
}
