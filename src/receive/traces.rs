//! `POST /v1/traces`: OTLP/HTTP trace exports, protobuf (`application/x-protobuf`) or JSON
//! (`application/json`), read by the otel adapter: every GenAI `execute_tool` span is one call.
//! Other spans are skipped. Answered with an `ExportTraceServiceResponse` in the request's
//! encoding; any other content type is 415, compressed bodies too (set the exporter's
//! compression to none).

use super::otlp;
use super::reply;
use super::state::Shared;
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
    let events = match read(encoding, &body) {
        Ok(events) => events,
        Err(why) => return reply::bad(why),
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

/// The events of the `execute_tool` spans of an export request, or why it cannot be read.
pub fn read(encoding: Encoding, body: &[u8]) -> Result<Vec<Event>, String> {
    let line = match encoding {
        Encoding::Protobuf => otlp::protobuf_to_json_line(body),
        Encoding::Json => otlp::json_to_json_line(body),
    }?;
    let parsed = parse(Format::Otel, "request", &line, &Options::default());
    if !parsed.errors.is_empty() {
        let problems: Vec<String> = parsed.errors.iter().map(ToString::to_string).collect();
        return Err(reply::reasons(&problems));
    }
    Ok(parsed.events)
}

/// The body's encoding from its headers, or why it is not one this route reads.
fn encoding(headers: &HeaderMap) -> Result<Encoding, String> {
    if let Some(ce) = headers.get(header::CONTENT_ENCODING) {
        let ce = ce.to_str().unwrap_or("?").trim();
        if !ce.eq_ignore_ascii_case("identity") {
            return Err(format!("Content-Encoding `{ce}` is not supported; send the body uncompressed (the exporter's compression: none)"));
        }
    }
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let media = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match media.as_str() {
        "application/x-protobuf" | "application/protobuf" => Ok(Encoding::Protobuf),
        "application/json" => Ok(Encoding::Json),
        _ => Err(format!(
            "Content-Type `{ct}` is not an OTLP/HTTP encoding; send application/x-protobuf or application/json"
        )),
    }
}
