//! HTTP: `/metrics`, `/healthz`, `/readyz` and the query API.
//!
//! The query API reads the partition stores without locks on the hot path: a
//! [`DashMap`](dashmap::DashMap) indexes the live partition tasks (the coordinator is its only
//! writer), and a query is a message to each task, answered between two chunks of input.

use crate::partition::{PartitionMsg, Query};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use dashmap::DashMap;
use prometheus::{Encoder, Registry, TextEncoder};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use toolcalls_model::{RecordId, SessionId, ToolCallRecord};

/// What the HTTP side shares with the coordinator.
pub(crate) struct HttpState {
    pub registry: Registry,
    /// Live partition tasks by partition number.
    pub partitions: DashMap<i32, mpsc::UnboundedSender<PartitionMsg>>,
    /// Every assigned partition is restored and the consumer is running.
    pub ready: AtomicBool,
    /// The coordinator loop is alive.
    pub alive: AtomicBool,
}

const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) fn router(state: Arc<HttpState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/v1/tool-calls/{id}", get(tool_call))
        .route("/v1/sessions/{session}/pending", get(session_pending))
        .with_state(state)
}

async fn metrics(State(s): State<Arc<HttpState>>) -> Response {
    let mut buf = Vec::new();
    match TextEncoder::new().encode(&s.registry.gather(), &mut buf) {
        Ok(()) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], buf).into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("encoding metrics failed: {e}"),
        )
            .into_response(),
    }
}

async fn healthz(State(s): State<Arc<HttpState>>) -> Response {
    if s.alive.load(Ordering::Acquire) {
        (StatusCode::OK, "ok\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "stopped\n").into_response()
    }
}

async fn readyz(State(s): State<Arc<HttpState>>) -> Response {
    if s.ready.load(Ordering::Acquire) && s.alive.load(Ordering::Acquire) {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: partitions are being restored or the consumer is not running\n",
        )
            .into_response()
    }
}

fn error(status: StatusCode, message: String) -> Response {
    (status, Json(json!({ "error": message }))).into_response()
}

/// Sends a query to every live partition and gathers the answers.
async fn ask_all<T: Send + 'static>(
    s: &HttpState,
    make: impl Fn(oneshot::Sender<T>) -> Query,
) -> Vec<T> {
    let mut waiting = Vec::new();
    for entry in s.partitions.iter() {
        let (tx, rx) = oneshot::channel();
        if entry.value().send(PartitionMsg::Query(make(tx))).is_ok() {
            waiting.push(rx);
        }
    }
    let mut answers = Vec::new();
    for rx in waiting {
        if let Ok(Ok(a)) = tokio::time::timeout(QUERY_TIMEOUT, rx).await {
            answers.push(a);
        }
    }
    answers
}

async fn tool_call(State(s): State<Arc<HttpState>>, Path(id): Path<String>) -> Response {
    let Ok(id) = RecordId::parse(&id) else {
        return error(
            StatusCode::BAD_REQUEST,
            format!(
                "`{}` is not a record id (a UUID)",
                id.chars().take(64).collect::<String>()
            ),
        );
    };
    let found: Vec<Option<ToolCallRecord>> = ask_all(&s, |tx| Query::Get(id, tx)).await;
    match found.into_iter().flatten().next() {
        Some(record) => Json(record).into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            format!("no pending call {id} on this instance; finished calls are on the records topic, and other instances own other partitions"),
        ),
    }
}

async fn session_pending(State(s): State<Arc<HttpState>>, Path(session): Path<String>) -> Response {
    let session = SessionId::from(session);
    let answers: Vec<Vec<ToolCallRecord>> =
        ask_all(&s, |tx| Query::Session(session.clone(), tx)).await;
    let mut pending: Vec<ToolCallRecord> = answers.into_iter().flatten().collect();
    pending.sort_by_key(|r| r.created_at);
    Json(json!({ "session": session.as_str(), "pending": pending })).into_response()
}
