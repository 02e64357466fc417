//! What the adapters' unit tests share.

use toolcalls_model::EventKind;

use crate::{parse, Format, Options, Parsed};

/// Parses `input` as `format` with the default options; `name` is the file name.
pub(crate) fn parse_str(format: Format, name: &str, input: &str) -> Parsed {
    parse(format, name, input.as_bytes(), &Options::default())
}

/// The kind and call id of each event.
pub(crate) fn kinds_and_ids(p: &Parsed) -> Vec<(EventKind, Option<&str>)> {
    p.events
        .iter()
        .map(|e| (e.kind(), e.call_id.as_ref().map(|c| c.as_str())))
        .collect()
}
