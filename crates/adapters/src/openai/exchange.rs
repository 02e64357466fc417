//! The `{"request", "response"}` exchange both OpenAI APIs are logged as.

use serde_json::Value;

/// Calls `f` with the bodies of a `{"request", "response"}` exchange: the request's (its `body`
/// when it has one), then the response's — each element of it when it is an array, a streamed
/// response logged as its list of chunks or events.
pub(super) fn for_each_body<'v>(exchange: &'v Value, mut f: impl FnMut(&'v Value)) {
    if let Some(req) = exchange.get("request") {
        f(req.get("body").unwrap_or(req));
    }
    match exchange.get("response").map(|r| r.get("body").unwrap_or(r)) {
        Some(Value::Array(parts)) => parts.iter().for_each(f),
        Some(r) => f(r),
        None => {}
    }
}
