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
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(given) if same_secret(given.as_bytes(), token.0.as_bytes()) => next.run(request).await,
        _ => {
            let mut response = error(
                StatusCode::UNAUTHORIZED,
                "this receiver needs `Authorization: Bearer <token>` with the token it was given (--token)",
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            response
        }
    }
}

/// Compares without stopping at the first difference, so the time taken does not tell how much
/// of a guess was right.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    #[test]
    fn same_secret_needs_every_byte() {
        use super::same_secret;
        assert!(same_secret(b"s3cret", b"s3cret"));
        assert!(!same_secret(b"s3cret", b"s3creT"));
        assert!(!same_secret(b"s3cret", b"s3cre"));
        assert!(!same_secret(b"", b"x"));
    }
}
