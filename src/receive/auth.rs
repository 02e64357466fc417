//! The bearer token (`--token`): every request on the receiving listener carries
//! `Authorization: Bearer <token>`, compared in constant time, as the processor's query API does.

use super::reply::error;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use std::sync::Arc;
use toolcalls_processor::Secret;

/// Lets a request through only with the token.
pub async fn authorize(
    State(token): State<Arc<Secret>>,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if token.is_bearer_in(request.headers()) {
        return next.run(request).await;
    }
    let mut response = error(
        StatusCode::UNAUTHORIZED,
        "this receiver needs `Authorization: Bearer <token>` with the token it was given (--token)",
    );
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}
