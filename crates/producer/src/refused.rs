//! Events the brokers refused as larger than a topic takes: the topic's `max.message.bytes` is
//! below the producer's `message.max.bytes`, so the producer's own check
//! ([`PublishSettings::check_size`](crate::PublishSettings::check_size)) let them through. Like
//! the events that check refuses, they are said and left out, not the end of the run: sending
//! one again fails the same way, and a follower that stopped on it would stop on it again at
//! every restart.

use std::fmt;
use toolcalls_model::Event;

/// One event the brokers refused as too large.
#[derive(Debug, Clone)]
pub struct Refused {
    /// The event as it was sent.
    pub payload: Vec<u8>,
    pub topic: String,
}

impl Refused {
    /// The event, to name it (file, kind, session, call).
    pub fn event(&self) -> Option<Event> {
        Event::decode(&self.payload).ok()
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the Kafka brokers refused its {} bytes as larger than topic `{}` takes (the topic's max.message.bytes is below the producer's message.max.bytes: raise the topic's, or lower --kafka message.max.bytes to match it so that such events are found before they are sent); it was left out",
            self.payload.len(),
            self.topic
        )
    }
}
