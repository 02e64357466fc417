//! Events read but too large for a Kafka message — by the producer's limit, or refused by the
//! brokers for the topic's: `ingest` and `--follow` report them, name them and go on without
//! them, as with a bad line (docs/ADAPTERS.md, "Errors").

use toolcalls_model::Event;

/// The reason label of an event over the producer's `message.max.bytes`.
pub const TOO_LARGE: &str = "too_large";
/// The reason label of an event the brokers refused for the topic's `max.message.bytes`.
pub const REFUSED_TOO_LARGE: &str = "refused_too_large";
/// Every reason an event is left out for.
pub const REASONS: [&str; 2] = [TOO_LARGE, REFUSED_TOO_LARGE];

/// Whether `e` is an event too large for a Kafka message: reported and left out, not the end.
pub fn is_too_large(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<toolcalls_producer::PublishError>(),
        Some(toolcalls_producer::PublishError::TooLarge { .. })
    )
}

/// What is said of an event of file `name` left out for `why`.
pub fn said(name: &str, event: &Event, why: &dyn std::fmt::Display) -> String {
    let call = event
        .call_id
        .as_ref()
        .map_or(String::new(), |id| format!(", call {}", id.as_str()));
    format!(
        "{name}: the {} event of session {}{call}: {why}",
        event.kind(),
        event.session.as_str()
    )
}

/// What is said of an event of file `name` (or of the run: `ingest` learns of the brokers'
/// refusals once every file is sent) the brokers refused as too large.
pub fn said_of_refused(name: &str, refused: &toolcalls_producer::Refused) -> String {
    match refused.event() {
        Some(event) => said(name, &event, refused),
        None => format!("{name}: an event: {refused}"),
    }
}
