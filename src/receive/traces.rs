//! `POST /v1/traces`: OTLP/HTTP trace exports, protobuf (`application/x-protobuf`) or JSON
//! (`application/json`), read by the otel adapter: every GenAI `execute_tool` span is one call.
//! Other spans are skipped. Answered with an `ExportTraceServiceResponse` in the request's
//! encoding; any other content type is 415. A gzip or deflate body comes here decompressed
//! ([`super::compression`]). A refusal of a protobuf request is a protobuf `google.rpc.Status`, as
//! OTLP/HTTP asks, so that the exporter can log why ([`protobuf_refusals`]).

use super::reply;
use super::state::Shared;
use super::{otlp, otlp_json, reading};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use prost::Message as _;
use std::sync::Arc;
use toolcalls_adapters::{parse, Format, Options};
use toolcalls_model::Event;

pub const ROUTE: &str = "traces";

#[derive(Clone, Copy, Debug)]
pub enum Encoding {
    Protobuf,
    Json,
}

pub async fn traces(
    State(s): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let encoding = match encoding(&headers) {
        Ok(e) => e,
        Err(why) => return reply::error(StatusCode::UNSUPPORTED_MEDIA_TYPE, why),
    };
    let body = match reply::body(&s, body) {
        Ok(b) => b,
        Err(r) => return r.into_response(),
    };
    let max_values = s.max_body_bytes / 16;
    let read = move |body: &[u8]| read(encoding, body, max_values);
    let (events, _turn) = match reading::events(&s.readers, body, read).await {
        Ok(read) => read,
        Err(unread) => return reply::unread(&s, unread),
    };
    if let Err(r) = reply::deliver(&s, ROUTE, &events).await {
        return r.into_response();
    }
    match encoding {
        Encoding::Protobuf => (
            [(header::CONTENT_TYPE, "application/x-protobuf")],
            ExportTraceServiceResponse::default().encode_to_vec(),
        )
            .into_response(),
        Encoding::Json => ([(header::CONTENT_TYPE, "application/json")], "{}").into_response(),
    }
}

/// The events of the `execute_tool` spans of an export request, or why it cannot be read; one of
/// more than `max_values` attribute values (protobuf), or JSON values in what the adapter reads
/// (JSON), is refused.
pub fn read(encoding: Encoding, body: &[u8], max_values: usize) -> Result<Vec<Event>, String> {
    let line = match encoding {
        Encoding::Protobuf => otlp::protobuf_to_json_line(body, max_values),
        Encoding::Json => otlp_json::json_to_json_line(body, max_values),
    }?;
    let parsed = parse(Format::Otel, REQUEST, &line, &Options::default());
    let mut problems: Vec<String> = parsed.errors.iter().map(ToString::to_string).collect();
    problems.extend(sessionless(&parsed.events));
    if !problems.is_empty() {
        return Err(reply::reasons(&problems));
    }
    Ok(parsed.events)
}

/// What the otel adapter names a request by, and the session it gives a span that names none.
const REQUEST: &str = "request";

/// The spans among `events` that name no session: no `gen_ai.conversation.id`, no `session.id`
/// and no trace id (which is also their turn). A file of spans is their session then; a request
/// has no name to stand in, and one it made up would put every client's spans in one session,
/// where they could take each other's results.
fn sessionless(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.turn.is_none() && e.session.as_str() == REQUEST)
        .filter_map(|e| match &e.body {
            toolcalls_model::EventBody::Announce(a) => Some(format!(
                "{REQUEST}: the `execute_tool` span of tool `{}` names no session: no `gen_ai.conversation.id`, `session.id` or trace id",
                a.tool
            )),
            _ => None,
        })
        .collect()
}

/// `google.rpc.Status`, the body OTLP/HTTP gives a refused protobuf request.
#[derive(Clone, PartialEq, prost::Message)]
struct Status {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// Every refusal (4xx, 5xx) of a protobuf request to this route, whichever layer made it (the
/// token, the body's limits, the handler), as a `google.rpc.Status` instead of the JSON
/// `{"error": …}` the other routes answer with; its status and headers kept.
pub async fn protobuf_refusals(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let protobuf = request.uri().path() == "/v1/traces"
        && matches!(
            media_type(request.headers()).as_str(),
            "application/x-protobuf" | "application/protobuf"
        );
    let response = next.run(request).await;
    let status = response.status();
    if !protobuf || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let message = serde_json::from_slice::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&text).into_owned());
    let body = Status {
        code: rpc_code(status),
        message,
    }
    .encode_to_vec();
    parts.headers.insert(
        header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/x-protobuf"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// The `google.rpc.Code` of an HTTP refusal, as gRPC's HTTP mapping pairs them.
fn rpc_code(status: StatusCode) -> i32 {
    match status.as_u16() {
        400 | 415 => 3,  // INVALID_ARGUMENT
        401 => 16,       // UNAUTHENTICATED
        403 => 7,        // PERMISSION_DENIED
        404 | 405 => 12, // UNIMPLEMENTED
        408 => 4,        // DEADLINE_EXCEEDED
        413 | 429 => 8,  // RESOURCE_EXHAUSTED
        503 => 14,       // UNAVAILABLE
        _ => 13,         // INTERNAL
    }
}

/// The media type of the request's `Content-Type`, lower case, without parameters.
fn media_type(headers: &HeaderMap) -> String {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    ct.split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The body's encoding from its headers, or why it is not one this route reads.
fn encoding(headers: &HeaderMap) -> Result<Encoding, String> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match media_type(headers).as_str() {
        "application/x-protobuf" | "application/protobuf" => Ok(Encoding::Protobuf),
        "application/json" => Ok(Encoding::Json),
        _ => Err(format!(
            "Content-Type `{ct}` is not an OTLP/HTTP encoding; send application/x-protobuf or application/json"
        )),
    }
}
