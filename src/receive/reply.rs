//! Answers every route shares: errors as `{"error": "…"}` with a status, the body read within
//! the size limit, and a request's events delivered before it is answered.

use super::deliver::Undelivered;
use super::state::Shared;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use toolcalls_model::Event;
use toolcalls_processor::listener::BodyTimedOut;

pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let message: String = message.into();
    (status, Json(serde_json::json!({ "error": message }))).into_response()
}

/// A request refused: its status and why (an error answer, built when needed).
#[derive(Debug)]
pub struct Refusal {
    status: StatusCode,
    message: String,
}

impl Refusal {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            message: message.into(),
        }
    }

    #[cfg(test)]
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let mut response = error(self.status, self.message);
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        response
    }
}

/// The body, or 413 over `--max-body-bytes`, 408 when it did not arrive within
/// `--read-timeout` (and 400 when it cannot be read).
pub fn body(s: &Shared, body: Result<Bytes, BytesRejection>) -> Result<Bytes, Refusal> {
    // A byte order mark before JSON is ignored, as RFC 8259 lets a reader do, on every route.
    let without_bom = |b: Bytes| match b.strip_prefix(b"\xEF\xBB\xBF") {
        Some(rest) => b.slice(b.len() - rest.len()..),
        None => b,
    };
    body.map(without_bom)
        .map_err(|rejection| match rejection.status() {
            _ if caused_by::<BodyTimedOut>(&rejection) => Refusal {
                status: StatusCode::REQUEST_TIMEOUT,
                message: format!("{rejection}; nothing of it was published"),
            },
            StatusCode::PAYLOAD_TOO_LARGE => Refusal {
                status: StatusCode::PAYLOAD_TOO_LARGE,
                message: format!(
                "the body is larger than {} bytes (--max-body-bytes); nothing of it was published",
                s.max_body_bytes
            ),
            },
            status => Refusal {
                status,
                message: format!("cannot read the body ({rejection})"),
            },
        })
}

/// Whether `error`, or an error it came from, is a `T` (reading the body failed because it did
/// not arrive in time, because it was too long).
pub fn caused_by<T: std::error::Error + 'static>(
    error: &(dyn std::error::Error + 'static),
) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.is::<T>() {
            return true;
        }
        cause = e.source();
    }
    false
}

/// 400 for a payload that cannot be read, saying why; nothing of it is published. The reason
/// may quote the payload, so the redaction patterns go over it as over the events: exporters and
/// collectors log what they are answered.
pub fn bad(s: &Shared, why: String) -> Response {
    let why = s.redaction.in_text(&why);
    error(
        StatusCode::BAD_REQUEST,
        format!("{why}; nothing of this request was published"),
    )
}

/// The answer to a body that gave no events.
pub fn unread(s: &Shared, unread: super::reading::Unread) -> Response {
    use super::reading::Unread;
    match unread {
        Unread::Bad(why) => bad(s, why),
        Unread::Failed => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the request could not be read; nothing of it was published",
        ),
        Unread::Stopping => error(StatusCode::SERVICE_UNAVAILABLE, "the receiver is stopping"),
    }
}

/// The first problems of a payload, one reason. The adapters speak to a user of files: what
/// they add for one (`check --format`, a span `skipped`) does not fit a request, whose route is
/// its format and which is refused whole.
pub fn reasons(problems: &[String]) -> String {
    const SHOWN: usize = 5;
    let shown: Vec<String> = problems[..problems.len().min(SHOWN)]
        .iter()
        .map(|p| {
            p.replace(" — check --format", "")
                .replace("; check --format", "")
                .trim_end_matches("; skipped")
                .to_owned()
        })
        .collect();
    let mut why = shown.join("; ");
    if problems.len() > SHOWN {
        why.push_str(&format!(" (and {} more)", problems.len() - SHOWN));
    }
    why
}

/// Publishes `events`, redacted, and waits until the brokers acknowledged every one: `Ok` then,
/// else 503 saying why (the client should retry: the processor drops what arrives twice).
pub async fn deliver(s: &Shared, route: &'static str, events: &[Event]) -> Result<(), Refusal> {
    if events.is_empty() {
        return Ok(());
    }
    let redacted: Vec<Event>;
    let mut changed = 0;
    let events = if s.redaction.is_empty() {
        events
    } else {
        redacted = events
            .iter()
            .cloned()
            .map(|mut e| {
                changed += usize::from(s.redaction.apply_event(&mut e));
                e
            })
            .collect();
        &redacted
    };
    match s.deliverer.deliver(events).await {
        Ok(()) => {
            // Counted once published: a refused request, or one retried, changed nothing out there.
            s.metrics.redacted(route, changed);
            s.metrics.events(route, events.len());
            Ok(())
        }
        Err(Undelivered::TooLarge(why)) => {
            tracing::warn!(route, events = events.len(), "not sent: {why}");
            Err(Refusal {
                status: StatusCode::PAYLOAD_TOO_LARGE,
                message: format!("{why}; nothing of this request was published"),
            })
        }
        Err(Undelivered::Refused(why)) => {
            tracing::warn!(route, events = events.len(), "not delivered: {why}");
            Err(Refusal {
                status: StatusCode::PAYLOAD_TOO_LARGE,
                message: format!("{why}; the other events of this request may have been published, and sending it again gives the same answer"),
            })
        }
        Err(Undelivered::Retry(why)) => {
            tracing::warn!(route, events = events.len(), "not delivered: {why}");
            Err(Refusal {
                status: StatusCode::SERVICE_UNAVAILABLE,
                message: format!("the events were not all acknowledged by the Kafka brokers: {why}; retry (the processor drops repeats)"),
            })
        }
    }
}
