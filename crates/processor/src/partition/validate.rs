//! Decoding and checking one input message: what fails here is dead-lettered with a reason label
//! and a description of what to send instead.

use crate::input::batch::InMsg;
use toolcalls_model::{DecodeError, Event};

/// The limits a message is checked against.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_message_bytes: usize,
    /// How far ahead of the processor's clock an event's time may be.
    pub max_future_skew_ms: u64,
}

/// Why a message was refused: a bounded reason label and a description.
#[derive(Debug)]
pub(super) struct Invalid {
    pub reason: &'static str,
    pub detail: String,
}

impl From<DecodeError> for Invalid {
    fn from(e: DecodeError) -> Self {
        Invalid {
            reason: e.reason(),
            detail: e.to_string(),
        }
    }
}

/// Decodes `m` and checks it: a payload within the size limit, an event time not far ahead of the
/// wall clock `now_ms`, a key that is the event's session.
pub(super) fn validate(m: &InMsg<'_>, limits: &Limits, now_ms: i64) -> Result<Event, Invalid> {
    let Some(payload) = m.payload else {
        return Err(DecodeError::Empty.into());
    };
    if payload.len() > limits.max_message_bytes {
        return Err(DecodeError::TooLarge {
            size: payload.len(),
            limit: limits.max_message_bytes,
        }
        .into());
    }
    let event = Event::decode(payload)?;
    let limit = now_ms.saturating_add(i64::try_from(limits.max_future_skew_ms).unwrap_or(i64::MAX));
    if event.time.millis() > limit {
        return Err(Invalid {
            reason: "far_future",
            detail: format!(
                "event time {} is more than {} ms ahead of the processor's clock; fix the producer's clock or its time field",
                event.time, limits.max_future_skew_ms
            ),
        });
    }
    match m.key {
        Some(key) if key == event.session.as_str().as_bytes() => Ok(event),
        Some(key) => Err(Invalid {
            reason: "key_mismatch",
            detail: format!(
                "message key `{}` is not the event's session `{}`; key every message by its session so a session stays in one partition",
                String::from_utf8_lossy(&key[..key.len().min(64)]),
                event.session.as_str().chars().take(64).collect::<String>()
            ),
        }),
        None => Err(Invalid {
            reason: "key_mismatch",
            detail: "message has no key; key every message by its session so a session stays in one partition".into(),
        }),
    }
}
