//! HTTP: `/metrics`, `/healthz` and `/readyz` on the operations listener; the query API on a
//! listener of its own, off unless asked for, behind a bearer token when one is set (it answers
//! with tool inputs and results).
//!
//! The query API reads the partition stores without locks on the hot path: a
//! [`DashMap`] indexes the live partition tasks (the coordinator is its only
//! writer), and a query is a message to each task, answered between two chunks of input.

use crate::ownership::{Member, Ownership};
use crate::partition::{PartitionMsg, Query};
use crate::secret::Secret;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use dashmap::{DashMap, DashSet};
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
    /// Partitions assigned here and being restored from the changelog: their calls are not
    /// known yet.
    pub restoring: DashSet<i32>,
    /// The consumer is in the group: it received an assignment and has not lost it since.
    pub joined: AtomicBool,
    /// The coordinator's commits and aborts under way.
    pub waits: crate::waits::Waits,
    /// How long a commit or abort may wait before the processor is not ready: the Kafka timeout.
    pub stall_after: Duration,
    /// Every assigned partition is restored and the consumer is running.
    pub ready: AtomicBool,
    /// The coordinator loop is alive.
    pub alive: AtomicBool,
    /// Where sessions are: their partitions and the partitions' owners.
    pub ownership: Ownership,
}

const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// `/metrics`, `/healthz`, `/readyz`.
pub(crate) fn ops_router(state: Arc<HttpState>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// The query API; with `token`, every request must carry `Authorization: Bearer <token>`.
pub(crate) fn api_router(state: Arc<HttpState>, token: Option<Secret>) -> Router {
    let router = Router::new()
        .route("/v1/tool-calls/{id}", get(tool_call))
        .route("/v1/sessions/{session}/pending", get(session_pending))
        .route("/v1/sessions/{session}/calls/{call_id}", get(session_call))
        .route("/v1/sessions/{session}/owner", get(session_owner))
        .fallback(no_such_route)
        .method_not_allowed_fallback(only_get)
        .with_state(state);
    match token {
        Some(token) => router.layer(axum::middleware::from_fn_with_state(
            Arc::new(token),
            authorize,
        )),
        None => router,
    }
}

/// A path the API does not have, answered as its other errors are: JSON.
async fn no_such_route(uri: axum::http::Uri) -> Response {
    error(
        StatusCode::NOT_FOUND,
        format!(
            "no route {}; the API has /v1/tool-calls/{{id}}, /v1/sessions/{{session}}/pending, /v1/sessions/{{session}}/calls/{{call_id}}?source=… and /v1/sessions/{{session}}/owner",
            uri.path()
        ),
    )
}

/// A method other than GET on one of the API's routes.
async fn only_get(method: axum::http::Method) -> Response {
    let mut answer = error(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("the query API answers GET only, not {method}"),
    );
    answer
        .headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static("GET"));
    answer
}

/// Lets a request through only with the bearer token.
async fn authorize(
    State(token): State<Arc<Secret>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if token.is_bearer_in(request.headers()) {
        return next.run(request).await;
    }
    let mut response = error(
        StatusCode::UNAUTHORIZED,
        "the query API needs `Authorization: Bearer <token>` with the token the processor was given (--api-token)".into(),
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
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
    let why = if !s.alive.load(Ordering::Acquire) {
        "not ready: the processor has stopped (the log says why)\n".to_owned()
    } else if let Some(waited) = s.waits.stalled(s.stall_after) {
        format!(
            "not ready: a commit or abort has waited {} s on the brokers (is a broker hung?)\n",
            waited.as_secs()
        )
    } else if s.ready.load(Ordering::Acquire) && s.joined.load(Ordering::Acquire) {
        return (StatusCode::OK, "ready\n").into_response();
    } else if !s.ownership.topics_checked() {
        "not ready: waiting for the brokers and the topics (the log says which brokers cannot be reached or which topics are missing)\n".to_owned()
    } else {
        "not ready: joining the consumer group, or restoring assigned partitions from the changelog\n".to_owned()
    };
    (StatusCode::SERVICE_UNAVAILABLE, why).into_response()
}

/// Why this instance cannot yet say that a call is not pending here (of `partition`, or of any
/// partition): the topics not checked, the group not joined (or its partitions lost), the
/// partition (or some partition) being restored from the changelog.
fn unsettled(s: &HttpState, partition: Option<i32>) -> Option<String> {
    if !s.ownership.topics_checked() {
        return Some("the input topics have not been checked yet".into());
    }
    if !s.joined.load(Ordering::Acquire) {
        return Some("this instance is joining the consumer group".into());
    }
    let restoring: Vec<i32> = match partition {
        Some(p) => s.restoring.contains(&p).then_some(p).into_iter().collect(),
        None => s.restoring.iter().map(|p| *p).collect(),
    };
    (!restoring.is_empty())
        .then(|| format!("partitions {restoring:?} are being restored from the changelog here"))
}

/// `503` saying why this instance cannot answer yet ([`unsettled`]).
fn not_yet(s: &HttpState, partition: Option<i32>) -> Response {
    let why = unsettled(s, partition).unwrap_or_else(|| "this instance is starting".into());
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("{why}; ask again once /readyz answers 200"),
    )
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

/// What a path or query string the API cannot read gets: the rejection's status and text, as
/// JSON like every other error of the API.
macro_rules! read_or_answer {
    ($extracted:expr) => {
        match $extracted {
            Ok(value) => value,
            Err(rejection) => return error(rejection.status(), rejection.body_text()),
        }
    };
}

async fn tool_call(
    State(s): State<Arc<HttpState>>,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let Path(id) = read_or_answer!(path);
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
        None if unsettled(&s, None).is_some() => not_yet(&s, None),
        None => error(
            StatusCode::NOT_FOUND,
            format!("no pending call {id} on this instance; finished calls are on the records topic, and other instances own other partitions"),
        ),
    }
}

/// Which call: its source (required: ids are unique per source) and, for frameworks with
/// threads, its thread.
#[derive(serde::Deserialize)]
struct CallScope {
    source: Option<String>,
    thread: Option<String>,
}

/// A pending call by the ids the agent knows it by: `(source, session, thread, call id)` is
/// the record id ([`RecordId::derive`]).
async fn session_call(
    State(s): State<Arc<HttpState>>,
    path: Result<Path<(String, String)>, PathRejection>,
    query: Result<axum::extract::Query<CallScope>, QueryRejection>,
) -> Response {
    let Path((session, call_id)) = read_or_answer!(path);
    let axum::extract::Query(scope) = read_or_answer!(query);
    let Some(source) = scope.source.filter(|s| !s.is_empty()) else {
        return error(
            StatusCode::BAD_REQUEST,
            "name the call's source: ?source=claude-code (call ids are unique per source and session)".into(),
        );
    };
    // An empty `thread=` is no thread, as an empty `source=` is no source.
    let thread = scope
        .thread
        .filter(|t| !t.is_empty())
        .map(toolcalls_model::ThreadId::from);
    let id = RecordId::derive(
        &toolcalls_model::Source::from(source),
        &SessionId::from(session.as_str()),
        thread.as_ref(),
        &call_id,
    );
    let found: Vec<Option<ToolCallRecord>> = ask_all(&s, |tx| Query::Get(id, tx)).await;
    if let Some(record) = found.into_iter().flatten().next() {
        return Json(record).into_response();
    }
    if let Some(elsewhere) = misdirected(&s, session.as_str()).await {
        return elsewhere;
    }
    error(
        StatusCode::NOT_FOUND,
        format!("no pending call {call_id} (record {id}): finished calls are on the records topic"),
    )
}

async fn session_pending(
    State(s): State<Arc<HttpState>>,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let Path(session) = read_or_answer!(path);
    let session = SessionId::from(session);
    let answers: Vec<Vec<ToolCallRecord>> =
        ask_all(&s, |tx| Query::Session(session.clone(), tx)).await;
    let mut pending: Vec<ToolCallRecord> = answers.into_iter().flatten().collect();
    // Nothing here: "nothing pending" only if this instance owns the session's partition.
    if pending.is_empty() {
        if let Some(elsewhere) = misdirected(&s, session.as_str()).await {
            return elsewhere;
        }
    }
    pending.sort_by_key(|r| r.created_at);
    Json(SessionPending {
        session: session.as_str(),
        pending: &pending,
    })
    .into_response()
}

/// The answer of `/v1/sessions/{session}/pending`. Written as a type, not through a
/// `serde_json::Value`: a record's arguments and results are its text as the agent sent it,
/// which a `Value` would rewrite (keys sorted, numbers through `f64`) or refuse (`1e400`, a lone
/// surrogate, nesting past 128 levels).
#[derive(serde::Serialize)]
struct SessionPending<'a> {
    session: &'a str,
    pending: &'a [ToolCallRecord],
}

/// Where a session is: its partition, whether this instance owns it, and which instance does.
async fn session_owner(
    State(s): State<Arc<HttpState>>,
    path: Result<Path<String>, PathRejection>,
) -> Response {
    let Path(session) = read_or_answer!(path);
    let Some((partition, partitions)) = s.ownership.partition_of(&session) else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the input topics have not been checked yet; ask again once /readyz answers 200".into(),
        );
    };
    let here = s.partitions.contains_key(&partition);
    let (owner, lookup_error) = owner_of(&s, partition, here).await;
    Json(json!({
        "session": session,
        "partition": partition,
        "partitions": partitions,
        "here": here,
        "instanceId": s.ownership.instance_id,
        "owner": owner,
        "ownerUnknownBecause": lookup_error,
    }))
    .into_response()
}

/// The owner of `partition`: this instance when it owns it, else from the group's description.
async fn owner_of(s: &HttpState, partition: i32, here: bool) -> (Option<Member>, Option<String>) {
    if here {
        let id = s.ownership.instance_id.clone();
        return (
            Some(Member {
                client_id: format!("toolcalls-{id}-consumer"),
                instance_id: Some(id),
                host: String::new(),
            }),
            None,
        );
    }
    match s.ownership.owner(partition, QUERY_TIMEOUT).await {
        Ok(Some(m)) => (Some(m), None),
        Ok(None) => (
            None,
            Some("no member of the group holds the partition (a rebalance?)".into()),
        ),
        Err(e) => (None, Some(e)),
    }
}

/// `421 Misdirected Request` naming the owner, when `session`'s partition is not this
/// instance's; `503` while this instance cannot tell (the topics not checked, the group not
/// joined, the partition being restored here); `None` when it is this instance's to answer.
async fn misdirected(s: &HttpState, session: &str) -> Option<Response> {
    let Some((partition, _)) = s.ownership.partition_of(session) else {
        return Some(not_yet(s, None));
    };
    if s.partitions.contains_key(&partition) {
        return None;
    }
    if unsettled(s, Some(partition)).is_some() {
        return Some(not_yet(s, Some(partition)));
    }
    let (owner, why) = owner_of(s, partition, false).await;
    let whom = match owner.as_ref().and_then(|m| m.instance_id.as_deref()) {
        Some(id) => format!("instance {id}"),
        None => "another instance".to_owned(),
    };
    let message = format!(
        "session {session} is on partition {partition}, which {whom} owns, not this one ({}): ask it (GET /v1/sessions/{{session}}/owner says which)",
        s.ownership.instance_id
    );
    Some(
        (
            StatusCode::MISDIRECTED_REQUEST,
            Json(json!({
                "error": message,
                "partition": partition,
                "owner": owner,
                "ownerUnknownBecause": why,
            })),
        )
            .into_response(),
    )
}
